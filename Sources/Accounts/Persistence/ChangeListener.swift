import Edge
import Store
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// How the loops' session caches learn, on PostgreSQL, that another instance (or the CLI) changed
/// a session's answer: one dedicated connection per process `LISTEN`s on the change channel, and
/// its thread bumps a local generation at each notification — delivered at the writer's commit,
/// so within milliseconds. Lost notifications are covered twice over: the shared change counter
/// (bumped in the same transactions) is read again every `recheck` (0.5 s), and whenever the
/// connection is not known good — not yet connected, closed by the server, reconnecting, or not
/// heard from within `recheck` + 0.5 s (a server that silently vanished) — there is no stamp at
/// all, so every read goes to the database. A change is thus never answered stale after 1 s; and
/// a change this process makes is not answered stale anywhere once its writer has returned, as the
/// writer waits until every other listener has heard it (`changeCommitted(on:)`).
public final class ChangeListener: Sendable {
  private final class Shared: Sendable {
    package let generation = Atomic<UInt64>(0)
    package let live = Atomic<Bool>(false)
    package let stopped = Atomic<Bool>(false)
    /// Times the connection was (re)made, for tests and logs.
    package let connections = Atomic<Int>(0)
    /// The server process of the current connection (for tests that kill it).
    package let backendPID = Atomic<Int>(0)
    /// When the server last answered (monotonic nanoseconds): a connection that silently stopped
    /// answering gives no stamp once this is older than `fresh`.
    package let confirmed = Atomic<Int>(0)
  }

  /// How long an answer from the server keeps the stamp good: the recheck interval and a margin.
  private let fresh: Int

  /// Monotonic nanoseconds now.
  private static func monotonic() -> Int {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec * 1_000_000_000 + now.tv_nsec
  }

  private let shared = Shared()

  /// This listener's name in `change_acks`, where it acknowledges what it heard.
  public let id = Secrets.identifier("lis")

  /// How long a writer waits, after a change, for the other instances' listeners to have heard it:
  /// past this a listener that has not would have no stamp anyway (`recheck` + 0.5 s by default),
  /// so waiting longer protects nothing.
  public static let acknowledgementWait = Duration.seconds(1)

  /// Starts the listening thread on `uri` (which may differ from the pool's: a transaction-mode
  /// pgbouncer cannot carry LISTEN, so the listener may go straight to PostgreSQL).
  public init(
    uri: String, settings: DatabaseSettings = DatabaseSettings(), recheck: Duration = .milliseconds(500)
  ) {
    fresh = Int(DatabaseSettings.milliseconds(recheck) + 500) * 1_000_000
    let (shared, id) = (self.shared, self.id)
    Background.process.start { Self.run(uri: uri, settings: settings, recheck: recheck, id: id, shared) }
  }

  /// The thread ends within `recheck` of the last reference going.
  deinit { shared.stopped.store(true, ordering: .sequentiallyConsistent) }

  /// The state now: equal stamps mean no announced change between them; nil while the listening
  /// connection is not known to be live (then nothing may be answered from a cache).
  package func stamp() -> ChangeStamp? {
    guard shared.live.load(ordering: .sequentiallyConsistent),
      Self.monotonic() - shared.confirmed.load(ordering: .sequentiallyConsistent) < fresh
    else { return nil }
    let generation = shared.generation.load(ordering: .sequentiallyConsistent)
    guard shared.live.load(ordering: .sequentiallyConsistent) else { return nil }
    return ChangeStamp(words: (generation, 1, 0, 0, 0, 0))
  }

  /// A change this process committed: its own cache forgets now (the notification will say so
  /// again a moment later, harmlessly).
  func changeCommitted() { shared.generation.add(1, ordering: .sequentiallyConsistent) }

  /// After this process committed a change of access on `database`: its own cache forgets now, and
  /// the writer waits (up to `acknowledgementWait`) until every other instance's listener has heard
  /// the change, so that the very next request anywhere is answered from the changed store.
  func changeCommitted(on database: PostgresDatabase) {
    changeCommitted()
    Self.awaitOthers(database, except: id)
  }

  /// Waits until every listener but `except` has heard what `database` just committed (see
  /// `PostgresDatabase.awaitListeners`); says so in the log when some did not in time.
  public static func awaitOthers(_ database: PostgresDatabase, except: String?) {
    do {
      let unheard = try database.awaitListeners(except: except, within: acknowledgementWait)
      if unheard > 0 { Log.event("warning", "change_unacknowledged", [("listeners", "\(unheard)")]) }
    } catch {
      Log.event("warning", "change_unacknowledged", [("error", "\(error)")])
    }
  }

  /// Whether the listening connection is up (for tests).
  public var isLive: Bool { shared.live.load(ordering: .sequentiallyConsistent) }

  /// The PostgreSQL server process serving the listening connection (for tests).
  public var backendPID: Int { shared.backendPID.load(ordering: .sequentiallyConsistent) }

  /// How many times the listening connection has been made (for tests).
  public var connections: Int { shared.connections.load(ordering: .sequentiallyConsistent) }

  private static func run(
    uri: String, settings: DatabaseSettings, recheck: Duration, id: String, _ shared: Shared
  ) {
    var backoff = settings.firstBackoff
    var toldNeverConnected = false
    let recheckMilliseconds = DatabaseSettings.milliseconds(recheck)
    while !shared.stopped.load(ordering: .sequentiallyConsistent), !Background.process.isEnding {
      do {
        let connection = try PostgresConnection(uri: uri, settings: settings, name: "band-edge-listener")
        // A marker drawn before this point was drawn after its change committed, so before the
        // generation moves on below: this listener has in effect heard it. A marker drawn between
        // here and LISTEN is never heard here, and its writer waits out its limit (a rare moment).
        var acknowledged = try PostgresDatabase.lastMarker(connection)
        try connection.listen(PostgresDatabase.changeChannel)
        var counter = try Self.counter(connection)
        try PostgresDatabase.forgetSilentListeners(connection)
        shared.confirmed.store(Self.monotonic(), ordering: .sequentiallyConsistent)
        shared.backendPID.store(connection.backendPID, ordering: .sequentiallyConsistent)
        // Whatever was cached before this connection existed is stale from now on.
        shared.generation.add(1, ordering: .sequentiallyConsistent)
        try PostgresDatabase.acknowledge(connection, listener: id, seen: acknowledged)
        shared.live.store(true, ordering: .sequentiallyConsistent)
        if shared.connections.add(1, ordering: .sequentiallyConsistent).oldValue > 0 {
          Log.event("info", "change_listener_reconnected", [])
        }
        backoff = settings.firstBackoff
        var nextCheck = ContinuousClock.now + recheck
        while !shared.stopped.load(ordering: .sequentiallyConsistent), !Background.process.isEnding {
          let left = ContinuousClock.now.duration(to: nextCheck)
          let wait = left <= .zero ? 0 : Int32(min(DatabaseSettings.milliseconds(left), recheckMilliseconds))
          let heard = try connection.notifications(waitingUpTo: wait)
          if heard.changes > 0 { shared.generation.add(1, ordering: .sequentiallyConsistent) }
          // Said only after the cache has forgotten what the changes before the marker changed.
          if let marker = heard.marker, marker > acknowledged {
            acknowledged = marker
            try PostgresDatabase.acknowledge(connection, listener: id, seen: acknowledged)
          }
          if ContinuousClock.now >= nextCheck {
            let now = try Self.counter(connection)
            shared.confirmed.store(Self.monotonic(), ordering: .sequentiallyConsistent)
            if now != counter {
              counter = now
              shared.generation.add(1, ordering: .sequentiallyConsistent)
            }
            try PostgresDatabase.acknowledge(connection, listener: id, seen: acknowledged)
            nextCheck = ContinuousClock.now + recheck
          }
        }
        shared.live.store(false, ordering: .sequentiallyConsistent)
        try? PostgresDatabase.forget(connection, listener: id)
      } catch {
        let wasLive = shared.live.exchange(false, ordering: .sequentiallyConsistent)
        shared.generation.add(1, ordering: .sequentiallyConsistent)
        // Said when a live connection goes, and when the first one cannot be made (wrong
        // credentials for --database-listen, say: the cache then answers nothing).
        if wasLive || (shared.connections.load(ordering: .sequentiallyConsistent) == 0 && !toldNeverConnected)
        {
          toldNeverConnected = true
          Log.event("error", "change_listener_lost", [("error", "\(error)")])
        }
        Background.process.pause(backoff) { shared.stopped.load(ordering: .sequentiallyConsistent) }
        backoff = min(backoff * 2, settings.longestBackoff)
      }
    }
  }

  private static func counter(_ connection: PostgresConnection) throws(StoreError) -> Int64 {
    Int64(try PostgresDatabase.changeCount(connection))
  }

}
