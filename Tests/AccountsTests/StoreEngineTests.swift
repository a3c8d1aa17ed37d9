import Dispatch
import Synchronization
import TestSupport
import Testing

@testable import Accounts
@testable import Store

@Suite("The store's rules on every engine")
struct StoreEngineTests {
  @Test("migrations apply once, in order, and a second start applies nothing", arguments: Engine.available)
  func migrations(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    #expect(try Migrations.apply(to: db) == Array(1...Migrations.latest))
    #expect(try db.schemaVersion() == Migrations.latest)
    #expect(try Migrations.apply(to: db) == [])
    try db.checkServable(name: "test")
  }

  @Test("accounts, memberships, sessions and the audit trail", arguments: Engine.available)
  func accountsAndSessions(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    let (store, _) = try makeStore(on: db)
    let ada = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    #expect(throws: StoreError.self) {
      try store.createAccount(email: "ada@example.test", displayName: "Again", passwordHash: "x", actor: "t")
    }
    #expect(try store.account(email: "ada@example.test")?.0 == ada)
    _ = try store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "t")
    try store.addMember(email: "ada@example.test", schoolSlug: "northfield", role: .teacher, actor: "t")
    #expect(try store.memberships(accountID: ada.id).map(\.role) == [.teacher])
    let token = Secrets.token()
    let session = try store.signIn(
      accountID: ada.id, token: token, replacing: nil, upgradedHash: nil, lifetimes: SessionLifetimes(),
      browser: "Firefox on Linux")
    let view = try #require(try store.sessionView(token: token, lifetimes: SessionLifetimes()))
    #expect(
      view.session.id == session.id && view.session.browser == "Firefox on Linux" && view.account == ada
        && view.memberships.count == 1)
    #expect(try store.revokeOwnSession(id: session.id, accountID: ada.id, reason: "signed_out"))
    #expect(try store.sessionView(token: token, lifetimes: SessionLifetimes()) == nil)
    #expect(
      try store.auditEvents().map(\.action) == [
        "account.created", "school.created", "membership.granted", "session.created", "sign_in.succeeded",
        "session.revoked",
      ])
  }

  @Test(
    "one statement reads many sessions: each token gets its own person, in order", arguments: Engine.available
  )
  func sessionViews(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    let (store, _) = try makeStore(on: db)
    _ = try store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "t")
    _ = try store.createSchool(name: "Aldgate Music", slug: "aldgate", actor: "t")
    var tokens: [String] = []
    let people: [EmailAddress] = ["ada@example.test", "bo@example.test", "cy@example.test"]
    for (i, email) in people.enumerated() {
      let account = try store.createAccount(email: email, displayName: "P\(i)", passwordHash: "x", actor: "t")
      if i != 2 { try store.addMember(email: email, schoolSlug: "northfield", role: .teacher, actor: "t") }
      if i == 0 { try store.addMember(email: email, schoolSlug: "aldgate", role: .administrator, actor: "t") }
      let token = Secrets.token()
      _ = try store.createSession(
        accountID: account.id, kind: .native, platform: "ios", appVersion: "1.4.0", token: token,
        lifetimes: SessionLifetimes())
      tokens.append(token)
    }
    let revoked = tokens[1]
    try store.revokeSessions(.account(email: "bo@example.test"), reason: "t", actor: "t")
    // Padded to a power of two by repeating the last distinct digest: 1, 2, 3 (as 4), 4, and a
    // duplicate; then widths 8, 16 and 32 with unknown tokens around the known ones.
    let asked = [tokens[0], Secrets.token(), revoked, tokens[2], tokens[0]]
    let expected: [String?] = ["ada@example.test", nil, nil, "cy@example.test", "ada@example.test"]
    for count in 1...asked.count {
      let views = try store.sessionViews(tokens: Array(asked.prefix(count)), lifetimes: SessionLifetimes())
      #expect(views.map { $0?.account.email } == Array(expected.prefix(count)))
      #expect(views.first??.memberships.map(\.school.slug) == ["aldgate", "northfield"])
    }
    for width in [6, 9, 17, 32] {
      var many = (0..<width).map { _ in Secrets.token() }
      many[width / 2] = tokens[2]
      many[width - 1] = tokens[0]
      let views = try store.sessionViews(tokens: many, lifetimes: SessionLifetimes())
      #expect(views.count == width && views.compactMap { $0 }.count == 2)
      #expect(views[width / 2]?.account.email == "cy@example.test" && views[width / 2]?.memberships == [])
      #expect(views[width - 1]?.memberships.map(\.school.slug) == ["aldgate", "northfield"])
    }
    let ada = try #require(try store.sessionView(token: tokens[0], lifetimes: SessionLifetimes()))
    #expect(ada.memberships.map(\.school.slug) == ["aldgate", "northfield"], "ordered by school name")
    #expect(ada.memberships.map(\.role) == [.administrator, .teacher])
    #expect(try store.sessionView(token: tokens[2], lifetimes: SessionLifetimes())?.memberships == [])
    #expect(try store.sessionViews(tokens: [], lifetimes: SessionLifetimes()).isEmpty)
  }

  @Test("the lockout schedule, keyed by the server's own key", arguments: Engine.available)
  func lockout(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    let (store, clock) = try makeStore(on: db)
    for i in 1...5 {
      #expect(try store.recordSignInFailure(accountID: nil, email: "tom@example.test") == (i == 5))
    }
    #expect(try store.isLocked(email: "tom@example.test"))
    clock.advance(30)
    #expect(try store.recordSignInFailure(accountID: nil, email: "tom@example.test"), "while locked")
    clock.advance(30)
    #expect(try !store.isLocked(email: "tom@example.test"), "the failure while locked did not extend it")
    #expect(try store.recordSignInFailure(accountID: nil, email: "tom@example.test"))
    clock.advance(119)
    #expect(try store.isLocked(email: "tom@example.test"), "the 6th failure doubled the lock")
    let again = try ClientStore(database: db, clock: clock.read)
    #expect(again.identifierDigest("tom@example.test") == store.identifierDigest("tom@example.test"))
  }
}

@Suite("Migrations started together")
struct ConcurrentMigrationTests {
  /// Connections, each used by one thread only.
  // Safe to share unchecked: thread `i` of `concurrentPerform` touches `connections[i]` alone.
  struct Connections: @unchecked Sendable {
    let connections: [any Database]
  }

  @Test(
    "connections migrating a new database at once all succeed, and each step is applied once",
    arguments: Engine.available)
  func together(engine: Engine) throws {
    for _ in 0..<3 {
      let location = try engine.location()
      // Opened one after the other: what opening does (PostgreSQL's band_edge_schema table) is not
      // under test here, only the migrations.
      let open = Connections(connections: try (0..<4).map { _ in try location.open() })
      let outcomes = Mutex<[Result<[Int], StoreError>]>([])
      DispatchQueue.concurrentPerform(iterations: open.connections.count) { i in
        let outcome = Result { () throws(StoreError) -> [Int] in try Migrations.apply(to: open.connections[i])
        }
        outcomes.withLock { $0.append(outcome) }
      }
      let applied = try outcomes.withLock { $0 }.flatMap { try $0.get() }
      #expect(applied.sorted() == Array(1...Migrations.latest))
      #expect(try Migrations.version(of: open.connections[0]) == Migrations.latest)
    }
  }
}
