/// The deadlines of one forwarded exchange, by phase: the connect timeout while connecting, the
/// first-byte timeout from the request's last byte written to the response's first, and the
/// total timeout from the moment the pool was asked for a connection (queue time and a retry
/// included). The loop schedules `next` on its timers and asks `expired` when it fires.
struct UpstreamDeadlines {
  enum Phase: Equatable {
    /// Waiting for a connection from the pool.
    case waiting
    /// Opening a connection since `since`.
    case connecting(since: Instant)
    /// Writing the request.
    case writing
    /// The request is written (at `since`); no byte of the response yet.
    case awaitingResponse(since: Instant)
    /// Reading the response.
    case receiving
  }

  let timeouts: UpstreamTimeouts
  /// When the pool was asked for a connection.
  let started: Instant
  private(set) var phase = Phase.waiting

  /// An exchange that asked the pool for a connection at `started`.
  init(timeouts: UpstreamTimeouts, started: Instant) {
    self.timeouts = timeouts
    self.started = started
  }

  /// A connection started opening at `now` (again, for a retry).
  mutating func connectStarted(at now: Instant) { phase = .connecting(since: now) }

  /// The request is being written, on a connection just opened or reused.
  mutating func writing() { phase = .writing }

  /// The request's last byte was written at `now`.
  mutating func requestWritten(at now: Instant) { phase = .awaitingResponse(since: now) }

  /// The response's first byte arrived.
  mutating func responseStarted() { phase = .receiving }

  /// The earliest deadline and the fault it brings. When the phase's deadline and the total one
  /// fall together, the phase's fault is named (it is the more precise).
  var next: (deadline: Instant, fault: UpstreamFault) {
    let total = started.adding(timeouts.total)
    let phaseDeadline: (Instant, UpstreamFault)? =
      switch phase {
      case .connecting(let since): (since.adding(timeouts.connect), .connectTimeout)
      case .awaitingResponse(let since): (since.adding(timeouts.firstByte), .firstByteTimeout)
      case .waiting, .writing, .receiving: nil
      }
    if let (deadline, fault) = phaseDeadline, deadline <= total { return (deadline, fault) }
    return (total, .totalTimeout)
  }

  /// The fault of the deadline passed at `now` (at exactly the deadline), or nil.
  func expired(at now: Instant) -> UpstreamFault? {
    let next = next
    return next.deadline <= now ? next.fault : nil
  }
}
