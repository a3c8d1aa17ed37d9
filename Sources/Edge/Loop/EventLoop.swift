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
  /// The byte stream under the protocol: the socket, or TLS for connections accepted on a TLS
  /// listener.
  var transport: any Transport
  /// The connection speaks HTTP/2 (the h2c preface, or ALPN `h2`): its frames go here, not to
  /// `machine`.
  var h2: HTTP2Connection<MonotonicClock>?
  /// Whether the protocol was chosen (after the first bytes, or the TLS handshake).
  var protocolChosen = false
  /// The protocol it was counted under in metrics, once chosen.
  var counted: MetricProtocol?

  init(fd: Int32, generation: UInt64, machine: ConnectionMachine<MonotonicClock>, transport: any Transport) {
    self.fd = fd
    self.generation = generation
    self.machine = machine
    self.transport = transport
  }

  deinit { machine.releaseBudget() }

  /// Bytes the protocol has queued for the socket.
  var pendingOutput: Int { h2?.output.pending ?? machine.output.pending }

  /// Calls `body` with the queued output as iovecs, after its first `skipping` bytes.
  func withOutput<R>(skipping: Int, _ body: (UnsafeBufferPointer<iovec>) -> R) -> R {
    if let h2 { return h2.output.withIOVecs(skipping: skipping, body) }
    return machine.output.withIOVecs(skipping: skipping, body)
  }
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
  private let buffers: TransportBuffers
  /// This loop's metric shard (nil: metrics off).
  private let metrics: MetricShard?
  /// For the admin listener's loop: the client networks served (others are closed at once,
  /// unanswered, like a firewall's refusal).
  private let allowed: [IPNetwork]?
  /// The loop's connections to upstreams, for forwarded calls: made with the first upstream
  /// configured or call forwarded, so a loop that forwards nothing pays nothing for it.
  private var upstreamClient: UpstreamClient<MonotonicClock>?
  private let upstreamMetrics: UpstreamMetrics?
  private static let maxEvents: Int32 = 256

  init(
    listeners: [Int32], tlsListeners: Set<Int32> = [], tls: TLSContext? = nil, mailbox: LoopMailbox,
    pool: WorkerPool,
    background: WorkerPool, limits: Limits, budget: RequestBudget, context: ConnectionContext,
    http2Cleartext: Bool = false, allowed: [IPNetwork]? = nil, upstreams: [UpstreamEndpoint] = [],
    upstreamMetrics: UpstreamMetrics? = nil
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
    self.allowed = allowed
    self.upstreamMetrics = upstreamMetrics
    metrics = context.metrics
    buffers = .allocate(tls: !tlsListeners.isEmpty)
    for fd in listeners + [mailbox.eventFD] {
      var event = epoll_event(events: epollIn, data: epoll_data_t(fd: fd))
      guard epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else { throw SystemError("epoll_ctl") }
    }
    if !upstreams.isEmpty { upstream().configure(upstreams) }
  }

  deinit {
    buffers.deallocate()
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
    if let due = upstreamClient?.earliest, next.map({ due < $0 }) ?? true { next = due }
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
      if let allowed {
        let peer = withUnsafePointer(to: &storage) { IPNetwork.address(of: $0) }
        guard let peer, allowed.contains(where: { $0.contains(peer) }) else {
          close(fd)
          continue
        }
      }
      let secure = tlsListeners.contains(listener)
      metrics?.count(.connectionsAccepted, secure ? 1 : 0)
      if live >= limits.maxConnectionsPerLoop {
        close(fd)
        metrics?.count(.connectionsClosed, CloseReason.limit.rawValue)
        metrics?.count(.connectionsClosedBy, 0)
        continue
      }
      // accept4 needs _GNU_SOURCE, which Swift's Glibc module lacks: set the flags here.
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
      var one: Int32 = 1
      setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
      let client = withUnsafePointer(to: &storage) { SocketAddress.describe($0) }
      let transport: any Transport
      if secure {
        guard let session = tls?.session(fd: fd) else {
          close(fd)
          metrics?.count(.connectionsClosed, CloseReason.error.rawValue)
          metrics?.count(.connectionsClosedBy, 0)
          continue
        }
        transport = TLSTransport(session)
      } else {
        transport = PlainTransport(fd: fd)
      }
      let connection = Connection(
        fd: fd, generation: nextGeneration,
        machine: ConnectionMachine(
          clock: clock, limits: limits, client: client, secure: secure, budget: budget),
        transport: transport)
      nextGeneration += 1
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
    guard Int(fd) < connections.count, let connection = connections[Int(fd)] else {
      upstreamClient?.handle(fd, flags)
      return
    }
    if flags & epollErr != 0 {
      closeConnection(connection, .error)
      return
    }
    if flags & (epollIn | epollHup | epollRdHup) != 0 { connection.readable = true }
    if flags & (epollHup | epollRdHup) != 0 { connection.peerHungUp = true }
    pump(connection)
  }

  /// Opens the transport, then reads while the protocol wants input and the socket may have some,
  /// writing what each read produced; then schedules the connection's deadline.
  private func pump(_ connection: Connection) {
    if !connection.protocolChosen {
      switch connection.transport.open(buffers) {
      case .ready(let h2):
        // A TLS connection's protocol is ALPN's choice; a plain one's, its first bytes' (`received`).
        if let tls = connection.transport as? TLSTransport, let metrics {
          metrics.count(.tlsHandshakes, tls.session.metricVersion * 2)
          if tls.session.resumed { metrics.count(.tlsResumptions) }
        }
        if h2 {
          connection.protocolChosen = true
          connection.h2 = HTTP2Connection(
            clock: clock, limits: limits, client: connection.machine.client, secure: true,
            dispatcher: context.dispatcher, budget: budget, metrics: metrics)
          chose(.h2, connection)
        } else if connection.transport is TLSTransport {
          connection.protocolChosen = true
          chose(.http1, connection)
        }
      case .waiting:
        schedule(connection)
        return
      case .failed:
        if let tls = connection.transport as? TLSTransport, tls.firstByteChecked {
          metrics?.count(.tlsHandshakes, 2 * 2 + 1)  // version none, failed
          closeConnection(connection, .tls)
        } else {
          closeConnection(connection)
        }
        return
      case .plainText(let peeked):
        // Plain HTTP on a TLS listener: answered in the clear, like nginx, and closed.
        connection.transport = PlainTransport(fd: connection.fd)
        connection.protocolChosen = true
        chose(.http1, connection)
        connection.machine.refusePlainHTTP(peeked, context: &context)
      }
    }
    while true {
      guard flush(connection) else { return }
      guard wantsInput(connection),
        connection.transport.mayRead(readable: connection.readable, peerHungUp: connection.peerHungUp)
      else { break }
      switch connection.transport.read(into: buffers.read) {
      case .bytes(let n, let drained):
        // A short read drained the socket; the next arrival raises a new edge. After a hang-up
        // no edge follows, so the end of input must still be read.
        if drained && !connection.peerHungUp { connection.readable = false }
        guard received(UnsafeRawBufferPointer(rebasing: buffers.read[0..<n]), connection) else { return }
      case .wouldBlock:
        connection.readable = false
        schedule(connection)
        return
      case .ended:
        connection.readable = false
        guard inputEnded(connection) else { return }
      case .failed:
        closeConnection(connection, .error)
        return
      }
    }
    schedule(connection)
  }

  /// Counts `connection` as speaking `protocol` from now on.
  private func chose(_ protocol: MetricProtocol, _ connection: Connection) {
    connection.counted = `protocol`
    metrics?.count(.connectionsChosen, `protocol`.rawValue)
  }

  /// Writes what the protocol has queued; false when the connection was closed.
  private func flush(_ connection: Connection) -> Bool {
    switch connection.transport.flush(connection, buffers, wrote: { wrote($0, connection) }) {
    case .done: return true
    case .closed: return false
    case .failed:
      closeConnection(connection, .error)
      return false
    }
  }

  /// Hands a request to its pool; its answer comes back to this loop under `key`. False (nothing
  /// queued) when the pool's queue is full.
  private func submit(_ dispatch: ConnectionMachine<MonotonicClock>.Dispatch, _ key: CompletionKey) -> Bool {
    if let call = dispatch.call {
      forward(call, key)
      return true
    }
    let request = dispatch.request
    let route = dispatch.route
    let mailbox = self.mailbox
    let accepted: Bool
    if let batch = route.batch {
      accepted = pool.submit(request, to: batch) { response in
        mailbox.post(.completed(key, response: response))
      }
    } else {
      accepted = (route.execution == .background ? background : pool).submit {
        let response = route.respond(to: request)
        mailbox.post(.completed(key, response: response))
      }
    }
    if accepted {
      metrics?.count(.requestsDispatched)
    } else {
      metrics?.count(.poolRejections, route.execution == .background ? 1 : 0)
    }
    return accepted
  }

  // MARK: the connection's protocol (the HTTP/1 machine, or HTTP/2)

  private func wantsInput(_ connection: Connection) -> Bool {
    connection.h2?.wantsInput ?? connection.machine.wantsInput
  }

  /// `count` bytes of the connection's output were written; false when it was closed.
  private func wrote(_ count: Int, _ connection: Connection) -> Bool {
    guard let h2 = connection.h2 else { return apply(connection.machine.wrote(count), connection) }
    guard !h2.wrote(count) else { return end(h2, connection) }
    return true
  }

  /// Ends an HTTP/2 connection whose session is over; false when it was closed. Unless the peer has
  /// closed its side or a deadline cut it off, it lingers first: HTTP/1's machine takes it over,
  /// shuts the write side down, and reads and drops what still arrives. Closed at once, a socket
  /// with frames unread answers them with a reset, which can make the client discard the GOAWAY
  /// (and its last processed stream) before reading it.
  private func end(_ h2: HTTP2Connection<MonotonicClock>, _ connection: Connection) -> Bool {
    guard h2.lingers else {
      closeConnection(connection, h2.closeReason)
      return false
    }
    connection.h2 = nil
    return apply(connection.machine.linger(reason: h2.closeReason), connection)
  }

  /// Bytes arrived; false when the connection was closed. The first bytes of a plain connection
  /// choose its protocol: the HTTP/2 preface (when h2c is on), else HTTP/1.
  private func received(_ bytes: UnsafeRawBufferPointer, _ connection: Connection) -> Bool {
    if !connection.protocolChosen {
      connection.protocolChosen = true
      if http2Cleartext && Self.opensWithPreface(bytes) {
        connection.h2 = HTTP2Connection(
          clock: clock, limits: limits, client: connection.machine.client, secure: false,
          dispatcher: context.dispatcher, budget: budget, metrics: metrics)
      }
      chose(connection.h2 == nil ? .http1 : .h2, connection)
    }
    guard let h2 = connection.h2 else {
      return apply(connection.machine.received(bytes, context: &context), connection)
    }
    return applyH2(h2.received(bytes, context: &context), connection)
  }

  /// RFC 9113 §3.4: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", or as much of it as has arrived (at least
  /// its first four bytes; the HTTP/2 session checks the rest).
  static func opensWithPreface(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8
    let n = min(bytes.count, preface.count)
    return n >= 4 && bytes.prefix(n).elementsEqual(preface.prefix(n))
  }

  /// The peer closed its side; false when the connection was closed.
  private func inputEnded(_ connection: Connection) -> Bool {
    guard let h2 = connection.h2 else { return apply(connection.machine.inputEnded(), connection) }
    guard !h2.inputEnded() else {
      closeConnection(connection, h2.closeReason)
      return false
    }
    return true
  }

  /// Executes an HTTP/2 step: its streams to the pools (503 on a stream whose pool is full);
  /// false when the connection was closed.
  private func applyH2(_ step: HTTP2Connection<MonotonicClock>.Step, _ connection: Connection) -> Bool {
    guard let h2 = connection.h2 else { return true }
    for (stream, dispatch) in step.dispatches {
      let key = CompletionKey(fd: connection.fd, generation: connection.generation, stream: UInt32(stream))
      guard !submit(dispatch, key) else { continue }
      _ = h2.finished(
        stream: stream,
        context.router.errors.refusal(
          .serviceUnavailable, dispatch.request, "The server is busy; try again shortly.",
          headers: [("Retry-After", "1")]), context: &context)
    }
    return step.close ? end(h2, connection) : true
  }

  /// Executes a machine's step; false when the connection was closed.
  private func apply(_ step: ConnectionMachine<MonotonicClock>.Step, _ connection: Connection) -> Bool {
    if let dispatch = step.dispatch {
      let accepted = submit(dispatch, CompletionKey(fd: connection.fd, generation: connection.generation))
      if !accepted {
        var busy = context.router.errors.refusal(
          .serviceUnavailable, dispatch.request, "The server is busy; try again shortly.",
          headers: [("Retry-After", "1")])
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
      connection.transport.shutdownWrite()
      return true
    case .now:
      closeConnection(connection, connection.machine.closeReason ?? .normal)
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
    upstreamClient?.fireTimers()
    let now = clock.now()
    while let entry = timers.popDue(now) {
      guard Int(entry.fd) < connections.count, let connection = connections[Int(entry.fd)],
        connection.generation == entry.generation, connection.scheduled == entry.deadline
      else { continue }
      connection.scheduled = .never
      if let h2 = connection.h2 {
        if h2.deadlinePassed(context: &context) && !end(h2, connection) { continue }
      } else {
        guard apply(connection.machine.deadlinePassed(context: &context), connection) else { continue }
      }
      pump(connection)
    }
  }

  private func closeConnection(_ connection: Connection, _ reason: CloseReason = .normal) {
    guard connections[Int(connection.fd)] === connection else { return }
    connections[Int(connection.fd)] = nil
    live -= 1
    if let metrics {
      metrics.count(.connectionsClosed, reason.rawValue)
      metrics.count(.connectionsClosedBy, connection.counted.map { $0.rawValue + 1 } ?? 0)
    }
    close(connection.fd)  // also removes it from the epoll set
  }

  // MARK: messages

  private func handleMessages() {
    for message in mailbox.take() {
      switch message {
      case .completed(let key, let response):
        metrics?.count(.requestsCompleted)
        if let call = response.forward {
          forward(call, key)
        } else {
          complete(key, response)
        }
      case .tls(let next):
        if tls != nil { tls = next }
      case .snapshot(let snapshot):
        context.router = snapshot.router
        if let next = snapshot.tls { tls = next }
        if context.httpsRedirect != nil { context.httpsRedirect = snapshot.httpsRedirect }
        if upstreamClient != nil || !snapshot.upstreams.isEmpty { upstream().configure(snapshot.upstreams) }
        // HTTP/2 connections live long: each is told to go (GOAWAY), finishes its streams on the
        // snapshot it began with, and its client comes back on a new connection, under this one.
        for case let connection? in connections {
          guard let h2 = connection.h2 else { continue }
          if h2.drain() && !end(h2, connection) { continue }
          pump(connection)
        }
      case .drain:
        startDraining()
      }
    }
  }

  /// Gives the request `key` names its answer (unless its client went away meanwhile).
  private func complete(_ key: CompletionKey, _ response: Response) {
    guard Int(key.fd) < connections.count, let connection = connections[Int(key.fd)],
      connection.generation == key.generation
    else { return }  // the client went away meanwhile
    if let h2 = connection.h2 {
      guard applyH2(h2.finished(stream: Int32(key.stream), response, context: &context), connection) else {
        return
      }
    } else {
      guard key.stream == 0,
        apply(connection.machine.handlerFinished(response, context: &context), connection)
      else { return }
    }
    pump(connection)
  }

  /// Sends `call` to its upstream and answers `key` with what the call makes of the result.
  private func forward(_ call: UpstreamCall, _ key: CompletionKey) {
    upstream().forward(call, key)
  }

  /// The loop's upstream client, made on first use.
  private func upstream() -> UpstreamClient<MonotonicClock> {
    if let upstreamClient { return upstreamClient }
    let made = UpstreamClient(epoll: epoll, clock: clock, metrics: upstreamMetrics, shard: metrics) {
      [unowned self] key, response in
      complete(key, response)
    }
    upstreamClient = made
    return made
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
        if h2.drain() && !end(h2, connection) { continue }
      } else {
        guard apply(connection.machine.drain(), connection) else { continue }
      }
      pump(connection)
    }
  }
}
