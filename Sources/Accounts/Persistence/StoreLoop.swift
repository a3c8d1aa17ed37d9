import Edge
import Store

#if canImport(Glibc)
  import Glibc
#endif

/// The shape every periodic background job of a process shares (the fleet heartbeat, the mail
/// sender): a thread of its own with a store connection of its own — so a busy pool never delays
/// it — that runs `step` every `interval` until `stopped()` says so or the process ends (`Background.process`). A failure is logged once as
/// `failed` (the next success as `resumed`), not at every interval; a connection that failed for
/// a reason other than the database being away is made again. `finish` runs once at the end.
package enum StoreLoop {
  package static func start(
    database: DatabaseLocation, settings: DatabaseSettings, clock: @escaping @Sendable () -> Int,
    interval: Duration, events: (failed: String, resumed: String), stopped: @escaping @Sendable () -> Bool,
    step: @escaping @Sendable (ClientStore) throws -> Void,
    finish: @escaping @Sendable (ClientStore?) -> Void = { _ in }
  ) {
    Background.process.start {
      var store: ClientStore? = nil
      var failing = false
      while !stopped(), !Background.process.isEnding {
        do {
          let current = try store ?? ClientStore(database: try database.open(settings), clock: clock)
          store = current
          try step(current)
          if failing {
            failing = false
            Log.event("info", events.resumed, [])
          }
        } catch {
          if (error as? StoreError)?.isOutage != true { store = nil }
          if !failing {
            failing = true
            Log.event("error", events.failed, [("error", "\(error)")])
          }
        }
        Background.process.pause(interval, unless: stopped)
      }
      finish(store)
    }
  }
}
