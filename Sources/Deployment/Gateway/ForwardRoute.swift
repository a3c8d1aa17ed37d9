import Edge

/// The least a caller's role in the school a forwarded path names must be, lowest first. The
/// names are those of the school roles the accounts store keeps (`Accounts.Role`'s raw values),
/// which this module cannot import: the two lists must agree (a test in ClientAPITests holds them
/// together).
public enum SchoolRole: String, Sendable, CaseIterable, Comparable {
  /// Any member of the school.
  case readOnly = "read_only"
  /// A teacher or an administrator.
  case teacher
  /// An administrator only.
  case administrator

  /// Lower roles may do less: `read_only` < `teacher` < `administrator`.
  public static func < (a: SchoolRole, b: SchoolRole) -> Bool { a.rank < b.rank }

  private var rank: Int {
    switch self {
    case .readOnly: 0
    case .teacher: 1
    case .administrator: 2
    }
  }
}

/// One route of the file's `"forward"` array: a school-scoped path of the client API that band-edge
/// authenticates and authorizes, then forwards to an API core.
public struct ForwardRoute: Sendable, Equatable {
  /// Every forwarded path starts with this, and names at least one more segment.
  public static let prefix = "/api/client/v1/schools/:schoolId/"
  /// The methods a route may forward, in the order the summary lists them.
  public static let methodOrder: [HTTPMethod] = [.get, .head, .post, .put, .patch, .delete]
  /// The methods whose request body is forwarded (`maxBodyBytes`, `mediaTypes`). A list, not a
  /// set: asked on the loop for every forwarded call, and comparing a few short tokens costs less
  /// than hashing one.
  public static let bodyMethods: [HTTPMethod] = [.post, .put, .patch]
  /// The methods that change something: each route with one names its `audit` event.
  public static let mutatingMethods: [HTTPMethod] = [.post, .put, .patch, .delete]

  /// `"path"`: the pattern (`/api/client/v1/schools/:schoolId/attendance/:date`), literal segments
  /// lower-case, `:name` parameters, an optional final `*`.
  public var path: String
  /// `"methods"`: each forwarded method and the least role it needs. HEAD is not listed beside
  /// GET: GET implies it, with GET's role (see `minimumRole(for:)`).
  public var methods: [HTTPMethod: SchoolRole]
  /// `"upstream"`: the name of the core in `Deployment.upstreams`.
  public var upstream: String
  /// `"since"`: the oldest app version (`MAJOR.MINOR[.PATCH]`) that may call the route; nil: any.
  public var since: String? = nil
  /// `"maxBodyBytes"`: the largest request body forwarded (POST, PUT, PATCH).
  public var maxBodyBytes = 64 * 1024
  /// `"mediaTypes"`: the request body media types forwarded (POST, PUT, PATCH), without parameters.
  public var mediaTypes = ["application/json"]
  /// `"audit"`: the audit event a mutation through this route records; set when a method mutates.
  public var audit: String? = nil
  /// `"capability"`: the capability (`Capabilities.forwarded`) this route serves, if any.
  public var capability: String? = nil
  /// `"enabled"`: the route's kill switch.
  public var enabled = true

  /// A route for `path` forwarding `methods` to `upstream`, every other setting its default.
  public init(path: String, methods: [HTTPMethod: SchoolRole], upstream: String) {
    self.path = path
    self.methods = methods
    self.upstream = upstream
  }

  /// The path as the router reads it.
  public var pattern: PathPattern { PathPattern(path) }

  /// The least role `method` needs here, nil when the route does not forward it. HEAD is answered
  /// as GET (RFC 9110 §9.3.2), so it needs GET's role unless listed alone.
  public func minimumRole(for method: HTTPMethod) -> SchoolRole? {
    methods[method] ?? (method == .head ? methods[.get] : nil)
  }

  /// Every method forwarded, HEAD included where GET implies it, in `methodOrder`.
  public var forwardedMethods: [HTTPMethod] { Self.methodOrder.filter { minimumRole(for: $0) != nil } }

  /// The keys a route's object may hold.
  static let keys: Set<String> = Set(
    ["path", "methods", "upstream", "since", "mediaTypes", "audit", "capability", "enabled"]
      + GatewayLimits.route.map(\.key))

  /// The problems of `routes` taken together, one line each: two routes for one path that both
  /// take a method, two different patterns that can match one path, and a pattern that can match
  /// a path of `own` (the composition's route patterns, answered by band-edge itself). Exact (see
  /// `PathPattern.commonPath`); a path belongs to one route, whatever the methods.
  public static func conflicts(_ routes: [ForwardRoute], own: [String] = []) -> [String] {
    var problems: [String] = []
    for (j, b) in routes.enumerated() {
      for a in routes.prefix(j) {
        if a.path == b.path {
          let both = b.forwardedMethods.filter { a.minimumRole(for: $0) != nil }
          if !both.isEmpty {
            let names = both.map(\.rawValue).joined(separator: ", ")
            problems.append(
              "two forward routes for '\(b.path)' both take \(names); each method of a path goes to one route"
            )
          }
        } else if let example = a.pattern.commonPath(with: b.pattern) {
          problems.append(
            "forward routes '\(a.path)' and '\(b.path)' overlap: both match \(example); a path goes to one route"
          )
        }
      }
    }
    var seen = Set<String>()
    let own = own.filter { seen.insert($0).inserted }
    for route in routes {
      for pattern in own {
        if let example = PathPattern(pattern).commonPath(with: route.pattern) {
          problems.append(
            "forward route '\(route.path)' overlaps band-edge's own route '\(pattern)': both match \(example); "
              + "band-edge answers that path itself")
        }
      }
    }
    return problems
  }
}
