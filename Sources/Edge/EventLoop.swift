import CLinux
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Which request a pooled answer belongs to: the connection's descriptor and generation (a
/// descriptor is reused once closed), and the stream on it (0 for HTTP/1, whose one request in
/// flight needs no number).
struct CompletionKey: Sendable, Hashable {
  let fd: Int32
  let generation: UInt64
  var stream: UInt32 = 0
}

/// Messages to a loop from other threads.
enum LoopMessage: Sendable {
  /// A pooled handler's answer for the request `key` names.
  case completed(CompletionKey, response: Response)
  /// Stop accepting, finish what is in flight, then end.
  case drain
  /// Use this route table and TLS context from now on.
  case snapshot(Snapshot)
  /// New handshakes use this TLS context (fresh ticket keys).
  case tls(TLSContext)
}

/// The thread-safe side of a loop: a mailbox and the eventfd that wakes the loop.
final class LoopMailbox: Sendable {
  let eventFD: Int32
  private let messages = Mutex<[LoopMessage]>([])

  init() throws(SystemError) {
    eventFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
    guard eventFD >= 0 else { throw SystemError("eventfd") }
  }

  /// Queues `message` and wakes the loop (one write per batch of messages).
  func post(_ message: LoopMessage) {
    let wasEmpty = messages.withLock { list in
      list.append(message)
      return list.count == 1
    }
    if wasEmpty {
      var one: UInt64 = 1
      _ = write(eventFD, &one, 8)
    }
  }

  /// Takes every queued message.
  func take() -> [LoopMessage] {
    var counter: UInt64 = 0
    _ = read(eventFD, &counter, 8)
    return messages.withLock { list in
      let taken = list
      list.removeAll()
      return taken
    }
  }
}

/// One accepted connection; owned by its loop's thread and never touched elsewhere.
final class Connection {
  let fd: Int32
  let generation: UInt64
  var machine: ConnectionMachine<MonotonicClock>
  /// Whether the socket may hold unread bytes (edge-triggered: cleared when a read drains it).
  var readable = true
  /// The peer shut its side down: read on until end of input, even after a short read.
  var peerHungUp = false
  var scheduled = Instant.never
  /// TLS state for connections accepted on a TLS listener.
  var tls: TLSSession?
  /// Whether the first byte of a TLS connection was looked at (a record, not plain HTTP).
  var firstByteChecked = false
  /// The connection speaks HTTP/2 (the h2c preface, or ALPN `h2`): its frames go here, not to
  /// `machine`.
  var h2: HTTP2Connection?
  /// Whether the protocol was chosen (after the first bytes, or the TLS handshake).
  var protocolChosen = false

  init(fd: Int32, generation: UInt64, machine: ConnectionMachine<MonotonicClock>) {
    self.fd = fd
    self.generation = generation
    self.machine = machine
  }

  deinit { machine.releaseBudget() }
}

private let epollIn = UInt32(EPOLLIN.rawValue)
private let epollOut = UInt32(EPOLLOUT.rawValue)
private let epollErr = UInt32(EPOLLERR.rawValue)
private let epollHup = UInt32(EPOLLHUP.rawValue)
private let epollRdHup = UInt32(EPOLLRDHUP.rawValue)
private let epollEdge = UInt32(EPOLLET.rawValue)

/// One event loop: an epoll set, its own listeners, its connections and their timers.
/// Bound to the thread that runs it (not Sendable).
final class EventLoop {
  private let epoll: Int32
  private let mailbox: LoopMailbox
  private var listeners: [Int32]
  private let pool: WorkerPool
  private let background: WorkerPool
  /// Listeners whose connections speak TLS, and the context they use.
  private let tlsListeners: Set<Int32>
  private var tls: TLSContext?
  private let limits: Limits
  /// Whether plain connections that open with the HTTP/2 preface speak HTTP/2 (h2c).
  private let http2Cleartext: Bool
  /// The process-wide allowance for buffered request bodies, shared by every loop.
  private let budget: RequestBudget
  private let clock = MonotonicClock()
  private var context: ConnectionContext
  private var connections: [Connection?] = []
  private var live = 0
  private var timers = TimerHeap()
  private var nextGeneration: UInt64 = 1
  private var draining = false
  /// Whether the listeners are out of the epoll set because `accept` failed (see `AcceptBackoff`).
  private var backoff = AcceptBackoff()
  private let readBuffer: UnsafeMutableRawBufferPointer
  private static let readBufferSize = 65536
  /// Where queued pieces are gathered into one TLS record (OpenSSL has no gather write).
  private let recordBuffer: UnsafeMutableRawBufferPointer
  private static let recordSize = 16384
  /// Where a connection's records are collected for one send: four full records of any suite
  /// (16 KiB of plaintext plus at most 29 bytes of header, nonce, type and tag each).
  private let batchBuffer: UnsafeMutableRawBufferPointer
  private static let batchSize = 4 * (16384 + 64)
  private static let maxEvents: Int32 = 256

  init(
    listeners: [Int32], tlsListeners: Set<Int32> = [], tls: TLSContext? = nil, mailbox: LoopMailbox,
    pool: WorkerPool,
    background: WorkerPool, limits: Limits, budget: RequestBudget, context: ConnectionContext,
    http2Cleartext: Bool = false
  )
    throws(SystemError)
  {
    epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    guard epoll >= 0 else { throw SystemError("epoll_create1") }
    self.listeners = listeners
    self.mailbox = mailbox
    self.pool = pool
    self.background = background
    self.tlsListeners = tlsListeners
    self.tls = tls
    self.limits = limits
    self.budget = budget
    self.context = context
    self.http2Cleartext = http2Cleartext
    readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
    recordBuffer = .allocate(byteCount: tlsListeners.isEmpty ? 0 : Self.recordSize, alignment: 16)
    batchBuffer = .allocate(byteCount: tlsListeners.isEmpty ? 0 : Self.batchSize, alignment: 16)
    for fd in listeners + [mailbox.eventFD] {
      var event = epoll_event(events: epollIn, data: epoll_data_t(fd: fd))
      guard epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else { throw SystemError("epoll_ctl") }
    }
  }

  deinit {
    readBuffer.deallocate()
    recordBuffer.deallocate()
    batchBuffer.deallocate()
    close(epoll)
  }

  /// Runs until drained.
  func run() {
    let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: Int(Self.maxEvents))
    defer { events.deallocate() }
    while !(draining && live == 0) {
      let n = epoll_wait(epoll, events, Self.maxEvents, waitMilliseconds())
      if n < 0 {
        if errno == EINTR { continue }
        Log.event("error", "epoll_wait", [("error", SystemError("epoll_wait").description)])
        return
      }
      context.date.refresh()
      for i in 0..<Int(n) {
        let fd = events[i].data.fd
        let flags = events[i].events
        if fd == mailbox.eventFD {
          handleMessages()
        } else if listeners.contains(fd) {
          acceptAll(fd)
        } else {
          handle(fd, flags)
        }
      }
      fireTimers()
      if backoff.paused && clock.now() >= backoff.resumeAt { resumeAccepting() }
      context.log.flushIfDue(nowSecond: context.date.second)
    }
    context.log.flush()
  }

  private func waitMilliseconds() -> Int32 {
    // Buffered log lines are written within about a second even when no request follows.
    let logWait: Int32 = context.log.isEmpty ? -1 : 1000
    var next = timers.earliest
    if backoff.paused, next.map({ backoff.resumeAt < $0 }) ?? true { next = backoff.resumeAt }
    guard let earliest = next else { return logWait }
    let now = clock.now()
    if earliest <= now { return 0 }
    let ms = (earliest.nanoseconds - now.nanoseconds + 999_999) / 1_000_000
    return Int32(min(ms, logWait < 0 ? 60_000 : UInt64(logWait)))
  }

  // MARK: accepting

  private func acceptAll(_ listener: Int32) {
    while true {
      var storage = sockaddr_storage()
      var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
      let fd = withUnsafeMutablePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          accept(listener, $0, &length)
        }
      }
      if fd < 0 {
        switch errno {
        case EINTR, ECONNABORTED: continue
        case EAGAIN: return
        default:
          // EMFILE and friends: stop watching the listeners for a moment; the backlog keeps the rest.
          pauseAccepting(SystemError("accept"))
          return
        }
      }
      if live >= limits.maxConnectionsPerLoop {
        close(fd)
        continue
      }
      // accept4 needs _GNU_SOURCE, which Swift's Glibc module lacks: set the flags here.
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
      var one: Int32 = 1
      setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
      let client = withUnsafePointer(to: &storage) { SocketAddress.describe($0) }
      let connection = Connection(
        fd: fd, generation: nextGeneration,
        machine: ConnectionMachine(
          clock: clock, limits: limits, client: client, secure: tlsListeners.contains(listener),
          budget: budget))
      nextGeneration += 1
      if tlsListeners.contains(listener) {
        guard let session = tls?.session(fd: fd) else {
          close(fd)
          continue
        }
        connection.tls = session
      }
      if Int(fd) >= connections.count {
        connections.append(contentsOf: repeatElement(nil, count: Int(fd) + 1 - connections.count + 64))
      }
      connections[Int(fd)] = connection
      live += 1
      // Edge-triggered, registered once: no epoll_ctl per request, and no re-poll of every
      // ready socket on the next epoll_wait as level-triggered mode would do.
      var event = epoll_event(events: epollIn | epollOut | epollRdHup | epollEdge, data: epoll_data_t(fd: fd))
      epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
      schedule(connection)
    }
  }

  private func pauseAccepting(_ error: SystemError) {
    if !backoff.paused {
      for fd in listeners { epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil) }
    }
    if let failures = backoff.failed(at: clock.now()) {
      Log.event(
        "error", "accept_paused",
        [
          ("error", error.description), ("failures", "\(failures)"),
          ("paused_ms", "\(AcceptBackoff.pause.nanoseconds / 1_000_000)"), ("open_connections", "\(live)"),
        ])
    }
  }

  private func resumeAccepting() {
    backoff.resumed()
    for fd in listeners {
      var event = epoll_event(events: epollIn, data: epoll_data_t(fd: fd))
      epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }
  }

  // MARK: connection events

  private func handle(_ fd: Int32, _ flags: UInt32) {
    guard Int(fd) < connections.count, let connection = connections[Int(fd)] else { return }
    if flags & epollErr != 0 {
      closeConnection(connection)
      return
    }
    if flags & (epollIn | epollHup | epollRdHup) != 0 { connection.readable = true }
    if flags & (epollHup | epollRdHup) != 0 { connection.peerHungUp = true }
    pump(connection)
  }

  /// Reads while the machine wants input and the socket may have some, writing what each read
  /// produced; then schedules the connection's deadline.
  private func pump(_ connection: Connection) {
    if let tls = connection.tls {
      pumpTLS(connection, tls)
      return
    }
    while true {
      guard flush(connection) else { return }
      guard connection.readable && wantsInput(connection) else { break }
      // recv, not read: sockets skip the VFS read path (position lock, area checks).
      let n = recv(connection.fd, readBuffer.baseAddress, Self.readBufferSize, 0)
      if n > 0 {
        // A short read drained the socket; the next arrival raises a new edge. After a hang-up
        // no edge follows, so the end of input must still be read.
        if n < Self.readBufferSize && !connection.peerHungUp { connection.readable = false }
        guard received(UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]), connection) else { return }
      } else if n == 0 {
        connection.readable = false
        guard inputEnded(connection) else { return }
      } else {
        switch errno {
        case EINTR: continue
        case EAGAIN: connection.readable = false
        default:
          closeConnection(connection)
          return
        }
      }
    }
    schedule(connection)
  }

  /// `pump` for a TLS connection: the handshake first, then records in and out. Edge-triggered
  /// epoll delivers both directions, so a TLS call that wants the other direction simply waits for
  /// the next event; decrypted bytes OpenSSL still holds are read before the socket is.
  private func pumpTLS(_ connection: Connection, _ tls: TLSSession) {
    let wire = tls.wire
    if !connection.firstByteChecked {
      var first: UInt8 = 0
      var n: Int
      repeat { n = recv(connection.fd, &first, 1, Int32(MSG_PEEK)) } while n < 0 && errno == EINTR
      if n < 0 && errno == EAGAIN {
        schedule(connection)
        return
      }
      guard n == 1 else {
        closeConnection(connection)
        return
      }
      connection.firstByteChecked = true
      // RFC 8446 §5.1: a TLS client starts with a handshake record (type 22); a set high bit is an
      // old-style hello, which OpenSSL refuses itself. Anything else is most likely plain HTTP:
      // answer it in the clear, like nginx, and close.
      if first != 0x16 && first & 0x80 == 0 {
        connection.tls = nil
        // What has arrived so far, left on the socket: its target may show the answer's shape.
        repeat {
          n = recv(connection.fd, readBuffer.baseAddress, Self.readBufferSize, Int32(MSG_PEEK))
        } while n < 0 && errno == EINTR
        connection.machine.refusePlainHTTP(
          UnsafeRawBufferPointer(rebasing: readBuffer[0..<max(n, 0)]), context: &context)
        pump(connection)
        return
      }
    }
    while !tls.handshakeDone {
      guard let flushed = wire.pointee.sendPending() else {
        closeConnection(connection)
        return
      }
      guard flushed else {
        schedule(connection)
        return
      }
      // The server's flight (hello, certificate, finished; then the session ticket) as one send.
      wire.pointee.beginBatch(batchBuffer)
      let outcome = tls.handshake()
      let batched = wire.pointee.batched > 0
      guard wire.pointee.endBatch() else {
        closeConnection(connection)
        return
      }
      switch outcome {
      case .bytes: break
      case .wantWrite where batched && !wire.pointee.hasPending:
        continue  // the batch was full and is sent: OpenSSL writes the rest now
      case .wantRead, .wantWrite:
        schedule(connection)
        return
      case .closed, .failed:
        closeConnection(connection)
        return
      }
    }
    if !connection.protocolChosen {
      // ALPN chose the protocol during the handshake.
      connection.protocolChosen = true
      if tls.negotiatedH2 {
        connection.h2 = HTTP2Connection(
          clock: clock, limits: limits, client: connection.machine.client, secure: true)
      }
    }
    while true {
      guard flushTLS(connection, tls) else { return }
      guard wantsInput(connection) else { break }
      // As for plain connections, a short read drained the socket: a read now would only say
      // EAGAIN (one syscall per request saved), unless OpenSSL still holds input or the peer hung up.
      guard connection.readable || connection.peerHungUp || tls.hasBufferedInput else { break }
      switch tls.read(UnsafeMutableRawBufferPointer(readBuffer)) {
      case .bytes(let n):
        if wire.pointee.drained { connection.readable = false }
        guard received(UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]), connection) else { return }
      case .wantRead, .wantWrite:
        connection.readable = false
        schedule(connection)
        return
      case .closed:
        // The peer's close_notify (or EOF): the machine decides; the loop's top flushes what is left.
        guard inputEnded(connection) else { return }
      case .failed:
        closeConnection(connection)
        return
      }
    }
    schedule(connection)
  }

  /// `flush` for TLS. Pieces are gathered into records of up to 16 KiB (a response head and its
  /// body go out as one record, not two); a piece of a full record's size or more is encrypted from
  /// where it lies. Records are batched (`TLSWire`) and sent four at a time; the machine hears
  /// that bytes are written only once the socket has taken their records, so its write deadline
  /// and its closing wait for the ciphertext. After a refused write OpenSSL is offered the same
  /// bytes again, as it requires.
  private func flushTLS(_ connection: Connection, _ tls: TLSSession) -> Bool {
    let wire = tls.wire
    switch wire.pointee.sendPending() {
    case nil:
      closeConnection(connection)
      return false
    case false?:
      return true
    case true?:
      if tls.unreported > 0 {
        let written = tls.unreported
        tls.unreported = 0
        guard wrote(written, connection) else { return false }
      }
    }
    let record = recordBuffer
    while true {
      var taken = 0
      var blocked = false
      wire.pointee.beginBatch(batchBuffer)
      collect: while taken < pending(connection) {
        let outcome = withIOVecs(connection, skipping: taken) { vectors in
          if vectors[0].iov_len >= Self.recordSize || vectors.count == 1 {
            return tls.write(UnsafeRawBufferPointer(start: vectors[0].iov_base, count: vectors[0].iov_len))
          }
          var filled = 0
          for vector in vectors where filled < Self.recordSize {
            let take = min(vector.iov_len, Self.recordSize - filled)
            record.baseAddress!.advanced(by: filled).copyMemory(from: vector.iov_base!, byteCount: take)
            filled += take
          }
          return tls.write(UnsafeRawBufferPointer(rebasing: record[0..<filled]))
        }
        switch outcome {
        case .bytes(let n):
          taken += n
        case .wantWrite:
          break collect  // the batch is full (or the socket is)
        case .wantRead:
          blocked = true
          break collect
        case .closed, .failed:
          _ = wire.pointee.endBatch()
          closeConnection(connection)
          return false
        }
      }
      let sentSomething = wire.pointee.batched > 0
      guard wire.pointee.endBatch() else {
        closeConnection(connection)
        return false
      }
      if wire.pointee.hasPending {
        tls.unreported = taken
        return true
      }
      if taken > 0 {
        guard wrote(taken, connection) else { return false }
      }
      if blocked || !sentSomething || pending(connection) == 0 { return true }
    }
  }

  /// Writes what the machine has queued; false when the connection was closed.
  private func flush(_ connection: Connection) -> Bool {
    while pending(connection) > 0 {
      let n = withIOVecs(connection, skipping: 0) { Self.send(connection.fd, $0) }
      if n > 0 {
        guard wrote(n, connection) else { return false }
      } else if n < 0 && errno == EINTR {
        continue
      } else if n < 0 && errno == EAGAIN {
        return true
      } else {
        closeConnection(connection)
        return false
      }
    }
    return true
  }

  /// send for one segment, sendmsg for several: both skip the VFS write path that write and
  /// writev take, and MSG_NOSIGNAL turns a closed peer into EPIPE rather than a signal.
  private static func send(_ fd: Int32, _ vectors: UnsafeBufferPointer<iovec>) -> Int {
    let flags = Int32(MSG_NOSIGNAL)
    if vectors.count == 1 { return Glibc.send(fd, vectors[0].iov_base, vectors[0].iov_len, flags) }
    var message = msghdr()
    message.msg_iov = UnsafeMutablePointer(mutating: vectors.baseAddress)
    message.msg_iovlen = vectors.count
    return sendmsg(fd, &message, flags)
  }

  /// Hands a request to its pool; its answer comes back to this loop under `key`. False (nothing
  /// queued) when the pool's queue is full.
  private func submit(_ dispatch: ConnectionMachine<MonotonicClock>.Dispatch, _ key: CompletionKey) -> Bool {
    let request = dispatch.request
    let route = dispatch.route
    let mailbox = self.mailbox
    if let batch = route.batch {
      return pool.submit(request, to: batch) { response in mailbox.post(.completed(key, response: response)) }
    }
    return (route.execution == .background ? background : pool).submit {
      let response = route.respond(to: request)
      mailbox.post(.completed(key, response: response))
    }
  }

  // MARK: the connection's protocol (the HTTP/1 machine, or HTTP/2)

  private func wantsInput(_ connection: Connection) -> Bool {
    connection.h2?.wantsInput ?? connection.machine.wantsInput
  }

  private func pending(_ connection: Connection) -> Int {
    connection.h2?.output.pending ?? connection.machine.output.pending
  }

  private func withIOVecs<R>(
    _ connection: Connection, skipping: Int, _ body: (UnsafeBufferPointer<iovec>) -> R
  ) -> R {
    if let h2 = connection.h2 { return h2.output.withIOVecs(skipping: skipping, body) }
    return connection.machine.output.withIOVecs(skipping: skipping, body)
  }

  /// `count` bytes of the connection's output were written; false when it was closed.
  private func wrote(_ count: Int, _ connection: Connection) -> Bool {
    guard let h2 = connection.h2 else { return apply(connection.machine.wrote(count), connection) }
    guard !h2.wrote(count) else {
      closeConnection(connection)
      return false
    }
    return true
  }

  /// Bytes arrived; false when the connection was closed. The first bytes of a plain connection
  /// choose its protocol: the HTTP/2 preface (when h2c is on), else HTTP/1.
  private func received(_ bytes: UnsafeRawBufferPointer, _ connection: Connection) -> Bool {
    if !connection.protocolChosen {
      connection.protocolChosen = true
      if http2Cleartext && connection.tls == nil && Self.opensWithPreface(bytes) {
        connection.h2 = HTTP2Connection(
          clock: clock, limits: limits, client: connection.machine.client, secure: false)
      }
    }
    guard let h2 = connection.h2 else {
      return apply(connection.machine.received(bytes, context: &context), connection)
    }
    return applyH2(h2.received(bytes, context: &context), connection)
  }

  /// RFC 9113 §3.4: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", or as much of it as has arrived (at least
  /// its first four bytes; nghttp2 checks the rest).
  static func opensWithPreface(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8
    let n = min(bytes.count, preface.count)
    return n >= 4 && bytes.prefix(n).elementsEqual(preface.prefix(n))
  }

  /// The peer closed its side; false when the connection was closed.
  private func inputEnded(_ connection: Connection) -> Bool {
    guard let h2 = connection.h2 else { return apply(connection.machine.inputEnded(), connection) }
    guard !h2.inputEnded() else {
      closeConnection(connection)
      return false
    }
    return true
  }

  /// Executes an HTTP/2 step: its streams to the pools (503 on a stream whose pool is full);
  /// false when the connection was closed.
  private func applyH2(_ step: HTTP2Connection.Step, _ connection: Connection) -> Bool {
    guard let h2 = connection.h2 else { return true }
    for (stream, dispatch) in step.dispatches {
      let key = CompletionKey(fd: connection.fd, generation: connection.generation, stream: UInt32(stream))
      guard !submit(dispatch, key) else { continue }
      _ = h2.finished(
        stream: stream,
        Dispatcher.refusal(
          .serviceUnavailable, dispatch.request, "The server is busy; try again shortly.",
          headers: [("Retry-After", "1")], page: context.router.errorPage), context: &context)
    }
    if step.close {
      closeConnection(connection)
      return false
    }
    return true
  }

  /// Executes a machine's step; false when the connection was closed.
  private func apply(_ step: ConnectionMachine<MonotonicClock>.Step, _ connection: Connection) -> Bool {
    if let dispatch = step.dispatch {
      let accepted = submit(dispatch, CompletionKey(fd: connection.fd, generation: connection.generation))
      if !accepted {
        var busy = Dispatcher.refusal(
          .serviceUnavailable, dispatch.request, "The server is busy; try again shortly.",
          headers: [("Retry-After", "1")],
          page: context.router.errorPage)
        // Held like a rate-limit refusal: a flood past the queue gets one answer per connection per
        // second instead of as many as the loop can write.
        busy.holdFor = limits.busyHold
        guard apply(connection.machine.handlerFinished(busy, context: &context), connection) else {
          return false
        }
      }
    }
    switch step.close {
    case .none:
      return true
    case .shutdownWrite:
      connection.tls?.shutdown()  // close_notify first, so the client knows the response is complete
      shutdown(connection.fd, Int32(SHUT_WR))
      return true
    case .now:
      closeConnection(connection)
      return false
    }
  }

  private func schedule(_ connection: Connection) {
    let deadline = connection.h2?.deadline ?? connection.machine.deadline
    guard deadline < connection.scheduled else { return }
    connection.scheduled = deadline
    timers.push(.init(deadline: deadline, fd: connection.fd, generation: connection.generation))
  }

  private func fireTimers() {
    let now = clock.now()
    while let entry = timers.popDue(now) {
      guard Int(entry.fd) < connections.count, let connection = connections[Int(entry.fd)],
        connection.generation == entry.generation, connection.scheduled == entry.deadline
      else { continue }
      connection.scheduled = .never
      if let h2 = connection.h2 {
        if h2.deadlinePassed() {
          closeConnection(connection)
          continue
        }
      } else {
        guard apply(connection.machine.deadlinePassed(context: &context), connection) else { continue }
      }
      pump(connection)
    }
  }

  private func closeConnection(_ connection: Connection) {
    guard connections[Int(connection.fd)] === connection else { return }
    connections[Int(connection.fd)] = nil
    live -= 1
    close(connection.fd)  // also removes it from the epoll set
  }

  // MARK: messages

  private func handleMessages() {
    for message in mailbox.take() {
      switch message {
      case .completed(let key, let response):
        guard Int(key.fd) < connections.count, let connection = connections[Int(key.fd)],
          connection.generation == key.generation
        else { continue }  // the client went away meanwhile
        if let h2 = connection.h2 {
          guard applyH2(h2.finished(stream: Int32(key.stream), response, context: &context), connection)
          else {
            continue
          }
        } else {
          guard key.stream == 0,
            apply(connection.machine.handlerFinished(response, context: &context), connection)
          else { continue }
        }
        pump(connection)
      case .tls(let next):
        if tls != nil { tls = next }
      case .snapshot(let snapshot):
        context.router = snapshot.router
        if let next = snapshot.tls { tls = next }
        if context.httpsRedirect != nil { context.httpsRedirect = snapshot.httpsRedirect }
      case .drain:
        startDraining()
      }
    }
  }

  private func startDraining() {
    guard !draining else { return }
    draining = true
    backoff.resumed()
    for fd in listeners {
      epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
      close(fd)
    }
    listeners = []
    for case let connection? in connections {
      if let h2 = connection.h2 {
        if h2.drain() {
          closeConnection(connection)
          continue
        }
      } else {
        guard apply(connection.machine.drain(), connection) else { continue }
      }
      pump(connection)
    }
  }
}
