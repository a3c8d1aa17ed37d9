import CLinux
import COpenSSL
import Glibc

/// One exchange in flight: the call, the request it answers, its deadlines and what is known of
/// its attempt (for the retry rule).
final class UpstreamExchange {
  let call: UpstreamCall
  let key: CompletionKey
  var deadlines: UpstreamDeadlines
  var attempt: UpstreamAttempt
  /// When the request's last byte was written (for the first-byte duration).
  var writtenAt: Instant?

  init(_ call: UpstreamCall, key: CompletionKey, timeouts: UpstreamTimeouts, started: Instant) {
    self.call = call
    self.key = key
    deadlines = UpstreamDeadlines(timeouts: timeouts, started: started)
    attempt = UpstreamAttempt(method: call.method, reusedConnection: false, requestBytesWritten: false)
  }
}

/// One connection to an upstream: its socket, the exchange it carries (none while idle), the
/// request bytes still to write and the response bytes read so far. Owned by its loop's thread.
final class UpstreamSocket {
  let fd: Int32
  let id: UpstreamConnectionID
  let generation: UInt64
  /// Until the connect, and the TLS handshake if any, completes.
  var connecting = true
  /// Whether the TCP (or Unix) connect completed.
  var transportConnected = false
  /// The TLS session over the socket, once the connect completed (nil: plain).
  private(set) var tls: OpaquePointer?
  var exchange: UpstreamExchange?
  /// The request being written, and how much of it is written.
  var output: [UInt8] = []
  var written = 0
  /// The response's bytes not yet consumed by the parser.
  var input: [UInt8] = []
  var parser = HTTP1ResponseParser(method: .get)
  /// The deadline the loop's timer heap holds for it (`never`: none).
  var scheduled = Instant.never
  /// When the connect started (for the connect duration).
  var openedAt = Instant.never

  init(fd: Int32, id: UpstreamConnectionID, generation: UInt64) {
    self.fd = fd
    self.id = id
    self.generation = generation
  }

  /// What starting a connect came to.
  enum Opening {
    /// Connecting (or connected): the socket's first writable event says how it went.
    case started(UpstreamSocket)
    /// It failed at once.
    case failed(UpstreamFault)
  }

  /// A non-blocking socket connecting to `address`.
  static func connect(
    _ address: UpstreamEndpoint.Address, id: UpstreamConnectionID, generation: UInt64
  ) -> Opening {
    let family: Int32 =
      switch address {
      case .tcp(.v4): AF_INET
      case .tcp(.v6): AF_INET6
      case .unix: AF_UNIX
      }
    let fd = socket(
      family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return .failed(connectFault(errno, unix: family == AF_UNIX)) }
    let status: Int32
    switch address {
    case .tcp(let socketAddress):
      var one: Int32 = 1
      setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
      status = socketAddress.withSockAddr { Glibc.connect(fd, $0, $1) }
    case .unix(let path):
      status =
        withUnixAddress(path) { Glibc.connect(fd, $0, $1) }
        ?? {
          errno = ENAMETOOLONG; return -1
        }()
    }
    if status != 0 && errno != EINPROGRESS {
      let code = errno
      Glibc.close(fd)
      return .failed(connectFault(code, unix: family == AF_UNIX))
    }
    return .started(UpstreamSocket(fd: fd, id: id, generation: generation))
  }

  /// The outcome of a connect under way, once the socket signalled: nil when connected, else the
  /// fault.
  func connectResult() -> UpstreamFault? {
    var code: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else { return .connectError }
    return code == 0 ? nil : Self.connectFault(code, unix: false)
  }

  /// What a connect error says: the upstream refused (or nothing listens at the socket's path),
  /// its backlog is full, this process is out of resources, or the network failed.
  static func connectFault(_ code: Int32, unix: Bool) -> UpstreamFault {
    switch code {
    case ECONNREFUSED, ENOENT: .connectRefused
    case EAGAIN where unix: .connectBusy
    case EMFILE, ENFILE, ENOBUFS, ENOMEM: .outOfResources
    default: .connectError
    }
  }

  /// Calls `body` with `path` as a `sockaddr_un`; nil when the path does not fit one.
  private static func withUnixAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R)
    -> R?
  {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard bytes.count < capacity, !bytes.contains(0) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      raw.copyBytes(from: bytes)
      raw[bytes.count] = 0
    }
    return withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        body($0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
  }

  /// Takes on `exchange`: its request to write, a parser for its answer.
  func start(_ exchange: UpstreamExchange, limits: ResponseLimits) {
    self.exchange = exchange
    // A read has no body: its head is written as it stands (shared, not copied).
    output = exchange.call.body.isEmpty ? exchange.call.head : exchange.call.head + exchange.call.body
    written = 0
    input.removeAll(keepingCapacity: true)
    parser = HTTP1ResponseParser(method: exchange.call.method, limits: limits)
  }

  /// What writing the request came to.
  enum Write {
    /// All of it is written.
    case done
    /// The socket is full: the next writable event goes on.
    case blocked
    /// The connection failed (reset, or closed by the upstream).
    case failed
  }

  /// Writes what is left of the request.
  func write() -> Write {
    while written < output.count {
      if let tls {
        let n = output.withUnsafeBytes { raw in
          SSL_write(tls, raw.baseAddress.map { $0 + written }, Int32(clamping: raw.count - written))
        }
        if n > 0 {
          written += Int(n)
          continue
        }
        let error = SSL_get_error(tls, n)
        return error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ ? .blocked : .failed
      }
      do {
        let sent = try syscall("send") {
          output.withUnsafeBytes { raw in
            send(fd, raw.baseAddress.map { $0 + written }, raw.count - written, Int32(MSG_NOSIGNAL))
          }
        }
        guard case .done(let n) = sent else { return .blocked }
        written += n
      } catch {
        return .failed
      }
    }
    return .done
  }

  /// What reading came to.
  enum Read {
    /// The bytes so far are in `input`; the socket is drained.
    case drained
    /// The upstream closed its side after the bytes in `input`.
    case ended
    /// The connection was reset.
    case failed
  }

  /// Reads everything available into `input`, through `buffer`. A short read of a plain socket
  /// drained it (its next arrival raises another edge), so no read follows only to hear `EAGAIN`
  /// (a system call per response saved), unless the event said the upstream hung up (`hungUp`):
  /// then the end may already be queued behind the bytes, and nothing would announce it again.
  func read(through buffer: UnsafeMutableRawBufferPointer, hungUp: Bool) -> Read {
    if let tls { return readTLS(tls, through: buffer) }
    let plain = PlainTransport(fd: fd)
    while true {
      switch plain.read(into: buffer) {
      case .bytes(let n, let drained):
        input.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        if drained && !hungUp { return .drained }
      case .wouldBlock: return .drained
      case .ended: return .ended
      case .failed: return .failed
      }
    }
  }

  private func readTLS(_ tls: OpaquePointer, through buffer: UnsafeMutableRawBufferPointer) -> Read {
    while true {
      let n = SSL_read(tls, buffer.baseAddress, Int32(clamping: buffer.count))
      if n > 0 {
        input.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<Int(n)]))
        continue
      }
      switch SSL_get_error(tls, n) {
      case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .drained
      // A close without close_notify counts as a close (the context ignores unexpected EOF): the
      // response's own framing says whether it was whole.
      case SSL_ERROR_ZERO_RETURN: return .ended
      default: return .failed
      }
    }
  }

  /// What the TLS handshake came to.
  enum Handshake {
    case done
    case waiting
    case failed
  }

  /// Starts TLS over the connected socket with `context`, then drives the handshake (call again
  /// on each event until it is not `waiting`).
  func handshake(_ context: UpstreamTLS) -> Handshake {
    if tls == nil {
      guard let session = context.session(fd: fd) else { return .failed }
      tls = session
    }
    guard let tls else { return .failed }
    let result = SSL_connect(tls)
    if result == 1 { return .done }
    let error = SSL_get_error(tls, result)
    return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? .waiting : .failed
  }

  /// Closes the socket (and frees its TLS session; no close_notify: the exchange is over or failed).
  func close() {
    if let tls { SSL_free(tls) }
    tls = nil
    Glibc.close(fd)
  }
}
