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
  // Connections the pool closed, by `UpstreamCloseReason`.
  var closedIdleTimeout = 0
  var closedIdleLimit = 0
  var closedRequestLimit = 0
  var closedAgeLimit = 0
  var closedNotReusable = 0
  var closedDisabled = 0
  // Requests refused, by `UpstreamRefusal`.
  var refusedQueueFull = 0
  var refusedQueueTimeout = 0
  var refusedCircuitOpen = 0
  var refusedDisabled = 0

  mutating func count(_ reason: UpstreamCloseReason) {
    switch reason {
    case .idleTimeout: closedIdleTimeout += 1
    case .idleLimit: closedIdleLimit += 1
    case .requestLimit: closedRequestLimit += 1
    case .ageLimit: closedAgeLimit += 1
    case .notReusable: closedNotReusable += 1
    case .disabled: closedDisabled += 1
    }
  }

  mutating func count(_ refusal: UpstreamRefusal) {
    switch refusal {
    case .queueFull: refusedQueueFull += 1
    case .queueTimeout: refusedQueueTimeout += 1
    case .circuitOpen: refusedCircuitOpen += 1
    case .disabled: refusedDisabled += 1
    }
  }
}
