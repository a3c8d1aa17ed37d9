/// Where the store lives (`--database URL`, the configuration file's `"database"`,
/// `BAND_LICENCE_DATABASE_URL`): `sqlite:DIR` (a directory holding `band-edge.sqlite`, the
/// embedded default; `--data DIR` says the same) or a libpq URI `postgresql://...` /
/// `postgres://...` (a Unix-socket host as `postgresql:///db?host=/run/pg` too).
public enum DatabaseLocation: Sendable, Equatable, CustomStringConvertible {
  /// The SQLite file (`DIR/band-edge.sqlite` for `sqlite:DIR`).
  case sqlite(file: String)
  case postgres(uri: String)

  /// The location `text` names, or nil when it is neither form.
  public init?(_ text: String) {
    if text.hasPrefix("sqlite:") {
      let directory = String(text.dropFirst("sqlite:".count))
      guard !directory.isEmpty else { return nil }
      self = .sqlite(file: directory + "/band-edge.sqlite")
    } else if text.hasPrefix("postgresql://") || text.hasPrefix("postgres://") {
      self = .postgres(uri: text)
    } else {
      return nil
    }
  }

  /// The SQLite file, for the SQLite engine.
  public var sqlitePath: String? { if case .sqlite(let file) = self { file } else { nil } }

  /// The store at `sqlite:DIR`.
  public static func sqlite(directory: String) -> DatabaseLocation {
    .sqlite(file: directory + "/band-edge.sqlite")
  }

  /// As it may be printed or logged: a PostgreSQL password is masked.
  public var description: String {
    switch self {
    case .sqlite(let file): "sqlite:\(Self.directory(of: file))"
    case .postgres(let uri): PostgresConnection.maskedURI(uri)
    }
  }

  /// The text to hand a child process (`admin --database`): the location itself, password included.
  public var argument: String {
    switch self {
    case .sqlite(let file): "sqlite:\(Self.directory(of: file))"
    case .postgres(let uri): uri
    }
  }

  /// A new connection of this location's engine (`settings` and `schedule` apply to a server
  /// database).
  public func open(_ settings: DatabaseSettings = DatabaseSettings(), schedule: ReconnectSchedule? = nil)
    throws(StoreError) -> any Database
  {
    switch self {
    case .sqlite(let file): try SQLiteDatabase(path: file)
    case .postgres(let uri): try PostgresDatabase(uri: uri, settings: settings, schedule: schedule)
    }
  }

  private static func directory(of file: String) -> String {
    let parts = file.split(separator: "/", omittingEmptySubsequences: false)
    let directory = parts.dropLast().joined(separator: "/")
    return parts.count == 1 ? "." : directory.isEmpty ? "/" : directory
  }
}
