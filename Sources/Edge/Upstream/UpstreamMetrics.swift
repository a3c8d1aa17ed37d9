import Synchronization

/// What a forwarded answer's access-log line says of its upstream: which, what it answered (or why
/// not), and how long the exchange took. A class, as `UpstreamCall`: it rides in a `Response`.
public final class UpstreamNote: Sendable {
  public let upstream: String
  /// The upstream's status; nil when there was no usable response.
  public let status: Int?
  /// The `Proxy-Status` error type when there was none.
  public let error: String?
  public let durationNanoseconds: UInt64

  init(upstream: String, status: Int?, error: String?, durationNanoseconds: UInt64) {
    self.upstream = upstream
    self.status = status
    self.error = error
    self.durationNanoseconds = durationNanoseconds
  }
}

/// The upstream client's metric families. Their `upstream` label takes the names configured at
/// start (`register(upstreams:)`, once per process; the first `maxNames` of them) and `other` for
/// any beyond or added by a reload later. Each name costs about 80 cells of every shard.
/// A class: made once per process, and read for every forwarded call.
public final class UpstreamMetrics: Sendable {
  /// Exchanges by upstream and outcome: the response's status class, or `fault`.
  public let requests: MetricHandle
  /// Durations by upstream and phase: connect (TLS included), first byte (from the request
  /// written), total (from asking the pool).
  public let duration: MetricHandle
  /// Connections by upstream and event: opened, reused (a request on a kept connection), closed.
  public let connections: MetricHandle
  /// Requests sent again past the idle-close race, by upstream.
  public let retries: MetricHandle
  /// Faults by upstream and `Proxy-Status` error type.
  public let errors: MetricHandle
  /// Times a circuit opened, by upstream (on one loop: each loop keeps its own circuit).
  public let circuitsOpened: MetricHandle
  /// The `upstream` label's values.
  public let names: [String]

  static let outcomes = ["1xx", "2xx", "3xx", "4xx", "5xx", "fault"]
  static let phases = ["connect", "first_byte", "total"]
  static let events = ["opened", "reused", "closed"]
  /// Every `Proxy-Status` error type `UpstreamFault` gives, then `other`.
  static let errorTypes = [
    "connection_refused", "connection_timeout", "destination_unavailable", "tls_protocol_error",
    "proxy_internal_error", "connection_terminated", "http_response_incomplete", "connection_read_timeout",
    "http_response_timeout", "http_protocol_error", "http_response_header_section_size",
    "http_response_body_size", "connection_limit_reached", "other",
  ]
  static let buckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

  /// The most upstream names a label holds (with `other`), bounding the cells the families take.
  public static let maxNames = 16

  private static let registered = Mutex<UpstreamMetrics?>(nil)

  /// The process's families, registered the first time with `names` (later calls return them).
  public static func register(upstreams names: [String]) -> UpstreamMetrics {
    registered.withLock { made in
      if let made { return made }
      let metrics = UpstreamMetrics(names: names)
      made = metrics
      return metrics
    }
  }

  // swift-format-ignore
  private init(names: [String]) {
    self.names = Array(names.prefix(Self.maxNames)) + ["other"]
    let upstream = MetricLabel("upstream", self.names)
    func register(_ name: String, _ help: String, _ labels: [MetricLabel], histogram: Bool = false) -> MetricHandle {
      MetricCatalog.register(
        MetricFamily(name: name, kind: histogram ? .histogram : .counter, help: help, labels: labels,
          buckets: histogram ? Self.buckets : [], scale: histogram ? 1e9 : 1))
    }
    requests = register("band_edge_upstream_requests_total", "Forwarded exchanges, by upstream and outcome.",
      [upstream, MetricLabel("outcome", Self.outcomes)])
    duration = register("band_edge_upstream_duration_seconds", "Forwarded exchange durations, by upstream and phase.",
      [upstream, MetricLabel("phase", Self.phases)], histogram: true)
    connections = register("band_edge_upstream_connections_total",
      "Connections to upstreams, by upstream and event (opened, reused, closed).",
      [upstream, MetricLabel("event", Self.events)])
    retries = register("band_edge_upstream_retries_total",
      "Requests sent again on a new connection after a stale keep-alive, by upstream.", [upstream])
    errors = register("band_edge_upstream_errors_total", "Forwarded exchanges without a usable answer, by upstream and Proxy-Status error.",
      [upstream, MetricLabel("error", Self.errorTypes)])
    circuitsOpened = register("band_edge_upstream_circuit_opened_total",
      "Times an event loop's circuit for an upstream opened, by upstream.", [upstream])
  }

  /// The `upstream` label's index for `name`.
  func index(_ name: String) -> Int { names.firstIndex(of: name) ?? names.count - 1 }

  /// The series of `outcome` for upstream `u`.
  func outcome(_ u: Int, status: Int?) -> Int {
    let column = status.map { min(max($0 / 100 - 1, 0), 4) } ?? 5
    return u * Self.outcomes.count + column
  }

  func phase(_ u: Int, _ phase: Int) -> Int { u * Self.phases.count + phase }
  func event(_ u: Int, _ event: Int) -> Int { u * Self.events.count + event }
  func error(_ u: Int, _ fault: UpstreamFault) -> Int {
    u * Self.errorTypes.count
      + (Self.errorTypes.firstIndex(of: fault.proxyStatusError) ?? Self.errorTypes.count - 1)
  }
}
