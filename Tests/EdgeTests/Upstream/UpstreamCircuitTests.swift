import Testing

@testable import Edge

/// The circuit: failures in a row open it, it refuses while open, then lets exactly one probe
/// through, whose outcome closes it or reopens it for twice as long, up to the maximum.
@Suite("Upstream circuit")
struct UpstreamCircuitTests {
  static let failure = UpstreamOutcome.fault(.connectRefused)
  static let success = UpstreamOutcome.response(status: 200)
  static let neutral = UpstreamOutcome.fault(.queueFull)

  static func circuit(failuresToOpen: Int = 3) -> UpstreamCircuit {
    var limits = UpstreamPoolLimits()
    limits.failuresToOpen = failuresToOpen
    limits.openDuration = .seconds(5)
    limits.maxOpenDuration = .seconds(60)
    return UpstreamCircuit(limits: limits)
  }

  static func id(_ n: Int) -> UpstreamConnectionID { UpstreamConnectionID(rawValue: n) }

  /// Feeds `pattern` (f: a failure, s: an answer, n: neither) on connection 1; whether it opened.
  static func feed(_ pattern: String, to circuit: inout UpstreamCircuit, at now: Instant) -> Bool {
    var opened = false
    for c in pattern {
      let outcome = c == "f" ? failure : c == "s" ? success : neutral
      opened = circuit.record(outcome, on: id(1), at: now) || opened
    }
    return opened
  }

  @Test(
    "three failures in a row open it; an answer in between starts the count again",
    arguments: [
      ("fff", true), ("ff", false), ("ffsff", false), ("ffsfff", true), ("fnfnf", true), ("sfsfsf", false),
      ("nnnnnn", false), ("ffffff", true),
    ])
  func streak(pattern: String, opens: Bool) {
    let clock = ManualClock()
    var circuit = Self.circuit()
    #expect(Self.feed(pattern, to: &circuit, at: clock.now()) == opens)
    #expect((circuit.gauge == 2) == opens)
    #expect(circuit.admission(at: clock.now()) == (opens ? .refuse : .admit))
  }

  @Test("a 502, 503 or 504 of the upstream counts as a failure; a 500 is an answer")
  func statuses() {
    let clock = ManualClock()
    var circuit = Self.circuit(failuresToOpen: 2)
    let opened = [503, 500, 502, 504].map {
      circuit.record(.response(status: $0), on: Self.id(1), at: clock.now())
    }
    #expect(opened == [false, false, false, true])
  }

  @Test("open, it refuses until exactly its open time, then admits exactly one probe")
  func halfOpen() {
    let clock = ManualClock()
    var circuit = Self.circuit()
    _ = Self.feed("fff", to: &circuit, at: clock.now())
    #expect(circuit.deadline == clock.now().adding(.seconds(5)))
    clock.advance(by: .seconds(5) - .nanoseconds(1))
    #expect(circuit.admission(at: clock.now()) == .refuse)
    clock.advance(by: .nanoseconds(1))
    #expect(circuit.admission(at: clock.now()) == .probe)
    circuit.probing(Self.id(7))
    #expect(circuit.gauge == 1 && circuit.deadline == .never)
    #expect(circuit.admission(at: clock.now()) == .refuse)
    #expect(circuit.admission(at: clock.now()) == .refuse)
  }

  @Test("the probe's answer closes it and the open time starts again from the first")
  func probeSuccess() {
    let clock = ManualClock()
    var circuit = Self.circuit()
    _ = Self.feed("fff", to: &circuit, at: clock.now())
    clock.advance(by: .seconds(5))
    #expect(circuit.admission(at: clock.now()) == .probe)
    circuit.probing(Self.id(2))
    let byOther = circuit.record(Self.failure, on: Self.id(1), at: clock.now())
    #expect(!byOther && circuit.state == .halfOpen(probe: Self.id(2)), "not the probe: ignored")
    let byProbe = circuit.record(Self.success, on: Self.id(2), at: clock.now())
    #expect(!byProbe)
    #expect(circuit.state == .closed(failures: 0) && circuit.gauge == 0)
    #expect(circuit.admission(at: clock.now()) == .admit)
    _ = Self.feed("fff", to: &circuit, at: clock.now())
    #expect(circuit.deadline == clock.now().adding(.seconds(5)))
  }

  @Test("each failed probe doubles the open time, up to the maximum")
  func backoff() {
    let clock = ManualClock()
    var circuit = Self.circuit()
    _ = Self.feed("fff", to: &circuit, at: clock.now())
    var durations: [Int64] = []
    for probe in 1...6 {
      let wait = circuit.deadline.nanoseconds - clock.now().nanoseconds
      durations.append(Int64(wait / 1_000_000_000))
      clock.advance(by: .nanoseconds(Int64(wait)))
      #expect(circuit.admission(at: clock.now()) == .probe)
      circuit.probing(Self.id(probe))
      let reopened = circuit.record(.fault(.firstByteTimeout), on: Self.id(probe), at: clock.now())
      #expect(reopened)
    }
    #expect(durations == [5, 10, 20, 40, 60, 60])
    #expect(circuit.openings == 7)
  }

  @Test("a probe that ends with nothing to say, or is given up, lets the next request probe")
  func abandonedProbe() {
    let clock = ManualClock()
    var circuit = Self.circuit()
    _ = Self.feed("fff", to: &circuit, at: clock.now())
    clock.advance(by: .seconds(5))
    #expect(circuit.admission(at: clock.now()) == .probe)
    circuit.probing(Self.id(1))
    let opened = circuit.record(Self.neutral, on: Self.id(1), at: clock.now())
    #expect(!opened)
    #expect(circuit.admission(at: clock.now()) == .probe)
    circuit.probing(Self.id(2))
    circuit.abandoned(Self.id(3))
    #expect(circuit.admission(at: clock.now()) == .refuse, "another connection: the probe stands")
    circuit.abandoned(Self.id(2))
    #expect(circuit.admission(at: clock.now()) == .probe)
  }

  @Test("outcomes of requests sent before it opened change nothing while it is open")
  func openIgnores() {
    let clock = ManualClock()
    var circuit = Self.circuit()
    _ = Self.feed("fff", to: &circuit, at: clock.now())
    let until = circuit.deadline
    #expect(!Self.feed("ssfff", to: &circuit, at: clock.now()))
    #expect(circuit.deadline == until && circuit.openings == 1)
  }
}
