/// One upstream's circuit breaker (passive health): `failuresToOpen` failures in a row open it,
/// and an open circuit refuses every request for its open time. Then it is half-open: exactly
/// one request (the probe) goes through; the probe's success closes the circuit, its failure
/// opens it again for twice as long, up to `maxOpenDuration`.
///
/// While open, outcomes of requests sent before it opened are ignored; while half-open, only the
/// probe's outcome counts.
struct UpstreamCircuit {
  enum State: Equatable {
    /// Requests go through; `failures` in a row so far.
    case closed(failures: Int)
    /// Requests are refused until `until`.
    case open(until: Instant)
    /// One request may probe; `probe` is its connection once one was given.
    case halfOpen(probe: UpstreamConnectionID?)
  }

  /// Whether a request may go to the upstream now.
  enum Admission: Equatable {
    case admit
    /// Yes, as the half-open circuit's probe: name its connection with `probing`.
    case probe
    case refuse
  }

  let failuresToOpen: Int
  let baseOpenDuration: Duration
  let maxOpenDuration: Duration
  private(set) var state = State.closed(failures: 0)
  /// How long the circuit stays (or would stay) open this time.
  private(set) var openDuration: Duration
  /// How many times it opened.
  private(set) var openings = 0

  init(limits: UpstreamPoolLimits) {
    failuresToOpen = max(1, limits.failuresToOpen)
    baseOpenDuration = limits.openDuration
    maxOpenDuration = max(limits.openDuration, limits.maxOpenDuration)
    openDuration = limits.openDuration
  }

  /// When an open circuit becomes half-open (`never` otherwise).
  var deadline: Instant {
    if case .open(let until) = state { until } else { .never }
  }

  /// The state as a number for a gauge: 0 closed, 1 half-open, 2 open.
  var gauge: Int {
    switch state {
    case .closed: 0
    case .halfOpen: 1
    case .open: 2
    }
  }

  /// Whether a request may go to the upstream at `now`.
  mutating func admission(at now: Instant) -> Admission {
    timePassed(now)
    switch state {
    case .closed: return .admit
    case .open: return .refuse
    case .halfOpen(let probe): return probe == nil ? .probe : .refuse
    }
  }

  /// The probe admitted by `admission` goes on connection `id`.
  mutating func probing(_ id: UpstreamConnectionID) {
    if case .halfOpen(nil) = state { state = .halfOpen(probe: id) }
  }

  /// The probe's connection went away without an outcome: the next request probes instead.
  mutating func abandoned(_ id: UpstreamConnectionID) {
    if case .halfOpen(id) = state { state = .halfOpen(probe: nil) }
  }

  /// An open circuit becomes half-open once its time is up.
  mutating func timePassed(_ now: Instant) {
    if case .open(let until) = state, now >= until { state = .halfOpen(probe: nil) }
  }

  /// An attempt on connection `id` ended with `outcome`; true when this opened the circuit.
  mutating func record(_ outcome: UpstreamOutcome, on id: UpstreamConnectionID, at now: Instant) -> Bool {
    let health = outcome.health
    switch state {
    case .closed(let failures):
      switch health {
      case .answered: state = .closed(failures: 0)
      case .nothing: break
      case .failed:
        guard failures + 1 >= failuresToOpen else {
          state = .closed(failures: failures + 1)
          return false
        }
        open(at: now, for: baseOpenDuration)
        return true
      }
    case .open:
      break
    case .halfOpen(let probe):
      guard probe == id else { return false }
      switch health {
      case .answered:
        state = .closed(failures: 0)
        openDuration = baseOpenDuration
      case .nothing: state = .halfOpen(probe: nil)
      case .failed:
        open(at: now, for: min(openDuration * 2, maxOpenDuration))
        return true
      }
    }
    return false
  }

  private mutating func open(at now: Instant, for duration: Duration) {
    openDuration = duration
    state = .open(until: now.adding(duration))
    openings += 1
  }
}
