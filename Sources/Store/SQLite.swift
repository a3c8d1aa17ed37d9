import CSQLite

#if canImport(Glibc)
  import Glibc
#endif

/// The embedded engine: one SQLite connection with cached prepared statements. Used by one thread
/// at a time (each pool worker opens its own), so it is not Sendable.
public final class SQLiteDatabase: Database {
  private var handle: OpaquePointer?
  private var statements: [String: OpaquePointer] = [:]

  /// Opens (creating if needed) `path`: WAL, a busy timeout, foreign keys on.
  public init(path: String) throws(StoreError) {
    let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
    guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK else {
      let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
      sqlite3_close(handle)
      throw StoreError.failed("cannot open database \(path): \(message)")
    }
    sqlite3_busy_timeout(handle, 5000)
    // Switching a new file to WAL needs a moment alone with it, and SQLite answers BUSY at once
    // (without its busy handler) when another process is doing the same: retry for up to 5 s.
    var attempts = 0
    while true {
      do {
        try execute("PRAGMA journal_mode = WAL")
        break
      } catch {
        attempts += 1
        guard attempts < 500, sqlite3_errcode(handle) == SQLITE_BUSY else { throw error }
        usleep(10_000)
      }
    }
    try execute("PRAGMA synchronous = NORMAL")
    try execute("PRAGMA foreign_keys = ON")
  }

  deinit {
    for statement in statements.values { sqlite3_finalize(statement) }
    sqlite3_close(handle)
  }

  /// Runs SQL that returns no rows (several statements allowed).
  public func execute(_ sql: String) throws(StoreError) {
    var error: UnsafeMutablePointer<CChar>? = nil
    guard sqlite3_exec(handle, sql, nil, nil, &error) == SQLITE_OK else {
      let message = error.map { String(cString: $0) } ?? "unknown error"
      sqlite3_free(error)
      throw StoreError.failed("SQL failed: \(message)")
    }
  }

  /// The engine-neutral value (kept under its old name for the SQLite-only tools).
  public typealias Value = DatabaseValue

  /// Runs one statement with `parameters`, returning every row (columns as values).
  @discardableResult
  public func query(_ sql: String, _ parameters: [Value]) throws(StoreError) -> [[Value]] {
    let statement = try prepared(sql)
    defer {
      sqlite3_reset(statement)
      sqlite3_clear_bindings(statement)
    }
    for (i, value) in parameters.enumerated() {
      let index = Int32(i + 1)
      let status: Int32 =
        switch value {
        case .null: sqlite3_bind_null(statement, index)
        case .integer(let n): sqlite3_bind_int64(statement, index, n)
        // With its byte length, so that text holding a NUL is bound whole, not cut at the NUL.
        case .text(var s):
          s.withUTF8 {
            sqlite3_bind_text(
              statement, index, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self),
              Int32($0.count), Self.transient)
          }
        case .blob(let b):
          b.withUnsafeBytes {
            sqlite3_bind_blob(statement, index, $0.baseAddress, Int32(b.count), Self.transient)
          }
        }
      guard status == SQLITE_OK else { throw lastError("bind") }
    }
    var rows: [[Value]] = []
    while true {
      let step = sqlite3_step(statement)
      if step == SQLITE_DONE { return rows }
      guard step == SQLITE_ROW else { throw lastError("step") }
      var row: [Value] = []
      for column in 0..<sqlite3_column_count(statement) {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
        case SQLITE_TEXT:
          // Read with its byte length too: a NUL inside stays inside.
          let count = Int(sqlite3_column_bytes(statement, column))
          let text = UnsafeRawBufferPointer(start: sqlite3_column_text(statement, column), count: count)
          row.append(.text(String(decoding: text, as: UTF8.self)))
        case SQLITE_BLOB:
          let count = Int(sqlite3_column_bytes(statement, column))
          let bytes = sqlite3_column_blob(statement, column)
          row.append(.blob(bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []))
        default: row.append(.null)
        }
      }
      rows.append(row)
    }
  }

  /// Runs `body` in one transaction (BEGIN IMMEDIATE): all of it commits, or none of it. Inside
  /// another transaction it simply runs as part of that one.
  public func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
    if sqlite3_get_autocommit(handle) == 0 { return try body() }
    try execute("BEGIN IMMEDIATE")
    do {
      let result = try body()
      try execute("COMMIT")
      return result
    } catch {
      try? execute("ROLLBACK")
      throw error
    }
  }

  /// Whether SQLite opened the main database read-only (it falls back to that, silently, when the
  /// file or its directory cannot be written).
  public var isReadOnly: Bool { sqlite3_db_readonly(handle, "main") == 1 }

  /// Rows changed by the last statement.
  public var changes: Int { Int(sqlite3_changes(handle)) }

  public var dialect: SQLDialect { .sqlite }

  /// Nothing: BEGIN IMMEDIATE already lets one writer in at a time.
  /// SQLite has one writer at a time per file: `BEGIN IMMEDIATE` takes the write lock first, so
  /// every write transaction is already exclusive.
  public func exclusiveTransaction<T>(_ lock: ExclusiveLock, _ body: () throws(StoreError) -> T)
    throws(StoreError) -> T
  { try transaction(body) }

  /// Nothing to send (the loops' watchers read the WAL index, which every commit changes); the
  /// counter is kept for operators and tests (one writer at a time: no conflicts).
  public func announceChange() throws(StoreError) {
    try query(
      "INSERT INTO change_counter (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = change_counter.n + 1"
    )
  }

  public func changeCount() throws(StoreError) -> Int {
    guard case .integer(let n)? = try query("SELECT n FROM change_counter WHERE id = 1").first?.first else {
      return 0
    }
    return Int(n)
  }

  /// `PRAGMA user_version`.
  public func schemaVersion() throws(StoreError) -> Int {
    guard case .integer(let n)? = try query("PRAGMA user_version").first?.first else { return 0 }
    return Int(n)
  }

  public func recordSchemaVersion(_ version: Int) throws(StoreError) {
    try execute("PRAGMA user_version = \(version)")
  }

  /// `PRAGMA quick_check` passes, SQLite did not fall back to read-only, and a write commits (a
  /// read-only file, directory or mount, or a full disk, fails here rather than at the first
  /// sign-in). The write changes no answer: the schema version, rewritten.
  public func checkServable(name: String) throws(StoreError) {
    let report = try query("PRAGMA quick_check").compactMap { row -> String? in
      if case .text(let line) = row.first { line } else { nil }
    }
    guard report == ["ok"] else {
      throw StoreError.failed(
        "the database \(name) is damaged (quick_check: \(report.prefix(3).joined(separator: "; ")))")
    }
    guard !isReadOnly else {
      throw StoreError.failed(
        "the database \(name) cannot be written (a read-only file, directory or file system)")
    }
    do {
      try transaction { () throws(StoreError) in try recordSchemaVersion(try schemaVersion()) }
    } catch {
      throw StoreError.failed("the database \(name) cannot be written: \(error)")
    }
  }

  private func prepared(_ sql: String) throws(StoreError) -> OpaquePointer {
    if let statement = statements[sql] { return statement }
    var statement: OpaquePointer? = nil
    guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
      throw lastError("prepare")
    }
    statements[sql] = statement
    return statement
  }

  private func lastError(_ what: String) -> StoreError {
    StoreError.failed("SQL \(what) failed: \(String(cString: sqlite3_errmsg(handle)))")
  }

  /// SQLITE_TRANSIENT: SQLite copies bound text and blobs before the call returns.
  private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}
