import CSQLite
import Edge
import Store
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The state of the database as a change watcher sees it: two equal stamps mean no change that
/// could alter a session's answer happened between them. On SQLite it is the WAL-index header,
/// which SQLite rewrites at every commit by any connection of any process (its `iChange` field
/// counts commits; sqlite.org/walformat.html §2.1); on PostgreSQL, the listener's generation.
package struct ChangeStamp: Equatable {
  package var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)

  package static func == (a: ChangeStamp, b: ChangeStamp) -> Bool {
    a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
      && a.words.4 == b.words.4 && a.words.5 == b.words.5
  }
}

/// What tells a session cache whether the database changed since an answer was read.
package protocol ChangeWatch: AnyObject, Sendable {
  /// The state now, or nil when it cannot be known (then nothing is answered from the cache).
  func stamp() -> ChangeStamp?
  /// Whether `after` can only be `before` plus exactly one committed transaction (default: never
  /// known, so every move counts as a change).
  func isOneCommit(_ after: ChangeStamp, after before: ChangeStamp) -> Bool
}

extension ChangeWatch {
  package func isOneCommit(_ after: ChangeStamp, after before: ChangeStamp) -> Bool { false }
}

extension ChangeListener: ChangeWatch {}

/// Reads the WAL-index header of a database through SQLite's own mapping of its `-shm` file.
///
/// It holds its own SQLite connection open for as long as it lives: while any connection has the
/// WAL index open, SQLite never truncates or reinitialises the `-shm` file, and the connection's
/// mapping of the index's first region (which holds the header) stays where it is. The pointer is
/// SQLite's (the VFS's `xShmMap` of region 0), never a mapping of our own: opening the `-shm` file
/// ourselves and closing that descriptor would release every POSIX lock this process holds on it
/// (fcntl locks belong to the process), SQLite's shared lock that marks the index in use among
/// them; another process's first connection would then truncate and rebuild the index under this
/// process's readers (a SIGBUS in the clean-clone run). The header is written by SQLite (in this
/// or another process) as two copies, the second first; a read that finds them different is a
/// write in progress and counts as "changed".
// Safe to share unchecked: `connection` is used only in init and deinit; `header` points into
// SQLite's mapping of the WAL index, which lives until the connection closes in deinit, when no
// other reference can exist. Reads of memory another process writes may tear; a torn read makes
// the copies differ, which is answered as "changed" (a cache miss), never as "unchanged".
final class WALWatch: ChangeWatch, @unchecked Sendable {
  private let connection: OpaquePointer
  private let mapping: UnsafeMutableRawPointer
  /// The WAL index's region size (SQLite's WALINDEX_PGSZ); the header is at its start.
  private static let region: Int32 = 32768

  /// A watch on the database at `path`, or nil when its WAL index cannot be reached.
  package init?(databasePath path: String) {
    var handle: OpaquePointer? = nil
    guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
      let handle
    else {
      sqlite3_close(handle)
      return nil
    }
    // A read opens the WAL index (and takes SQLite's shared lock on it) for this connection's life.
    guard sqlite3_exec(handle, "SELECT count(*) FROM sqlite_master", nil, nil, nil) == SQLITE_OK,
      let mapped = Self.walIndex(handle)
    else {
      sqlite3_close(handle)
      return nil
    }
    connection = handle
    mapping = mapped
  }

  /// SQLite's own mapping of the first region of `connection`'s WAL index (never extended).
  private static func walIndex(_ connection: OpaquePointer) -> UnsafeMutableRawPointer? {
    var file: UnsafeMutablePointer<sqlite3_file>? = nil
    guard sqlite3_file_control(connection, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
      let file, let methods = file.pointee.pMethods, methods.pointee.iVersion >= 2,
      let map = methods.pointee.xShmMap
    else { return nil }
    var region: UnsafeMutableRawPointer? = nil
    guard map(file, 0, Self.region, 0, &region) == SQLITE_OK else { return nil }
    return region
  }

  deinit { sqlite3_close(connection) }

  /// The header now, or nil while a writer is between its two copies.
  package func stamp() -> ChangeStamp? {
    atomicMemoryFence(ordering: .acquiring)
    let first = Self.read(mapping)
    let second = Self.read(mapping + 48)
    atomicMemoryFence(ordering: .acquiring)
    return first == second ? first : nil
  }

  /// One commit by anyone increments the header's `iChange` (bytes 8-11) by one; a commit that
  /// restarts the WAL also changes its salts (bytes 32-39), and a recovery rewrites the header. So
  /// `iChange` one more with the same version, page size and salts is one commit in the same WAL.
  package func isOneCommit(_ after: ChangeStamp, after before: ChangeStamp) -> Bool {
    after.words.0 == before.words.0 && after.words.4 == before.words.4
      && after.words.1 >> 32 == before.words.1 >> 32
      && UInt32(truncatingIfNeeded: after.words.1) == UInt32(truncatingIfNeeded: before.words.1) &+ 1
  }

  private static func read(_ p: UnsafeMutableRawPointer) -> ChangeStamp {
    let r = UnsafeRawPointer(p)
    return ChangeStamp(
      words: (
        r.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
        r.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
        r.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
        r.loadUnaligned(fromByteOffset: 24, as: UInt64.self),
        r.loadUnaligned(fromByteOffset: 32, as: UInt64.self),
        r.loadUnaligned(fromByteOffset: 40, as: UInt64.self)
      ))
  }
}

/// The database's changes as the session caches count them: an epoch that moves on whenever the
/// watch's stamp moves, except across this process's own unannounced writes — a session's "last
/// seen", which alters no cached answer — proven to be the only commit in between. Shared by every
/// session cache of the process, on SQLite and PostgreSQL alike.
///
/// Without the exception, every session's last-seen write (one a minute per active session) would
/// void every cached answer: with a few hundred sessions, most lookups missed.
package final class ChangeEpoch: Sendable {
  private enum Watch {
    case notYet
    case ready(any ChangeWatch)
    case unavailable
  }

  private struct State {
    var watch = Watch.notYet
    var epoch: UInt64 = 0
    /// The stamp `epoch` was last confirmed at.
    var stamp: ChangeStamp? = nil
    /// An unannounced write of this process is under way: a stamp that moved may be its commit,
    /// so it neither confirms nor ends the epoch until the write has been judged.
    var writing = false
  }

  private let state = Mutex(State())
  /// Serialises this process's unannounced writes, so that each is judged alone (SQLite serialises
  /// writers anyway).
  private let writes = Mutex(())
  private let makeWatch: @Sendable () -> (any ChangeWatch)?

  /// Epochs over the watch `makeWatch` makes at the first `beforeRead` (nil: no watch, no epochs).
  package init(watch makeWatch: @escaping @Sendable () -> (any ChangeWatch)?) {
    self.makeWatch = makeWatch
  }

  /// Epochs over the SQLite database at `databasePath`, watching its WAL index.
  package convenience init(databasePath: String) {
    self.init { WALWatch(databasePath: databasePath) }
  }

  /// The epoch now, or nil when it cannot be known (no watch yet, a header mid-write, an
  /// unannounced write being judged). Never blocks beyond a short lock; never opens the watch.
  package func current() -> UInt64? { state.withLock { Self.advance(&$0) } }

  /// The epoch to take before a store read whose answer will be cached (on a pool thread: opens the
  /// watch on first use, so a server that never reads sessions never loads it).
  package func beforeRead() -> UInt64? {
    if state.withLock({ if case .notYet = $0.watch { true } else { false } }) {
      let made = makeWatch()
      state.withLock { state in
        if case .notYet = state.watch { state.watch = made.map { .ready($0) } ?? .unavailable }
      }
    }
    return current()
  }

  private static func advance(_ state: inout State) -> UInt64? {
    guard case .ready(let watch) = state.watch, let now = watch.stamp() else { return nil }
    if now == state.stamp { return state.epoch }
    if state.writing { return nil }
    state.epoch &+= 1
    state.stamp = now
    return state.epoch
  }

  /// Runs `write`, a change no cached answer depends on, that reports whether it committed exactly
  /// one changed row in a transaction of its own. When the stamp then shows that commit and no
  /// other, the epoch carries over it; otherwise the move counts as any other change.
  package func unannounced(_ write: () throws(StoreError) -> Bool) throws(StoreError) {
    let outcome: Result<Void, StoreError> = writes.withLock { _ in
      let before: (watch: any ChangeWatch, stamp: ChangeStamp)? = state.withLock { state in
        guard case .ready(let watch) = state.watch, Self.advance(&state) != nil, let stamp = state.stamp
        else { return nil }
        state.writing = true
        return (watch, stamp)
      }
      let committed: Result<Bool, StoreError> = Result { () throws(StoreError) in try write() }
      guard let before else { return committed.map { _ in () } }
      let after = before.watch.stamp()
      state.withLock { state in
        state.writing = false
        if case .success(true) = committed, let after, state.stamp == before.stamp,
          before.watch.isOneCommit(after, after: before.stamp)
        {
          state.stamp = after
        }
      }
      return committed.map { _ in () }
    }
    try outcome.get()
  }
}

/// What the loop may use for a token without the pool: each entry is what the store's read gave for
/// a token digest (for `GET /session` its exact answer as ready bytes; for the gateway the session,
/// account and live memberships), valid only within the change epoch it was read in (on SQLite any
/// commit anywhere but this process's own last-seen writes, on PostgreSQL any announced change — a
/// revoked session or membership, a disabled account — invalidates every entry at once) and while
/// the session's lifetimes and last-seen resolution allow.
package final class SessionCache<Value: Sendable>: Sendable {
  package struct Key: Hashable {
    package let a: UInt64, b: UInt64, c: UInt64, d: UInt64

    package init(_ digest: [UInt8]) {
      func word(_ i: Int) -> UInt64 { digest[i..<i + 8].reduce(0) { $0 << 8 | UInt64($1) } }
      (a, b, c, d) = (word(0), word(8), word(16), word(24))
    }
  }

  package struct Entry {
    package let answer: Value
    package let epoch: UInt64
    /// The session stays answerable until the first of these instants (epoch seconds).
    package let validUntil: Int
    /// From this instant on, the next lookup that asks (`answer(for:now:claimingRefresh:)`) is told
    /// to have the entry read again, while the entry still answers until `validUntil`.
    package let refreshAt: Int
    /// Whether a lookup has been told so since the entry was stored.
    package var refreshClaimed = false
  }

  private let entries = Mutex<[Key: Entry]>([:])
  /// The change epochs every cache of the process shares.
  package let epochs: ChangeEpoch
  /// Most entries kept; when full, all are dropped (each is one cheap store read to refill). 0 turns
  /// the cache off: every read goes to the pool.
  package let capacity: Int

  /// A cache whose entries live within `epochs`.
  package init(capacity: Int = 4096, epochs: ChangeEpoch) {
    self.epochs = epochs
    self.capacity = capacity
  }

  /// The cached answer for `digest` if the database is unchanged since it was read (the same
  /// epoch) and `now` is before its end; never blocks (lookups under short locks).
  package func answer(for digest: [UInt8], now: Int) -> Value? {
    guard capacity > 0 else { return nil }
    let found: Value?
    if let epoch = epochs.current() {
      found = entries.withLock { entries -> Value? in
        guard let entry = entries[Key(digest)], entry.epoch == epoch, now < entry.validUntil else {
          return nil
        }
        return entry.answer
      }
    } else {
      found = nil
    }
    Metrics.count(.sessionCacheLookups, found == nil ? 1 : 0)
    return found
  }

  /// The cached answer for `digest`, as `answer(for:now:)` finds it, and whether this lookup is the
  /// one to have it read again: the first at or after the entry's `refreshAt` (one in all, until the
  /// entry is stored anew).
  package func answer(for digest: [UInt8], now: Int, claimingRefresh: Bool) -> (value: Value, refresh: Bool)?
  {
    guard capacity > 0 else { return nil }
    var found: (value: Value, refresh: Bool)? = nil
    if let epoch = epochs.current() {
      found = entries.withLock { entries -> (value: Value, refresh: Bool)? in
        let key = Key(digest)
        guard let entry = entries[key], entry.epoch == epoch, now < entry.validUntil else { return nil }
        guard claimingRefresh, now >= entry.refreshAt, !entry.refreshClaimed else {
          return (entry.answer, false)
        }
        entries[key]?.refreshClaimed = true
        return (entry.answer, true)
      }
    }
    Metrics.count(.sessionCacheLookups, found == nil ? 1 : 0)
    return found
  }

  /// Forgets `digest`'s entry (its session ended): the next lookup goes to the store.
  package func forget(_ digest: [UInt8]) {
    _ = entries.withLock { $0.removeValue(forKey: Key(digest)) }
  }

  /// The epoch to take before a store read whose answer will be cached (on a pool thread); nil when
  /// nothing may be cached.
  package func epochBeforeRead() -> UInt64? {
    capacity > 0 ? epochs.beforeRead() : nil
  }

  /// Keeps `answer` for `digest`, read in `epoch`, answerable until `validUntil`, to be read again
  /// from `refreshAt` (never, by default); an entry read in a later epoch stays.
  package func store(
    _ answer: Value, for digest: [UInt8], epoch: UInt64, validUntil: Int, refreshAt: Int? = nil
  ) {
    entries.withLock { entries in
      if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
      if let kept = entries[Key(digest)], kept.epoch > epoch { return }
      entries[Key(digest)] = Entry(
        answer: answer, epoch: epoch, validUntil: validUntil, refreshAt: refreshAt ?? validUntil)
    }
  }
}
