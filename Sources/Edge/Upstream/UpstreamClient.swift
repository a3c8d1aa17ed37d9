import CLinux

#if canImport(Glibc)
  import Glibc
#endif

/// One event loop's client of its upstreams: a pool per upstream (`UpstreamPoolState`), the
/// sockets of those pools in the loop's epoll set, and the exchanges they carry. The loop hands it
/// each forwarded call (`forward`), each event on a socket it does not own itself (`handle`), and
/// each turn of its timers (`fireTimers`); answers go back through `deliver`, on the loop's thread,
/// after the client's own state is settled (so an answer that starts the next call finds it
/// consistent).
///
/// Bound to its loop's thread (not Sendable), like the connections it answers.
final class UpstreamClient<Clock: EdgeClock> {
  /// One upstream's pool on this loop.
  final class Pool {
    var endpoint: UpstreamEndpoint
    let state: UpstreamPoolState<Clock>
    var sockets: [UpstreamConnectionID: UpstreamSocket] = [:]
    var waiters: [UpstreamWaiterID: UpstreamExchange] = [:]
    /// Replaced by a reload: it takes no new call, and its connections close when done.
    var retired = false
    /// The upstream's index in the metrics' `upstream` label.
    let metricIndex: Int
    /// Whether the circuit was open when last looked at (its openings are counted and logged).
    var circuitOpen = false

    init(_ endpoint: UpstreamEndpoint, clock: Clock, metricIndex: Int) {
      self.endpoint = endpoint
      self.metricIndex = metricIndex
      state = UpstreamPoolState(clock: clock, limits: endpoint.pool, enabled: endpoint.enabled)
    }
  }

  private let epoll: Int32
  private let clock: Clock
  private let deliver: (CompletionKey, Response) -> Void
  /// The families, and this loop's shard to count them in (nil: not counted).
  private let metrics: UpstreamMetrics?
  private let shard: MetricShard?
  private var pools: [String: Pool] = [:]
  /// Every pool's sockets, indexed by descriptor (as the loop keeps its connections: no hashing
  /// on every event), with the pool each belongs to.
  private var sockets: [(socket: UpstreamSocket, pool: Pool)?] = []
  /// Sockets open, for tests and metrics.
  private(set) var socketCount = 0
  private var timers = TimerHeap()
  private var nextGeneration: UInt64 = 1
  private var answers: [(CompletionKey, Response)] = []
  /// The answers being delivered (`flushAnswers`), empty between deliveries.
  private var delivered: [(CompletionKey, Response)] = []
  private var delivering = false
  private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

  /// A client whose sockets join `epoll`, timed by `clock`, answering through `deliver`, counting
  /// in `shard` when both it and `metrics` are given.
  init(
    epoll: Int32, clock: Clock, metrics: UpstreamMetrics? = nil, shard: MetricShard? = nil,
    deliver: @escaping (CompletionKey, Response) -> Void
  ) {
    self.epoll = epoll
    self.clock = clock
    self.metrics = metrics
    self.shard = metrics == nil ? nil : shard
    self.deliver = deliver
  }

  deinit {
    for case let (socket, _)? in sockets { socket.close() }
    buffer.deallocate()
  }

  /// Whether `fd` is one of its sockets.
  func owns(_ fd: Int32) -> Bool { entry(fd) != nil }

  /// The socket open on `fd`, with its pool.
  private func entry(_ fd: Int32) -> (socket: UpstreamSocket, pool: Pool)? {
    fd >= 0 && Int(fd) < sockets.count ? sockets[Int(fd)] : nil
  }

  /// The earliest deadline of any exchange or pool (nil: none).
  var earliest: Instant? {
    var next = timers.earliest
    for pool in pools.values {
      let deadline = pool.state.nextDeadline
      if deadline != .never, next.map({ deadline < $0 }) ?? true { next = deadline }
    }
    return next
  }

  // MARK: configuration

  /// Uses `endpoints` from now on. A pool whose endpoint is unchanged stays, with its connections;
  /// one that differs only in its switch is switched; any other is retired (its idle connections
  /// close, its busy ones when done, its waiters are refused) and a new pool takes its name.
  func configure(_ endpoints: [UpstreamEndpoint]) {
    let named = Dictionary(endpoints.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    for (name, pool) in pools {
      guard let next = named[name], next.sameButSwitch(pool.endpoint) else {
        retire(pool)
        pools[name] = nil
        continue
      }
      if next.enabled != pool.endpoint.enabled {
        pool.endpoint = next
        perform(pool.state.setEnabled(next.enabled), pool)
      }
    }
    for (name, endpoint) in named where pools[name] == nil {
      pools[name] = Pool(endpoint, clock: clock, metricIndex: metrics?.index(name) ?? 0)
    }
    flushAnswers()
  }

  private func retire(_ pool: Pool) {
    pool.retired = true
    perform(pool.state.setEnabled(false), pool)
  }

  // MARK: calls

  /// Sends `call` to its upstream; the answer for `key` comes through `deliver` (at once when the
  /// call is refused without trying).
  func forward(_ call: UpstreamCall, _ key: CompletionKey) {
    let pool = pools[call.upstream]
    let exchange = UpstreamExchange(
      call, key: key, timeouts: pool?.endpoint.timeouts ?? UpstreamTimeouts(), started: clock.now())
    if let pool {
      acquire(exchange, pool)
    } else {
      answer(exchange, .fault(.disabled), nil)
    }
    flushAnswers()
  }

  private func acquire(_ exchange: UpstreamExchange, _ pool: Pool) {
    switch pool.state.acquire() {
    case .reuse(let id):
      guard let socket = pool.sockets[id] else { return answer(exchange, .fault(.outOfResources), pool) }
      start(exchange, on: socket, pool, reused: true)
    case .connect(let id):
      open(id, for: exchange, pool)
    case .queued(let waiter):
      pool.waiters[waiter] = exchange
    case .refuse(let refusal):
      answer(exchange, .fault(refusal.fault), pool)
    }
  }

  /// Opens connection `id` of `pool` for `exchange`.
  private func open(_ id: UpstreamConnectionID, for exchange: UpstreamExchange, _ pool: Pool) {
    switch UpstreamSocket.connect(pool.endpoint.address, id: id, generation: nextGeneration) {
    case .failed(let fault):
      let actions = pool.state.connectFailed(id, fault)
      answer(exchange, .fault(fault), pool)
      perform(actions, pool)
    case .started(let socket):
      nextGeneration += 1
      count({ $0.connections }, pool, event: 0)
      socket.openedAt = clock.now()
      pool.sockets[id] = socket
      if Int(socket.fd) >= sockets.count {
        sockets.append(contentsOf: repeatElement(nil, count: Int(socket.fd) + 1 - sockets.count + 16))
      }
      sockets[Int(socket.fd)] = (socket, pool)
      socketCount += 1
      socket.start(exchange, limits: pool.endpoint.response)
      exchange.attempt.reusedConnection = false
      exchange.deadlines.connectStarted(at: clock.now())
      // Edge-triggered: the first writable event says the connect finished (either way).
      var event = epoll_event(
        events: UInt32(EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue) | UInt32(EPOLLET.rawValue),
        data: epoll_data_t(fd: socket.fd))
      epoll_ctl(epoll, EPOLL_CTL_ADD, socket.fd, &event)
      schedule(socket)
    }
  }

  /// Sends `exchange` on `socket`, an established connection.
  private func start(_ exchange: UpstreamExchange, on socket: UpstreamSocket, _ pool: Pool, reused: Bool) {
    socket.start(exchange, limits: pool.endpoint.response)
    exchange.attempt.reusedConnection = reused
    exchange.deadlines.writing()
    if reused { count({ $0.connections }, pool, event: 1) }
    send(socket, pool)
  }

  // MARK: socket events

  /// An epoll event on one of its sockets.
  func handle(_ fd: Int32, _ flags: UInt32) {
    guard let (socket, pool) = entry(fd) else { return }
    if socket.connecting {
      guard open(socket, pool, flags) else {
        flushAnswers()
        return
      }
    }
    if socket.exchange != nil, socket.written < socket.output.count {
      send(socket, pool)
    }
    if flags & UInt32(EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue | EPOLLERR.rawValue) != 0,
      entry(fd)?.socket === socket
    {
      receive(
        socket, pool, hungUp: flags & UInt32(EPOLLHUP.rawValue | EPOLLRDHUP.rawValue | EPOLLERR.rawValue) != 0
      )
    }
    flushAnswers()
  }

  /// Takes a connect (and a TLS handshake) on as far as `flags` allow; true once established.
  private func open(_ socket: UpstreamSocket, _ pool: Pool, _ flags: UInt32) -> Bool {
    if !socket.transportConnected {
      guard flags & UInt32(EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 else {
        return false
      }
      if let fault = socket.connectResult() {
        fail(socket, pool, fault)
        return false
      }
      socket.transportConnected = true
    }
    if let tls = pool.endpoint.tls {
      switch socket.handshake(tls) {
      case .done: break
      case .waiting: return false
      case .failed:
        fail(socket, pool, .tlsHandshakeFailed)
        return false
      }
    }
    socket.connecting = false
    pool.state.connected(socket.id)
    socket.exchange?.deadlines.writing()
    observe(pool, phase: 0, since: socket.openedAt)
    return true
  }

  /// Writes what is left of the socket's request.
  private func send(_ socket: UpstreamSocket, _ pool: Pool) {
    guard let exchange = socket.exchange else { return }
    let before = socket.written
    let result = socket.write()
    if socket.written > before { exchange.attempt.requestBytesWritten = true }
    switch result {
    case .done:
      let now = clock.now()
      exchange.deadlines.requestWritten(at: now)
      exchange.writtenAt = now
      schedule(socket)
    case .blocked:
      break
    case .failed:
      fail(socket, pool, .resetBeforeResponse)
    }
  }

  /// Reads what arrived and parses it.
  private func receive(_ socket: UpstreamSocket, _ pool: Pool, hungUp: Bool) {
    let before = socket.input.count
    let read = socket.read(through: buffer, hungUp: hungUp)
    guard let exchange = socket.exchange else {
      // An idle connection spoke or closed: the upstream is done with it.
      drop(socket, pool)
      perform(pool.state.closed(socket.id), pool)
      return
    }
    if socket.input.count > before, !exchange.attempt.responseBytesReceived {
      exchange.attempt.responseBytesReceived = true
      exchange.deadlines.responseStarted()
      if let writtenAt = exchange.writtenAt { observe(pool, phase: 1, since: writtenAt) }
    }
    do throws(ResponseParseError) {
      if try parse(socket, pool) { return }
      switch read {
      case .drained:
        break
      case .ended:
        let response = try socket.input.withUnsafeBytes { raw in
          Result { () throws(ResponseParseError) in try socket.parser.finish(raw) }
        }.get()
        finish(socket, pool, response, reusable: false)
      case .failed:
        fail(socket, pool, exchange.attempt.responseBytesReceived ? .closedMidResponse : .resetBeforeResponse)
      }
    } catch {
      fail(socket, pool, Self.fault(error, received: exchange.attempt.responseBytesReceived))
    }
  }

  /// Parses the socket's input; true when the exchange ended with a whole response.
  private func parse(_ socket: UpstreamSocket, _ pool: Pool) throws(ResponseParseError) -> Bool {
    while true {
      let result = try socket.input.withUnsafeBytes { raw in
        Result { () throws(ResponseParseError) in try socket.parser.parse(raw) }
      }.get()
      switch result {
      case .needMore:
        return false
      case .informational(_, let consumed):
        socket.input.removeFirst(consumed)
      case .complete(let response, let consumed):
        // Bytes past the response were never asked for: the connection is not reused.
        finish(socket, pool, response, reusable: response.keepAlive && consumed == socket.input.count)
        return true
      }
    }
  }

  /// What a parse error is for the client: a head or body past the limits, a connection closed
  /// early, or a malformed response.
  static func fault(_ error: ResponseParseError, received: Bool) -> UpstreamFault {
    switch error {
    case .headTooLarge, .tooManyFields: .responseHeadTooLarge
    case .bodyTooLarge: .responseBodyTooLarge
    case .noResponse: received ? .closedMidResponse : .closedBeforeResponse
    case .truncatedHead, .truncatedBody: .closedMidResponse
    default: .badResponse(error.description)
    }
  }

  /// The exchange on `socket` got `response`.
  private func finish(_ socket: UpstreamSocket, _ pool: Pool, _ response: UpstreamResponse, reusable: Bool) {
    guard let exchange = socket.exchange else { return }
    socket.exchange = nil
    socket.input.removeAll(keepingCapacity: true)
    socket.output = []
    var actions = pool.state.record(.response(status: response.status), on: socket.id)
    actions += pool.state.release(socket.id, reusable: reusable && !pool.retired)
    answer(exchange, .response(response), pool)
    perform(actions, pool)
  }

  /// The exchange on `socket` failed with `fault`: tried once more where the retry rule allows,
  /// else answered with the fault. The socket is closed either way.
  private func fail(_ socket: UpstreamSocket, _ pool: Pool, _ fault: UpstreamFault) {
    guard let exchange = socket.exchange else {
      drop(socket, pool)
      perform(pool.state.closed(socket.id), pool)
      return
    }
    socket.exchange = nil
    drop(socket, pool)
    if socket.connecting {
      let actions = pool.state.connectFailed(socket.id, fault)
      answer(exchange, .fault(fault), pool)
      perform(actions, pool)
      return
    }
    if UpstreamRetry.decide(exchange.attempt, after: fault) != nil, !pool.retired {
      // The idle-close race: the connection was stale, which says nothing of the upstream.
      perform(pool.state.closed(socket.id), pool)
      count({ $0.retries }, pool)
      exchange.attempt = UpstreamAttempt(
        method: exchange.attempt.method, number: 2, reusedConnection: false, requestBytesWritten: false)
      acquire(exchange, pool)
      return
    }
    var actions = pool.state.record(.fault(fault), on: socket.id)
    actions += pool.state.release(socket.id, reusable: false)
    answer(exchange, .fault(fault), pool)
    perform(actions, pool)
  }

  /// Closes `socket` and forgets it (the pool is told by the caller).
  private func drop(_ socket: UpstreamSocket, _ pool: Pool) {
    guard entry(socket.fd)?.socket === socket else { return }
    sockets[Int(socket.fd)] = nil
    socketCount -= 1
    pool.sockets[socket.id] = nil
    socket.close()  // also leaves the epoll set
    count({ $0.connections }, pool, event: 2)
  }

  // MARK: pool actions

  private func perform(_ actions: [UpstreamPoolAction], _ pool: Pool) {
    watchCircuit(pool)
    for action in actions {
      switch action {
      case .handOver(let id, let waiter):
        guard let exchange = pool.waiters.removeValue(forKey: waiter) else { continue }
        guard let socket = pool.sockets[id] else {
          answer(exchange, .fault(.outOfResources), pool)
          continue
        }
        start(exchange, on: socket, pool, reused: true)
      case .connect(let id, let waiter):
        guard let exchange = pool.waiters.removeValue(forKey: waiter) else { continue }
        open(id, for: exchange, pool)
      case .refuse(let waiter, let refusal):
        guard let exchange = pool.waiters.removeValue(forKey: waiter) else { continue }
        answer(exchange, .fault(refusal.fault), pool)
      case .close(let id, _):
        guard let socket = pool.sockets[id] else { continue }
        if let exchange = socket.exchange {
          socket.exchange = nil
          answer(exchange, .fault(.disabled), pool)
        }
        drop(socket, pool)
      }
    }
  }

  // MARK: timers

  private func schedule(_ socket: UpstreamSocket) {
    guard let exchange = socket.exchange else { return }
    let deadline = exchange.deadlines.next.deadline
    guard deadline < socket.scheduled else { return }
    socket.scheduled = deadline
    timers.push(.init(deadline: deadline, fd: socket.fd, generation: socket.generation))
  }

  /// Ends the exchanges whose deadline passed, and gives the pools their turn.
  func fireTimers() {
    let now = clock.now()
    while let entry = timers.popDue(now) {
      guard let (socket, pool) = self.entry(entry.fd), socket.generation == entry.generation,
        socket.scheduled == entry.deadline
      else { continue }
      socket.scheduled = .never
      guard let exchange = socket.exchange else { continue }
      if let fault = exchange.deadlines.expired(at: now) {
        fail(socket, pool, fault)
      } else {
        schedule(socket)
      }
    }
    for pool in Array(pools.values) where pool.state.nextDeadline <= now {
      perform(pool.state.deadlinePassed(), pool)
    }
    flushAnswers()
  }

  // MARK: answers and what they count

  /// The client's answer for `exchange` from `result`, noted for the access log and counted under
  /// `pool` (nil: no pool had the call).
  private func answer(_ exchange: UpstreamExchange, _ result: UpstreamResult, _ pool: Pool?) {
    let now = clock.now()
    let elapsed = now.nanoseconds &- exchange.deadlines.started.nanoseconds
    var response = exchange.call.answer(result)
    switch result {
    case .response(let upstream):
      response.upstream = UpstreamNote(
        upstream: exchange.call.upstream, status: upstream.status, error: nil, durationNanoseconds: elapsed)
      if let pool, let metrics {
        shard?.count(metrics.requests, metrics.outcome(pool.metricIndex, status: upstream.status))
      }
    case .fault(let fault):
      response.upstream = UpstreamNote(
        upstream: exchange.call.upstream, status: nil, error: fault.proxyStatusError,
        durationNanoseconds: elapsed)
      if let pool, let metrics {
        shard?.count(metrics.requests, metrics.outcome(pool.metricIndex, status: nil))
        shard?.count(metrics.errors, metrics.error(pool.metricIndex, fault))
      }
    }
    if let pool { observe(pool, phase: 2, since: exchange.deadlines.started) }
    answers.append((exchange.key, response))
  }

  /// Counts one in `family`'s series for `pool`'s upstream (and `event`, where the family has one).
  /// The family is named by a function, not a key path: applying a key path cost more than the rest
  /// of the count.
  @inline(__always)
  private func count(_ family: (UpstreamMetrics) -> MetricHandle, _ pool: Pool, event: Int? = nil) {
    guard let metrics, let shard else { return }
    shard.count(family(metrics), event.map { metrics.event(pool.metricIndex, $0) } ?? pool.metricIndex)
  }

  /// Records the time since `start` in `pool`'s duration series for `phase` (0 connect, 1 first
  /// byte, 2 total).
  private func observe(_ pool: Pool, phase: Int, since start: Instant) {
    guard let metrics, let shard, start != .never else { return }
    shard.observe(
      metrics.duration, metrics.phase(pool.metricIndex, phase), clock.now().nanoseconds &- start.nanoseconds)
  }

  /// Counts and logs the opening and closing of `pool`'s circuit.
  private func watchCircuit(_ pool: Pool) {
    let open = pool.state.circuit.gauge == 2
    guard open != pool.circuitOpen else { return }
    pool.circuitOpen = open
    if open, let metrics { shard?.count(metrics.circuitsOpened, pool.metricIndex) }
    Log.event(
      open ? "warning" : "info", open ? "upstream_circuit_open" : "upstream_circuit_closed",
      [("upstream", pool.endpoint.name)])
  }

  /// Hands the answers gathered to the loop (once the client's state is settled; an answer may
  /// start another call, which gathers its own).
  private func flushAnswers() {
    guard !delivering else { return }
    delivering = true
    defer { delivering = false }
    while !answers.isEmpty {
      // The two arrays swap roles, so that neither is allocated again for every answer.
      swap(&answers, &delivered)
      for (key, response) in delivered { deliver(key, response) }
      delivered.removeAll(keepingCapacity: true)
    }
  }
}
