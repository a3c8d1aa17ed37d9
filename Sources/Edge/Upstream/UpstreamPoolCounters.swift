/// What one pool has done since it started, as plain numbers for the metrics: connections
/// opened, reused and closed (by reason), requests refused (by reason).
struct UpstreamPoolCounters: Equatable {
  /// Connections established.
  var opened = 0
  /// Connections that failed to open.
  var connectFailures = 0
  /// Requests sent on a connection that had carried one before.
  var reused = 0
  /// Connections the upstream closed (or that failed) outside the pool's decisions.
  var closedByPeer = 0
  /// Connections the pool closed, by reason (a reason never counted is absent).
  private var closes: [UpstreamCloseReason: Int] = [:]
  /// Requests refused, by reason (a reason never counted is absent).
  private var refusals: [UpstreamRefusal: Int] = [:]

  mutating func count(_ reason: UpstreamCloseReason) { closes[reason, default: 0] += 1 }

  mutating func count(_ refusal: UpstreamRefusal) { refusals[refusal, default: 0] += 1 }

  /// Connections the pool closed for `reason`.
  func closed(_ reason: UpstreamCloseReason) -> Int { closes[reason, default: 0] }

  /// Requests refused for `refusal`.
  func refused(_ refusal: UpstreamRefusal) -> Int { refusals[refusal, default: 0] }
}
