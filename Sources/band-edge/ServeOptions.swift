import Accounts
import ClientAPI
import Edge
import Store

#if canImport(Glibc)
  import Glibc
#endif

/// What `serve` starts with: first what its flags say, then (`ServeCommand.run`) what the
/// configuration file adds where no flag spoke.
struct ServeOptions {
  var settings = ServeSettings()
  var listen: [SocketAddress] = []
  var tlsListen: [SocketAddress] = []
  var certificates: [String] = []
  var keyFiles: [String] = []
  var testRoutes = false
  var http2 = true
  var shellDirectory = ShellCommand.defaultDestination
  var configFlag: String? = nil
  /// `--key-encryption-key`: the gateway's KEK file.
  var kekFlag: String? = nil
  var databaseFlag: DatabaseLocation? = nil
  var smtpFlag: String? = nil
  /// The limits a flag set: the file's values do not apply to them.
  var givenLimits: Set<String> = []
  var printRoutes = false
  var trustedProxies: Set<String> = []
  var adminListenFlag: String? = nil
  var adminAllowFlag: [String]? = nil
  var metricsOn = true

  /// The options `arguments` set; nil when they ask for `--help` (the words after it are not read).
  static func read(_ arguments: Arguments) throws(UsageError) -> ServeOptions? {
    var arguments = arguments
    var options = ServeOptions()
    while let word = arguments.next() {
      let (flag, inline) = Arguments.split(word)
      func value() throws(UsageError) -> String { try arguments.value(of: flag, inline: inline) }
      if flag.hasPrefix("--"), let limit = LimitTable.named(String(flag.dropFirst(2))) {
        switch limit.parse(try value()) {
        case .failure(let problem): throw problem
        case .success(let number): limit.write(&options.settings, number)
        }
        options.givenLimits.insert(limit.name)
        continue
      }
      if flag == "--help" || flag == "-h" { return nil }
      if try !options.takeListening(flag, value), try !options.takeContent(flag, value) {
        throw UsageError("serve does not know '\(word)'; see band-edge serve --help")
      }
    }
    return options
  }

  /// `flag` if it is one of the help's "Listening" flags (`value` reads its value); false if not.
  private mutating func takeListening(_ flag: String, _ value: () throws(UsageError) -> String)
    throws(UsageError) -> Bool
  {
    switch flag {
    case "--listen":
      let text = try value()
      guard let address = SocketAddress(text) else {
        throw UsageError(
          "--listen takes a numeric host:port such as 127.0.0.1:8080 or [::1]:8080, not '\(text)'")
      }
      listen.append(address)
    case "--tls-listen":
      let text = try value()
      guard let address = SocketAddress(text) else {
        throw UsageError("--tls-listen takes a numeric host:port such as 0.0.0.0:443, not '\(text)'")
      }
      tlsListen.append(address)
    case "--cert": certificates.append(try value())
    case "--key": keyFiles.append(try value())
    case "--no-access-log": settings.server.accessLog = false
    case "--h2c": settings.server.http2Cleartext = true
    case "--http2": http2 = true
    case "--no-http2": http2 = false
    case "--trusted-proxy":
      let text = try value()
      guard SocketAddress(text.contains(":") ? "[\(text)]:1" : "\(text):1") != nil else {
        throw UsageError("--trusted-proxy takes a numeric IP address, not '\(text)'")
      }
      trustedProxies.insert(text)
    case "--admin-listen": adminListenFlag = try value()
    case "--admin-allow":
      adminAllowFlag = (adminAllowFlag ?? []) + (try value()).split(separator: ",").map(String.init)
    case "--no-metrics": metricsOn = false
    default: return false
    }
    return true
  }

  /// `flag` if it is one of the help's "Content and deployment", "Inspecting" or "Testing" flags
  /// (`value` reads its value); false if not.
  private mutating func takeContent(_ flag: String, _ value: () throws(UsageError) -> String)
    throws(UsageError) -> Bool
  {
    switch flag {
    case "--test-routes": testRoutes = true
    case "--print-routes": printRoutes = true
    case "--shell": shellDirectory = try value()
    case "--config": configFlag = try value()
    case "--key-encryption-key": kekFlag = try value()
    case "--data": databaseFlag = .sqlite(directory: try value())
    case "--database": databaseFlag = try AdminCommand.databaseLocation(try value(), "--database")
    case "--smtp":
      let url = try value()
      guard url.hasPrefix("smtp://") || url.hasPrefix("smtps://") else {
        throw UsageError("--smtp takes an smtp:// or smtps:// URL")
      }
      smtpFlag = url
    case "--database-unprepared":
      settings.database.preparedStatements = false
      // The migrate and retention children read it from their environment.
      setenv("BAND_LICENCE_DATABASE_UNPREPARED", "1", 1)
    case "--database-listen":
      let uri = try value()
      guard case .postgres = DatabaseLocation(uri) else {
        throw UsageError("--database-listen takes a postgresql:// URI")
      }
      settings.database.listenURI = uri
    default: return false
    }
    return true
  }
}
