import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import Store

#if canImport(Glibc)
  import Glibc
#endif

/// A fresh database file in its own temporary directory (see `TestDirectory`).
func temporaryDatabase() throws -> (SQLiteDatabase, String) {
  let path = try TestDirectory.make("store").appendingPathComponent("test.sqlite").path
  return (try SQLiteDatabase(path: path), path)
}

/// The store's tables, by name (not PostgreSQL's `band_edge_schema`, where that engine keeps the
/// schema version SQLite keeps in `PRAGMA user_version`).
func tables(_ db: any Database) throws -> [String] {
  let sql =
    switch db.dialect {
    case .sqlite:
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    case .postgres:
      "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        + " AND table_name <> 'band_edge_schema' ORDER BY table_name"
    }
  return try db.query(sql).compactMap { if case .text(let name) = $0[0] { name } else { nil } }
}

@Suite("Store: migrations and transactions")
struct MigrationTests {
  @Test("from an empty database every migration applies, in order", arguments: Engine.available)
  func fromEmpty(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    #expect(try Migrations.apply(to: db) == Array(1...Migrations.latest))
    #expect(try Migrations.version(of: db) == Migrations.latest)
    #expect(
      try tables(db) == [
        "accounts", "action_tokens", "audit_events", "change_acks", "change_counter", "gateway_keys",
        "handoffs",
        "instances",
        "invitations", "job_runs", "memberships", "outbox", "schools", "server_keys", "sessions",
        "sign_in_failures", "trusted_devices",
      ])
    #expect(try Migrations.apply(to: db) == [], "a second start applies nothing")
  }

  @Test(
    "from every earlier version the rest applies and existing rows survive",
    arguments: Engine.available, 1..<Migrations.latest)
  func fromEarlier(engine: Engine, _ version: Int) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    try Migrations.apply(to: db, upTo: version)
    #expect(try Migrations.version(of: db) == version)
    try db.query(
      "INSERT INTO accounts (id, email, display_name, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
      [.text("acc_x"), .text("ada@example.test"), .text("Ada Example"), .text("h"), .integer(1)])
    #expect(try Migrations.apply(to: db) == Array((version + 1)...Migrations.latest))
    #expect(try db.query("SELECT email FROM accounts") == [[.text("ada@example.test")]])
  }

  @Test("a database newer than this build is refused", arguments: Engine.available)
  func newerSchema(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    try db.transaction { () throws(StoreError) in try db.recordSchemaVersion(99) }
    #expect(throws: StoreError.self) { try Migrations.apply(to: db) }
    do {
      try Migrations.apply(to: db)
    } catch {
      #expect(error.description.contains("schema version 99"))
    }
  }

  @Test("an error inside a transaction leaves nothing written", arguments: Engine.available)
  func rollback(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    try Migrations.apply(to: db)
    #expect(throws: StoreError.self) {
      try db.transaction { () throws(StoreError) in
        try db.query("INSERT INTO schools (id, name, slug, created_at) VALUES ('sch_a', 'A', 'a', 1)")
        // The same slug again: the second insert fails, and the first must not survive.
        try db.query("INSERT INTO schools (id, name, slug, created_at) VALUES ('sch_b', 'B', 'a', 1)")
      }
    }
    #expect(try db.query("SELECT count(*) FROM schools") == [[.integer(0)]])
  }

  // SQLite only: a Python sqlite3 child writes the file in WAL mode and dies before COMMIT.
  @Test("a process that dies between the statements of a transaction leaves nothing half-written")
  func crash() throws {
    let (db, path) = try temporaryDatabase()
    try Migrations.apply(to: db)
    // A separate, single-threaded process (forking this multi-threaded test runner is unsafe) opens
    // the database in WAL mode, writes the first half of a two-row change and dies before COMMIT.
    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    child.arguments = [
      "python3", "-c",
      """
      import os, sqlite3, sys
      db = sqlite3.connect(sys.argv[1], isolation_level=None)
      db.execute("PRAGMA journal_mode = WAL")
      db.execute("BEGIN IMMEDIATE")
      db.execute("INSERT INTO schools (id, name, slug, created_at) VALUES ('sch_c', 'C', 'c', 1)")
      os._exit(9)
      """,
      path,
    ]
    try child.run()
    child.waitUntilExit()
    #expect(child.terminationStatus == 9, "the child reached its crash point")
    let reopened = try SQLiteDatabase(path: path)
    #expect(try reopened.query("SELECT count(*) FROM schools") == [[.integer(0)]])
    try reopened.query("INSERT INTO schools (id, name, slug, created_at) VALUES ('sch_d', 'D', 'd', 1)")
    #expect(
      try reopened.query("SELECT count(*) FROM schools") == [[.integer(1)]], "the database is not locked")
  }
}

@Suite("Secrets")
struct SecretsTests {
  @Test("base64url matches RFC 4648's vectors, without padding")
  func base64url() {
    let table: [(String, String)] = [
      ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
      ("foobar", "Zm9vYmFy"),
    ]
    for (input, output) in table { #expect(Secrets.base64url(Array(input.utf8)) == output) }
    #expect(Secrets.base64url([0xFB, 0xFF, 0xBF]) == "-_-_")
    #expect(Secrets.base64url(Array("foob".utf8), prefix: "req_") == "req_Zm9vYg")
    #expect(Secrets.base64url([], prefix: "req_") == "req_")
  }

  @Test("the stored digest is SHA-256 of the token text")
  func digest() {
    #expect(
      Secrets.digest("abc").map { String(format: "%02x", $0) }.joined()
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    #expect(Secrets.digest(bytes: Array("abc".utf8)) == Secrets.digest("abc"))
    #expect(
      Secrets.digest("").map { String(format: "%02x", $0) }.joined()
        == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
  }

  @Test("random base64url IDs: never handed out twice, across refills of the buffer and threads")
  func bufferedRandom() async {
    // 4 threads x 1,000 x 12 bytes: about 12 refills of the 4 KiB buffer.
    let ids = await withTaskGroup(of: [String].self) { group in
      for _ in 0..<4 { group.addTask { (0..<1000).map { _ in Secrets.randomBase64url(12, prefix: "req_") } } }
      return await group.reduce(into: []) { $0 += $1 }
    }
    #expect(ids.count == 4000 && Set(ids).count == 4000)
    #expect(
      ids.allSatisfy {
        $0.hasPrefix("req_") && $0.utf8.count == 20 && $0.utf8.dropFirst(4).allSatisfy(PKCE.isBase64URL)
      })
    // The whole buffer at once: 4,096 bytes, 5,462 characters.
    #expect(Secrets.randomBase64url(4096).utf8.count == 5462)
  }

  @Test("IDs are opaque, prefixed and unique")
  func identifiers() {
    let ids = (0..<1000).map { _ in Secrets.identifier("acc") }
    #expect(Set(ids).count == 1000)
    #expect(ids.allSatisfy { $0.hasPrefix("acc_") && $0.count == 26 })
  }

  @Test("constant-time comparison")
  func equal() {
    #expect(Secrets.equal([1, 2, 3], [1, 2, 3]))
    #expect(!Secrets.equal([1, 2, 3], [1, 2, 4]))
    #expect(!Secrets.equal([1, 2, 3], [1, 2]))
  }
}

@Suite("Passwords (Argon2id)")
struct PasswordTests {
  @Test("hash and verify with OWASP's parameters")
  func roundTrip() {
    let hasher = PasswordHasher()
    let encoded = hasher.hash("correct horse battery staple")
    #expect(encoded.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
    #expect(hasher.verify("correct horse battery staple", against: encoded))
    #expect(!hasher.verify("correct horse battery stapler", against: encoded))
    #expect(!hasher.verify("anything", against: "not a hash"))
    #expect(hasher.hash("same") != hasher.hash("same"), "a fresh salt every time")
  }

  @Test("the decoy for unknown emails decodes with the current parameters and matches nothing")
  func decoy() {
    let hasher = PasswordHasher()
    let decoy = hasher.decoy()
    #expect(decoy.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
    #expect(!hasher.needsRehash(decoy))
    // VERIFY_MISMATCH (-35) comes only after the full Argon2id computation; a decoding error would
    // return at once and make unknown emails faster than known ones.
    #expect(hasher.verifyStatus("anything", against: decoy) == -35)
    #expect(hasher.decoy() != decoy)
  }

  @Test("hashing at idle priority restores the thread's scheduling policy afterwards")
  func idlePriority() {
    let before = sched_getscheduler(0)
    let hasher = PasswordHasher()
    #expect(hasher.verify("x", against: hasher.decoy()) == false)
    #expect(sched_getscheduler(0) == before)
  }

  @Test("weaker parameters ask for a rehash")
  func rehash() {
    let hasher = PasswordHasher()
    #expect(!hasher.needsRehash(hasher.hash("x")))
    var weak = PasswordHasher()
    weak.memoryKiB = 8192
    weak.timeCost = 1
    #expect(hasher.needsRehash(weak.hash("x")))
    #expect(hasher.needsRehash("$argon2i$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"))
  }
}
