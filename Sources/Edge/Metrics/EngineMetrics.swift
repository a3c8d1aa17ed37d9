/// The engine's own metric families: requests, connections, the worker pools, TLS, HTTP/2 and
/// reloads. Their offsets in a shard are fixed, before any the composition registers; their names
/// are shown after the registry's namespace (`Metrics.namespace`).
public enum MetricID: Int, CaseIterable, Sendable {
  case requests, requestDuration, responseSize, requestsDispatched, requestsCompleted
  case connectionsAccepted, connectionsChosen, connectionsClosed, connectionsClosedBy
  case poolRejections
  case tlsHandshakes, tlsResumptions
  case h2Streams, h2ResetsReceived, h2ResetsSent, h2GoawaysSent
  case reloads
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

/// The worker pools.
public enum PoolName: Int, Sendable {
  case requests, background
}

extension MetricCatalog {
  /// The engine's families, in `MetricID` order, each with its offset.
  public static let engine: [MetricFamily] = {
    var offset = 0
    return MetricID.allCases.map { id in
      var family = MetricFamily.describe(id)
      family.namespaced = true
      family.offset = offset
      offset = family.end
      return family
    }
  }()
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

  // swift-format-ignore
  fileprivate static func describe(_ id: MetricID) -> MetricFamily {
    let cls = MetricLabel("class", cacheClasses)
    let pool = MetricLabel("pool", ["requests", "background"])
    let proto = MetricLabel("protocol", ["http1", "h2"])
    return switch id {
    case .requests:
      MetricFamily("http_requests_total", .counter, "Requests answered, by route, method, protocol and status code.",
        routed: true, [MetricLabel("method", methods), proto, MetricLabel("code", codes)], showZeros: false)
    case .requestDuration:
      MetricFamily("http_request_duration_seconds", .histogram,
        "Time from a request's head to its answer being queued, by the route's cache class.", [cls],
        buckets: durationBuckets, scale: 1e9)
    case .responseSize:
      MetricFamily("http_response_size_bytes", .histogram, "Response body sizes, by the route's cache class.",
        [cls], buckets: sizeBuckets)
    case .requestsDispatched: MetricFamily(nil, .counter, "Requests handed to a pool.")
    case .requestsCompleted: MetricFamily(nil, .counter, "Pooled requests answered.")
    case .connectionsAccepted:
      MetricFamily("connections_accepted_total", .counter, "Connections accepted, by listener.",
        [MetricLabel("listener", ["plain", "tls"])])
    case .connectionsChosen: MetricFamily(nil, .counter, "Connections whose protocol was chosen.", [proto])
    case .connectionsClosed:
      MetricFamily("connections_closed_total", .counter, "Connections closed, by reason.",
        [MetricLabel("reason", ["normal", "timeout", "limit", "parse_error", "drain", "tls", "error"])])
    case .connectionsClosedBy:
      MetricFamily(nil, .counter, "Connections closed, by protocol.", [MetricLabel("protocol", ["pending", "http1", "h2"])])
    case .poolRejections:
      MetricFamily("pool_rejections_total", .counter, "Requests answered 503 because a pool's queue was full.", [pool])
    case .tlsHandshakes:
      MetricFamily("tls_handshakes_total", .counter, "TLS handshakes, by version and result.",
        [MetricLabel("version", ["TLSv1.2", "TLSv1.3", "none"]), MetricLabel("result", ["ok", "failed"])])
    case .tlsResumptions:
      MetricFamily("tls_resumptions_total", .counter, "TLS handshakes that resumed a session.")
    case .h2Streams:
      MetricFamily("h2_streams_total", .counter, "HTTP/2 streams opened by clients.")
    case .h2ResetsReceived:
      MetricFamily("h2_resets_received_total", .counter, "HTTP/2 RST_STREAM frames received.")
    case .h2ResetsSent:
      MetricFamily("h2_resets_sent_total", .counter, "HTTP/2 RST_STREAM frames sent.")
    case .h2GoawaysSent:
      MetricFamily("h2_goaways_sent_total", .counter, "HTTP/2 GOAWAY frames sent, by error code.",
        [MetricLabel("reason", goawayReasons)])
    case .reloads:
      MetricFamily("reloads_total", .counter, "Configuration reloads (SIGHUP), by result.",
        [MetricLabel("result", ["ok", "failed"])])
    }
  }

  /// The index of `code` in `codes`.
  static let codeIndex: [UInt8] = {
    var table = [UInt8](repeating: UInt8(codes.count - 1), count: 600)
    for (i, code) in codes.enumerated() { if let n = Int(code) { table[n] = UInt8(i) } }
    return table
  }()

  private static let methodCount = methods.count
  private static let codeCount = codes.count

  /// The series of `http_requests_total` for these labels.
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
