import Accounts
import ClientAPI
import Deployment
import Edge
import Store

/// What SIGHUP does to a running `serve`: a whole new snapshot, validated off the loops; the old
/// one serves until it is ready, and keeps serving when the new one is refused.
struct ServeReload: Sendable {
  /// The configuration file serve started with (`--config`, else `BAND_LICENCE_CONFIG`).
  let configPath: String?
  /// The deployment serve started with: limits and listeners are fixed at start.
  let started: Deployment
  let shellDirectory: String
  let services: ClientServices
  /// The gateway's keys, read again at every reload; nil when serve started without a KEK.
  let keys: GatewayKeys?
  let testRoutes: Bool
  let http2: Bool
  /// The certificate/key pairs, read again at every reload; nil when serve has no TLS listener.
  let tlsFiles: [(certificate: String, key: String)]?
  /// The event loops, which share each upstream's connections and queue.
  let loops: Int

  /// The next snapshot, or nil (logged as `reload_refused`) when anything in it is wrong.
  func next() -> Snapshot? {
    switch ConfigCommand.load(configPath) {
    case .failure(let problems):
      Log.event("error", "reload_refused", [("problems", problems.lines.joined(separator: "; "))])
      return nil
    case .success(let next):
      do {
        keys?.refresh(services)
        let router = try ServeCommand.snapshot(
          deployment: next, shellDirectory: shellDirectory, services: services, keys: keys,
          testRoutes: testRoutes)
        // Certificates are read again with the rest; a bad one refuses the whole reload.
        var tls: TLSContext? = nil
        if let pairs = tlsFiles {
          switch ServeCommand.tlsContext(pairs: pairs, origin: next.origin, http2: http2) {
          case .failure(let problem):
            Log.event("error", "reload_refused", [("problems", problem.description)])
            return nil
          case .success(let context): tls = context
          }
        }
        Log.event(
          "info", "deployment",
          [("environment", next.environment.rawValue), ("origin", next.origin), ("label", next.label)])
        GatewayRoutes.log(next)
        warnOfRestart(next)
        Operators.publish(next, tls: tls, to: Metrics.process)
        return Snapshot(
          router: router, tls: tls,
          httpsRedirect: tls != nil && next.environment != .development ? next.origin : nil,
          upstreams: ServeCommand.upstreams(next, loops: loops))
      } catch {
        Log.event("error", "reload_refused", [("problems", "\(error)")])
        return nil
      }
    }
  }

  /// Limits and listeners are fixed at start: says which of `next`'s changes wait for a restart.
  private func warnOfRestart(_ next: Deployment) {
    let changed =
      Set(next.limits.keys).union(started.limits.keys)
      .filter { next.limits[$0] != started.limits[$0] }.sorted()
      + (next.listen != started.listen ? ["listen"] : [])
      + (next.tls.listen != started.tls.listen ? ["tls.listen"] : [])
      + (next.admin != started.admin ? ["admin"] : [])
    guard !changed.isEmpty else { return }
    Log.event(
      "warning", "restart_needed",
      [
        ("settings", changed.joined(separator: " ")),
        ("advice", "these take effect at the next start"),
      ])
  }
}
