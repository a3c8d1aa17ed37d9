/// The pool's answer to a request asking for a connection.
enum UpstreamAcquisition: Equatable {
  /// Send the request on this idle connection (most recently used first).
  case reuse(UpstreamConnectionID)
  /// Open this new connection and send the request on it; answer with `connected` or
  /// `connectFailed`.
  case connect(UpstreamConnectionID)
  /// Every connection is busy: the request waits; an action later hands it a connection or
  /// refuses it.
  case queued(UpstreamWaiterID)
  /// Answer 503 at once, without touching the upstream.
  case refuse(UpstreamRefusal)
}

/// Why the pool answers a request without trying the upstream (each a 503 with `Retry-After`).
enum UpstreamRefusal: Hashable, Sendable {
  /// Every connection busy, and the queue full.
  case queueFull
  /// Waited longer than the queue timeout.
  case queueTimeout
  /// The circuit is open (or half-open with its probe under way).
  case circuitOpen
  /// The upstream is switched off.
  case disabled

  /// The fault the gateway answers with.
  var fault: UpstreamFault {
    switch self {
    case .queueFull: .queueFull
    case .queueTimeout: .queueTimeout
    case .circuitOpen: .circuitOpen
    case .disabled: .disabled
    }
  }
}

/// Why the pool let a connection go.
enum UpstreamCloseReason: Hashable, Sendable {
  /// Idle for the idle timeout.
  case idleTimeout
  /// Released while `maxIdle` connections were already idle.
  case idleLimit
  /// Released after its `maxRequestsPerConnection`th request.
  case requestLimit
  /// Released after `maxConnectionAge`.
  case ageLimit
  /// Released as not reusable (a fault, `Connection: close`, an unread body).
  case notReusable
  /// Idle or released while the upstream is switched off.
  case disabled
}

/// What the loop must do after an event of the pool.
enum UpstreamPoolAction: Equatable {
  /// Send the waiting request on this connection (an idle one, or one just released).
  case handOver(UpstreamConnectionID, to: UpstreamWaiterID)
  /// Open this new connection for the waiting request; answer with `connected` or
  /// `connectFailed`.
  case connect(UpstreamConnectionID, for: UpstreamWaiterID)
  /// Answer the waiting request with the refusal's 503.
  case refuse(UpstreamWaiterID, UpstreamRefusal)
  /// Close this connection; the pool has already forgotten it.
  case close(UpstreamConnectionID, UpstreamCloseReason)
}
