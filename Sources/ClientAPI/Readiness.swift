import Edge

/// `GET /readyz` (architecture.md, "Operating it"): 200 when the configuration is loaded (it is,
/// or no route would answer) and the store answers; 503 with `Retry-After` otherwise, so a load
/// balancer stops sending sign-ins to an instance whose database has gone. `/healthz` stays
/// "alive". Pooled: asking the store blocks.
public enum Readiness {
  /// The route.
  public static func routes(_ context: ClientContext) -> [Route] {
    [
      Route(.get, "/readyz", cacheClass: .private, execution: .pooled) { _ in
        do {
          _ = try context.store().schemaVersion()
          return .text(.ok, "ready\n")
        } catch {
          Log.event("error", "not_ready", [("error", "\(error)")])
          return .text(
            .serviceUnavailable, "not ready: the database does not answer\n", headers: [("Retry-After", "1")])
        }
      }
    ]
  }
}
