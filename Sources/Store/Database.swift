/// Why the store could not do what was asked, in three kinds that callers answer differently. The
/// message is for operators and logs, never for a client.
public enum StoreError: Error, CustomStringConvertible, Sendable {
  /// The database could not be reached or did not answer in time (down, restarting, a statement
  /// timeout): worth retrying in a moment. Clients get a `503` with `Retry-After`; the reconnect
  /// schedule backs off; a worker keeps its connection object.
  case outage(String)
  /// A rule of the data refused the change: no such account or school, a duplicate, a row another
  /// request used meanwhile. Nothing was written. Admin commands print the message; a request
  /// that meets one answers `409` (the state changed under it).
  case refused(String)
  /// Anything else: a statement that failed, damaged data, a bug. Clients get a generic `500`.
  case failed(String)

  public var description: String {
    switch self {
    case .outage(let message), .refused(let message), .failed(let message): message
    }
  }

  /// Whether this is an outage, worth retrying in a moment.
  public var isOutage: Bool {
    if case .outage = self { true } else { false }
  }
}

/// How a server database is reached: how long to wait for a connection and for each statement,
/// and how quickly to try again once it has gone away.
public struct DatabaseSettings: Sendable, Equatable {
  /// The longest wait for a new connection (libpq's `connect_timeout`, unless the URI sets one).
  public var connectTimeout: Duration = .seconds(5)
  /// The longest a statement may run before the server cancels it (`statement_timeout`).
  public var statementTimeout: Duration = .seconds(5)
  /// After a failed connection, the first wait before the next attempt; it doubles up to `longestBackoff`.
  public var firstBackoff: Duration = .milliseconds(100)
  public var longestBackoff: Duration = .seconds(2)
  /// Whether statements are prepared once per connection (named prepared statements). A pooler
  /// in transaction mode older than pgbouncer 1.21 cannot carry them: turn this off there.
  public var preparedStatements = true
  /// Where the change listener connects, when not the pool's URI (a transaction-mode pooler
  /// cannot carry `LISTEN`: point this straight at PostgreSQL).
  public var listenURI: String? = nil

  /// The defaults: 5 s to connect, 5 s per statement, reconnecting after 0.1 s doubling to 2 s.
  public init() {}

  /// Milliseconds of `d`, at least 1.
  package static func milliseconds(_ d: Duration) -> Int64 {
    max(1, d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)
  }
}

/// A value bound to a `?` parameter or read from a column, in every engine.
public enum DatabaseValue: Sendable, Equatable {
  case null
  case integer(Int64)
  case text(String)
  case blob([UInt8])

  /// The text, when the value is text.
  public var text: String? { if case .text(let s) = self { s } else { nil } }
  /// The integer, when the value is an integer.
  public var int: Int? { if case .integer(let n) = self { Int(n) } else { nil } }
  /// The bytes, when the value is a blob.
  public var blob: [UInt8]? { if case .blob(let b) = self { b } else { nil } }
}

/// The narrow seam the store's rules are written against, once for SQLite and PostgreSQL: one
/// connection, used by one thread at a time. SQL is written once, with `?` placeholders and the
/// dialect both engines share (`ON CONFLICT ... DO UPDATE`, `RETURNING`-free statements); what
/// differs — placeholders, how a write transaction begins, where the schema version lives, how the
/// store is checked before serving — is each engine's to say here. No engine type appears above it.
public protocol Database: AnyObject {
  /// Runs one statement with `parameters`, returning every row (columns as values).
  @discardableResult
  func query(_ sql: String, _ parameters: [DatabaseValue]) throws(StoreError) -> [[DatabaseValue]]

  /// Runs SQL that returns no rows and takes no parameters (several statements allowed).
  func execute(_ sql: String) throws(StoreError)

  /// Runs `body` in one write transaction: all of it commits, or none of it. Inside another
  /// transaction it simply runs as part of that one.
  func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T

  /// Rows changed by the last statement.
  var changes: Int { get }

  /// The schema version recorded in the database (0 for a new one).
  func schemaVersion() throws(StoreError) -> Int

  /// Records `version` as the schema version (inside the migration's transaction).
  func recordSchemaVersion(_ version: Int) throws(StoreError)

  /// Checks that the store can serve — its structure is sound and a write commits — or throws a
  /// one-line reason naming `name` (the path or the masked URI).
  func checkServable(name: String) throws(StoreError)

  /// The SQL dialect the schema is written in for this engine.
  var dialect: SQLDialect { get }

  /// Runs `body` in a write transaction that no other process runs an exclusive transaction
  /// of `lock` beside: it first waits for theirs to end, and then reads everything they committed.
  /// How a migration runs exactly once, and a fleet-wide job once per period, however many
  /// processes start it at the same moment.
  func exclusiveTransaction<T>(_ lock: ExclusiveLock, _ body: () throws(StoreError) -> T) throws(StoreError)
    -> T

  /// Inside a transaction: tells every other process watching this database, once it commits,
  /// that a session's answer may have changed (SQLite's watchers see any commit; PostgreSQL's
  /// listen for a notification).
  func announceChange() throws(StoreError)

  /// How many changes have been announced so far (a number that only grows).
  func changeCount() throws(StoreError) -> Int
}

/// The locks `exclusiveTransaction` takes: one per kind of fleet-wide work, and one per email
/// for counting its failures.
public struct ExclusiveLock: Sendable, Equatable {
  /// The advisory lock's 64-bit key.
  public let key: Int64

  /// Migrations ("bandedge" in ASCII, as a 64-bit number).
  public static let migration = ExclusiveLock(key: 0x6261_6e64_6564_6765)
  /// Periodic jobs (retention, clean-up): "bejobs01".
  public static let jobs = ExclusiveLock(key: 0x6265_6a6f_6273_3031)
  /// Claiming outbox messages to deliver: "bemail01".
  public static let mail = ExclusiveLock(key: 0x6265_6d61_696c_3031)
  /// Making and rotating the gateway's signing keys: "begwkeys".
  public static let gatewayKeys = ExclusiveLock(key: 0x6265_6777_6b65_7973)

  /// The lock of one sign-in failure counter, from the first 8 bytes of its (keyed) digest.
  public static func failures(_ digest: [UInt8]) -> ExclusiveLock {
    ExclusiveLock(key: Int64(bitPattern: digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }))
  }
}

/// The two dialects, and the one place the schema's differences live: migrations are written in
/// SQLite's and translated for PostgreSQL (64-bit integers, `BYTEA`, identity columns; emails need
/// no case-insensitive collation, being stored normalised).
public enum SQLDialect: Sendable {
  case sqlite
  case postgres

  /// `ddl` (SQLite's) in this dialect.
  public func schema(_ ddl: String) -> String {
    switch self {
    case .sqlite: return ddl
    case .postgres:
      return
        ddl
        .replacing(
          /INTEGER PRIMARY KEY AUTOINCREMENT/, with: "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
        )
        .replacing(/\bINTEGER\b/, with: "BIGINT")
        .replacing(/\bBLOB\b/, with: "BYTEA")
        .replacing(/\s+COLLATE NOCASE\b/, with: "")
    }
  }
}

extension Database {
  /// `query` without parameters.
  @discardableResult
  public func query(_ sql: String) throws(StoreError) -> [[DatabaseValue]] { try query(sql, []) }
}
