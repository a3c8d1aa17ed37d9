import Synchronization
import TestSupport
import Testing

@testable import Accounts
@testable import Store

/// A watch whose stamp a test moves by hand: one word, the count of commits.
private final class CountingWatch: ChangeWatch {
  let commits = Mutex<UInt64>(0)
  /// While set, the stamp is unknown (a header mid-write).
  let torn = Atomic<Bool>(false)

  func commit(_ n: UInt64 = 1) { commits.withLock { $0 += n } }

  func stamp() -> ChangeStamp? {
    torn.load(ordering: .relaxed) ? nil : ChangeStamp(words: (commits.withLock { $0 }, 0, 0, 0, 0, 0))
  }

  func isOneCommit(_ after: ChangeStamp, after before: ChangeStamp) -> Bool {
    after.words.0 == before.words.0 + 1
  }
}

@Suite("Change epochs")
struct ChangeEpochTests {
  /// What an unannounced write does to the stamp, and whether the epoch must carry over it.
  struct Case: CustomStringConvertible, Sendable {
    let name: String
    /// Commits by this write (0 or 1) and by others meanwhile.
    let own: UInt64, others: UInt64
    /// What the write reports: it committed one changed row (false: none, or it threw).
    let reports: Bool
    let throwsError: Bool
    let carries: Bool
    var description: String { name }
  }

  static let cases: [Case] = [
    Case(name: "its own commit alone", own: 1, others: 0, reports: true, throwsError: false, carries: true),
    Case(name: "no commit at all", own: 0, others: 0, reports: false, throwsError: false, carries: true),
    Case(
      name: "its commit and another's", own: 1, others: 1, reports: true, throwsError: false, carries: false),
    Case(
      name: "another's commit while it changed nothing", own: 0, others: 1, reports: false,
      throwsError: false,
      carries: false),
    Case(
      name: "another's commit while it failed", own: 0, others: 1, reports: false, throwsError: true,
      carries: false),
  ]

  @Test(
    "an unannounced write keeps the epoch only when the stamp shows its commit and no other", arguments: cases
  )
  func unannounced(_ c: Case) throws {
    let watch = CountingWatch()
    let epochs = ChangeEpoch { watch }
    let start = try #require(epochs.beforeRead())
    #expect(epochs.current() == start, "an unmoved stamp is the same epoch")
    var during: UInt64?? = .none
    let outcome = Result { () throws(StoreError) in
      try epochs.unannounced { () throws(StoreError) -> Bool in
        watch.commit(c.own + c.others)
        during = .some(epochs.current())
        if c.throwsError { throw StoreError.failed("test") }
        return c.reports
      }
    }
    #expect(c.throwsError == (try? outcome.get()).map { false } ?? true, "a failure reaches the caller")
    if c.own + c.others > 0 {
      #expect(during == .some(nil), "while the write is judged, a moved stamp is no epoch")
    }
    #expect((epochs.current() == start) == c.carries)
  }

  @Test("the epoch moves with any other change, and is unknown without a stamp")
  func moves() throws {
    let watch = CountingWatch()
    let epochs = ChangeEpoch { watch }
    #expect(epochs.current() == nil, "the loop never opens the watch")
    let first = try #require(epochs.beforeRead())
    watch.commit()
    let second = try #require(epochs.current())
    #expect(second != first)
    #expect(epochs.current() == second)
    watch.torn.store(true, ordering: .relaxed)
    #expect(epochs.current() == nil)
    watch.torn.store(false, ordering: .relaxed)
    #expect(epochs.current() == second)
    // The watch's stamp moved before the write began: that move ends the epoch first.
    watch.commit()
    try epochs.unannounced { () throws(StoreError) -> Bool in
      watch.commit()
      return true
    }
    #expect(epochs.current() != second)
    #expect(ChangeEpoch { nil }.beforeRead() == nil, "no watch, no epochs")
  }

  @Test("past its refresh time an entry still answers, and tells exactly one lookup to read it again")
  func refreshClaim() throws {
    let watch = CountingWatch()
    let cache = SessionCache<String>(capacity: 4, epochs: ChangeEpoch { watch })
    let ada = [UInt8](repeating: 1, count: 32)
    let epoch = try #require(cache.epochBeforeRead())
    cache.store("ada", for: ada, epoch: epoch, validUntil: 120, refreshAt: 60)
    // (now, claiming, expected answer, expected refresh), in order: a claim is taken once.
    let steps: [(Int, Bool, String?, Bool)] = [
      (59, true, "ada", false), (60, false, "ada", false), (60, true, "ada", true), (61, true, "ada", false),
      (119, true, "ada", false), (120, true, nil, false),
    ]
    for (now, claiming, answer, refresh) in steps {
      let found = cache.answer(for: ada, now: now, claimingRefresh: claiming)
      #expect(found?.value == answer && (found?.refresh ?? false) == refresh, "at \(now)")
    }
    // Stored anew (the refresh's read), the claim is open again from the new refresh time.
    cache.store("ada", for: ada, epoch: epoch, validUntil: 240, refreshAt: 180)
    #expect(cache.answer(for: ada, now: 179, claimingRefresh: true)?.refresh == false)
    #expect(cache.answer(for: ada, now: 180, claimingRefresh: true)?.refresh == true)
    // Without a refresh time it never asks; a forgotten entry answers nothing; a change ends all.
    cache.store("bo", for: [UInt8](repeating: 2, count: 32), epoch: epoch, validUntil: 100)
    #expect(
      cache.answer(for: [UInt8](repeating: 2, count: 32), now: 99, claimingRefresh: true)?.refresh == false)
    cache.forget([UInt8](repeating: 2, count: 32))
    #expect(cache.answer(for: [UInt8](repeating: 2, count: 32), now: 0, claimingRefresh: true) == nil)
    watch.commit()
    #expect(cache.answer(for: ada, now: 200, claimingRefresh: true) == nil)
  }

  @Test("a cache answers an entry only in the epoch it was read in, and before its end")
  func cache() throws {
    let watch = CountingWatch()
    let cache = SessionCache<String>(capacity: 2, epochs: ChangeEpoch { watch })
    let ada = [UInt8](repeating: 1, count: 32)
    let bo = [UInt8](repeating: 2, count: 32)
    let epoch = try #require(cache.epochBeforeRead())
    cache.store("ada", for: ada, epoch: epoch, validUntil: 100)
    #expect(cache.answer(for: ada, now: 99) == "ada")
    #expect(cache.answer(for: ada, now: 100) == nil)
    #expect(cache.answer(for: bo, now: 0) == nil)
    watch.commit()
    #expect(cache.answer(for: ada, now: 0) == nil)
    // Read before a change, kept after it: never answered.
    let stale = try #require(cache.epochBeforeRead())
    watch.commit()
    cache.store("bo", for: bo, epoch: stale, validUntil: 100)
    #expect(cache.answer(for: bo, now: 0) == nil)
    #expect(SessionCache<String>(capacity: 0, epochs: ChangeEpoch { watch }).epochBeforeRead() == nil)
  }

  @Test(
    "a last-seen write never rewrites a row as it is: SQLite counts such an UPDATE as a change but commits nothing"
  )
  func noIdenticalWrite() throws {
    let (db, path) = try temporaryDatabase()
    let (store, clock) = try makeStore(on: db)
    let watch = try #require(WALWatch(databasePath: path))
    let ada = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    let session = try store.createSession(
      accountID: ada.id, kind: .native, platform: "ios", appVersion: "1.4.0", token: "t",
      lifetimes: SessionLifetimes())
    let now = clock.read() + 61
    var before = try #require(watch.stamp())
    #expect(try store.markSeen(id: session.id, at: now, network: nil))
    #expect(watch.isOneCommit(try #require(watch.stamp()), after: before))
    // The same value again, as a second reader of the same old row would write it: no change claimed.
    before = try #require(watch.stamp())
    #expect(try !store.markSeen(id: session.id, at: now, network: nil))
    #expect(try #require(watch.stamp()) == before)
    // Why: the plain UPDATE of a row to the bytes it holds is "one change" with nothing committed.
    try db.query(
      "UPDATE sessions SET last_seen_at = ? WHERE id = ?", [.integer(Int64(now)), .text(session.id)])
    #expect(db.changes == 1)
    #expect(try #require(watch.stamp()) == before)
  }

  @Test("SQLite's WAL index: one commit is told apart from two, from none, and from a WAL restart")
  func walCommits() throws {
    let (db, path) = try temporaryDatabase()
    try db.execute("CREATE TABLE t (v INTEGER)")
    let watch = try #require(WALWatch(databasePath: path))
    func step(_ sql: String) throws -> Bool {
      let before = try #require(watch.stamp())
      try db.execute(sql)
      let after = try #require(watch.stamp())
      return watch.isOneCommit(after, after: before)
    }
    #expect(try step("INSERT INTO t VALUES (1)"))
    #expect(try step("UPDATE t SET v = 2 WHERE v = 1"))
    #expect(try !step("INSERT INTO t VALUES (3); INSERT INTO t VALUES (4)"))
    #expect(try !step("UPDATE t SET v = 5 WHERE v = 99"), "no commit")
    #expect(try step("BEGIN; INSERT INTO t VALUES (6); INSERT INTO t VALUES (7); COMMIT"))
    // After a complete checkpoint the next writer restarts the WAL: new salts, not "one commit".
    try db.execute("PRAGMA wal_checkpoint(RESTART)")
    #expect(try !step("INSERT INTO t VALUES (8)"))
    #expect(try step("INSERT INTO t VALUES (9)"))
  }
}
