import ClientAPI
import Deployment
import Edge

/// What the composition adds to the gateway's configuration: the routes band-edge answers itself,
/// which no forward route may overlap, the limits a route's body must fit, and the log line that
/// says what is forwarded.
enum GatewayRoutes {
  /// band-edge's own route patterns under the forwarded prefix, known before any snapshot exists
  /// (`config check`, a reload, start): the client API's school endpoints. `check` then holds the
  /// whole route table of each snapshot to the same rule.
  static var ownPatterns: [String] { SchoolsAPI.patterns }

  /// Refuses a snapshot whose table (`routes`) has a route some forward route of `deployment` can
  /// match a path of: a path is answered by band-edge or by a core, never both.
  static func check(_ deployment: Deployment, routes: [Route]) throws(GatewayConflict) {
    let problems = ForwardRoute.conflicts(deployment.forwardRoutes, own: routes.map(\.pattern))
    guard problems.isEmpty else { throw GatewayConflict(lines: problems) }
  }

  /// The forward routes against the limits `settings` fix: a body larger than
  /// max-buffered-request-bytes could never be taken.
  static func crossCheck(_ deployment: Deployment, settings: ServeSettings) -> [String] {
    let buffered = settings.server.limits.maxBufferedRequestBytes
    return deployment.forwardRoutes.filter { $0.maxBodyBytes > buffered }.map {
      "forward route '\($0.path)' maxBodyBytes (\($0.maxBodyBytes)) is larger than max-buffered-request-bytes "
        + "(\(buffered)): a body that large could never be accepted"
    }
  }

  /// Logs the upstreams and forward routes of `deployment` (at start and after each reload), as
  /// `config check` lists them; nothing when it has none.
  static func log(_ deployment: Deployment) {
    guard !deployment.upstreams.isEmpty || !deployment.forwardRoutes.isEmpty else { return }
    Log.event(
      "info", "gateway",
      [
        ("upstreams", deployment.upstreamLines.joined(separator: "; ")),
        ("forward", deployment.forwardLines.joined(separator: "; ")),
      ])
  }
}

/// Forward routes that overlap routes of a snapshot's table, one line each.
struct GatewayConflict: Error, CustomStringConvertible {
  let lines: [String]

  var description: String { lines.joined(separator: "; ") }
}
