/// One event loop's pool of HTTP/1.1 keep-alive connections to one upstream, as a state machine
/// over an injectable clock: it is told what happened (a request wants a connection, a connection
/// opened, failed, was released or closed, a deadline passed) and answers with what the loop must
/// do (`UpstreamAcquisition`, `UpstreamPoolAction`). It performs no I/O, so every limit and
/// timeout is testable instantly with a manual clock.
///
/// The rules:
/// - at most `maxConnections` connections, connecting, busy and idle together; a request beyond
///   them waits in a FIFO queue of `queueLength`, for `queueTimeout` at most, then is refused;
/// - a released connection goes to the oldest waiter, else is kept idle (at most `maxIdle`);
///   idle connections are reused most recently used first (LIFO: the least used ones age out
///   under the idle timeout, and the one reused is the least likely to be closing upstream);
/// - a connection is closed instead of kept when it is not reusable, has carried
///   `maxRequestsPerConnection` requests, is older than `maxConnectionAge`, or the upstream is
///   switched off; an idle one after `idleTimeout`;
/// - the circuit (`UpstreamCircuit`) refuses requests while open, and lets one probe through
///   when half-open; when it opens, the waiting requests are refused.
///
/// The loop records each attempt's outcome (`record`) before it releases the connection, except
/// a failed connect, which `connectFailed` records itself.
///
/// Bound to its loop's thread (not Sendable): one per upstream per loop, so it needs no lock.
final class UpstreamPoolState<Clock: EdgeClock> {
  private struct Connection {
    enum State: Equatable {
      case connecting
      case busy
      case idle
    }
    var state = State.connecting
    /// When it was established (when it started connecting, until then).
    var established: Instant
    /// Requests given to it so far, the current one included.
    var requests = 1
    /// When it was last released (while idle).
    var idleSince = Instant.never
  }

  private struct Waiter {
    let id: UpstreamWaiterID
    let deadline: Instant
  }

  let clock: Clock
  let limits: UpstreamPoolLimits
  /// The circuit of this loop's view of the upstream.
  private(set) var circuit: UpstreamCircuit
  /// What the pool has done, for the metrics.
  private(set) var counters = UpstreamPoolCounters()
  /// The upstream's switch: off, every request is refused and no connection is kept.
  private(set) var enabled: Bool
  private var connections: [UpstreamConnectionID: Connection] = [:]
  /// Idle connections, least recently released first: reused from the end, timed out from the
  /// front (the order of `idleSince`).
  private var idle: [UpstreamConnectionID] = []
  /// Waiting requests, oldest first (the order of their deadlines).
  private var waiters: [Waiter] = []
  private var lastConnection = 0
  private var lastWaiter = 0

  /// A pool with no connection yet.
  init(clock: Clock, limits: UpstreamPoolLimits, enabled: Bool = true) {
    self.clock = clock
    self.limits = limits
    self.enabled = enabled
    circuit = UpstreamCircuit(limits: limits)
  }

  /// Connections connecting, busy or idle.
  var connectionCount: Int { connections.count }
  /// Idle connections.
  var idleCount: Int { idle.count }
  /// Requests waiting for a connection.
  var waitingCount: Int { waiters.count }
  /// The idle connections, most recently released first (the order of reuse).
  var idleConnections: [UpstreamConnectionID] { idle.reversed() }

  /// When the loop must call `deadlinePassed` next: the first idle timeout, the oldest waiter's
  /// queue timeout, or the end of the circuit's open time (`never`: none).
  var nextDeadline: Instant {
    var next = circuit.deadline
    if let first = idle.first, let connection = connections[first] {
      next = min(next, connection.idleSince.adding(limits.idleTimeout))
    }
    if let waiter = waiters.first { next = min(next, waiter.deadline) }
    return next
  }

  // MARK: events

  /// A request wants a connection to the upstream.
  func acquire() -> UpstreamAcquisition {
    let now = clock.now()
    guard enabled else { return refused(.disabled) }
    switch circuit.admission(at: now) {
    case .refuse:
      return refused(.circuitOpen)
    case .probe:
      // The half-open circuit's one probe takes a connection at hand, never a place in the queue.
      if let id = takeIdle() {
        circuit.probing(id)
        return .reuse(id)
      }
      guard connections.count < limits.maxConnections else { return refused(.circuitOpen) }
      let id = open(at: now)
      circuit.probing(id)
      return .connect(id)
    case .admit:
      if let id = takeIdle() { return .reuse(id) }
      if connections.count < limits.maxConnections { return .connect(open(at: now)) }
      guard waiters.count < limits.queueLength else { return refused(.queueFull) }
      lastWaiter += 1
      let waiter = Waiter(
        id: UpstreamWaiterID(rawValue: lastWaiter), deadline: now.adding(limits.queueTimeout))
      waiters.append(waiter)
      return .queued(waiter.id)
    }
  }

  /// Connection `id` is established; its request may be written.
  func connected(_ id: UpstreamConnectionID) {
    guard connections[id]?.state == .connecting else { return }
    connections[id]?.state = .busy
    connections[id]?.established = clock.now()
    counters.opened += 1
  }

  /// Connection `id` failed to open with `fault` (its request is answered with the fault, not
  /// retried). The failure counts for the circuit; a waiter may be given a new connection, or
  /// every waiter refused when the circuit opens.
  func connectFailed(_ id: UpstreamConnectionID, _ fault: UpstreamFault) -> [UpstreamPoolAction] {
    guard connections[id]?.state == .connecting else { return [] }
    connections[id] = nil
    counters.connectFailures += 1
    var actions: [UpstreamPoolAction] = []
    if circuit.record(.fault(fault), on: id, at: clock.now()) {
      refuseWaiters(.circuitOpen, into: &actions)
    }
    circuit.abandoned(id)
    admitWaiter(into: &actions)
    return actions
  }

  /// The attempt on connection `id` ended with `outcome` (once per attempt, before `release`).
  /// When this opens the circuit, every waiter is refused.
  func record(_ outcome: UpstreamOutcome, on id: UpstreamConnectionID) -> [UpstreamPoolAction] {
    var actions: [UpstreamPoolAction] = []
    if circuit.record(outcome, on: id, at: clock.now()) { refuseWaiters(.circuitOpen, into: &actions) }
    return actions
  }

  /// The request on connection `id` is done with it. `reusable`: the response was read whole and
  /// neither side asked to close (RFC 9112 §9.3); false after any fault. The connection goes to
  /// the oldest waiter, is kept idle, or is closed.
  func release(_ id: UpstreamConnectionID, reusable: Bool) -> [UpstreamPoolAction] {
    // One hash of `id`: the connection is then reached by its index (this runs for every call).
    guard let i = connections.index(forKey: id), connections.values[i].state != .idle else { return [] }
    circuit.abandoned(id)
    let now = clock.now()
    if let reason = closeReason(connections.values[i], reusable: reusable, now: now) {
      return drop(id, reason)
    }
    if !waiters.isEmpty {
      let waiter = waiters.removeFirst()
      connections.values[i].requests += 1
      counters.reused += 1
      return [.handOver(id, to: waiter.id)]
    }
    guard idle.count < limits.maxIdle else { return drop(id, .idleLimit) }
    connections.values[i].state = .idle
    connections.values[i].idleSince = now
    idle.append(id)
    return []
  }

  /// Connection `id` was closed by the upstream (or failed) outside the pool's decisions; the
  /// loop has closed its socket. A waiter may be given a new connection.
  func closed(_ id: UpstreamConnectionID) -> [UpstreamPoolAction] {
    guard connections.removeValue(forKey: id) != nil else { return [] }
    idle.removeAll { $0 == id }
    counters.closedByPeer += 1
    circuit.abandoned(id)
    var actions: [UpstreamPoolAction] = []
    admitWaiter(into: &actions)
    return actions
  }

  /// A waiting request no longer wants a connection (its client went away).
  func cancel(_ waiter: UpstreamWaiterID) {
    waiters.removeAll { $0.id == waiter }
  }

  /// Switches the upstream on or off. Off: waiters are refused, idle connections closed, busy
  /// ones closed when released, and every new request refused.
  func setEnabled(_ on: Bool) -> [UpstreamPoolAction] {
    enabled = on
    guard !on else { return [] }
    var actions: [UpstreamPoolAction] = []
    refuseWaiters(.disabled, into: &actions)
    for id in idle {
      connections[id] = nil
      counters.count(UpstreamCloseReason.disabled)
      actions.append(.close(id, .disabled))
    }
    idle.removeAll()
    return actions
  }

  /// `nextDeadline` has come: idle connections past the idle timeout are closed, waiters past
  /// the queue timeout refused (both at exactly their deadline), an open circuit whose time is
  /// up becomes half-open.
  func deadlinePassed() -> [UpstreamPoolAction] {
    let now = clock.now()
    var actions: [UpstreamPoolAction] = []
    while let first = idle.first, let connection = connections[first],
      connection.idleSince.adding(limits.idleTimeout) <= now
    {
      idle.removeFirst()
      connections[first] = nil
      counters.count(.idleTimeout)
      actions.append(.close(first, .idleTimeout))
    }
    while let waiter = waiters.first, waiter.deadline <= now {
      waiters.removeFirst()
      counters.count(.queueTimeout)
      actions.append(.refuse(waiter.id, .queueTimeout))
    }
    circuit.timePassed(now)
    return actions
  }

  // MARK: helpers

  private func refused(_ refusal: UpstreamRefusal) -> UpstreamAcquisition {
    counters.count(refusal)
    return .refuse(refusal)
  }

  /// The most recently released idle connection, now busy.
  private func takeIdle() -> UpstreamConnectionID? {
    guard let id = idle.popLast() else { return nil }
    if let i = connections.index(forKey: id) {
      connections.values[i].state = .busy
      connections.values[i].requests += 1
    }
    counters.reused += 1
    return id
  }

  /// A new connection, connecting.
  private func open(at now: Instant) -> UpstreamConnectionID {
    lastConnection += 1
    let id = UpstreamConnectionID(rawValue: lastConnection)
    connections[id] = Connection(established: now)
    return id
  }

  private func closeReason(_ connection: Connection, reusable: Bool, now: Instant) -> UpstreamCloseReason? {
    if !reusable || connection.state == .connecting { return .notReusable }
    if !enabled { return .disabled }
    if connection.requests >= limits.maxRequestsPerConnection { return .requestLimit }
    if connection.established.adding(limits.maxConnectionAge) <= now { return .ageLimit }
    return nil
  }

  /// Forgets connection `id`, to be closed for `reason`; its place may go to a waiter.
  private func drop(_ id: UpstreamConnectionID, _ reason: UpstreamCloseReason) -> [UpstreamPoolAction] {
    connections[id] = nil
    counters.count(reason)
    var actions: [UpstreamPoolAction] = [.close(id, reason)]
    admitWaiter(into: &actions)
    return actions
  }

  /// Gives the oldest waiter a new connection when there is room. Waiters exist only while the
  /// circuit is closed and the upstream on: opening the circuit or switching it off refuses them.
  private func admitWaiter(into actions: inout [UpstreamPoolAction]) {
    guard !waiters.isEmpty, connections.count < limits.maxConnections else { return }
    let waiter = waiters.removeFirst()
    actions.append(.connect(open(at: clock.now()), for: waiter.id))
  }

  private func refuseWaiters(_ refusal: UpstreamRefusal, into actions: inout [UpstreamPoolAction]) {
    for waiter in waiters {
      counters.count(refusal)
      actions.append(.refuse(waiter.id, refusal))
    }
    waiters.removeAll()
  }
}
