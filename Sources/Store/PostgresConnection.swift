import CPostgres

#if canImport(Glibc)
  import Glibc
#endif

/// One PostgreSQL connection through libpq. Used by one thread at a time (each pool worker opens
/// its own), so it is not Sendable. Every statement with values goes through `PQexecParams`
/// with `$1...$n` placeholders: values are never interpolated into SQL.
public final class PostgresConnection {
  let handle: OpaquePointer
  private let settings: DatabaseSettings
  private var lastChanges = 0
  /// When to try again once the server has gone (shared by the process's connections).
  private let schedule: ReconnectSchedule
  /// The connection went and has not come back yet.
  private var lost = false
  /// Set by the owner between its BEGIN and its COMMIT or ROLLBACK: a lost connection is then
  /// never made again silently (see `reconnectIfLost`).
  var inTransaction = false
  /// This connection `LISTEN`s (see `listen`).
  var listening = false
  /// Statement texts prepared on this connection, by name.
  private var prepared: [String: String] = [:]
  /// The SQLSTATE of the last statement that failed (`40001`: a serialization failure), else nil.
  public private(set) var lastSQLState: String? = nil

  /// Connects to the libpq URI (or key=value string) `uri` with `settings`' connect and statement
  /// timeouts. The error never holds the password; a server that cannot be reached is an `outage`.
  /// `name` is the connection's `application_name` unless the URI sets one, so an operator can
  /// tell the pool's connections from the change listener's in `pg_stat_activity`.
  /// `schedule` spaces out its reconnections (with the other connections sharing it).
  public init(
    uri: String, settings: DatabaseSettings = DatabaseSettings(), name: String = "band-edge",
    schedule: ReconnectSchedule? = nil
  ) throws(StoreError) {
    guard !uri.utf8.contains(0) else {
      throw StoreError.failed("cannot connect to PostgreSQL: the URI holds a NUL")
    }
    self.settings = settings
    self.schedule = schedule ?? ReconnectSchedule(settings)
    if let failure = be_pq_load_failure() {
      throw StoreError.failed("PostgreSQL needs libpq: \(String(cString: failure))")
    }
    // The URI comes second, so a connect_timeout it names wins over the default.
    let timeout = String(max(1, settings.connectTimeout.components.seconds))
    // TCP keepalives and a user timeout, so a connection to a server that vanished (a partition, a
    // host gone) fails within about 20 s instead of the kernel's 15 minutes (ignored on Unix sockets).
    let keywords = [
      "connect_timeout", "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "dbname",
    ]
    let made: OpaquePointer? = keywords.withCStrings {
      keywords in
      [timeout, name, "1", "10", "5", "2", "20000", uri].withCStrings { values in
        be_PQconnectdbParams(keywords, values, 1)
      }
    }
    guard let handle = made else {
      throw StoreError.failed("cannot connect to PostgreSQL: out of memory")
    }
    guard be_PQstatus(handle) == CONNECTION_OK else {
      let message = Self.message(be_PQerrorMessage(handle))
      be_PQfinish(handle)
      throw StoreError.outage(
        "cannot connect to PostgreSQL at \(Self.maskedURI(uri)): \(Self.scrubbed(message, of: uri))")
    }
    self.handle = handle
    // NOTICEs (e.g. from DROP ... IF EXISTS) would go to stderr; errors arrive as results anyway.
    be_PQsetNoticeProcessor(handle, { _, _ in }, nil)
    // Every property is set: if this throws, deinit runs and closes the handle (closing it here
    // too would free it twice).
    try prepareSession()
  }

  deinit { be_PQfinish(handle) }

  /// What each new or remade connection is set to: UTF-8, and the statement timeout.
  private func prepareSession() throws(StoreError) {
    guard be_PQsetClientEncoding(handle, "UTF8") == 0 else {
      throw StoreError.outage(
        "cannot set the PostgreSQL client encoding to UTF8: \(Self.message(be_PQerrorMessage(handle)))")
    }
    _ = try rows(
      of: be_PQexec(
        handle, "SET statement_timeout = \(DatabaseSettings.milliseconds(settings.statementTimeout))"))
  }

  /// A connection the server dropped (a restart, `pg_terminate_backend`) is made again before the
  /// next statement. While that keeps failing, attempts are spaced out (0.1 s doubling to 2 s, by
  /// default) and statements meanwhile fail at once as an `outage`, so a request never waits on
  /// a database that is down.
  private func reconnectIfLost() throws(StoreError) {
    // An idle pool connection has nothing to read unless the server has spoken first — closing it
    // (a restart, pg_terminate_backend) sends a FATAL message (which libpq, idle, treats as a
    // notice) and then the end of the stream, which may not have arrived yet. So anything to read
    // means the connection is made again before this statement. Looking costs one poll(2); it
    // saves the statement that would fail on a connection already gone.
    if listening {
      // Notifications arrive unasked: read them; a listening connection that went is never made
      // again silently (a new session would not be listening): its owner starts over.
      guard be_PQstatus(handle) == CONNECTION_OK, be_PQconsumeInput(handle) == 1,
        be_PQstatus(handle) == CONNECTION_OK
      else {
        throw StoreError.outage("the PostgreSQL listening connection is closed")
      }
      return
    }
    if be_PQstatus(handle) == CONNECTION_OK, !lost {
      var ready = pollfd(fd: be_PQsocket(handle), events: Int16(POLLIN), revents: 0)
      guard poll(&ready, 1, 0) > 0 else { return }
    }
    lost = true
    // Inside a transaction the rest of it must not run on a new session, where each statement
    // would commit on its own: the transaction fails here, and the caller's ROLLBACK (outside it)
    // makes the connection again.
    if inTransaction {
      throw StoreError.outage("the PostgreSQL connection went in the middle of a transaction")
    }
    try schedule.attempt { () throws(StoreError) in
      be_PQreset(handle)
      prepared.removeAll()
      guard be_PQstatus(handle) == CONNECTION_OK else {
        throw StoreError.outage(
          "PostgreSQL is out of reach: \(Self.message(be_PQerrorMessage(handle)))")
      }
      try prepareSession()
    }
    lost = false
  }

  /// Runs SQL without parameters through `PQexec`, returning the rows of the last statement.
  /// Several statements are allowed; without BEGIN/COMMIT of their own they run as one implicit
  /// transaction (all or none).
  @discardableResult
  public func execute(_ sql: String) throws(StoreError) -> [[DatabaseValue]] {
    guard !sql.utf8.contains(0) else { throw StoreError.failed("SQL holds a NUL") }
    try reconnectIfLost()
    return try rows(of: be_PQexec(handle, sql))
  }

  /// Runs one statement with `parameters` bound to `$1...$n`, returning every row. Integers are
  /// sent as int8, blobs as binary bytea, text as text of the type the server infers; text
  /// holding a NUL is refused (PostgreSQL text cannot hold one). Columns of type int2, int4 and
  /// int8 come back as `.integer`, bytea as `.blob`, SQL NULL as `.null`, anything else as the
  /// server's text form.
  @discardableResult
  public func query(_ sql: String, _ parameters: [DatabaseValue] = []) throws(StoreError)
    -> [[DatabaseValue]]
  {
    guard !sql.utf8.contains(0) else { throw StoreError.failed("SQL holds a NUL") }
    guard parameters.count <= Int(Int32.max) else { throw StoreError.failed("too many parameters") }
    try reconnectIfLost()
    var types: [Oid] = []
    var values: [UnsafePointer<CChar>?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    var buffers: [UnsafeMutablePointer<CChar>] = []
    defer { for buffer in buffers { buffer.deallocate() } }
    /// A copy of `bytes` that libpq can read (never a null pointer, which would mean SQL NULL).
    func copy(_ bytes: some Collection<UInt8>, terminated: Bool) -> UnsafePointer<CChar> {
      let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
      for (i, byte) in bytes.enumerated() { buffer[i] = CChar(bitPattern: byte) }
      if terminated { buffer[bytes.count] = 0 }
      buffers.append(buffer)
      return UnsafePointer(buffer)
    }
    for (i, value) in parameters.enumerated() {
      switch value {
      case .null:
        types.append(0)
        values.append(nil)
        lengths.append(0)
        formats.append(0)
      case .integer(let n):
        types.append(Self.int8)
        values.append(copy(String(n).utf8, terminated: true))
        lengths.append(0)
        formats.append(0)
      case .text(let s):
        guard !s.utf8.contains(0) else {
          throw StoreError.failed(
            "parameter $\(i + 1) is text holding a NUL, which PostgreSQL text cannot hold")
        }
        types.append(0)
        values.append(copy(s.utf8, terminated: true))
        lengths.append(0)
        formats.append(0)
      case .blob(let b):
        guard b.count <= Int(Int32.max) else { throw StoreError.failed("parameter $\(i + 1) is too long") }
        types.append(Self.bytea)
        values.append(copy(b, terminated: false))
        lengths.append(Int32(b.count))
        formats.append(1)
      }
    }
    guard settings.preparedStatements else {
      return try rows(
        of: be_PQexecParams(handle, sql, Int32(parameters.count), types, values, lengths, formats, 0))
    }
    // Each statement text is prepared once per connection (parsed and planned once, not at every
    // request); a connection made again has none, so the names are forgotten with it.
    // Keyed by the parameters' types too: a text where an integer was before is another statement.
    let key = types.map { String($0) }.joined(separator: ",") + ";" + sql
    let name: String
    if let known = prepared[key] {
      name = known
    } else {
      name = "be_\(prepared.count + 1)"
      _ = try rows(of: be_PQprepare(handle, name, sql, Int32(parameters.count), types))
      prepared[key] = name
    }
    return try rows(of: be_PQexecPrepared(handle, name, Int32(parameters.count), values, lengths, formats, 0))
  }

  /// Rows changed (or returned) by the last command, from `PQcmdTuples`; 0 for commands that
  /// report no count.
  public var changes: Int { lastChanges }

  /// SQLSTATEs that mean "not now" rather than "not so": connection exceptions (class 08), a
  /// cancelled statement (57014, the statement timeout), the server shutting down or starting
  /// (57P01-57P03), too many connections (53300).
  static func isUnavailable(_ state: String?) -> Bool {
    guard let state else { return false }
    return state.hasPrefix("08") || ["57014", "57P01", "57P02", "57P03", "53300"].contains(state)
  }

  private static let int2: Oid = 21
  private static let int4: Oid = 23
  private static let int8: Oid = 20
  private static let bytea: Oid = 17

  private static func message(_ text: UnsafePointer<CChar>?) -> String {
    guard let text else { return "unknown error" }
    // libpq's messages run over several lines ("server closed the connection unexpectedly\n\tThis
    // probably means..."): one line each, for logs and the CLI's one-line refusals.
    let message = String(cString: text).split(whereSeparator: \.isWhitespace).joined(separator: " ")
    return message.isEmpty ? "unknown error" : message
  }

  /// The rows of `result` (which this clears), or its error.
  private func rows(of result: OpaquePointer?) throws(StoreError) -> [[DatabaseValue]] {
    lastSQLState = nil
    guard let result else {
      throw StoreError.outage("PostgreSQL: \(Self.message(be_PQerrorMessage(handle)))")
    }
    defer { be_PQclear(result) }
    let status = be_PQresultStatus(result)
    guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY else {
      // PG_DIAG_SQLSTATE is the field code 'C'.
      lastSQLState = be_PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
      // The primary message and SQLSTATE only: DETAIL lines quote row values (a duplicate key's
      // email, a digest), which must not reach a log.
      let primary = be_PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
      let message = "PostgreSQL \(lastSQLState ?? "error"): \(primary ?? "the statement failed")"
      if Self.isUnavailable(lastSQLState) || be_PQstatus(handle) != CONNECTION_OK {
        throw StoreError.outage(message)
      }
      throw StoreError.failed(message)
    }
    lastChanges = be_PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
    let columns = be_PQnfields(result)
    let types = (0..<columns).map { be_PQftype(result, $0) }
    var rows: [[DatabaseValue]] = []
    rows.reserveCapacity(Int(be_PQntuples(result)))
    for row in 0..<be_PQntuples(result) {
      var values: [DatabaseValue] = []
      values.reserveCapacity(Int(columns))
      for column in 0..<columns {
        values.append(try value(result, row, column, type: types[Int(column)]))
      }
      rows.append(values)
    }
    return rows
  }

  /// One field of a text-format result.
  private func value(_ result: OpaquePointer, _ row: Int32, _ column: Int32, type: Oid) throws(StoreError)
    -> DatabaseValue
  {
    if be_PQgetisnull(result, row, column) == 1 { return .null }
    guard let field = be_PQgetvalue(result, row, column) else { return .null }
    let count = Int(be_PQgetlength(result, row, column))
    switch type {
    case Self.int2, Self.int4, Self.int8:
      guard let n = Int64(String(cString: field)) else {
        throw StoreError.failed("PostgreSQL sent an integer that is not one: \(String(cString: field))")
      }
      return .integer(n)
    case Self.bytea:
      // The text form (hex, or the older escape form): libpq decodes both.
      var length = 0
      guard
        let bytes = be_PQunescapeBytea(UnsafeRawPointer(field).assumingMemoryBound(to: UInt8.self), &length)
      else {
        throw StoreError.failed("PostgreSQL sent bytea that cannot be decoded")
      }
      defer { be_PQfreemem(bytes) }
      return .blob(Array(UnsafeBufferPointer(start: bytes, count: length)))
    default:
      let bytes = UnsafeRawBufferPointer(start: field, count: count)
      return .text(String(decoding: bytes, as: UTF8.self))
    }
  }
}

extension Array where Element == String {
  /// Calls `body` with the strings as a NULL-terminated array of C strings (libpq's keyword and
  /// value lists), valid only during the call.
  fileprivate func withCStrings<R>(_ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = map { strdup($0) }
    defer { for copy in copies { free(copy) } }
    return body(copies.map { $0.map { UnsafePointer($0) } } + [nil])
  }
}
