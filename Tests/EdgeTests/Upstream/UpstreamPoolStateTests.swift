import Testing

@testable import Edge

/// One pool over a manual clock, with small limits.
struct PoolHarness {
  let clock = ManualClock()
  let pool: UpstreamPoolState<ManualClock>

  init(_ adjust: (inout UpstreamPoolLimits) -> Void = { _ in }) {
    var limits = UpstreamPoolLimits()
    limits.maxIdle = 3
    limits.maxConnections = 3
    limits.queueLength = 2
    limits.queueTimeout = .seconds(1)
    limits.idleTimeout = .seconds(30)
    limits.maxRequestsPerConnection = 100
    limits.maxConnectionAge = .seconds(3600)
    limits.failuresToOpen = 3
    limits.openDuration = .seconds(5)
    limits.maxOpenDuration = .seconds(60)
    adjust(&limits)
    pool = UpstreamPoolState(clock: clock, limits: limits)
  }

  static func c(_ n: Int) -> UpstreamConnectionID { UpstreamConnectionID(rawValue: n) }
  static func w(_ n: Int) -> UpstreamWaiterID { UpstreamWaiterID(rawValue: n) }

  /// Acquires a new connection and reports it established.
  func open() -> UpstreamConnectionID? {
    guard case .connect(let id) = pool.acquire() else { return nil }
    pool.connected(id)
    return id
  }

  /// `n` connections opened and busy.
  func open(_ n: Int) -> [UpstreamConnectionID] { (0..<n).compactMap { _ in open() } }
}

/// The per-loop pool: LIFO reuse, its bounds, the wait queue, the caps that close a connection
/// instead of keeping it, its deadlines, the circuit's effect and the kill switch.
@Suite("Upstream pool")
struct UpstreamPoolStateTests {
  typealias H = PoolHarness

  @Test("idle connections are reused most recently released first")
  func lifo() {
    let h = H()
    #expect(h.open(3) == [H.c(1), H.c(2), H.c(3)])
    for id in [H.c(1), H.c(3), H.c(2)] { #expect(h.pool.release(id, reusable: true) == []) }
    #expect(h.pool.idleConnections == [H.c(2), H.c(3), H.c(1)])
    #expect(h.pool.acquire() == .reuse(H.c(2)))
    #expect(h.pool.acquire() == .reuse(H.c(3)))
    #expect(h.pool.acquire() == .reuse(H.c(1)))
    #expect(h.pool.counters.reused == 3 && h.pool.counters.opened == 3)
  }

  @Test("a connection released while maxIdle are idle is closed", arguments: [0, 1, 2])
  func idleLimit(maxIdle: Int) {
    let h = H { $0.maxIdle = maxIdle }
    let ids = h.open(3)
    var closed: [UpstreamConnectionID] = []
    for id in ids {
      for action in h.pool.release(id, reusable: true) {
        #expect(action == .close(id, .idleLimit))
        closed.append(id)
      }
    }
    #expect(h.pool.idleCount == maxIdle && closed == Array(ids.dropFirst(maxIdle)))
    #expect(h.pool.counters.closed(.idleLimit) == 3 - maxIdle && h.pool.connectionCount == maxIdle)
  }

  @Test("beyond maxConnections (connecting ones included) a request waits; beyond the queue it is refused")
  func bounds() {
    let h = H()
    #expect(h.pool.acquire() == .connect(H.c(1)))
    #expect(h.pool.acquire() == .connect(H.c(2)))
    h.pool.connected(H.c(1))
    #expect(h.pool.acquire() == .connect(H.c(3)))
    #expect(h.pool.acquire() == .queued(H.w(1)))
    #expect(h.pool.acquire() == .queued(H.w(2)))
    #expect(h.pool.acquire() == .refuse(.queueFull))
    #expect(
      h.pool.connectionCount == 3 && h.pool.waitingCount == 2 && h.pool.counters.refused(.queueFull) == 1)
  }

  @Test("with no queue, a request beyond maxConnections is refused at once")
  func noQueue() {
    let h = H { $0.queueLength = 0 }
    _ = h.open(3)
    #expect(h.pool.acquire() == .refuse(.queueFull))
  }

  @Test("a waiter is refused at exactly its queue timeout")
  func queueTimeout() {
    let h = H()
    _ = h.open(3)
    let queuedAt = h.clock.now()
    #expect(h.pool.acquire() == .queued(H.w(1)))
    h.clock.advance(by: .milliseconds(400))
    #expect(h.pool.acquire() == .queued(H.w(2)))
    #expect(h.pool.nextDeadline == queuedAt.adding(.seconds(1)))
    h.clock.advance(by: .milliseconds(600) - .nanoseconds(1))
    #expect(h.pool.deadlinePassed() == [])
    h.clock.advance(by: .nanoseconds(1))
    #expect(h.pool.deadlinePassed() == [.refuse(H.w(1), .queueTimeout)])
    #expect(h.pool.nextDeadline == queuedAt.adding(.milliseconds(1400)))
    #expect(h.pool.waitingCount == 1 && h.pool.counters.refused(.queueTimeout) == 1)
  }

  @Test("released connections go to the waiters in the order they came")
  func fifo() {
    let h = H()
    _ = h.open(3)
    #expect(h.pool.acquire() == .queued(H.w(1)))
    #expect(h.pool.acquire() == .queued(H.w(2)))
    #expect(h.pool.release(H.c(3), reusable: true) == [.handOver(H.c(3), to: H.w(1))])
    #expect(h.pool.release(H.c(1), reusable: true) == [.handOver(H.c(1), to: H.w(2))])
    #expect(h.pool.release(H.c(2), reusable: true) == [])
    #expect(h.pool.waitingCount == 0 && h.pool.idleCount == 1 && h.pool.counters.reused == 2)
  }

  @Test("a cancelled waiter is passed over")
  func cancel() {
    let h = H()
    _ = h.open(3)
    _ = h.pool.acquire()
    _ = h.pool.acquire()
    h.pool.cancel(H.w(1))
    #expect(h.pool.release(H.c(1), reusable: true) == [.handOver(H.c(1), to: H.w(2))])
  }

  @Test("a connection released as not reusable is closed, and its place goes to a waiter")
  func notReusable() {
    let h = H()
    _ = h.open(3)
    #expect(h.pool.acquire() == .queued(H.w(1)))
    #expect(
      h.pool.release(H.c(2), reusable: false) == [
        .close(H.c(2), .notReusable), .connect(H.c(4), for: H.w(1)),
      ])
    #expect(h.pool.release(H.c(1), reusable: false) == [.close(H.c(1), .notReusable)])
    #expect(h.pool.counters.closed(.notReusable) == 2 && h.pool.connectionCount == 2)
  }

  @Test("an idle connection is closed at exactly its idle timeout, the least recently used first")
  func idleTimeout() {
    let h = H()
    _ = h.open(2)
    let first = h.clock.now()
    _ = h.pool.release(H.c(1), reusable: true)
    h.clock.advance(by: .seconds(10))
    _ = h.pool.release(H.c(2), reusable: true)
    #expect(h.pool.nextDeadline == first.adding(.seconds(30)))
    h.clock.advance(by: .seconds(20) - .nanoseconds(1))
    #expect(h.pool.deadlinePassed() == [])
    h.clock.advance(by: .nanoseconds(1))
    #expect(h.pool.deadlinePassed() == [.close(H.c(1), .idleTimeout)])
    #expect(h.pool.nextDeadline == first.adding(.seconds(40)))
    #expect(h.pool.acquire() == .reuse(H.c(2)))
    #expect(h.pool.nextDeadline == .never && h.pool.counters.closed(.idleTimeout) == 1)
  }

  @Test("a connection that carried maxRequestsPerConnection requests is closed when released")
  func requestLimit() {
    let h = H { $0.maxRequestsPerConnection = 3 }
    #expect(h.open() == H.c(1))
    for _ in 1..<3 {
      #expect(h.pool.release(H.c(1), reusable: true) == [])
      #expect(h.pool.acquire() == .reuse(H.c(1)))
    }
    #expect(h.pool.release(H.c(1), reusable: true) == [.close(H.c(1), .requestLimit)])
    #expect(h.pool.counters.closed(.requestLimit) == 1 && h.pool.acquire() == .connect(H.c(2)))
  }

  @Test("a handed-over request counts toward the cap too")
  func requestLimitHandOver() {
    let h = H {
      $0.maxRequestsPerConnection = 2
      $0.maxConnections = 1
    }
    _ = h.open()
    #expect(h.pool.acquire() == .queued(H.w(1)))
    #expect(h.pool.release(H.c(1), reusable: true) == [.handOver(H.c(1), to: H.w(1))])
    #expect(h.pool.release(H.c(1), reusable: true) == [.close(H.c(1), .requestLimit)])
  }

  @Test("a connection released maxConnectionAge after it was established is closed")
  func ageLimit() {
    let h = H { $0.maxConnectionAge = .seconds(60) }
    #expect(h.pool.acquire() == .connect(H.c(1)))
    h.clock.advance(by: .seconds(1))
    h.pool.connected(H.c(1))
    h.clock.advance(by: .seconds(60) - .nanoseconds(1))
    #expect(h.pool.release(H.c(1), reusable: true) == [])
    #expect(h.pool.acquire() == .reuse(H.c(1)))
    h.clock.advance(by: .nanoseconds(1))
    #expect(h.pool.release(H.c(1), reusable: true) == [.close(H.c(1), .ageLimit)])
    #expect(h.pool.counters.closed(.ageLimit) == 1)
  }

  @Test("an idle connection the upstream closed is forgotten; numbers are never given twice")
  func peerClosed() {
    let h = H()
    _ = h.open(2)
    _ = h.pool.release(H.c(1), reusable: true)
    _ = h.pool.release(H.c(2), reusable: true)
    #expect(h.pool.closed(H.c(2)) == [])
    #expect(h.pool.closed(H.c(2)) == [])
    #expect(h.pool.idleConnections == [H.c(1)] && h.pool.counters.closedByPeer == 1)
    #expect(h.pool.acquire() == .reuse(H.c(1)))
    #expect(h.pool.acquire() == .connect(H.c(3)))
  }

  @Test("a busy connection the upstream closed makes room for a waiter")
  func peerClosedBusy() {
    let h = H()
    _ = h.open(3)
    #expect(h.pool.acquire() == .queued(H.w(1)))
    #expect(h.pool.closed(H.c(1)) == [.connect(H.c(4), for: H.w(1))])
  }

  @Test("a failed connect makes room for a waiter; late events for it change nothing")
  func connectFailed() {
    let h = H()
    for n in 1...3 { #expect(h.pool.acquire() == .connect(H.c(n))) }
    #expect(h.pool.acquire() == .queued(H.w(1)))
    #expect(h.pool.connectFailed(H.c(2), .connectRefused) == [.connect(H.c(4), for: H.w(1))])
    h.pool.connected(H.c(2))
    #expect(h.pool.release(H.c(2), reusable: true) == [])
    #expect(
      h.pool.connectionCount == 3 && h.pool.counters.connectFailures == 1 && h.pool.counters.opened == 0)
  }

  @Test("a connection given up while connecting is closed, never kept")
  func releaseConnecting() {
    let h = H()
    #expect(h.pool.acquire() == .connect(H.c(1)))
    #expect(h.pool.release(H.c(1), reusable: true) == [.close(H.c(1), .notReusable)])
  }

  @Test("failed connects in a row open the circuit; the queue is refused and so is every request")
  func circuitFromConnects() {
    let h = H()
    for n in 1...3 { #expect(h.pool.acquire() == .connect(H.c(n))) }
    #expect(h.pool.acquire() == .queued(H.w(1)))
    #expect(h.pool.acquire() == .queued(H.w(2)))
    #expect(h.pool.connectFailed(H.c(1), .connectRefused) == [.connect(H.c(4), for: H.w(1))])
    #expect(h.pool.connectFailed(H.c(2), .connectTimeout) == [.connect(H.c(5), for: H.w(2))])
    #expect(h.pool.acquire() == .queued(H.w(3)))
    #expect(h.pool.connectFailed(H.c(3), .connectRefused) == [.refuse(H.w(3), .circuitOpen)])
    #expect(h.pool.acquire() == .refuse(.circuitOpen))
    #expect(h.pool.circuit.gauge == 2 && h.pool.nextDeadline == h.clock.now().adding(.seconds(5)))
    #expect(h.pool.counters.refused(.circuitOpen) == 2)
  }

  @Test(
    "failures recorded in a row open the circuit; N-1 with an answer between do not",
    arguments: [
      ([503, 503, 503], true), ([503, 503, 200, 503, 503], false), ([503, 500, 503], false),
      ([504, 502, 503], true),
    ])
  func circuitFromOutcomes(statuses: [Int], opens: Bool) {
    let h = H()
    let id = h.open()
    for status in statuses {
      guard let id else { break }
      _ = h.pool.record(.response(status: status), on: id)
    }
    #expect((h.pool.acquire() == .refuse(.circuitOpen)) == opens)
  }

  @Test("the outcome that opens the circuit refuses the waiting requests")
  func circuitRefusesWaiters() {
    let h = H()
    _ = h.open(3)
    #expect(h.pool.acquire() == .queued(H.w(1)))
    #expect(h.pool.acquire() == .queued(H.w(2)))
    #expect(h.pool.record(.fault(.closedMidResponse), on: H.c(1)) == [])
    #expect(h.pool.record(.response(status: 502), on: H.c(2)) == [])
    #expect(
      h.pool.record(.fault(.totalTimeout), on: H.c(3)) == [
        .refuse(H.w(1), .circuitOpen), .refuse(H.w(2), .circuitOpen),
      ])
    #expect(h.pool.waitingCount == 0 && h.pool.counters.refused(.circuitOpen) == 2)
    #expect(h.pool.release(H.c(1), reusable: false) == [.close(H.c(1), .notReusable)])
  }

  @Test("half-open: exactly one probe, whose answer closes the circuit")
  func probe() {
    let h = H()
    _ = h.open(2)
    _ = h.pool.release(H.c(2), reusable: true)
    for _ in 1...3 { _ = h.pool.record(.fault(.firstByteTimeout), on: H.c(1)) }
    _ = h.pool.release(H.c(1), reusable: false)
    h.clock.advance(by: .seconds(5) - .nanoseconds(1))
    #expect(h.pool.acquire() == .refuse(.circuitOpen))
    h.clock.advance(by: .nanoseconds(1))
    #expect(h.pool.deadlinePassed() == [] && h.pool.circuit.gauge == 1)
    #expect(h.pool.acquire() == .reuse(H.c(2)))
    #expect(h.pool.acquire() == .refuse(.circuitOpen))
    #expect(h.pool.record(.response(status: 204), on: H.c(2)) == [])
    _ = h.pool.release(H.c(2), reusable: true)
    #expect(h.pool.circuit.gauge == 0)
    #expect(h.pool.acquire() == .reuse(H.c(2)))
    #expect(h.pool.acquire() == .connect(H.c(3)))
  }

  @Test("a probe that fails to connect reopens the circuit for twice as long")
  func probeFails() {
    let h = H()
    for _ in 1...3 {
      guard case .connect(let id) = h.pool.acquire() else { return }
      _ = h.pool.connectFailed(id, .connectRefused)
    }
    h.clock.advance(by: .seconds(5))
    #expect(h.pool.acquire() == .connect(H.c(4)))
    #expect(h.pool.connectFailed(H.c(4), .connectRefused) == [])
    #expect(h.pool.nextDeadline == h.clock.now().adding(.seconds(10)))
    h.clock.advance(by: .seconds(10) - .nanoseconds(1))
    #expect(h.pool.acquire() == .refuse(.circuitOpen))
    h.clock.advance(by: .nanoseconds(1))
    #expect(h.pool.acquire() == .connect(H.c(5)))
  }

  @Test("a probe released without an outcome lets the next request probe")
  func probeGivenUp() {
    let h = H()
    for _ in 1...3 {
      guard case .connect(let id) = h.pool.acquire() else { return }
      _ = h.pool.connectFailed(id, .connectRefused)
    }
    h.clock.advance(by: .seconds(5))
    #expect(h.pool.acquire() == .connect(H.c(4)))
    _ = h.pool.release(H.c(4), reusable: false)
    #expect(h.pool.acquire() == .connect(H.c(5)))
    #expect(h.pool.acquire() == .refuse(.circuitOpen))
  }

  @Test("switched off: waiters refused, idle connections closed, busy ones closed when released")
  func disabled() {
    let h = H()
    _ = h.open(3)
    _ = h.pool.release(H.c(1), reusable: true)
    #expect(h.pool.acquire() == .reuse(H.c(1)))
    _ = h.pool.release(H.c(2), reusable: true)
    #expect(h.pool.acquire() == .reuse(H.c(2)))
    #expect(h.pool.acquire() == .queued(H.w(1)))
    _ = h.pool.release(H.c(3), reusable: true)
    #expect(h.pool.acquire() == .queued(H.w(2)))
    #expect(h.pool.release(H.c(3), reusable: true) == [.handOver(H.c(3), to: H.w(2))])
    _ = h.pool.release(H.c(2), reusable: true)
    #expect(h.pool.setEnabled(false) == [.close(H.c(2), .disabled)])
    #expect(h.pool.acquire() == .refuse(.disabled))
    #expect(h.pool.release(H.c(1), reusable: true) == [.close(H.c(1), .disabled)])
    #expect(h.pool.setEnabled(true) == [])
    #expect(h.pool.acquire() == .connect(H.c(4)))
    #expect(h.pool.counters.refused(.disabled) == 1 && h.pool.counters.closed(.disabled) == 2)
  }

  @Test("switching off refuses the waiting requests")
  func disabledRefusesWaiters() {
    let h = H()
    _ = h.open(3)
    _ = h.pool.acquire()
    _ = h.pool.acquire()
    #expect(h.pool.setEnabled(false) == [.refuse(H.w(1), .disabled), .refuse(H.w(2), .disabled)])
    #expect(h.pool.waitingCount == 0 && h.pool.counters.refused(.disabled) == 2)
  }

  @Test("a pool made switched off refuses from the start")
  func disabledAtStart() {
    let pool = UpstreamPoolState(clock: ManualClock(), limits: UpstreamPoolLimits(), enabled: false)
    #expect(pool.acquire() == .refuse(.disabled))
  }

  @Test("the next deadline is the earliest of the idle timeouts and the open circuit's end")
  func nextDeadline() {
    let h = H()
    #expect(h.pool.nextDeadline == .never)
    let start = h.clock.now()
    _ = h.open(3)
    _ = h.pool.release(H.c(1), reusable: true)
    #expect(h.pool.nextDeadline == start.adding(.seconds(30)))
    for _ in 1...3 { _ = h.pool.record(.fault(.resetBeforeResponse), on: H.c(2)) }
    #expect(h.pool.nextDeadline == start.adding(.seconds(5)))
    h.clock.advance(by: .seconds(5))
    #expect(h.pool.deadlinePassed() == [])
    #expect(h.pool.nextDeadline == start.adding(.seconds(30)))
  }

  @Test("a refusal of the pool is answered with the fault of the same name")
  func refusals() {
    #expect(UpstreamRefusal.queueFull.fault == .queueFull)
    #expect(UpstreamRefusal.queueTimeout.fault == .queueTimeout)
    #expect(UpstreamRefusal.circuitOpen.fault == .circuitOpen)
    #expect(UpstreamRefusal.disabled.fault == .disabled)
  }
}
