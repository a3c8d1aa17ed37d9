import Edge
import Store

#if canImport(Glibc)
  import Glibc
#endif

/// The shape every periodic background job of a process shares (the fleet heartbeat, the mail
/// sender): a thread of its own with a store connection of its own — so a busy pool never delays
/// it — that runs `step` every `interval` until `stopped()` says so. A failure is logged once as
/// `failed` (the next success as `resumed`), not at every interval; a connection that failed for
/// a reason other than the database being away is made again. `finish` runs once at the end.
package enum StoreLoop {
  package static func start(
    database: DatabaseLocation, settings: DatabaseSettings, clock: @escaping @Sendable () -> Int,
    interval: Duration, events: (failed: String, resumed: String), stopped: @escaping @Sendable () -> Bool,
    step: @escaping @Sendable (ClientStore) throws -> Void,
    finish: @escaping @Sendable (ClientStore?) -> Void = { _ in }
  ) {
    let thread = startThread {
      var store: ClientStore? = nil
      var failing = false
      while !stopped() {
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
        var pause = timespec(
          tv_sec: Int(interval.components.seconds),
          tv_nsec: Int(interval.components.attoseconds / 1_000_000_000))
        nanosleep(&pause, nil)
      }
      finish(store)
    }
    pthread_detach(thread)
  }
}
