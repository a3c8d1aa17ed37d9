import ClientAPI
import Store

/// The store `serve` opens and where it was named: `--database` (or `--data`), else
/// BAND_LICENCE_DATABASE_URL, else the configuration file's `"database"`, else `sqlite:data`.
/// `config check` shows the same choice, made without the flag.
struct StoreChoice {
  /// Where the store was named.
  enum Source: String {
    case flag = "--database or --data"
    case environment = "BAND_LICENCE_DATABASE_URL"
    case file = "the configuration file's \"database\""
    case fallback = "the default"
  }

  /// The store.
  let location: DatabaseLocation
  /// Where it was named.
  let source: Source

  /// As `config check` prints it: the location (a password masked), then its source.
  var line: String {
    source == .fallback
      ? "\(location) (the default: nothing names a store)" : "\(location) (from \(source.rawValue))"
  }

  /// The choice `serve` makes from `flag`, the environment variable's value `environment` and the
  /// file's `file`; an empty variable counts as unset. Fails when the winning text is no location.
  static func resolve(flag: DatabaseLocation?, environment: String?, file: String?) -> Result<
    StoreChoice, UsageError
  > {
    if let flag { return .success(StoreChoice(location: flag, source: .flag)) }
    if let text = environment, !text.isEmpty {
      guard let location = DatabaseLocation(text) else {
        return .failure(UsageError("BAND_LICENCE_DATABASE_URL takes sqlite:DIR or a postgresql:// URI"))
      }
      return .success(StoreChoice(location: location, source: .environment))
    }
    if let text = file {
      guard let location = DatabaseLocation(text) else {
        return .failure(UsageError("database in the configuration takes sqlite:DIR or a postgresql:// URI"))
      }
      return .success(StoreChoice(location: location, source: .file))
    }
    return .success(StoreChoice(location: .sqlite(directory: "data"), source: .fallback))
  }
}
