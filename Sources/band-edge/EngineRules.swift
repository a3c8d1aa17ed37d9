import ClientAPI
import Edge

/// What the engine is told of this product: its metrics' namespace, the health paths, which
/// routes must be private, and the shape of the errors it answers itself.
enum EngineRules {
  /// What the engine's metric names begin with (`band_edge_http_requests_total`).
  static let metricNamespace = "band_edge"

  /// Alive and ready (`EdgeRoutes.health`, `Readiness`): answered in the clear even where plain
  /// HTTP is redirected to HTTPS, for load balancers.
  static let clearPaths: Set<String> = ["/healthz", "/readyz"]

  /// Every route under these is about a person (the client API): the router refuses one whose
  /// cache class is not `private`.
  static let privatePrefixes = ["/api/"]

  /// The engine's own errors (404, 405, 413, 503, parse errors, ...): the client API's JSON error
  /// under `/api/` (every API answer is JSON); `page` for a browser (`Accept` names `text/html`)
  /// outside `/.well-known/` (files for machines), when there is one; else plain text.
  static func errors(page: ErrorPage?) -> ErrorRenderer {
    ErrorRenderer { error in
      guard let path = error.path else { return error.plainText }
      if path.hasPrefix("/api/") {
        return APIError.response(error.status, error.code, error.message, headers: error.headers)
      }
      if let page, !path.hasPrefix("/.well-known/"), ErrorRenderer.acceptsHTML(error.accept) {
        var response = page(error.status, error.message)
        for (name, value) in error.headers { response.add(name, value) }
        return response
      }
      return error.plainText
    }
  }
}
