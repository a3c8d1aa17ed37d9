import TestSupport
import Testing

@testable import Accounts
@testable import Store

/// The text in `value`, or a test failure.
private func text(_ value: DatabaseValue) throws -> String {
  guard case .text(let text) = value else { throw StoreError.failed("\(value) is not text") }
  return text
}

@Suite("Copying a store to another (admin copy-store)")
struct StoreCopyTests {
  /// A store on `db` holding a row in every table, with text that travels badly (quotes, accents,
  /// an emoji); returns the session's token and the locked-out email.
  static func seed(_ db: any Database) throws -> (token: String, locked: EmailAddress) {
    let (store, clock) = try makeStore(on: db)
    let ada = try store.createAccount(
      email: "ada@example.test", displayName: "Ada O'Example \"ü\" 🎸", passwordHash: "x", actor: "t")
    _ = try store.createAccount(
      email: "tom@example.test", displayName: "Tom Example", passwordHash: "y", actor: "t")
    _ = try store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "t")
    try store.addMember(email: "ada@example.test", schoolSlug: "northfield", role: .teacher, actor: "t")
    let token = Secrets.token()
    _ = try store.signIn(
      accountID: ada.id, token: token, replacing: nil, upgradedHash: nil, lifetimes: SessionLifetimes(),
      browser: "Firefox on Linux")
    _ = try store.createHandoff(
      accountID: ada.id, challenge: "c", state: "s", platform: "ios", appVersion: "1.0", lifetime: 600)
    _ = try store.trustDevice(account: ada, replacing: nil)
    for _ in 1...5 { _ = try store.recordSignInFailure(accountID: nil, email: "tom@example.test") }
    _ = try store.runJob("retention", oncePer: 3000) { () throws(StoreError) in 0 }
    _ = try store.heartbeat(instance: "ins_test", window: 5)
    try db.query("INSERT INTO change_acks (listener, seen, at, pid) VALUES ('lis_test', 1, 1, 1)")
    // SQLite counts changes in this row; PostgreSQL in a sequence (not a table, not copied).
    try db.query("INSERT INTO change_counter (id, n) VALUES (1, 5) ON CONFLICT (id) DO UPDATE SET n = 5")
    _ = try store.issueToken(.recovery, accountID: ada.id, email: "ada@example.test")
    try store.enqueueMail(
      MailMessage(
        kind: "recovery", to: "ada@example.test", subject: "Réglage ✓", text: "t", html: "<p>h</p>"),
      host: "x.example.test")
    try db.query(
      """
      INSERT INTO invitations (id, school_id, email, role, invited_by, token_digest, created_at, expires_at)
      SELECT 'inv_1', id, 'tom@example.test', 'teacher', ?, ?, 1, 2 FROM schools
      """, [.text(ada.id), .blob(Secrets.digest("invitation"))])
    // The gateway's keys are made by the Gateway target; a row of the same shape stands in here.
    try db.query(
      "INSERT INTO gateway_keys (kid, sealed, public_x, created_at, signs_from) VALUES (?, ?, ?, ?, ?)",
      [.text("kid-1"), .blob(Secrets.randomBytes(60)), .text("x"), .integer(1), .integer(1)])
    clock.advance(1)
    return (token, "tom@example.test")
  }

  @Test("every migration's statements are understood, and the tables are those the schema makes")
  func tableList() throws {
    let tables = try StoreCopy.tables()
    #expect(
      tables.map(\.name) == [
        "accounts", "schools", "memberships", "sessions", "audit_events", "handoffs", "sign_in_failures",
        "server_keys", "change_counter", "job_runs", "instances", "outbox", "invitations", "trusted_devices",
        "action_tokens", "gateway_keys", "change_acks",
      ])
    #expect(tables.first { $0.name == "memberships" }?.primaryKey == ["account_id", "school_id"])
    #expect(tables.first { $0.name == "sign_in_failures" }?.primaryKey == ["email_key"], "renamed in 6")
    #expect(tables.compactMap(\.identity) == ["seq", "id"])
    let accounts = tables.first { $0.name == "accounts" }
    #expect(accounts.map { table in table.columns.allSatisfy { table.types[$0] != nil } } == true)
    #expect(accounts?.types["deleted_at"] == .integer && accounts?.types["email"] == .text)
    #expect(tables.first { $0.name == "sessions" }?.types["token_digest"] == .blob)
    #expect(
      try StoreCopy.tables(upTo: 2).map(\.name) == [
        "accounts", "schools", "memberships", "sessions", "audit_events",
      ])
    #expect(try StoreCopy.tables(upTo: 0).isEmpty)
  }

  @Test("the table list equals the migrated database's own catalog", arguments: Engine.available)
  func catalog(engine: Engine) throws {
    let (db, finish) = try engine.database()
    defer { finish() }
    try Migrations.apply(to: db)
    let names: [String]
    switch engine {
    case .sqlite:
      names = try db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .map { try text($0[0]) }
    case .postgres:
      names = try db.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
          + "AND table_name <> 'band_edge_schema'"
      ).map { try text($0[0]) }
    }
    let tables = try StoreCopy.tables()
    #expect(Set(names) == Set(tables.map(\.name)))
    for table in tables {
      let (columns, key, identity): ([DatabaseValue], [DatabaseValue], [DatabaseValue])
      switch engine {
      case .sqlite:
        let info = try db.query("SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", [.text(table.name)])
        columns = info.map { $0[0] }
        key = info.filter { $0[1] != .integer(0) }.sorted { StoreCopy.precedes([$0[1]], [$1[1]], keys: [0]) }
          .map { $0[0] }
        let sql = try text(
          try #require(
            try db.query("SELECT sql FROM sqlite_master WHERE name = ?", [.text(table.name)]).first)[0])
        identity = sql.contains("AUTOINCREMENT") ? [.text(table.primaryKey[0])] : []
      case .postgres:
        let filter = "table_schema = current_schema() AND table_name = ?"
        columns = try db.query(
          "SELECT column_name FROM information_schema.columns WHERE \(filter) ORDER BY ordinal_position",
          [.text(table.name)]
        ).map { $0[0] }
        key = try db.query(
          "SELECT k.column_name FROM information_schema.table_constraints c JOIN information_schema.key_column_usage k "
            + "ON k.constraint_name = c.constraint_name AND k.table_schema = c.table_schema "
            + "WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema() AND c.table_name = ? "
            + "ORDER BY k.ordinal_position", [.text(table.name)]
        ).map { $0[0] }
        identity = try db.query(
          "SELECT column_name FROM information_schema.columns WHERE \(filter) AND is_identity = 'YES'",
          [.text(table.name)]
        ).map { $0[0] }
      }
      #expect(columns == table.columns.map { .text($0) }, "columns of \(table.name)")
      #expect(key == table.primaryKey.map { .text($0) }, "primary key of \(table.name)")
      #expect(identity == (table.identity.map { [.text($0)] } ?? []), "identity of \(table.name)")
    }
  }

  @Test(
    "a statement changes the table list as the engine would",
    arguments: [
      ("ALTER TABLE t ADD COLUMN c INTEGER", ["t": ["a", "b", "c"]], ["a"]),
      ("ALTER TABLE t ADD c TEXT", ["t": ["a", "b", "c"]], ["a"]),
      ("ALTER TABLE t RENAME COLUMN a TO z", ["t": ["z", "b"]], ["z"]),
      ("ALTER TABLE t RENAME a TO z", ["t": ["z", "b"]], ["z"]),
      ("ALTER TABLE t DROP COLUMN b", ["t": ["a"]], ["a"]),
      ("ALTER TABLE t RENAME TO u", ["u": ["a", "b"]], ["a"]),
      ("DROP TABLE t", [:], []),
      ("DROP TABLE IF EXISTS t", [:], []),
      ("CREATE INDEX t_b ON t(b)", ["t": ["a", "b"]], ["a"]),
      ("DELETE FROM t", ["t": ["a", "b"]], ["a"]),
    ] as [(String, [String: [String]], [String])])
  func statement(_ sql: String, after: [String: [String]], key: [String]) throws {
    var tables = [StoreCopy.Table(name: "t", columns: ["a", "b"], primaryKey: ["a"], identity: nil)]
    try StoreCopy.apply(sql, to: &tables)
    #expect(Dictionary(uniqueKeysWithValues: tables.map { ($0.name, $0.columns) }) == after)
    #expect(tables.first?.primaryKey ?? [] == key)
  }

  @Test(
    "a statement the reader does not know is an error, never a table left out",
    arguments: [
      "CREATE VIEW v AS SELECT 1", "ALTER TABLE nothere ADD COLUMN c INTEGER",
      "CREATE TABLE \"Quoted\" (a TEXT)",
      "ALTER TABLE t RENAME COLUMN q TO r", "CREATE TEMP TABLE x (a TEXT)",
    ])
  func unknownStatement(_ sql: String) {
    var tables = [StoreCopy.Table(name: "t", columns: ["a", "b"], primaryKey: ["a"], identity: nil)]
    #expect(throws: StoreError.self) { try StoreCopy.apply(sql, to: &tables) }
  }

  @Test("statements are split at semicolons outside quotes, comments dropped")
  func statements() {
    #expect(
      StoreCopy.statements(
        of: "CREATE TABLE a (x TEXT CHECK (x IN ('a;b', 'c')));  -- one; two\n\nDELETE FROM a;")
        == ["CREATE TABLE a (x TEXT CHECK (x IN ('a;b', 'c')))", "DELETE FROM a"])
  }

  @Test(
    "the canonical encoding of a row: a tag, then 8-byte big-endian integers and lengths",
    arguments: [
      ([.null], [0]),
      ([.integer(1)], [1, 0, 0, 0, 0, 0, 0, 0, 1]),
      ([.integer(-1)], [1, 255, 255, 255, 255, 255, 255, 255, 255]),
      ([.text("é")], [2, 0, 0, 0, 0, 0, 0, 0, 2, 0xC3, 0xA9]),
      ([.blob([7])], [3, 0, 0, 0, 0, 0, 0, 0, 1, 7]),
      ([.text(""), .blob([])], [2, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]),
    ] as [([DatabaseValue], [UInt8])])
  func encoding(_ row: [DatabaseValue], _ bytes: [UInt8]) {
    #expect(StoreCopy.canonicalEncoding(row) == bytes)
  }

  @Test("rows sort by key with no engine collation: bytes, not locale")
  func order() {
    let rows: [[DatabaseValue]] = [
      [.text("b")], [.text("B")], [.text("é")], [.text("e")], [.null], [.integer(2)],
    ]
    #expect(
      rows.sorted { StoreCopy.precedes($0, $1, keys: [0]) } == [
        [.null], [.integer(2)], [.text("B")], [.text("b")], [.text("e")], [.text("é")],
      ])
  }

  @Test("the checksum does not depend on the order rows were written in")
  func checksumIgnoresInsertOrder() throws {
    let table = StoreCopy.Table(name: "t", columns: ["k", "v"], primaryKey: ["k"], identity: nil)
    var summaries: [StoreCopy.Summary] = []
    for order in [[1, 2, 3], [3, 1, 2]] {
      let (db, finish) = try Engine.sqlite.database()
      defer { finish() }
      try db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
      for k in order {
        try db.query("INSERT INTO t (k, v) VALUES (?, ?)", [.integer(Int64(k)), .text("v\(k)")])
      }
      summaries.append(try StoreCopy.summary(of: table, in: db))
    }
    #expect(summaries[0] == summaries[1] && summaries[0].rows == 3)
    #expect(
      summaries[0].line == "t 3 \(summaries[0].checksumPrefix)" && summaries[0].checksumPrefix.count == 16)
  }

  @Test(
    "a copy holds every row of every table; the same token signs in, the lockout holds, and ids go on",
    arguments: Engine.available, Engine.available)
  func copy(from: Engine, to: Engine) throws {
    let (source, finishSource) = try from.database()
    defer { finishSource() }
    let (target, finishTarget) = try to.database()
    defer { finishTarget() }
    let (token, locked) = try Self.seed(source)
    let summaries = try StoreCopy.copy(from: source, to: target, sourceName: "source", targetName: "target")
    #expect(summaries.map(\.table) == (try StoreCopy.tables()).map(\.name))
    #expect(summaries.allSatisfy { $0.rows > 0 }, "the seed reaches every table")
    for table in try StoreCopy.tables() {
      #expect(try StoreCopy.summary(of: table, in: target) == StoreCopy.summary(of: table, in: source))
    }
    #expect(try target.schemaVersion() == Migrations.latest)
    let (store, _) = try makeStore(on: target)
    #expect(
      try store.sessionView(token: token, lifetimes: SessionLifetimes())?.account.email == "ada@example.test")
    #expect(try store.isLocked(email: locked), "the server keys came along, so the failure key matches")
    let before = try store.auditEvents().count
    _ = try store.createSchool(name: "Riverside Music Academy", slug: "riverside", actor: "t")
    #expect(try store.auditEvents().count == before + 1, "a new audit row after the copied ones")
    let seqs = try target.query("SELECT seq FROM audit_events ORDER BY seq").map { "\($0[0])" }
    #expect(Set(seqs).count == before + 1)
  }

  @Test("a target holding any row is refused, and left as it was", arguments: Engine.available)
  func nonEmptyTarget(engine: Engine) throws {
    let (source, finishSource) = try Engine.sqlite.database()
    defer { finishSource() }
    _ = try Self.seed(source)
    let (target, finishTarget) = try engine.database()
    defer { finishTarget() }
    // A store that was only ever opened already holds its server keys.
    _ = try makeStore(on: target)
    let before = try StoreCopy.tables().map { table throws in try StoreCopy.summary(of: table, in: target) }
    #expect {
      try StoreCopy.copy(from: source, to: target, sourceName: "source", targetName: "target")
    } throws: { error in
      "\(error)".contains("the target target is not empty (server_keys has 2 rows)")
    }
    #expect(
      try StoreCopy.tables().map { table throws in try StoreCopy.summary(of: table, in: target) } == before)
  }

  @Test("a target at an older version holding rows is refused before it is migrated")
  func olderNonEmptyTarget() throws {
    let (source, finishSource) = try Engine.sqlite.database()
    defer { finishSource() }
    _ = try Self.seed(source)
    let (target, finishTarget) = try Engine.sqlite.database()
    defer { finishTarget() }
    try Migrations.apply(to: target, upTo: 2)
    try target.query("INSERT INTO audit_events (at, action) VALUES (1, 'x')")
    #expect(throws: StoreError.self) {
      try StoreCopy.copy(from: source, to: target, sourceName: "source", targetName: "target")
    }
    #expect(try target.schemaVersion() == 2)
  }

  @Test("a source at another schema version is refused with what to run", arguments: [0, 5])
  func sourceVersion(version: Int) throws {
    let (source, finishSource) = try Engine.sqlite.database()
    defer { finishSource() }
    try Migrations.apply(to: source, upTo: version)
    let (target, finishTarget) = try Engine.sqlite.database()
    defer { finishTarget() }
    #expect {
      try StoreCopy.copy(from: source, to: target, sourceName: "sqlite:old", targetName: "target")
    } throws: { error in
      "\(error)".contains(
        "schema version \(version), not \(Migrations.latest); run band-edge admin --database sqlite:old migrate"
      )
    }
    #expect(try target.schemaVersion() == 0, "nothing written")
  }

  @Test(
    "a value not of its column's declared type, or text not UTF-8, is refused by table, column and key",
    arguments: [
      (
        "UPDATE accounts SET deleted_at = 1.5 WHERE id = ?", "accounts.deleted_at",
        "a real value where the schema declares integer"
      ),
      (
        "UPDATE accounts SET created_at = 'soon' WHERE id = ?", "accounts.created_at",
        "a text value where the schema declares integer"
      ),
      (
        "UPDATE accounts SET display_name = CAST(x'80' AS TEXT) WHERE id = ?", "accounts.display_name",
        "text that is not valid UTF-8"
      ),
      (
        "UPDATE accounts SET display_name = x'41' WHERE id = ?", "accounts.display_name",
        "a blob value where the schema declares text"
      ),
      (
        "UPDATE sessions SET token_digest = 'abc' WHERE account_id = ?", "sessions.token_digest",
        "a text value where the schema declares blob"
      ),
    ])
  func refusedValue(_ sql: String, column: String, problem: String) throws {
    let (source, finishSource) = try Engine.sqlite.database()
    defer { finishSource() }
    _ = try Self.seed(source)
    let ada = try text(
      try #require(try source.query("SELECT id FROM accounts WHERE email = 'ada@example.test'").first)[0])
    let session = try text(try #require(try source.query("SELECT id FROM sessions").first)[0])
    try source.query(sql, [.text(ada)])
    let (target, finishTarget) = try Engine.sqlite.database()
    defer { finishTarget() }
    let key = column.hasPrefix("sessions.") ? "id '\(session)'" : "id '\(ada)'"
    #expect {
      try StoreCopy.copy(from: source, to: target, sourceName: "source", targetName: "target")
    } throws: { error in
      "\(error)" == "copy-store refuses \(column) in the row with \(key): it holds \(problem); "
        + "correct the source and copy again (nothing was written)"
    }
    for table in try StoreCopy.tables() {
      #expect(try StoreCopy.summary(of: table, in: target).rows == 0, "\(table.name) left empty")
    }
  }

  @Test("a key that is itself at fault is named by the row's place in the read, not its value")
  func refusedKey() throws {
    let (db, finish) = try Engine.sqlite.database()
    defer { finish() }
    try db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)")
    try db.query("INSERT INTO t (k, v) VALUES ('fine', 1), (CAST(x'ff' AS TEXT), 2)")
    var tables: [StoreCopy.Table] = []
    try StoreCopy.apply("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)", to: &tables)
    let table = try #require(tables.first)
    #expect {
      try StoreCopy.summary(of: table, in: db)
    } throws: { error in
      "\(error)".hasPrefix("copy-store refuses t.k in row 2 as read: it holds text that is not valid UTF-8")
    }
  }

  @Test("a copy the target changes as it is written is caught, and rolled back", arguments: Engine.available)
  func tamperedCopy(engine: Engine) throws {
    let (source, finishSource) = try Engine.sqlite.database()
    defer { finishSource() }
    _ = try Self.seed(source)
    let (target, finishTarget) = try engine.database()
    defer { finishTarget() }
    try Migrations.apply(to: target)
    switch engine {
    case .sqlite:
      try target.execute(
        "CREATE TRIGGER tamper AFTER INSERT ON audit_events BEGIN "
          + "UPDATE audit_events SET detail = 'changed' WHERE seq = NEW.seq; END")
    case .postgres:
      try target.execute(
        """
        CREATE FUNCTION tamper() RETURNS trigger AS $$ BEGIN NEW.detail := 'changed'; RETURN NEW; END $$
        LANGUAGE plpgsql;
        CREATE TRIGGER tamper BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION tamper();
        """)
    }
    #expect {
      try StoreCopy.copy(from: source, to: target, sourceName: "source", targetName: "target")
    } throws: { error in
      "\(error)".contains("does not match the source in audit_events (source ")
        && "\(error)".hasSuffix("nothing was written") && !"\(error)".contains("accounts")
    }
    for table in try StoreCopy.tables() {
      #expect(try StoreCopy.summary(of: table, in: target).rows == 0, "\(table.name) rolled back")
    }
  }
}
