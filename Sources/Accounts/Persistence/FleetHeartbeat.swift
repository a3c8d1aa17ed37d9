import Edge
import Store
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// How an instance knows how many share its database: a thread of its own writes this instance's
/// heartbeat every `interval` (its own connection, so a slow pool never delays it) and counts the
/// instances seen within `window`; the rate limiters then apply their share (`RateLimiter.share`).
/// While the database does not answer, the last count stands.
public final class FleetHeartbeat: Sendable {
  private final class Shared: Sendable {
    package let instances = Atomic<Int>(1)
    package let stopped = Atomic<Bool>(false)
    let beats = Atomic<Int>(0)
    /// The limiters whose limits are shared among the instances.
    let limiters: Mutex<[RateLimiter]>

    init(_ limiters: [RateLimiter]) { self.limiters = Mutex(limiters) }
  }

  private let shared: Shared
  /// This process's name in the `instances` table.
  public let id = Secrets.identifier("ins")

  /// Starts beating on `database` every `interval`; `window` seconds of silence end an instance.
  public init(
    database: DatabaseLocation, settings: DatabaseSettings, limiters: [RateLimiter],
    interval: Duration = .seconds(1),
    window: Int = 5, clock: @escaping @Sendable () -> Int
  ) {
    shared = Shared(limiters)
    let (shared, id) = (self.shared, self.id)
    // While the database is away the count stands; the pool's own answers say 503.
    StoreLoop.start(
      database: database, settings: settings, clock: clock, interval: interval,
      events: ("fleet_heartbeat_failed", "fleet_heartbeat_resumed"),
      stopped: { shared.stopped.load(ordering: .sequentiallyConsistent) },
      step: { store in
        let count = try store.heartbeat(instance: id, window: window)
        shared.beats.add(1, ordering: .sequentiallyConsistent)
        if shared.instances.exchange(count, ordering: .sequentiallyConsistent) != count {
          shared.limiters.withLock { for limiter in $0 { limiter.share(among: count) } }
          Log.event("info", "fleet", [("instances", "\(count)")])
        }
      },
      finish: { store in _ = try? store?.leave(instance: id) })
  }

  /// The thread ends within an interval of the last reference going, and takes this instance off
  /// the table.
  deinit { shared.stopped.store(true, ordering: .sequentiallyConsistent) }

  /// Shares `more` limiters among the instances too, from now on (the gateway's, made after the
  /// heartbeat started).
  public func share(_ more: [RateLimiter]) {
    // Under the lock the step applies a new count under: either this sees the new count, or the
    // step sees these limiters.
    shared.limiters.withLock { limiters in
      limiters += more
      for limiter in more { limiter.share(among: instances) }
    }
  }

  /// Instances seen at the last heartbeat, this one included.
  public var instances: Int { shared.instances.load(ordering: .sequentiallyConsistent) }

  /// Heartbeats written so far (for tests).
  public var beats: Int { shared.beats.load(ordering: .sequentiallyConsistent) }
}
