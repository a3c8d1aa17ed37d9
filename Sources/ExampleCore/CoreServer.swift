import Edge

#if canImport(Glibc)
  import Glibc
#endif

/// The example core's HTTP/1.1 server, as plain as a development tool may be: a blocking accept
/// loop and a thread per connection, keep-alive, requests read with the engine's strict parser
/// (Content-Length bodies; a parse error is a 400 and the connection's end), one log line per
/// request on standard error.
public final class CoreServer: Sendable {
  /// The address listened on, its port resolved.
  public let address: SocketAddress
  /// How long a connection may sit idle (between requests, or inside one) before it is closed, in
  /// seconds: longer than band-edge's upstream pool keeps an idle connection.
  public static let idleTimeout = 75

  private let listener: Int32
  private let service: CoreService
  private let clock: @Sendable () -> Int
  private let log: @Sendable (String) -> Void

  /// Listens on `address` (loopback; port 0 picks one) for `service`, with `clock` (seconds since
  /// 1970) and `log` for one line per request.
  public init(
    listen address: SocketAddress, service: CoreService,
    clock: @escaping @Sendable () -> Int = { Int(time(nil)) },
    log: @escaping @Sendable (String) -> Void
  ) throws(SystemError) {
    let resolved = try Listener.claim(address)
    let fd = try Listener.open(resolved, backlog: 128)
    // Listener.open makes the socket non-blocking, for an event loop; this loop blocks in accept.
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
    self.address = resolved
    self.listener = fd
    self.service = service
    self.clock = clock
    self.log = log
  }

  /// Accepts connections until the listener is shut down (`stop`), each on a thread of its own.
  public func run() {
    while true {
      let fd = accept(listener, nil, nil)
      if fd < 0 {
        if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE { continue }
        return
      }
      _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
      var timeout = timeval(tv_sec: Self.idleTimeout, tv_usec: 0)
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
      pthread_detach(startThread { [self] in serve(fd) })
    }
  }

  /// Stops accepting: `run` returns; connections already open finish on their own.
  public func stop() { shutdown(listener, Int32(SHUT_RDWR)) }

  /// Reads requests from `fd` and answers each until the client closes, asks to, stays idle past
  /// the timeout, or sends bytes that are not a request.
  func serve(_ fd: Int32) {
    defer { close(fd) }
    var parser = HTTP1Parser()
    var pending: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let result: Result<ParseResult, HTTPParseError> = pending.withUnsafeBytes { bytes in
        do throws(HTTPParseError) { return .success(try parser.parse(bytes)) } catch {
          return .failure(error)
        }
      }
      switch result {
      case .failure(let error):
        let refusal = CoreResponse.error(.badRequest, "bad_request", "the request is not HTTP/1.1: \(error)")
        send(fd, refusal.serialized(keepAlive: false))
        return
      case .success(.continueExpected):
        send(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        continue
      case .success(.complete(let request, let consumed)):
        pending.removeFirst(consumed)
        let response = service.respond(to: request, now: clock())
        let line = "\(request.method) \(request.path) \(response.status.code)"
        log(response.note.map { line + " " + $0 } ?? line)
        guard send(fd, response.serialized(head: request.method == .head, keepAlive: request.keepAlive)),
          request.keepAlive
        else { return }
      case .success(.needMore):
        let count = recv(fd, &chunk, chunk.count, 0)
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { return }
        pending += chunk[..<count]
      }
    }
  }

  /// Writes all of `bytes`; false when the peer is gone.
  @discardableResult
  func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
      let written = bytes[offset...].withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      if written < 0 && errno == EINTR { continue }
      guard written > 0 else { return false }
      offset += written
    }
    return true
  }

  deinit { close(listener) }
}
