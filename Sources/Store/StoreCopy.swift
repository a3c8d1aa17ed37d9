import COpenSSL

/// Moving a deployment from one store to another (`band-edge admin copy-store`): every
/// table the migrations make, through the `Database` seam only, so any engine to any engine.
///
/// - The table list is read from `Migrations.steps` (`tables(upTo:)`), never kept by hand.
/// - The source must be at this build's schema version; the target is migrated to it first and
///   must hold no row in any table.
/// - Rows are copied in one transaction on the target (the source is read in one transaction too,
///   so the copy is one consistent moment of it), explicit ids kept; identity columns' sequences
///   are moved past the copied maximum.
/// - Every value read must have its column's declared type (no REAL in an INTEGER column, no
///   BLOB in a TEXT column, ...) and text must be valid UTF-8: anything else is refused, naming the
///   table, the column and the row's key, never the value, with nothing written.
/// - Before that transaction commits, each table is read back from the target and compared with
///   what was read from the source, by row count and a SHA-256 over a canonical, typed encoding of
///   the rows in primary-key order; any difference rolls the whole copy back.
public enum StoreCopy {
  /// A table as the migrations leave it: its columns in order, its primary key, and the column
  /// the engine numbers (`INTEGER PRIMARY KEY AUTOINCREMENT`), if any.
  public struct Table: Sendable, Equatable {
    /// The table's name.
    public var name: String
    /// Every column, in the order the migrations made them.
    public var columns: [String]
    /// The primary key's columns, in key order.
    public var primaryKey: [String]
    /// The column the engine numbers by itself (a sequence on PostgreSQL), if any.
    public var identity: String?
    /// Each column's declared type (a column the migrations gave no known type is absent).
    public var types: [String: ColumnType] = [:]
  }

  /// A column's declared type, as the migrations write it (the value a row may hold, or null).
  public enum ColumnType: String, Sendable, Equatable {
    case integer, text, blob
  }

  /// One table's row count and checksum, as read from one store.
  public struct Summary: Sendable, Equatable {
    /// The table's name.
    public let table: String
    /// How many rows it holds.
    public let rows: Int
    /// SHA-256 over the canonical encoding of its rows (`canonicalEncoding`) in primary-key order.
    public let checksum: [UInt8]

    /// The first 16 hex digits of the checksum.
    public var checksumPrefix: String {
      checksum.prefix(8).map { byte in
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
      }.joined()
    }

    /// `table rows checksum-prefix`: what the command prints (never a row's contents).
    public var line: String { "\(table) \(rows) \(checksumPrefix)" }
  }

  /// Rows bound per INSERT statement stay below this many parameters (SQLite's old limit is 999).
  static let parametersPerStatement = 900

  /// Copies every table of `source` into the empty `target` and verifies the copy; `sourceName`
  /// and `targetName` name them in errors (masked URIs). Returns each table's summary, identical on
  /// both sides. Throws, with nothing copied, when the source is not at `Migrations.latest`, the
  /// target is newer or holds any row, or the copy read back differs from the source.
  public static func copy(
    from source: any Database, to target: any Database, sourceName: String, targetName: String
  ) throws(StoreError) -> [Summary] {
    let version = try source.schemaVersion()
    guard version <= Migrations.latest else {
      throw StoreError.failed(
        "the source \(sourceName) has schema version \(version), newer than this band-edge knows "
          + "(\(Migrations.latest)); run the copy with a newer band-edge")
    }
    guard version == Migrations.latest else {
      throw StoreError.failed(
        "the source \(sourceName) has schema version \(version), not \(Migrations.latest); run "
          + "band-edge admin --database \(sourceName) migrate on it first")
    }
    let targetVersion = try target.schemaVersion()
    guard targetVersion <= Migrations.latest else {
      throw StoreError.failed(
        "the target \(targetName) has schema version \(targetVersion), newer than this band-edge knows "
          + "(\(Migrations.latest)); copy only into an empty store")
    }
    // Before migrating: a refused target is left exactly as it was.
    try refuseRows(in: target, tables: try tables(upTo: targetVersion), name: targetName)
    try Migrations.apply(to: target)
    let tables = try tables(upTo: Migrations.latest)
    return try source.transaction { () throws(StoreError) -> [Summary] in
      try target.transaction { () throws(StoreError) -> [Summary] in
        try refuseRows(in: target, tables: tables, name: targetName)
        // A copy changes no session anyone has cached: PostgreSQL's change triggers stay quiet.
        if target.dialect == .postgres { try target.execute("SET LOCAL band_edge.copying = 'on'") }
        // What was read from the source, summarised as it was read (never read a second time).
        var originals: [Summary] = []
        for table in tables {
          let read = try rows(of: table, in: source)
          try insert(read, into: table, of: target)
          originals.append(summary(of: table, rows: read))
        }
        try advanceIdentities(tables, in: target)
        var summaries: [Summary] = []
        var differing: [String] = []
        for (table, original) in zip(tables, originals) {
          let copied = try summary(of: table, in: target)
          if copied != original {
            differing.append(
              "\(table.name) (source \(original.rows) rows \(original.checksumPrefix), "
                + "copy \(copied.rows) rows \(copied.checksumPrefix))")
          }
          summaries.append(original)
        }
        guard differing.isEmpty else {
          throw StoreError.failed(
            "the copy in \(targetName) does not match the source in \(differing.joined(separator: ", ")); "
              + "nothing was written")
        }
        return summaries
      }
    }
  }

  /// The row count and checksum of `table` as `database` holds it (refused as `rows(of:in:)` refuses).
  public static func summary(of table: Table, in database: any Database) throws(StoreError) -> Summary {
    summary(of: table, rows: try rows(of: table, in: database))
  }

  /// The row count and checksum of `rows`, read from `table`.
  static func summary(of table: Table, rows: [[DatabaseValue]]) -> Summary {
    let keys = table.primaryKey.compactMap { table.columns.firstIndex(of: $0) }
    let sorted = rows.sorted { a, b in precedes(a, b, keys: keys) }
    var bytes = Array("band-edge copy-store 1\n\(table.name)\n\(table.columns.joined(separator: ","))\n".utf8)
    for row in sorted { bytes += canonicalEncoding(row) }
    return Summary(table: table.name, rows: rows.count, checksum: sha256(bytes))
  }

  /// SHA-256 of `bytes` (OpenSSL's one-shot digest).
  static func sha256(_ bytes: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    bytes.withUnsafeBufferPointer { _ = SHA256($0.baseAddress, $0.count, &out) }
    return out
  }

  /// A row's canonical encoding: per value a tag byte (0 null, 1 integer, 2 text, 3 blob), then an
  /// integer as 8 bytes big-endian two's complement, text (UTF-8) and blobs as an 8-byte big-endian
  /// length and the bytes. The same on every engine, since values arrive typed (`DatabaseValue`).
  static func canonicalEncoding(_ row: [DatabaseValue]) -> [UInt8] {
    func bigEndian(_ n: UInt64) -> [UInt8] {
      (0..<8).reversed().map { UInt8(truncatingIfNeeded: n >> ($0 * 8)) }
    }
    var out: [UInt8] = []
    for value in row {
      switch value {
      case .null: out.append(0)
      case .integer(let n): out += [1] + bigEndian(UInt64(bitPattern: n))
      case .text(let s): out += [2] + bigEndian(UInt64(s.utf8.count)) + Array(s.utf8)
      case .blob(let b): out += [3] + bigEndian(UInt64(b.count)) + b
      }
    }
    return out
  }

  /// Whether row `a` sorts before row `b`: by the key columns, then every column (null, then
  /// integers by value, text by UTF-8 bytes, blobs by bytes), so the order never depends on an
  /// engine's collation.
  static func precedes(_ a: [DatabaseValue], _ b: [DatabaseValue], keys: [Int]) -> Bool {
    for i in keys + Array(a.indices) where i < b.count {
      if let order = compare(a[i], b[i]) { return order }
    }
    return false
  }

  /// True when `a` sorts first, false when `b` does, nil when they are equal.
  private static func compare(_ a: DatabaseValue, _ b: DatabaseValue) -> Bool? {
    func rank(_ v: DatabaseValue) -> Int {
      switch v {
      case .null: 0
      case .integer: 1
      case .text: 2
      case .blob: 3
      }
    }
    switch (a, b) {
    case (.integer(let x), .integer(let y)): return x == y ? nil : x < y
    case (.text(let x), .text(let y)): return x == y ? nil : Array(x.utf8).lexicographicallyPrecedes(y.utf8)
    case (.blob(let x), .blob(let y)): return x == y ? nil : x.lexicographicallyPrecedes(y)
    default: return rank(a) == rank(b) ? nil : rank(a) < rank(b)
    }
  }

  /// Refuses a store holding any row in any of `tables` (their names and counts only).
  private static func refuseRows(in database: any Database, tables: [Table], name: String) throws(StoreError)
  {
    var filled: [String] = []
    for table in tables {
      if case .integer(let n)? = try database.query("SELECT count(*) FROM \(table.name)").first?.first, n > 0
      {
        filled.append("\(table.name) has \(n) row\(n == 1 ? "" : "s")")
      }
    }
    guard filled.isEmpty else {
      throw StoreError.failed(
        "the target \(name) is not empty (\(filled.joined(separator: ", "))); copy-store writes only into "
          + "a store with no rows")
    }
  }

  /// Inserts `rows` into `table`, several rows per statement, every value a parameter.
  private static func insert(_ rows: [[DatabaseValue]], into table: Table, of database: any Database)
    throws(StoreError)
  {
    let perStatement = max(1, parametersPerStatement / max(1, table.columns.count))
    let tuple = "(" + Array(repeating: "?", count: table.columns.count).joined(separator: ", ") + ")"
    var start = 0
    while start < rows.count {
      let batch = rows[start..<min(rows.count, start + perStatement)]
      let sql =
        "INSERT INTO \(table.name) (\(table.columns.joined(separator: ", "))) VALUES "
        + Array(repeating: tuple, count: batch.count).joined(separator: ", ")
      try database.query(sql, batch.flatMap { $0 })
      start += batch.count
    }
  }

  /// Moves each identity column's sequence past the largest copied value, so that the next row the
  /// store adds does not collide. SQLite needs nothing: an explicit rowid above `sqlite_sequence`
  /// raises it as it is inserted.
  private static func advanceIdentities(_ tables: [Table], in database: any Database) throws(StoreError) {
    guard database.dialect == .postgres else { return }
    for table in tables {
      guard let column = table.identity else { continue }
      try database.query(
        "SELECT setval(pg_get_serial_sequence(?, ?), coalesce(max(\(column)), 0) + 1, false) FROM \(table.name)",
        [.text(table.name), .text(column)])
    }
  }
}
