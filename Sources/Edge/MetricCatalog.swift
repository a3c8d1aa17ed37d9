/// Every metric family band-edge exposes, with its labels' fixed values: the one list the
/// exposition, the shards' layout and the documentation come from.
///
/// Labels are bounded by construction: each dimension has a fixed list of values (the route
/// names grow with the route table, up to `RouteNames.capacity`), and a value outside it is
/// counted as `other` or not at all. No label ever carries a path, an address, an email or an ID.
public enum MetricID: Int, CaseIterable, Sendable {
  case requests, requestDuration, responseSize, requestsDispatched, requestsCompleted
  case connectionsAccepted, connectionsChosen, connectionsClosed, connectionsClosedBy
  case signInAttempts, lockoutsStarted, nativeExchanges, handoffsCreated, sessionsCreated, sessionsRevoked
  case sessionCacheLookups, poolRejections, databaseStatementDuration, databaseErrors, mailDeliveries
  case tlsHandshakes, tlsResumptions
  case h2Streams, h2ResetsReceived, h2ResetsSent, h2GoawaysSent
  case reloads
}

/// How a family is shown.
public enum MetricKind: String, Sendable {
  case counter, gauge, histogram
}

/// One labelled dimension: the label's name and every value it can take.
public struct MetricLabel: Sendable {
  public let name: String
  public let values: [String]

  public init(_ name: String, _ values: [String]) {
    self.name = name
    self.values = values
  }
}

/// One family: what the exposition says of it, and where its cells are in a shard.
public struct MetricFamily: Sendable {
  public let id: MetricID
  /// Its name; nil for the counters only used to derive a gauge (in flight, open connections).
  public let name: String?
  public let help: String
  public let kind: MetricKind
  /// Whether the first dimension is the route's name (`RouteNames`), before `labels`.
  public let routed: Bool
  public let labels: [MetricLabel]
  /// A histogram's upper bounds, in base units (seconds, bytes).
  public let buckets: [Double]
  /// Observed integers per base unit (nanoseconds per second: 1e9; bytes: 1).
  public let scale: Double
  /// Whether every series is shown, zeros included (small families, so that a rate over a series
  /// that has just begun is right); otherwise only series that have counted something.
  public let showZeros: Bool
  /// The first cell in a shard.
  public fileprivate(set) var offset = 0

  /// Series: the product of the dimensions' sizes.
  public var series: Int {
    labels.reduce(routed ? RouteNames.capacity : 1) { $0 * $1.values.count }
  }

  /// Cells per series: one, or a histogram's buckets, `+Inf` and the sum.
  public var width: Int { kind == .histogram ? buckets.count + 2 : 1 }

  /// The label values of series `index` (route names from `routes`).
  public func labelValues(_ index: Int, routes: [String]) -> [(String, String)] {
    var rest = index
    var values: [(String, String)] = []
    for label in labels.reversed() {
      values.append((label.name, label.values[rest % label.values.count]))
      rest /= label.values.count
    }
    if routed { values.append(("route", rest < routes.count ? routes[rest] : RouteNames.other)) }
    return values.reversed()
  }
}

/// The label values, in the order the catalog lists them: their raw values are the indices.
public enum MetricProtocol: Int, Sendable {
  case http1, h2
}

/// Why a connection was closed.
public enum CloseReason: Int, Sendable {
  case normal, timeout, limit, parseError, drain, tls, error
}

/// The route a request was answered by (`RouteNames`); 0: none matched.
public typealias RouteIndex = Int

/// The sign-in form a person used.
public enum SignInChannel: Int, Sendable {
  case web, native
}

/// How a sign-in attempt ended.
public enum SignInOutcome: Int, Sendable {
  case ok, badCredentials, locked, rateLimited, refused
}

extension Metrics {
  /// Counts a sign-in attempt in this thread's shard.
  public static func signIn(_ channel: SignInChannel, _ outcome: SignInOutcome) {
    count(.signInAttempts, channel.rawValue * 5 + outcome.rawValue)
  }
}

/// How a native code exchange ended.
public enum ExchangeMetric: Int, Sendable {
  case issued, idempotentRetry, invalidGrant, replayRevoked
}

/// The worker pools.
public enum PoolName: Int, Sendable {
  case requests, background
}

/// The database engines.
public enum EngineName: Int, Sendable {
  case sqlite, postgres
}

extension MetricFamily {
  /// The HTTP methods counted by name; any other is `other`.
  static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"]
  /// The status codes counted by number; any other is `other`.
  static let codes = [
    "101", "200", "201", "202", "204", "206", "301", "302", "303", "304", "307", "308", "400", "401",
    "403", "404", "405", "406", "408", "409", "410", "411", "412", "413", "414", "415", "416", "417",
    "421", "422", "425", "426", "428", "429", "431", "451", "500", "501", "502", "503", "504", "505", "other",
  ]
  /// Session revocation reasons, as the store writes them; any other is `other`.
  public static let revocationReasons = [
    "signed_out", "replaced_at_sign_in", "revoked_by_owner", "handoff_replayed", "operator", "password_reset",
    "password_set", "password_changed", "account_deleted", "account_disabled", "email_restored",
    "other",
  ]
  /// HTTP/2 error codes a GOAWAY is sent with (RFC 9113 §7); any other is `other`.
  static let goawayReasons = [
    "no_error", "protocol_error", "internal_error", "flow_control_error", "settings_timeout",
    "stream_closed", "frame_size_error", "refused_stream", "cancel", "compression_error", "connect_error",
    "enhance_your_calm", "inadequate_security", "http_1_1_required", "other",
  ]
  static let cacheClasses = ["immutable", "revalidate", "link_file", "private"]
  static let durationBuckets = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
  ]
  static let sizeBuckets: [Double] = [256, 1024, 4096, 16384, 65536, 262_144, 1_048_576, 4_194_304]
  static let statementBuckets = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
  ]

  private init(
    _ id: MetricID, _ name: String?, _ kind: MetricKind, _ help: String, routed: Bool = false,
    _ labels: [MetricLabel] = [], buckets: [Double] = [], scale: Double = 1, showZeros: Bool = true
  ) {
    self.id = id
    self.name = name
    self.kind = kind
    self.help = help
    self.routed = routed
    self.labels = labels
    self.buckets = buckets
    self.scale = scale
    self.showZeros = showZeros
  }

  // swift-format-ignore
  private static func describe(_ id: MetricID) -> MetricFamily {
    let cls = MetricLabel("class", cacheClasses)
    let pool = MetricLabel("pool", ["requests", "background"])
    let engine = MetricLabel("engine", ["sqlite", "postgres"])
    let channel = MetricLabel("channel", ["web", "native"])
    let proto = MetricLabel("protocol", ["http1", "h2"])
    return switch id {
    case .requests:
      MetricFamily(id, "band_edge_http_requests_total", .counter, "Requests answered, by route, method, protocol and status code.",
        routed: true, [MetricLabel("method", methods), proto, MetricLabel("code", codes)], showZeros: false)
    case .requestDuration:
      MetricFamily(id, "band_edge_http_request_duration_seconds", .histogram,
        "Time from a request's head to its answer being queued, by the route's cache class.", [cls],
        buckets: durationBuckets, scale: 1e9)
    case .responseSize:
      MetricFamily(id, "band_edge_http_response_size_bytes", .histogram, "Response body sizes, by the route's cache class.",
        [cls], buckets: sizeBuckets)
    case .requestsDispatched: MetricFamily(id, nil, .counter, "Requests handed to a pool.")
    case .requestsCompleted: MetricFamily(id, nil, .counter, "Pooled requests answered.")
    case .connectionsAccepted:
      MetricFamily(id, "band_edge_connections_accepted_total", .counter, "Connections accepted, by listener.",
        [MetricLabel("listener", ["plain", "tls"])])
    case .connectionsChosen: MetricFamily(id, nil, .counter, "Connections whose protocol was chosen.", [proto])
    case .connectionsClosed:
      MetricFamily(id, "band_edge_connections_closed_total", .counter, "Connections closed, by reason.",
        [MetricLabel("reason", ["normal", "timeout", "limit", "parse_error", "drain", "tls", "error"])])
    case .connectionsClosedBy:
      MetricFamily(id, nil, .counter, "Connections closed, by protocol.", [MetricLabel("protocol", ["pending", "http1", "h2"])])
    case .signInAttempts:
      MetricFamily(id, "band_edge_signin_attempts_total", .counter, "Sign-in attempts, by form and outcome.",
        [channel, MetricLabel("outcome", ["ok", "bad_credentials", "locked", "rate_limited", "refused"])])
    case .lockoutsStarted:
      MetricFamily(id, "band_edge_lockouts_started_total", .counter, "Emails or trusted devices locked after repeated failures.")
    case .nativeExchanges:
      MetricFamily(id, "band_edge_native_exchanges_total", .counter, "Native handoff code exchanges, by outcome.",
        [MetricLabel("outcome", ["issued", "idempotent_retry", "invalid_grant", "replay_revoked"])])
    case .handoffsCreated:
      MetricFamily(id, "band_edge_handoffs_created_total", .counter, "Native sign-in handoff codes issued.")
    case .sessionsCreated:
      MetricFamily(id, "band_edge_sessions_created_total", .counter, "Sessions started, by form.", [channel])
    case .sessionsRevoked:
      MetricFamily(id, "band_edge_sessions_revoked_total", .counter, "Sessions revoked, by reason.",
        [MetricLabel("reason", revocationReasons)])
    case .sessionCacheLookups:
      MetricFamily(id, "band_edge_session_cache_lookups_total", .counter, "Session answers looked up in the cache, by result.",
        [MetricLabel("result", ["hit", "miss"])])
    case .poolRejections:
      MetricFamily(id, "band_edge_pool_rejections_total", .counter, "Requests answered 503 because a pool's queue was full.", [pool])
    case .databaseStatementDuration:
      MetricFamily(id, "band_edge_db_statement_duration_seconds", .histogram, "Database statement durations, by engine.",
        [engine], buckets: statementBuckets, scale: 1e9)
    case .databaseErrors:
      MetricFamily(id, "band_edge_db_errors_total", .counter, "Database statements that failed, by engine.", [engine])
    case .mailDeliveries:
      MetricFamily(id, "band_edge_mail_deliveries_total", .counter, "Outbox mail handed to the SMTP server, by result.",
        [MetricLabel("result", ["sent", "failed"])])
    case .tlsHandshakes:
      MetricFamily(id, "band_edge_tls_handshakes_total", .counter, "TLS handshakes, by version and result.",
        [MetricLabel("version", ["TLSv1.2", "TLSv1.3", "none"]), MetricLabel("result", ["ok", "failed"])])
    case .tlsResumptions:
      MetricFamily(id, "band_edge_tls_resumptions_total", .counter, "TLS handshakes that resumed a session.")
    case .h2Streams:
      MetricFamily(id, "band_edge_h2_streams_total", .counter, "HTTP/2 streams opened by clients.")
    case .h2ResetsReceived:
      MetricFamily(id, "band_edge_h2_resets_received_total", .counter, "HTTP/2 RST_STREAM frames received.")
    case .h2ResetsSent:
      MetricFamily(id, "band_edge_h2_resets_sent_total", .counter, "HTTP/2 RST_STREAM frames sent.")
    case .h2GoawaysSent:
      MetricFamily(id, "band_edge_h2_goaways_sent_total", .counter, "HTTP/2 GOAWAY frames sent, by error code.",
        [MetricLabel("reason", goawayReasons)])
    case .reloads:
      MetricFamily(id, "band_edge_reloads_total", .counter, "Configuration reloads (SIGHUP), by result.",
        [MetricLabel("result", ["ok", "failed"])])
    }
  }

  /// Every family, in `MetricID` order, with its offset in a shard.
  public static let all: [MetricFamily] = {
    var offset = 0
    return MetricID.allCases.map { id in
      var family = describe(id)
      family.offset = offset
      offset += family.series * family.width
      return family
    }
  }()

  /// Cells in a shard.
  public static let cells = all.last.map { $0.offset + $0.series * $0.width } ?? 0

  /// The index of `code` in `codes`.
  static let codeIndex: [UInt8] = {
    var table = [UInt8](repeating: UInt8(codes.count - 1), count: 600)
    for (i, code) in codes.enumerated() { if let n = Int(code) { table[n] = UInt8(i) } }
    return table
  }()

  private static let methodCount = methods.count
  private static let codeCount = codes.count

  /// The series of `band_edge_http_requests_total` for these labels.
  static func requestSeries(route: RouteIndex, method: HTTPMethod?, protocol: MetricProtocol, status: Int)
    -> Int
  {
    let m: Int =
      switch method?.rawValue {
      case "GET": 0
      case "HEAD": 1
      case "POST": 2
      case "PUT": 3
      case "PATCH": 4
      case "DELETE": 5
      case "OPTIONS": 6
      default: 7
      }
    let code = status >= 0 && status < 600 ? Int(codeIndex[status]) : codeCount - 1
    return ((min(route, RouteNames.capacity - 1) * methodCount + m) * 2 + `protocol`.rawValue) * codeCount
      + code
  }

  /// The `class` label's index for a cache class.
  static func classIndex(_ cacheClass: CacheClass) -> Int {
    switch cacheClass {
    case .immutable: 0
    case .revalidate: 1
    case .linkFile: 2
    case .private: 3
    }
  }
}
