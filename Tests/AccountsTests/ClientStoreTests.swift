import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Accounts
@testable import Store

@Suite("Client store")
struct ClientStoreTests {
  let hash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$aGFzaA"

  @Test("accounts: normalised unique emails, and every change audited", arguments: Engine.available)
  func accounts(engine: Engine) throws {
    let (store, _, _) = try makeStore(engine)
    let ada = try store.createAccount(
      email: "  Ada@Example.TEST ", displayName: "Ada Example", passwordHash: hash, actor: "cli")
    #expect(ada.email == "ada@example.test" && ada.id.hasPrefix("acc_"))
    #expect(throws: StoreError.self) {
      try store.createAccount(
        email: "ada@example.test", displayName: "Other", passwordHash: hash, actor: "cli")
    }
    #expect(try store.account(email: "ADA@example.test")?.0 == ada)
    _ = try store.setDisabled(email: "ada@example.test", true, actor: "cli")
    #expect(try store.account(id: ada.id)?.disabled == true)
    #expect(try store.auditEvents().map(\.action) == ["account.created", "account.disabled"])
  }

  @Test(
    "failure counts are keyed with the server's own key, never a plain digest of what was typed",
    arguments: Engine.available)
  func keyedFailures(engine: Engine) throws {
    let (store, _, location) = try makeStore(engine)
    try store.recordSignInFailure(accountID: nil, email: "ada@example.test")
    let db = try location.open()
    let stored = try db.query("SELECT email_key FROM sign_in_failures").map { $0[0] }
    guard
      case .blob(let key)? = try db.query("SELECT key FROM server_keys WHERE name = 'identifier'").first?[0]
    else {
      Issue.record("no identifier key")
      return
    }
    #expect(key.count == 32)
    #expect(stored == [.blob(Secrets.hmac(key: key, Array("ada@example.test".utf8)))])
    #expect(stored != [.blob(Secrets.digest("ada@example.test"))])
    // The key is made once per database: a second connection keys alike; another database differs.
    let again = try ClientStore(database: try location.open(), clock: { 0 })
    #expect(try again.isLocked(email: "ada@example.test") == false)
    #expect(again.identifierDigest("ada@example.test") == store.identifierDigest("ada@example.test"))
    let (other, _, _) = try makeStore(engine)
    #expect(other.identifierDigest("ada@example.test") != store.identifierDigest("ada@example.test"))
  }

  // SQLite only: how SQLite binds text. PostgreSQL text cannot hold a NUL, and PostgresConnection
  // refuses one with its own error (PostgresConnectionTests).
  @Test("text is bound and read with its byte length: a NUL inside is neither cut nor matched early")
  func nulInText() throws {
    let (db, _) = try temporaryDatabase()
    try db.execute("CREATE TABLE t (v TEXT)")
    try db.query("INSERT INTO t (v) VALUES (?)", [.text("tom@example.test")])
    #expect(
      try db.query("SELECT count(*) FROM t WHERE v = ?", [.text("tom@example.test\u{0}x")]) == [[.integer(0)]]
    )
    try db.query("INSERT INTO t (v) VALUES (?)", [.text("a\u{0}b")])
    #expect(
      try db.query("SELECT v, length(CAST(v AS BLOB)) FROM t WHERE v <> 'tom@example.test'") == [
        [.text("a\u{0}b"), .integer(3)]
      ])
  }

  @Test(
    "memberships are live: a revoked role disappears, and accounts never see each other's schools",
    arguments: Engine.available)
  func memberships(engine: Engine) throws {
    let (store, _, _) = try makeStore(engine)
    let a = try store.createAccount(
      email: "a@example.test", displayName: "A", passwordHash: hash, actor: "cli")
    let b = try store.createAccount(
      email: "b@example.test", displayName: "B", passwordHash: hash, actor: "cli")
    _ = try store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "cli")
    _ = try store.createSchool(name: "Southgate Academy", slug: "southgate", actor: "cli")
    try store.addMember(
      email: EmailAddress(stringLiteral: a.email), schoolSlug: "northfield", role: .teacher, actor: "cli")
    try store.addMember(
      email: EmailAddress(stringLiteral: b.email), schoolSlug: "southgate", role: .administrator, actor: "cli"
    )
    #expect(
      try store.memberships(accountID: a.id).map { [$0.school.slug, $0.role.rawValue] } == [
        ["northfield", "teacher"]
      ])
    #expect(try store.memberships(accountID: b.id).map(\.school.slug) == ["southgate"])
    try store.revokeMember(
      email: EmailAddress(stringLiteral: a.email), schoolSlug: "northfield", actor: "cli")
    #expect(try store.memberships(accountID: a.id).isEmpty)
    #expect(throws: StoreError.self) {
      try store.revokeMember(
        email: EmailAddress(stringLiteral: a.email), schoolSlug: "northfield", actor: "cli")
    }
    try store.addMember(
      email: EmailAddress(stringLiteral: a.email), schoolSlug: "northfield", role: .readOnly, actor: "cli")
    #expect(try store.memberships(accountID: a.id).map(\.role) == [.readOnly])
    #expect(throws: StoreError.self) {
      try store.createSchool(name: "Again", slug: "northfield", actor: "cli")
    }
    #expect(throws: StoreError.self) { try store.createSchool(name: "Bad", slug: "Bad Slug", actor: "cli") }
  }

  @Test(
    "sessions: found by token, within both lifetimes, per kind", arguments: Engine.available,
    [SessionRecord.Kind.web, .native])
  func lifetimes(engine: Engine, _ kind: SessionRecord.Kind) throws {
    let (store, clock, _) = try makeStore(engine)
    let account = try store.createAccount(
      email: "a@example.test", displayName: "A", passwordHash: hash, actor: "cli")
    var lifetimes = SessionLifetimes()
    lifetimes.webIdle = 100
    lifetimes.webAbsolute = 250
    lifetimes.nativeIdle = 100
    lifetimes.nativeAbsolute = 250
    let token = Secrets.token()
    _ = try store.createSession(
      accountID: account.id, kind: kind, platform: nil, appVersion: nil, token: token, lifetimes: lifetimes)
    #expect(try store.session(token: token, lifetimes: lifetimes)?.1 == account)
    #expect(try store.session(token: Secrets.token(), lifetimes: lifetimes) == nil)
    clock.advance(99)
    #expect(
      try store.session(token: token, lifetimes: lifetimes) != nil, "within the idle limit, and now seen")
    clock.advance(99)
    #expect(try store.session(token: token, lifetimes: lifetimes) != nil)
    clock.advance(60)  // 258 s in all: past the absolute limit though never idle for long
    #expect(try store.session(token: token, lifetimes: lifetimes) == nil)

    let idleToken = Secrets.token()
    _ = try store.createSession(
      accountID: account.id, kind: kind, platform: nil, appVersion: nil, token: idleToken,
      lifetimes: lifetimes)
    clock.advance(100)
    #expect(try store.session(token: idleToken, lifetimes: lifetimes) == nil, "idle too long")
  }

  @Test("revocation: one session, a disabled account, and operator filters", arguments: Engine.available)
  func revocation(engine: Engine) throws {
    let (store, _, _) = try makeStore(engine)
    let a = try store.createAccount(
      email: "a@example.test", displayName: "A", passwordHash: hash, actor: "cli")
    let lifetimes = SessionLifetimes()
    var tokens: [String] = []
    for (platform, version) in [("ios", "1.2.0"), ("ios", "1.4.0"), ("android", "1.0.0")] {
      let token = Secrets.token()
      tokens.append(token)
      _ = try store.createSession(
        accountID: a.id, kind: .native, platform: platform, appVersion: version, token: token,
        lifetimes: lifetimes)
    }
    #expect(try store.sessions(.platform("ios", below: "1.3")).map(\.appVersion) == ["1.2.0"])
    #expect(
      try store.revokeSessions(.platform("ios", below: "1.3"), reason: "minimum_raised", actor: "cli") == 1)
    #expect(try store.session(token: tokens[0], lifetimes: lifetimes) == nil)
    #expect(try store.session(token: tokens[1], lifetimes: lifetimes) != nil)
    let (record, _) = try #require(try store.session(token: tokens[1], lifetimes: lifetimes))
    try store.revokeSession(id: record.id, reason: "signed_out", actor: a.id)
    #expect(try store.session(token: tokens[1], lifetimes: lifetimes) == nil)
    _ = try store.setDisabled(email: EmailAddress(stringLiteral: a.email), true, actor: "cli")
    #expect(
      try store.session(token: tokens[2], lifetimes: lifetimes) == nil,
      "a disabled account's sessions end at once")
    #expect(try store.sessions(.all).isEmpty)
    let actions = try store.auditEvents().map(\.action)
    #expect(actions.filter { $0 == "session.revoked" }.count == 2)
  }

  // SQLite only: it reads the database file itself (after a WAL checkpoint).
  @Test("tokens and password hashes never reach the database file or the audit trail in clear")
  func noSecrets() throws {
    let (store, _, location) = try makeStore(.sqlite)
    let path = try #require(location.sqlitePath)
    let a = try store.createAccount(
      email: "a@example.test", displayName: "A", passwordHash: hash, actor: "cli")
    let token = Secrets.token()
    _ = try store.createSession(
      accountID: a.id, kind: .web, platform: nil, appVersion: nil, token: token,
      lifetimes: SessionLifetimes())
    try store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    let file = try Data(contentsOf: URL(fileURLWithPath: path))
    #expect(file.range(of: Data(token.utf8)) == nil)
    let trail = try store.auditEvents().map {
      "\($0.actor ?? "") \($0.action) \($0.subject ?? "") \($0.detail ?? "")"
    }
    #expect(!trail.joined().contains(token) && !trail.joined().contains(hash))
  }

  @Test("versions compare numerically")
  func versions() {
    #expect(ClientStore.compareVersions("1.10.0", "1.9") == 1)
    #expect(ClientStore.compareVersions("1.4", "1.4.0") == 0)
    #expect(ClientStore.compareVersions("0.9.9", "1.0") == -1)
  }
}
