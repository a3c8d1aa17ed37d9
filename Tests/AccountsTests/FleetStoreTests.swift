import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Accounts
@testable import Store

/// A schema of its own on the test PostgreSQL, as a URI every connection of a test can open.
struct TestSchema {
  let uri: String
  private let name: String

  init() throws {
    let base = try #require(testPostgresURI)
    name = "f_" + Secrets.base64url(Secrets.randomBytes(9)).lowercased().filter { $0.isLetter || $0.isNumber }
    try PostgresConnection(uri: base).execute("CREATE SCHEMA \(name)")
    uri = base + "&options=-csearch_path%3D\(name)"
  }

  func drop() {
    guard let base = testPostgresURI else { return }
    _ = try? PostgresConnection(uri: base).execute("DROP SCHEMA \(name) CASCADE")
  }
}

/// Runs `body(i)` for i in 0..<count on as many threads at once, and returns what each gave.
func together<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
  let results = Mutex<[Int: T]>([:])
  DispatchQueue.concurrentPerform(iterations: count) { i in
    let value = body(i)
    results.withLock { $0[i] = value }
  }
  return results.withLock { dictionary in (0..<count).compactMap { dictionary[$0] } }
}

@Suite("What a fleet shares, on every engine")
struct FleetStoreTests {
  /// An operation on a store with one account (`ada@example.test`), a school `north` she belongs
  /// to and a live session; and whether it may change what that session's `GET /session` says.
  struct Operation: CustomTestStringConvertible, Sendable {
    let name: String
    let changesAnswers: Bool
    let run: @Sendable (ClientStore, String, TestClock) throws -> Void
    var testDescription: String { name }
  }

  static let operations: [Operation] = [
    Operation(name: "revoke one session", changesAnswers: true) { store, session, _ in
      try store.revokeSession(id: session, reason: "t", actor: "t")
    },
    Operation(name: "revoke one's own session", changesAnswers: true) { store, session, _ in
      let account = try #require(try store.account(email: "ada@example.test")).0
      _ = try store.revokeOwnSession(id: session, accountID: account.id, reason: "signed_out")
    },
    Operation(name: "revoke sessions by filter", changesAnswers: true) { store, _, _ in
      try store.revokeSessions(.all, reason: "t", actor: "t")
    },
    Operation(name: "disable the account", changesAnswers: true) { store, _, _ in
      _ = try store.setDisabled(email: "ada@example.test", true, actor: "t")
    },
    Operation(name: "grant a membership", changesAnswers: true) { store, _, _ in
      _ = try store.createSchool(name: "South", slug: "south", actor: "t")
      try store.addMember(email: "ada@example.test", schoolSlug: "south", role: .teacher, actor: "t")
    },
    Operation(name: "revoke a membership", changesAnswers: true) { store, _, _ in
      try store.revokeMember(email: "ada@example.test", schoolSlug: "north", actor: "t")
    },
    Operation(name: "request deletion", changesAnswers: true) { store, _, _ in
      let account = try #require(try store.account(email: "ada@example.test")).0
      try store.requestDeletion(accountID: account.id)
    },
    Operation(name: "a failed sign-in", changesAnswers: false) { store, _, _ in
      try store.recordSignInFailure(accountID: nil, email: "ada@example.test")
    },
    Operation(name: "a new session", changesAnswers: false) { store, _, _ in
      let account = try #require(try store.account(email: "ada@example.test")).0
      _ = try store.createSession(
        accountID: account.id, kind: .web, platform: nil, appVersion: nil, token: "another-token",
        lifetimes: SessionLifetimes())
    },
  ]

  static var cases: [(Engine, Operation)] {
    Engine.available.flatMap { engine in operations.map { (engine, $0) } }
  }

  @Test("every change of a session's answer bumps the shared counter, and only those", arguments: cases)
  func counter(engine: Engine, operation: Operation) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    let (store, clock) = try makeStore(on: db)
    let ada = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    _ = try store.createSchool(name: "North", slug: "north", actor: "t")
    try store.addMember(email: "ada@example.test", schoolSlug: "north", role: .teacher, actor: "t")
    let session = try store.createSession(
      accountID: ada.id, kind: .web, platform: nil, appVersion: nil, token: "the-token",
      lifetimes: SessionLifetimes())
    let before = try store.changeCount()
    try operation.run(store, session.id, clock)
    let after = try store.changeCount()
    #expect((after > before) == operation.changesAnswers, "counter \(before) -> \(after)")
  }

  @Test("a periodic job runs once per period, whoever starts it", arguments: Engine.available)
  func jobOncePerPeriod(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    let (store, clock) = try makeStore(on: db)
    let runs = Mutex(0)
    func start() throws -> Bool {
      try store.runJob("retention", oncePer: 3000) { () throws(StoreError) -> Int in
        runs.withLock { $0 += 1 }
        return 0
      } != nil
    }
    #expect(try start())
    #expect(try !start(), "the second instance within the period does nothing")
    clock.advance(2999)
    #expect(try !start())
    clock.advance(1)
    #expect(try start(), "a period later it is due again")
    #expect(try store.runJob("retention", oncePer: 0) { () throws(StoreError) in 1 } == 1, "0: always")
    #expect(runs.withLock { $0 } == 2)
  }
}

@Suite(
  "Several processes' connections on one PostgreSQL",
  .enabled(if: testPostgresURI != nil, "BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)"))
struct PostgresFleetTests {
  @Test("five connections migrating an empty database at once apply each migration exactly once")
  func concurrentMigrations() throws {
    let schema = try TestSchema()
    defer { schema.drop() }
    let applied = together(5) { _ -> Result<[Int], StoreError> in
      Result { () throws(StoreError) in try Migrations.apply(to: try PostgresDatabase(uri: schema.uri)) }
    }
    let lists = try applied.map { try $0.get() }
    #expect(lists.flatMap { $0 }.sorted() == Array(1...Migrations.latest))
    #expect(try PostgresDatabase(uri: schema.uri).schemaVersion() == Migrations.latest)
  }

  @Test("five connections starting the job at once: it runs once")
  func concurrentJob() throws {
    let schema = try TestSchema()
    defer { schema.drop() }
    try Migrations.apply(to: try PostgresDatabase(uri: schema.uri))
    let clock = TestClock()
    let ran = together(5) { _ -> Bool in
      guard let store = try? ClientStore(database: try PostgresDatabase(uri: schema.uri), clock: clock.read)
      else { return false }
      return (try? store.runJob("retention", oncePer: 3000) { () throws(StoreError) in 1 }) == 1
    }
    #expect(ran.filter { $0 }.count == 1)
  }

  @Test("150 failures at once from six connections are each counted, and lock the email")
  func concurrentFailures() throws {
    let schema = try TestSchema()
    defer { schema.drop() }
    try Migrations.apply(to: try PostgresDatabase(uri: schema.uri))
    let clock = TestClock()
    let outcomes = together(6) { _ -> [Result<Bool, StoreError>] in
      do {
        let store = try ClientStore(database: try PostgresDatabase(uri: schema.uri), clock: clock.read)
        return (0..<25).map { _ in
          Result { () throws(StoreError) in
            try store.recordSignInFailure(accountID: nil, email: "ada@example.test")
          }
        }
      } catch {
        return [.failure(error as? StoreError ?? StoreError.failed("\(error)"))]
      }
    }.flatMap { $0 }
    let failed = outcomes.compactMap { if case .failure(let e) = $0 { "\(e)" } else { nil } }
    #expect(outcomes.count == 150 && failed.isEmpty, "no failure lost to a serialization error: \(failed)")
    let store = try ClientStore(database: try PostgresDatabase(uri: schema.uri), clock: clock.read)
    #expect(try store.isLocked(email: "ada@example.test"))
    // Exactly the threshold were counted outside the lock; the rest arrived while it held.
    let audit = try store.auditEvents().filter { $0.action == "sign_in.failed" }
    #expect(audit.count == 150)
    #expect(audit.filter { $0.detail == nil }.count == Lockout.threshold - 1)
    #expect(audit.filter { $0.detail == "locked" }.count == 1)
  }

  /// Raw SQL any writer might run, and whether PostgreSQL's triggers must announce it.
  static let rawWrites: [(String, Bool)] = [
    ("UPDATE memberships SET revoked_at = 1", true),
    ("DELETE FROM memberships", true),
    ("UPDATE accounts SET disabled = 1", true),
    ("UPDATE accounts SET display_name = 'Ada Renamed'", true),
    ("UPDATE schools SET name = 'North Renamed'", true),
    ("UPDATE sessions SET revoked_at = 1", true),
    ("UPDATE sessions SET expires_at = 1", true),
    ("DELETE FROM sessions", true),
    ("UPDATE sessions SET last_seen_at = last_seen_at + 1", false),
    ("UPDATE accounts SET password_hash = 'y'", false),
    ("INSERT INTO audit_events (at, actor, action) VALUES (1, 'x', 'y')", false),
    ("DELETE FROM sign_in_failures", false),
  ]

  @Test("a write by anyone that can change a session's answer is announced", arguments: rawWrites)
  func rawWritesAnnounced(sql: String, announced: Bool) throws {
    let schema = try TestSchema()
    defer { schema.drop() }
    let db = try PostgresDatabase(uri: schema.uri)
    let store = try ClientStore(database: db, clock: TestClock().read)
    let ada = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    _ = try store.createSchool(name: "North", slug: "north", actor: "t")
    try store.addMember(email: "ada@example.test", schoolSlug: "north", role: .teacher, actor: "t")
    _ = try store.createSession(
      accountID: ada.id, kind: .web, platform: nil, appVersion: nil, token: "t",
      lifetimes: SessionLifetimes())
    let before = try store.changeCount()
    // Another writer altogether: a plain connection, no band-edge rule in the way.
    try PostgresConnection(uri: schema.uri).execute(sql)
    #expect((try store.changeCount() > before) == announced)
  }

  @Test("the listener sees another connection's change, and has no stamp while its connection is gone")
  func listener() throws {
    let schema = try TestSchema()
    defer { schema.drop() }
    try Migrations.apply(to: try PostgresDatabase(uri: schema.uri))
    let listener = ChangeListener(uri: schema.uri, recheck: .milliseconds(200))
    func eventually(_ what: Comment, _ condition: () throws -> Bool) throws {
      for _ in 0..<500 {
        if try condition() { return }
        usleep(10_000)
      }
      Issue.record(what)
    }
    try eventually("the listener connects") { listener.isLive }
    let first = try #require(listener.stamp())
    #expect(listener.stamp() == first, "no change, the same stamp")
    let store = try ClientStore(database: try PostgresDatabase(uri: schema.uri), clock: TestClock().read)
    let ada = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    let session = try store.createSession(
      accountID: ada.id, kind: .web, platform: nil, appVersion: nil, token: "t",
      lifetimes: SessionLifetimes())
    try store.revokeSession(id: session.id, reason: "t", actor: "t")
    try eventually("the revocation is heard") { listener.stamp() != first }
    // Its connection killed by the server: no stamp until it is back, then a new one.
    let admin = try PostgresConnection(uri: schema.uri)
    let before = listener.connections
    let held = try #require(listener.stamp())
    try admin.query("SELECT pg_terminate_backend($1::int)", [.integer(Int64(listener.backendPID))])
    try eventually("it reconnects") { listener.connections > before && listener.isLive }
    #expect(listener.stamp() != held)
    // A server that silently stops answering (its process stopped, as behind a partition): within
    // a second there is no stamp, though the connection still looks open; then it comes back.
    let pid = pid_t(listener.backendPID)
    try eventually("a stamp to start from") { listener.stamp() != nil }
    kill(pid, SIGSTOP)
    try eventually("no stamp from a server that stopped answering") { listener.stamp() == nil }
    kill(pid, SIGCONT)
    try eventually("a stamp again once it answers") { listener.stamp() != nil }
  }

  @Test("a change of access returns only once every other instance's listener has heard it")
  func acknowledged() throws {
    let schema = try TestSchema()
    defer { schema.drop() }
    try Migrations.apply(to: try PostgresDatabase(uri: schema.uri))
    let listeners = (0..<2).map { _ in ChangeListener(uri: schema.uri, recheck: .milliseconds(200)) }
    for _ in 0..<500 where !listeners.allSatisfy({ $0.isLive }) { usleep(10_000) }
    guard listeners.allSatisfy({ $0.isLive }) else {
      Issue.record("the listeners never connected")
      return
    }
    let db = try PostgresDatabase(uri: schema.uri)
    db.afterAnnouncedCommit = { ChangeListener.awaitOthers($0, except: nil) }
    let store = try ClientStore(database: db, clock: TestClock().read)
    let ada = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    // Each listener's cache has forgotten by the time the revocation returns, every time.
    for round in 0..<20 {
      let session = try store.createSession(
        accountID: ada.id, kind: .native, platform: "ios", appVersion: "1.4.0", token: "t\(round)",
        lifetimes: SessionLifetimes())
      let before = listeners.map { $0.stamp() }
      try store.revokeSession(id: session.id, reason: "t", actor: "t")
      #expect(zip(listeners, before).allSatisfy { $0.stamp() != $1 }, "round \(round)")
    }
    // Whom a writer waits for: not itself, not a listener silent for longer than the freshness
    // window, nor one whose server process has gone, but a fresh one that does not hear, until the
    // limit.
    let other = try PostgresConnection(uri: schema.uri)
    #expect(try db.awaitListeners(except: listeners[0].id, within: .seconds(1)) == 0)
    try other.query(
      "INSERT INTO change_acks (listener, seen, at, pid) VALUES ('lis_silent', 0, $1, pg_backend_pid())",
      [.integer(Int64(time(nil)) - Int64(PostgresDatabase.listenerFreshness) - 5)])
    try other.query(
      "INSERT INTO change_acks (listener, seen, at, pid) VALUES ('lis_killed', 0, $1, 0)",
      [.integer(Int64(time(nil)))])
    #expect(try db.awaitListeners(except: nil, within: .seconds(1)) == 0)
    try PostgresDatabase.acknowledge(other, listener: "lis_deaf", seen: 0)
    #expect(try db.awaitListeners(except: nil, within: .milliseconds(20)) == 1)
    #expect(try db.awaitListeners(except: "lis_deaf", within: .seconds(1)) == 0)
    // A listener that connects now has in effect heard every marker drawn before it: it says so at
    // once, and no writer waits for it to hear one it never could.
    let last = try PostgresDatabase.lastMarker(other)
    #expect(last > 0)
    let late = ChangeListener(uri: schema.uri, recheck: .milliseconds(200))
    for _ in 0..<500 where !late.isLive { usleep(10_000) }
    #expect(
      try other.query("SELECT seen FROM change_acks WHERE listener = $1", [.text(late.id)])
        == [[.integer(last)]])
  }

  @Test("a database that is not there is 'unavailable', and attempts are spaced out")
  func unavailable() throws {
    var settings = DatabaseSettings()
    settings.firstBackoff = .seconds(60)
    let gate = ReconnectSchedule(settings)
    let attempts = Mutex(0)
    for _ in 0..<3 {
      #expect {
        try gate.attempt { () throws(StoreError) -> Int in
          attempts.withLock { $0 += 1 }
          return try PostgresConnection(
            uri: "postgresql:///none?host=/nonexistent-band-edge", settings: settings
          )
          .changes
        }
      } throws: { ($0 as? StoreError)?.isOutage == true }
    }
    #expect(attempts.withLock { $0 } == 1, "the second and third fail at once, without connecting")
  }

  @Test(
    "statements are prepared once per connection, again after a reconnect, or not at all",
    arguments: [true, false])
  func prepared(_ prepare: Bool) throws {
    var settings = DatabaseSettings()
    settings.preparedStatements = prepare
    let connection = try PostgresConnection(uri: try #require(testPostgresURI), settings: settings)
    let admin = try PostgresConnection(uri: try #require(testPostgresURI))
    func named() throws -> Int {
      guard
        case .integer(let n)? = try connection.query("SELECT count(*) FROM pg_prepared_statements").first?
          .first
      else { return -1 }
      return Int(n)
    }
    for value in [DatabaseValue.integer(7), .text("seven"), .blob([0, 7]), .null] {
      #expect(
        try connection.query(
          "SELECT $1::text IS NOT DISTINCT FROM $1::text, $2::bigint", [value, .integer(1)])
          == [[.text("t"), .integer(1)]])
    }
    // Three type signatures (an integer, text or NULL, bytea) and the counting query's own.
    #expect(try named() == (prepare ? 4 : 0))
    try admin.query("SELECT pg_terminate_backend($1::int)", [.integer(Int64(connection.backendPID))])
    usleep(100_000)
    #expect(
      try connection.query("SELECT $1::bigint", [.integer(3)]) == [[.integer(3)]],
      "prepared again after the reconnect")
  }

  @Test(
    "a connection lost in the middle of a transaction fails it whole; the rest never runs on a new session")
  func lostMidTransaction() throws {
    let schema = try TestSchema()
    defer { schema.drop() }
    let db = try PostgresDatabase(uri: schema.uri)
    let admin = try PostgresConnection(uri: schema.uri)
    try db.execute("CREATE TABLE t (n BIGINT)")
    let pid = try #require(db.query("SELECT pg_backend_pid()").first?.first)
    #expect(throws: StoreError.self) {
      try db.transaction { () throws(StoreError) in
        try db.query("INSERT INTO t VALUES (1)")
        try admin.query("SELECT pg_terminate_backend($1::int)", [pid])
        usleep(100_000)
        try db.query("INSERT INTO t VALUES (2)")
      }
    }
    #expect(try db.query("SELECT count(*) FROM t") == [[.integer(0)]], "nothing of it committed")
    try db.transaction { () throws(StoreError) in _ = try db.query("INSERT INTO t VALUES (3)") }
    #expect(
      try db.query("SELECT n FROM t") == [[.integer(3)]], "the next transaction runs on the new connection")
  }

  @Test("a statement past the statement timeout is cancelled and 'unavailable'")
  func statementTimeout() throws {
    var settings = DatabaseSettings()
    settings.statementTimeout = .milliseconds(50)
    let connection = try PostgresConnection(uri: try #require(testPostgresURI), settings: settings)
    #expect {
      try connection.execute("SELECT pg_sleep(5)")
    } throws: { error in
      guard let error = error as? StoreError else { return false }
      return error.isOutage && error.description.contains("57014")
    }
    #expect(try connection.query("SELECT 1").first?.first == .integer(1), "the connection stays usable")
  }
}

@Suite("Per-address limits shared by a fleet")
struct FleetRateTests {
  /// (instances, attempts one instance allows at once, attempts it regains per minute) for a
  /// limit of 20 at once and 60 a minute.
  static let shares: [(Int, Double, Double)] = [
    (1, 20, 60), (2, 10, 30), (3, 7, 20), (4, 5, 15), (40, 1, 1.5), (0, 20, 60),
  ]

  @Test(
    "each of N instances applies 1/N of the burst (rounded up, at least 1) and of the rate", arguments: shares
  )
  func share(instances: Int, burst: Double, perMinute: Double) {
    let limiter = RateLimiter(RateLimit(burst: 20, perMinute: 60), now: { 0 })
    limiter.share(among: instances)
    #expect(limiter.applied.burst == burst)
    #expect(abs(limiter.applied.perSecond * 60 - perMinute) < 1e-9)
    let allowed = (0..<30).filter { _ in limiter.take("192.0.2.1") == nil }.count
    #expect(allowed == Int(burst))
  }

  @Test(
    "instances on one database count each other by heartbeat, and one that stops leaves the count",
    .enabled(if: testPostgresURI != nil, "BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)"))
  func heartbeat() throws {
    let schema = try TestSchema()
    defer { schema.drop() }
    try Migrations.apply(to: try PostgresDatabase(uri: schema.uri))
    let location = DatabaseLocation.postgres(uri: schema.uri)
    let limiter = RateLimiter(RateLimit(burst: 20, perMinute: 60))
    let clock = TestClock()
    let first = FleetHeartbeat(
      database: location, settings: DatabaseSettings(), limiters: [limiter], interval: .milliseconds(20),
      clock: clock.read)
    var second: FleetHeartbeat? = FleetHeartbeat(
      database: location, settings: DatabaseSettings(), limiters: [], interval: .milliseconds(20),
      clock: clock.read)
    func eventually(_ what: Comment, _ condition: () -> Bool) {
      for _ in 0..<500 where !condition() { usleep(10_000) }
      if !condition() { Issue.record(what) }
    }
    eventually("both see two") { first.instances == 2 && second?.instances == 2 }
    #expect(limiter.applied.burst == 10)
    // A limiter made later (the gateway's) takes its share at once, and follows from then on.
    let late = RateLimiter(RateLimit(burst: 120, perMinute: 600))
    first.share([late])
    #expect(late.applied.burst == 60)
    second = nil
    eventually("the one left sees itself alone") { first.instances == 1 }
    #expect(limiter.applied.burst == 20)
    #expect(late.applied.burst == 120)
  }
}
