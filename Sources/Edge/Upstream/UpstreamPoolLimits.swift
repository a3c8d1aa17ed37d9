/// The numbers one event loop's pool for one upstream works within: its connections, its wait
/// queue, and its circuit. The defaults are the gateway's recommended ones.
public struct UpstreamPoolLimits: Sendable, Equatable {
  /// Idle connections kept open for reuse (0: none); one more released is closed.
  public var maxIdle = 64
  /// Connections open or being opened, idle and busy together; a request beyond waits.
  public var maxConnections = 128
  /// Requests that may wait for a connection; one more is refused at once (0: none wait).
  public var queueLength = 256
  /// The longest a request waits for a connection before it is refused.
  public var queueTimeout = Duration.seconds(1)
  /// An idle connection is closed after this long (keep it below the upstream's keep-alive
  /// timeout, or the upstream may close it as a request is sent on it).
  public var idleTimeout = Duration.seconds(30)
  /// Requests one connection carries; when released after its last, it is closed.
  public var maxRequestsPerConnection = 1000
  /// A connection released this long after it was established is closed instead of kept.
  public var maxConnectionAge = Duration.seconds(3600)
  /// Failures in a row that open the circuit.
  public var failuresToOpen = 5
  /// How long the circuit first stays open before one request probes the upstream.
  public var openDuration = Duration.seconds(5)
  /// The longest it stays open: each failed probe doubles the open time up to this.
  public var maxOpenDuration = Duration.seconds(60)

  /// The defaults.
  public init() {}
}

/// The deadlines of one forwarded exchange.
public struct UpstreamTimeouts: Sendable, Equatable {
  /// Opening a connection (and its TLS handshake).
  public var connect = Duration.seconds(1)
  /// From the request's last byte written to the response's first byte.
  public var firstByte = Duration.seconds(15)
  /// The whole exchange, from asking the pool for a connection to the response's last byte.
  public var total = Duration.seconds(30)

  /// The defaults.
  public init() {}
}
