import Foundation
import TestSupport
import Testing

@testable import Store

/// A connection to the test server. Tables the tests make are TEMP: they vanish with it.
func testPostgres() throws -> PostgresConnection {
  try PostgresConnection(uri: try #require(testPostgresURI))
}

@Suite(
  "PostgresConnection against a live PostgreSQL",
  .enabled(if: testPostgresURI != nil, "BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)"))
struct PostgresConnectionTests {
  static let values: [DatabaseValue] = [
    .integer(0), .integer(-1), .integer(-9_007_199_254_740_993), .integer(Int64.max), .integer(Int64.min),
    .text(""), .text("it's \"quoted\"; \\ back'slash' $1 ?"), .text("é ü 🎸 Ω"),
    .blob([]), .blob([0]), .blob([0, 0, 1, 0x5C, 0x78, 255, 0]), .blob(Array(0...255)),
    .null,
  ]

  @Test("a value bound to $1 comes back as the same value", arguments: values)
  func selectRoundTrip(_ value: DatabaseValue) throws {
    let db = try testPostgres()
    #expect(try db.query("SELECT $1", [value]) == [[value]])
  }

  @Test("a value stored in a column of its type and read back is the same value", arguments: values)
  func columnRoundTrip(_ value: DatabaseValue) throws {
    let db = try testPostgres()
    try db.execute("CREATE TEMP TABLE kinds (n bigint, i integer, s text, b bytea)")
    let column =
      switch value {
      case .integer(let n) where Int64(Int32.min)...Int64(Int32.max) ~= n: "i"
      case .integer: "n"
      case .text, .null: "s"
      case .blob: "b"
      }
    try db.query("INSERT INTO kinds (\(column)) VALUES ($1)", [value])
    #expect(db.changes == 1)
    #expect(try db.query("SELECT \(column) FROM kinds") == [[value]])
    #expect(
      try db.query("SELECT count(*) FROM kinds WHERE \(column) IS NOT DISTINCT FROM $1", [value]) == [
        [.integer(1)]
      ])
  }

  @Test("columns map by type: int2/int4/int8 to integer, bytea to blob, NULL to null, the rest to text")
  func columnTypes() throws {
    let db = try testPostgres()
    let rows = try db.query(
      "SELECT 1::int2, -2::int4, 3::int8, 'x'::text, 'y'::varchar, true, 1.5::numeric, NULL::int4, NULL::bytea, '\\x00ff'::bytea"
    )
    #expect(
      rows == [
        [
          .integer(1), .integer(-2), .integer(3), .text("x"), .text("y"), .text("t"), .text("1.5"), .null,
          .null, .blob([0, 255]),
        ]
      ])
  }

  @Test("text holding a NUL is refused with a StoreError, not cut at the NUL")
  func textWithNUL() throws {
    let db = try testPostgres()
    try db.execute("CREATE TEMP TABLE words (s text)")
    #expect(throws: StoreError.self) {
      try db.query("INSERT INTO words VALUES ($1)", [.text("before\0after")])
    }
    #expect(try db.query("SELECT count(*) FROM words") == [[.integer(0)]], "nothing was stored")
  }

  @Test("execute runs several statements; changes counts the rows of the last command")
  func severalStatementsAndChanges() throws {
    let db = try testPostgres()
    try db.execute(
      """
      CREATE TEMP TABLE counters (name text PRIMARY KEY, n integer NOT NULL);
      INSERT INTO counters VALUES ('a', 1), ('b', 2), ('c', 3);
      UPDATE counters SET n = n + 10 WHERE n >= 2
      """)
    #expect(db.changes == 2)
    try db.query("UPDATE counters SET n = 0 WHERE n > $1", [.integer(12)])
    #expect(db.changes == 1)
    try db.query("UPDATE counters SET n = 0 WHERE name = $1", [.text("nobody")])
    #expect(db.changes == 0)
    #expect(
      try db.query("SELECT name, n FROM counters ORDER BY name")
        == [[.text("a"), .integer(1)], [.text("b"), .integer(12)], [.text("c"), .integer(0)]])
  }

  @Test("a syntax error is a StoreError, and the connection still works afterwards")
  func syntaxError() throws {
    let db = try testPostgres()
    let error = #expect(throws: StoreError.self) { try db.query("SELEC 1", []) }
    #expect(error?.description.contains("syntax error") == true)
    #expect(throws: StoreError.self) {
      try db.execute("CREATE TEMP TABLE t (n int); SELECT * FROM no_such_table")
    }
    #expect(try db.query("SELECT $1::int4 + 1", [.integer(41)]) == [[.integer(42)]])
  }

  @Test("an error never quotes a row's values (PostgreSQL's DETAIL), only its SQLSTATE and message")
  func noValuesInErrors() throws {
    let db = try testPostgres()
    try db.execute("CREATE TEMP TABLE people (email text UNIQUE)")
    try db.query("INSERT INTO people (email) VALUES ($1)", [.text("tom.private@example.test")])
    let error = #expect(throws: StoreError.self) {
      try db.query("INSERT INTO people (email) VALUES ($1)", [.text("tom.private@example.test")])
    }
    #expect(error?.description.contains("23505") == true, "\(String(describing: error))")
    #expect(error?.description.contains("tom.private") == false)
  }
}

@Suite("PostgresConnection without a server")
struct PostgresConnectionOfflineTests {
  @Test(
    "a URI that cannot connect is a StoreError that never shows the password",
    arguments: [
      "postgresql://band_edge:hunter2@/band_edge_test?host=/nonexistent/band-edge-no-socket",
      "postgresql:///band_edge_test?host=/nonexistent/band-edge-no-socket&user=u&password=hunter2",
      "host=/nonexistent/band-edge-no-socket dbname=x password=hunter2",
      // libpq quotes what it cannot parse: the bad percent-escape is inside the password.
      "postgresql://band_edge:hun%zzter2@/db?host=/nonexistent/band-edge-no-socket",
      "postgresql://band_edge:hunter2@/db?host=/nonexistent/band-edge-no-socket&bogus=1",
    ])
  func cannotConnect(_ uri: String) throws {
    let error = #expect(throws: StoreError.self) { try PostgresConnection(uri: uri) }
    let message = try #require(error).description
    #expect(message.hasPrefix("cannot connect to PostgreSQL"))
    #expect(
      !message.contains("hunter2"),
      "the password is in: \(message.replacingOccurrences(of: "hunter2", with: "<password>"))")
    #expect(!message.contains("hun%zzter2") && !message.contains("zzter"))
  }

  @Test(
    "maskedURI replaces every password with ***",
    arguments: [
      ("postgresql://user:secret@host/db", "postgresql://user:***@host/db"),
      (
        "postgres://user:secret@host:5432/db?sslmode=require",
        "postgres://user:***@host:5432/db?sslmode=require"
      ),
      ("POSTGRESQL://user:s%40cret@host/db", "POSTGRESQL://user:***@host/db"),
      ("postgresql://user:@host/db", "postgresql://user:***@host/db"),
      ("postgresql://user:a:b@[::1]:5432/db", "postgresql://user:***@[::1]:5432/db"),
      ("postgresql://user@host/db", "postgresql://user@host/db"),
      ("postgresql://host/db?user=a@b", "postgresql://host/db?user=a@b"),
      ("postgresql:///db?host=/run/pg&user=u", "postgresql:///db?host=/run/pg&user=u"),
      ("postgresql:///db?password=secret", "postgresql:///db?password=***"),
      (
        "postgresql:///db?host=/run/pg&password=secret&user=u",
        "postgresql:///db?host=/run/pg&password=***&user=u"
      ),
      (
        "postgresql://u:one@h/db?password=two&Password=three",
        "postgresql://u:***@h/db?password=***&Password=***"
      ),
      ("postgresql://u:pass/word@h/db", "postgresql://u:***@h/db"),
      ("postgresql://u:pa?ss@h/db", "postgresql://u:***@h/db"),
      ("postgresql://u:p@ss@h/db?user=a@b", "postgresql://u:***@h/db?user=a@b"),
      ("host=/run/pg password=secret dbname=db", "host=/run/pg password=*** dbname=db"),
      ("host=h password = 'se cret\\' x' user=u", "host=h password = *** user=u"),
      ("host=h mypassword=kept", "host=h mypassword=kept"),
      ("", ""),
    ])
  func masked(_ uri: String, _ expected: String) {
    #expect(PostgresConnection.maskedURI(uri) == expected)
  }
}
