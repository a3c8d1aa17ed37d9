/// The fleet engine: the `Database` seam over one PostgreSQL connection (libpq). Used by one thread
/// at a time, like the SQLite engine.
///
/// - Placeholders: the shared SQL's `?` become `$1...$n` (outside quoted text), once per statement.
/// - Write transactions are SERIALIZABLE and retried from the start on a serialization failure or
///   a deadlock (SQLSTATE 40001, 40P01), so a rule written once — read a failure count, then write
///   it — holds when several instances run it at the same moment, as SQLite's single writer makes
///   it hold for one.
/// - The schema version lives in `band_edge_schema`; migrations take a transaction-level advisory
///   lock (it survives transaction pooling, and is released by COMMIT or ROLLBACK).
public final class PostgresDatabase: Database {
  private let connection: PostgresConnection
  private let name: String
  private var depth = 0
  private var placeholders: [String: String] = [:]
  /// Attempts of one transaction before a serialization failure is passed on.
  static let attempts = 8
  /// The advisory lock key migrations take ("bandedge" in ASCII, as a 64-bit number).
  static let migrationLock: Int64 = 0x6261_6e64_6564_6765

  /// Connects to the libpq URI `uri` (the password may come from the URI, PGPASSWORD or a
  /// PGPASSFILE) and makes the schema-version table if the database has none.
  public init(uri: String) throws(StoreError) {
    connection = try PostgresConnection(uri: uri)
    name = PostgresConnection.maskedURI(uri)
    try connection.execute("CREATE TABLE IF NOT EXISTS band_edge_schema (version BIGINT NOT NULL)")
  }

  public var dialect: SQLDialect { .postgres }

  @discardableResult
  public func query(_ sql: String, _ parameters: [DatabaseValue]) throws(StoreError) -> [[DatabaseValue]] {
    try connection.query(numbered(sql), parameters)
  }

  public func execute(_ sql: String) throws(StoreError) { try connection.execute(sql) }

  public var changes: Int { connection.changes }

  public func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
    if depth > 0 { return try body() }
    var attempt = 0
    while true {
      attempt += 1
      try connection.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
      depth += 1
      do {
        let result = try body()
        try connection.execute("COMMIT")
        depth -= 1
        return result
      } catch {
        depth -= 1
        let state = connection.lastSQLState
        _ = try? connection.execute("ROLLBACK")
        guard attempt < Self.attempts, state == "40001" || state == "40P01" else { throw error }
      }
    }
  }

  public func schemaVersion() throws(StoreError) -> Int {
    guard
      case .integer(let n)? = try connection.query("SELECT max(version) FROM band_edge_schema").first?.first
    else { return 0 }
    return Int(n)
  }

  public func recordSchemaVersion(_ version: Int) throws(StoreError) {
    try connection.execute("DELETE FROM band_edge_schema")
    try connection.query("INSERT INTO band_edge_schema (version) VALUES ($1)", [.integer(Int64(version))])
  }

  public func lockForMigration() throws(StoreError) {
    try connection.query("SELECT pg_advisory_xact_lock($1)", [.integer(Self.migrationLock)])
  }

  /// The server is not read-only (a standby, or `default_transaction_read_only`) and a write commits.
  public func checkServable(name: String) throws(StoreError) {
    guard case .text(let readOnly)? = try connection.query("SHOW transaction_read_only").first?.first,
      readOnly == "off"
    else {
      throw StoreError("the database \(self.name) cannot be written (a read-only server or standby)")
    }
    do {
      try transaction { () throws(StoreError) in try recordSchemaVersion(try schemaVersion()) }
    } catch {
      throw StoreError("the database \(self.name) cannot be written: \(error)")
    }
  }

  /// `sql` with its `?` placeholders numbered `$1...$n` (quoted text and identifiers left alone),
  /// worked out once per statement text.
  func numbered(_ sql: String) -> String {
    if let done = placeholders[sql] { return done }
    var out = ""
    var n = 0
    var quote: Character? = nil
    for c in sql {
      if let q = quote {
        if c == q { quote = nil }
        out.append(c)
      } else if c == "'" || c == "\"" {
        quote = c
        out.append(c)
      } else if c == "?" {
        n += 1
        out += "$\(n)"
      } else {
        out.append(c)
      }
    }
    placeholders[sql] = out
    return out
  }
}
