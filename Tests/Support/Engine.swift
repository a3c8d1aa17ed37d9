import Accounts
import Store
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The engines a store-bound test runs on: SQLite always, PostgreSQL too when build/test started
/// one (`BAND_EDGE_TEST_POSTGRES`). Store-bound tests take one as their first argument
/// (`@Test(arguments: Engine.available)`); only tests that inspect SQLite itself stay on `.sqlite`.
package enum Engine: String, CaseIterable, Sendable, CustomStringConvertible {
  case sqlite
  case postgres

  /// The engines this run can reach: PostgreSQL only when build/test started one.
  package static var available: [Engine] { testPostgresURI == nil ? [.sqlite] : allCases }

  /// The engine's name in test results.
  package var description: String { rawValue }

  /// A new, empty database of this engine, and what removes it afterwards.
  package func database() throws -> (any Database, () -> Void) {
    switch self {
    case .sqlite:
      let path = try TestDirectory.make("engine").appendingPathComponent("test.sqlite").path
      return (try SQLiteDatabase(path: path), {})
    case .postgres:
      let base = try testPostgresURI ?? { throw StoreError.failed("BAND_EDGE_TEST_POSTGRES is not set") }()
      let schema = TestSchemas.name()
      let admin = try PostgresConnection(uri: base)
      try admin.execute("CREATE SCHEMA \(schema)")
      let database = try PostgresDatabase(uri: TestSchemas.uri(base, schema))
      return (database, { _ = try? admin.execute("DROP SCHEMA \(schema) CASCADE") })
    }
  }

  /// Where a new, empty store of this engine lives: `band-edge.sqlite` in a new temporary
  /// directory, or a new schema of its own on the test server (dropped when the test process
  /// exits, see `TestSchemas`). Every connection opened on it (`location.open()`) sees the same store.
  package func location() throws -> DatabaseLocation {
    switch self {
    case .sqlite: return .sqlite(directory: try TestDirectory.make("store").path)
    case .postgres:
      let base = try testPostgresURI ?? { throw StoreError.failed("BAND_EDGE_TEST_POSTGRES is not set") }()
      return .postgres(uri: TestSchemas.uri(base, try TestSchemas.make(on: base)))
    }
  }
}

/// The schemas `Engine.location()` made on the test server, all dropped when the test process
/// exits (pass or fail), as `TestDirectory` removes its directories; a run that is killed leaves
/// them in a server build/test removes anyway.
package enum TestSchemas {
  private static let made = Mutex<[String]>([])
  private static let dropAtExit: Void = { atexit { TestSchemas.dropAll() } }()

  /// A new schema name: `t_` and random lowercase letters and digits.
  package static func name() -> String {
    "t_" + Secrets.base64url(Secrets.randomBytes(12)).lowercased().filter { $0.isLetter || $0.isNumber }
  }

  /// `base` with every connection's search path set to `schema`.
  package static func uri(_ base: String, _ schema: String) -> String {
    base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
  }

  /// Creates a new, empty schema on `base` and returns its name.
  package static func make(on base: String) throws -> String {
    _ = dropAtExit
    let schema = name()
    try PostgresConnection(uri: base).execute("CREATE SCHEMA \(schema)")
    made.withLock { $0.append(schema) }
    return schema
  }

  private static func dropAll() {
    let schemas = made.withLock { $0 }
    guard !schemas.isEmpty, let base = testPostgresURI, let admin = try? PostgresConnection(uri: base) else {
      return
    }
    for schema in schemas { _ = try? admin.execute("DROP SCHEMA \(schema) CASCADE") }
  }
}
