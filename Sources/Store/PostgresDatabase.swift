#if canImport(Glibc)
  import Glibc
#endif

/// The fleet engine: the `Database` seam over one PostgreSQL connection (libpq). Used by one thread
/// at a time, like the SQLite engine.
///
/// - Placeholders: the shared SQL's `?` become `$1...$n` (outside quoted text), once per statement.
/// - Write transactions are SERIALIZABLE and retried from the start on a serialization failure or
///   a deadlock (SQLSTATE 40001, 40P01), so a rule written once — read a failure count, then write
///   it — holds when several instances run it at the same moment, as SQLite's single writer makes
///   it hold for one.
/// - The schema version lives in `band_edge_schema`; migrations and fleet-wide jobs run in READ
///   COMMITTED transactions that first take a transaction-level advisory lock (it survives
///   transaction pooling and is released by COMMIT or ROLLBACK), so every statement after the lock
///   sees what the previous holder committed — a SERIALIZABLE snapshot would be taken before the
///   wait and miss it.
public final class PostgresDatabase: Database {
  private let connection: PostgresConnection
  private let name: String
  private var depth = 0
  private var placeholders: [String: String] = [:]
  /// Attempts of one transaction before a serialization failure is passed on.
  static let attempts = 8
  /// The channel session changes are announced on (`NOTIFY`, delivered at commit).
  public static let changeChannel = "band_edge_changes"

  /// Connects to the libpq URI `uri` (the password may come from the URI, PGPASSWORD or a
  /// PGPASSFILE); `schedule` spaces out reconnections with the process's other connections.
  public init(
    uri: String, settings: DatabaseSettings = DatabaseSettings(), schedule: ReconnectSchedule? = nil
  ) throws(StoreError) {
    connection = try PostgresConnection(uri: uri, settings: settings, schedule: schedule)
    name = PostgresConnection.maskedURI(uri)
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
      connection.inTransaction = true
      depth += 1
      do {
        let result = try body()
        try commit()
        depth -= 1
        return result
      } catch {
        depth -= 1
        let state = connection.lastSQLState
        announced = false
        connection.inTransaction = false
        _ = try? connection.execute("ROLLBACK")
        guard attempt < Self.attempts, state == "40001" || state == "40P01" else { throw error }
        // Those that collided start again at spread-out moments, so they do not collide again.
        var pause = timespec(tv_sec: 0, tv_nsec: Int.random(in: 0...(1 << min(attempt, 6))) * 500_000)
        nanosleep(&pause, nil)
      }
    }
  }

  /// The version in `band_edge_schema`; 0 while that table does not exist (a new database: it is
  /// made by the first migration's `recordSchemaVersion`, under the migration lock, so instances
  /// starting together never race to create it).
  public func schemaVersion() throws(StoreError) -> Int {
    // pg_tables is read with the statement's snapshot (after the migration lock, fresh under READ
    // COMMITTED); to_regclass would use the catalog cache, which can miss a table just committed.
    guard
      case .integer(1)? = try connection.query(
        "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'band_edge_schema'"
      ).first?.first,
      case .integer(let n)? = try connection.query("SELECT max(version) FROM band_edge_schema").first?.first
    else { return 0 }
    return Int(n)
  }

  public func recordSchemaVersion(_ version: Int) throws(StoreError) {
    try connection.execute(
      "CREATE TABLE IF NOT EXISTS band_edge_schema (version BIGINT NOT NULL); DELETE FROM band_edge_schema")
    try connection.query("INSERT INTO band_edge_schema (version) VALUES ($1)", [.integer(Int64(version))])
  }

  public func exclusiveTransaction<T>(_ lock: ExclusiveLock, _ body: () throws(StoreError) -> T)
    throws(StoreError) -> T
  {
    if depth > 0 { return try body() }
    try connection.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
    connection.inTransaction = true
    depth += 1
    defer { depth -= 1 }
    do {
      // A migration step or a retention run may take longer than a request's statement timeout,
      // and waiting for the lock counts against it too.
      if lock == .migration || lock == .jobs { try connection.execute("SET LOCAL statement_timeout = 0") }
      try connection.query("SELECT pg_advisory_xact_lock($1)", [.integer(lock.key)])
      let result = try body()
      try commit()
      return result
    } catch {
      announced = false
      connection.inTransaction = false
      _ = try? connection.execute("ROLLBACK")
      throw error
    }
  }

  /// The sequence advances (never a conflict between concurrent writers, unlike a counter row)
  /// and the listeners are notified at the commit.
  public func announceChange() throws(StoreError) {
    try connection.execute("SELECT nextval('band_edge_change_seq'); NOTIFY \(Self.changeChannel)")
    if depth == 0 { afterAnnouncedCommit?(self) } else { announced = true }
  }

  /// The payload that makes a notification on the change channel a sync marker: "sync <n>".
  package static let markerPrefix = "sync "

  /// Listeners that said they are listening within this many seconds are waited for.
  package static let listenerFreshness = 2

  /// After a change has committed: sends a sync marker on the change channel (in a transaction of
  /// its own, so after the change's) and waits, up to `limit`, until every listener that said it
  /// is listening within `listenerFreshness` s and whose connection's server process still runs
  /// (an instance killed is not waited for), but `except`, has heard it (`acknowledge`).
  /// PostgreSQL delivers each listener its notifications in commit order, so each has then heard
  /// the change too, and emptied its cache before saying so. Returns how many had not heard it
  /// when the wait ended (0 at once when nobody listens).
  public func awaitListeners(except: String?, within limit: Duration) throws(StoreError) -> Int {
    let sent = try connection.query(
      """
      SELECT m, pg_notify('\(Self.changeChannel)', '\(Self.markerPrefix)' || m)
      FROM (SELECT nextval('band_edge_sync_seq') AS m) AS s
      """, [])
    guard case .integer(let marker)? = sent.first?.first else { return 0 }
    let deadline = ContinuousClock.now + limit
    while true {
      let row = try connection.query(
        """
        SELECT count(*) FROM change_acks a
        WHERE a.seen < $1 AND a.listener <> $2 AND a.at >= extract(epoch FROM clock_timestamp())::bigint - $3
          AND EXISTS (SELECT 1 FROM pg_stat_activity p WHERE p.pid = a.pid)
        """, [.integer(marker), .text(except ?? ""), .integer(Int64(Self.listenerFreshness))])
      guard case .integer(let waiting)? = row.first?.first, waiting > 0 else { return 0 }
      guard ContinuousClock.now < deadline else { return Int(waiting) }
      var pause = timespec(tv_sec: 0, tv_nsec: 1_000_000)
      nanosleep(&pause, nil)
    }
  }

  /// Says, for the listener `id` on `connection`, that it has heard every notification up to sync
  /// marker `seen` and acted on them, and that it is listening now.
  package static func acknowledge(_ connection: PostgresConnection, listener id: String, seen: Int64)
    throws(StoreError)
  {
    try connection.query(
      """
      INSERT INTO change_acks (listener, seen, at, pid)
      VALUES ($1, $2, extract(epoch FROM clock_timestamp())::bigint, pg_backend_pid())
      ON CONFLICT (listener) DO UPDATE SET seen = excluded.seen, at = excluded.at, pid = excluded.pid
      """, [.text(id), .integer(seen)])
  }

  /// The highest sync marker drawn so far (0 before the first).
  package static func lastMarker(_ connection: PostgresConnection) throws(StoreError) -> Int64 {
    let row = try connection.query("SELECT last_value, is_called FROM band_edge_sync_seq", []).first
    guard case .integer(let n)? = row?.first, case .text("t")? = row?.last else { return 0 }
    return n
  }

  /// Forgets listeners silent for a day (instances that ended without saying so).
  package static func forgetSilentListeners(_ connection: PostgresConnection) throws(StoreError) {
    try connection.query(
      "DELETE FROM change_acks WHERE at < extract(epoch FROM clock_timestamp())::bigint - 86400", [])
  }

  /// Takes listener `id` off the table (it stops listening).
  package static func forget(_ connection: PostgresConnection, listener id: String) throws(StoreError) {
    try connection.query("DELETE FROM change_acks WHERE listener = $1", [.text(id)])
  }

  public func changeCount() throws(StoreError) -> Int {
    try Self.changeCount(connection)
  }

  /// The change sequence's value on `connection` (0 before the first change).
  package static func changeCount(_ connection: PostgresConnection) throws(StoreError) -> Int {
    let row = try connection.query("SELECT last_value, is_called FROM band_edge_change_seq").first
    guard case .integer(let n)? = row?.first, case .text("t")? = row?.last else { return 0 }
    return Int(n)
  }

  /// Called right after a transaction that announced a change commits, on this thread, with this
  /// database: this process's own cache forgets at once, without waiting for its notification to
  /// come back, and the writer waits for the other listeners (`awaitListeners`).
  public var afterAnnouncedCommit: ((PostgresDatabase) -> Void)? = nil
  private var announced = false

  /// COMMIT, then the announcement hook if the transaction announced a change.
  private func commit() throws(StoreError) {
    do { try connection.execute("COMMIT") } catch {
      connection.inTransaction = false
      announced = false
      throw error
    }
    // Cleared before the hook, whose own statements run outside the transaction.
    connection.inTransaction = false
    if announced {
      announced = false
      afterAnnouncedCommit?(self)
    }
  }

  /// The server is not read-only (a standby, or `default_transaction_read_only`) and a write commits.
  public func checkServable(name: String) throws(StoreError) {
    guard case .text(let readOnly)? = try connection.query("SHOW transaction_read_only").first?.first,
      readOnly == "off"
    else {
      throw StoreError.failed("the database \(self.name) cannot be written (a read-only server or standby)")
    }
    do {
      try exclusiveTransaction(.migration) { () throws(StoreError) in
        try recordSchemaVersion(try schemaVersion())
      }
    } catch {
      throw StoreError.failed("the database \(self.name) cannot be written: \(error)")
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
