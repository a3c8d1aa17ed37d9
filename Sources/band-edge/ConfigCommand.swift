import ClientAPI
import Deployment
import LinkAssoc

#if canImport(Glibc)
  import Glibc
#endif

/// `band-edge config check` and `band-edge links print`.
enum ConfigCommand {
  static let help = """
    Usage: band-edge config check [--config FILE]
           band-edge config limits
           band-edge links print apple|android [--config FILE]

    Resolves the deployment from BAND_LICENCE_ENV (development, staging, production; default
    development) and BAND_LICENCE_APP_URL over the JSON file named by --config or
    BAND_LICENCE_CONFIG, and validates it. `config check` prints the deployment, the store serve
    would open without --database or --data (BAND_LICENCE_DATABASE_URL, else the file's
    "database", else sqlite:data; a password masked) and where it was named, and both link files,
    or every problem, one per line. `config limits` prints the table of every limit (flag and file
    key, unit, range, default), then the gateway's per-upstream and per-route numbers, as
    docs/limits.md carries them. `links print` prints one file exactly as served.

    Exit status: 0 valid; 1 problems found (each on its own line on stderr); 2 usage error.
    """

  /// The configuration file: --config, else BAND_LICENCE_CONFIG, else none.
  static func configPath(_ flag: String?) -> String? {
    flag ?? ProcessEnvironment.value("BAND_LICENCE_CONFIG").flatMap { $0.isEmpty ? nil : $0 }
  }

  /// The deployment, with its `"limits"` checked against the limit table (names, units, ranges),
  /// and its forward routes against band-edge's own routes (`GatewayRoutes`) and those limits.
  static func load(_ path: String?) -> Result<Deployment, DeploymentProblems> {
    DeploymentLoader.load(
      environment: ProcessEnvironment.all(), configPath: configPath(path),
      ownRoutes: GatewayRoutes.ownPatterns
    ).flatMap { deployment in
      var scratch = ServeSettings()
      var problems = LimitTable.apply(file: deployment.limits, except: [], to: &scratch)
      if problems.isEmpty {
        problems = LimitTable.crossCheck(scratch) + GatewayRoutes.crossCheck(deployment, settings: scratch)
      }
      return problems.isEmpty ? .success(deployment) : .failure(DeploymentProblems(lines: problems))
    }
  }

  static func check(_ arguments: Arguments) throws(UsageError) -> Int32 {
    var arguments = arguments
    guard let verb = arguments.next() else { throw UsageError("config needs a command: config check") }
    if verb == "--help" || verb == "-h" {
      print(help)
      return 0
    }
    if verb == "limits" {
      print(LimitTable.markdown() + "\n\n" + GatewayLimits.markdown())
      return 0
    }
    guard verb == "check" else {
      throw UsageError("unknown config command '\(verb)'; see band-edge config --help")
    }
    let path = try configFlag(&arguments)
    // The store as serve would choose it without --database or --data.
    let loaded = load(path).flatMap { deployment in
      StoreChoice.resolve(
        flag: nil, environment: ProcessEnvironment.value("BAND_LICENCE_DATABASE_URL"),
        file: deployment.database
      ).map { (deployment, $0) }.mapError { DeploymentProblems(lines: [$0.message]) }
    }
    switch loaded {
    case .failure(let problems):
      for line in problems.lines { fail(line) }
      fail("the configuration has \(problems.lines.count) problem\(problems.lines.count == 1 ? "" : "s")")
      return 1
    case .success(let (deployment, store)):
      let files = LinkFiles(deployment)
      print(deployment.summary)
      print("database:           \(store.line)")
      print("\n/.well-known/apple-app-site-association (\(files.apple.count) bytes):")
      print(String(decoding: files.apple, as: UTF8.self))
      print("\n/.well-known/assetlinks.json (\(files.android.count) bytes):")
      print(String(decoding: files.android, as: UTF8.self))
      return 0
    }
  }

  static func links(_ arguments: Arguments) throws(UsageError) -> Int32 {
    var arguments = arguments
    guard let verb = arguments.next() else {
      throw UsageError("links needs a command: links print apple|android")
    }
    if verb == "--help" || verb == "-h" {
      print(help)
      return 0
    }
    guard verb == "print", let which = arguments.next(), which == "apple" || which == "android" else {
      throw UsageError("usage: band-edge links print apple|android [--config FILE]")
    }
    let path = try configFlag(&arguments)
    switch load(path) {
    case .failure(let problems):
      for line in problems.lines { fail(line) }
      return 1
    case .success(let deployment):
      let files = LinkFiles(deployment)
      let bytes = which == "apple" ? files.apple : files.android
      _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
      print("")
      return 0
    }
  }

  private static func configFlag(_ arguments: inout Arguments) throws(UsageError) -> String? {
    var path: String? = nil
    while let word = arguments.next() {
      guard word == "--config" else { throw UsageError("unexpected '\(word)'; see band-edge config --help") }
      path = try arguments.value(of: word, inline: nil)
    }
    return path
  }
}

/// The process environment, read through libc (no Foundation in the executable's own code).
enum ProcessEnvironment {
  static func value(_ name: String) -> String? {
    guard let raw = getenv(name) else { return nil }
    return String(decoding: UnsafeRawBufferPointer(start: raw, count: strlen(raw)), as: UTF8.self)
  }

  static func all() -> [String: String] {
    var out: [String: String] = [:]
    for name in ["BAND_LICENCE_ENV", "BAND_LICENCE_APP_URL", "BAND_LICENCE_CONFIG"] {
      if let v = value(name) { out[name] = v }
    }
    return out
  }
}
