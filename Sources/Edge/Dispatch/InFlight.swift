/// A request whose answer comes later (from a pool, or after a hold): what the writer, the access
/// log and the metrics then need of it. The same for HTTP/1 and HTTP/2.
struct InFlight {
  let method: HTTPMethod
  let path: String
  let route: RouteIndex
  let cacheClass: CacheClass
  let headOnly: Bool
  /// HTTP/1's `Connection` field for the answer (HTTP/2 has none: `.none`).
  let connection: ConnectionHeader
  let started: Instant

  /// A request of `method` for `path`, answered by `route`.
  init(
    method: HTTPMethod, path: String, route: Route, headOnly: Bool, connection: ConnectionHeader = .none,
    started: Instant
  ) {
    self.method = method
    self.path = path
    self.route = route.metricIndex
    cacheClass = route.cacheClass
    self.headOnly = headOnly
    self.connection = connection
    self.started = started
  }
}
