import Accounts
import Edge
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// `GET /readyz` (docs/operations.md): 200 when the configuration is loaded (it is,
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

/// `band_edge_ready`: the answer `/readyz` would give, checked every `interval` on a thread of its
/// own (with its own store connection), so that a scrape never waits on the database and still
/// sees one that has gone.
public final class ReadinessWatch: Sendable {
  private final class Shared: Sendable {
    let ready = Atomic<Int>(-1)
    let stopped = Atomic<Bool>(false)
  }

  private let shared = Shared()

  /// Starts checking `context`'s store every `interval`.
  public init(_ context: ClientContext, interval: Duration = .seconds(1)) {
    let shared = self.shared
    Background.process.start {
      while !shared.stopped.load(ordering: .relaxed), !Background.process.isEnding {
        let ok = (try? context.store().schemaVersion()) != nil
        shared.ready.store(ok ? 1 : 0, ordering: .relaxed)
        Background.process.pause(interval) { shared.stopped.load(ordering: .relaxed) }
      }
    }
  }

  deinit { shared.stopped.store(true, ordering: .relaxed) }

  /// 1 ready, 0 not, -1 not checked yet.
  public var ready: Int { shared.ready.load(ordering: .relaxed) }
}
