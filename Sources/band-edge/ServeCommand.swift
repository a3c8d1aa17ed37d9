import ClientAPI
import Dispatch
import Edge
import LinkAssoc
import Shell

#if canImport(Glibc)
  import Glibc
#endif

/// The client API's per-address limits, as the flags set them.
struct ClientLimits {
  var signIn: RateLimit
  var exchange: RateLimit
  var trustedProxies: Set<String>
  var refusalHold: Duration
}

/// `band-edge serve`: parse flags into a server configuration and run it.
enum ServeCommand {
  static let help = """
    Usage: band-edge serve [options]

    Serves HTTP/1.1 until SIGTERM or SIGINT, then drains: stops accepting, finishes what is in
    flight, closes idle connections and exits within --drain-timeout. SIGHUP reloads.

    Listening and threads:
      --listen ADDR           numeric host:port, repeatable (default 127.0.0.1:8080; port 0 picks one)
      --tls-listen ADDR       a TLS (HTTPS) listener, repeatable; needs --cert and --key (the config
                              file's "tls": {"listen", "certificate", "key"} sets the same)
      --cert FILE             PEM certificate chain; with several --cert/--key pairs the first is the
                              default and the others are chosen by the name the client asks for (SNI);
                              one of them must cover the configured origin's host
      --key FILE              PEM private key; refused when readable by other users
      --ticket-rotation S     replace the TLS session-ticket keys this often (default 43200, 12 hours)
      --threads N             event loops, one per core by default (now \(ServerConfiguration.cores))
      --pool-threads N        worker threads for blocking routes (default \(ServerConfiguration().poolThreads))
      --pool-queue N          blocking requests that may wait before new ones get 503 (default 256)
      --background-threads N  low-priority (nice 19) threads for password hashing (default \(ServerConfiguration().backgroundThreads))
      --background-queue N    password checks that may wait before new ones get 503 (default 64)
      --busy-hold S           a 503 for a full queue is held this long before it is sent (default 1)
      --drain-timeout S       seconds allowed for draining on SIGTERM (default 10)
      --no-access-log         do not write the JSON access log to stdout

    Limits (see docs/limits.md):
      --max-target-bytes N    longest request-target, else 414 (default 8192)
      --max-header-bytes N    header section size, else 431 (default 16384)
      --max-header-count N    header field lines, else 431 (default 100)
      --max-body-bytes N      request body size, else 413 (default 1048576)
      --max-chunk-extension-bytes N  extensions on one chunk-size line, else 400 (default 256)
      --max-buffered-request-bytes N  request bytes all connections hold, else 503 (default 67108864)
      --max-connections N     open connections per loop (default 8192)
      --head-timeout S        to receive a request head, from its first byte (default 10)
      --body-timeout S        longest pause while receiving a body (default 10)
      --idle-timeout S        keep-alive wait for the next request (default 60)
      --write-timeout S       longest pause while a client reads a response (default 30)
      --linger-timeout S      draining unread input before closing (default 2)

    Content and deployment:
      --shell DIR             the built public shell to serve (default shell-build; see band-edge shell build)
      --data DIR              the database directory (default data; band-edge.sqlite inside, migrated at start)
      --config FILE           deployment settings (JSON; also BAND_LICENCE_CONFIG); BAND_LICENCE_ENV and
                              BAND_LICENCE_APP_URL override it; flags override its listen and limits.
                              Any problem stops start-up (see band-edge config check).

    Sessions (client-api-v1.md, "Lifetimes and clocks"):
      --web-session-idle S        web session ends after this long unused (default 43200, 12 hours)
      --web-session-lifetime S    web session ends after this long in all (default 604800, 7 days)
      --native-session-idle S     native session ends after this long unused (default 2592000, 30 days)
      --native-session-lifetime S native session ends after this long in all (default 15552000, 180 days)
      --sign-in-burst N           sign-in attempts (web and native forms) one client address may make at
                                  once before 429 (default 20)
      --sign-in-per-minute N      ... and regains per minute (default 30)
      --exchange-burst N          native exchanges one client address may make at once (default 20)
      --exchange-per-minute N     ... and regains per minute (default 60)
      --rate-limited-hold S       a 429 is held this long before it is sent, so a flood that does not
                                  wait gets one answer per connection per hold (default 1; 0 sends at once)
      --trusted-proxy IP          a proxy whose X-Forwarded-For is believed for the client address
                                  (repeatable; default none)
      --retention-days N          deleted accounts' personal fields are erased this many days after
                                  deletion (default 30; checked at start and hourly)
      --session-cache-entries N   GET /session answers the loops keep while the database is unchanged
                                  (default 4096; 0 sends every read to the pool)

    Inspecting:
      --print-routes          print the route table (method, path, cache class, execution) and exit

    Testing:
      --test-routes           add /_test/sleep, /_test/echo and /_test/bytes (development only)

    Exit status: 0 stopped after draining; 1 could not start (for example the address is in use);
    2 usage error.
    """

  static func run(_ arguments: Arguments) throws(UsageError) -> Int32 {
    var arguments = arguments
    var configuration = ServerConfiguration()
    var listen: [SocketAddress] = []
    var tlsListen: [SocketAddress] = []
    var certificates: [String] = []
    var keyFiles: [String] = []
    var testRoutes = false
    var shellDirectory = ShellCommand.defaultDestination
    var configFlag: String? = nil
    var dataDirectory = "data"
    var givenLimits: Set<String> = []
    var lifetimes = SessionLifetimes()
    var printRoutes = false
    var sessionCacheEntries = 4096
    var signInLimit = RateLimit(burst: 20, perMinute: 30)
    var exchangeLimit = RateLimit(burst: 20, perMinute: 60)
    var trustedProxies: Set<String> = []
    var retentionDays = 30
    var refusalHold = Duration.seconds(1)
    while let word = arguments.next() {
      let (flag, inline) = split(word)
      func value() throws(UsageError) -> String { try arguments.value(of: flag, inline: inline) }
      if flag.hasPrefix("--") && DeploymentLoader.limitKeys.contains(String(flag.dropFirst(2))) {
        givenLimits.insert(String(flag.dropFirst(2)))
      }
      switch flag {
      case "--help", "-h":
        print(help)
        return 0
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
      case "--ticket-rotation": configuration.ticketKeyRotation = try Arguments.seconds(value(), flag)
      case "--key": keyFiles.append(try value())
      case "--threads": configuration.threads = try Arguments.integer(value(), flag, min: 1, max: 256)
      case "--pool-threads":
        configuration.poolThreads = try Arguments.integer(value(), flag, min: 1, max: 1024)
      case "--pool-queue":
        configuration.poolQueue = try Arguments.integer(value(), flag, min: 0, max: 1_000_000)
      case "--background-threads":
        configuration.backgroundThreads = try Arguments.integer(value(), flag, min: 1, max: 1024)
      case "--background-queue":
        configuration.backgroundQueue = try Arguments.integer(value(), flag, min: 0, max: 1_000_000)
      case "--busy-hold":
        configuration.limits.busyHold = try Arguments.seconds(value(), flag, zeroAllowed: true)
      case "--drain-timeout": configuration.drainTimeout = try Arguments.seconds(value(), flag)
      case "--no-access-log": configuration.accessLog = false
      case "--max-target-bytes":
        configuration.limits.maxTargetBytes = try Arguments.integer(value(), flag, min: 64, max: 1 << 20)
      case "--max-header-bytes":
        configuration.limits.maxHeaderBytes = try Arguments.integer(value(), flag, min: 256, max: 1 << 20)
      case "--max-header-count":
        configuration.limits.maxHeaderCount = try Arguments.integer(value(), flag, min: 1, max: 10_000)
      case "--max-body-bytes":
        configuration.limits.maxBodyBytes = try Arguments.integer(value(), flag, min: 0, max: 1 << 30)
      case "--max-chunk-extension-bytes":
        configuration.limits.maxChunkExtensionBytes = try Arguments.integer(value(), flag, min: 0, max: 65536)
      case "--max-buffered-request-bytes":
        configuration.limits.maxBufferedRequestBytes = try Arguments.integer(
          value(), flag, min: 65536, max: 1 << 40)
      case "--max-connections":
        configuration.limits.maxConnectionsPerLoop = try Arguments.integer(
          value(), flag, min: 1, max: 1_000_000)
      case "--head-timeout": configuration.limits.headTimeout = try Arguments.seconds(value(), flag)
      case "--body-timeout": configuration.limits.bodyTimeout = try Arguments.seconds(value(), flag)
      case "--idle-timeout": configuration.limits.idleTimeout = try Arguments.seconds(value(), flag)
      case "--write-timeout": configuration.limits.writeTimeout = try Arguments.seconds(value(), flag)
      case "--linger-timeout": configuration.limits.lingerTimeout = try Arguments.seconds(value(), flag)
      case "--web-session-idle":
        lifetimes.webIdle = try Arguments.integer(value(), flag, min: 1, max: 1 << 31)
      case "--web-session-lifetime":
        lifetimes.webAbsolute = try Arguments.integer(value(), flag, min: 1, max: 1 << 31)
      case "--native-session-idle":
        lifetimes.nativeIdle = try Arguments.integer(value(), flag, min: 1, max: 1 << 31)
      case "--native-session-lifetime":
        lifetimes.nativeAbsolute = try Arguments.integer(value(), flag, min: 1, max: 1 << 31)
      case "--sign-in-burst":
        signInLimit.burst = Double(try Arguments.integer(value(), flag, min: 1, max: 1_000_000))
      case "--sign-in-per-minute":
        signInLimit.perSecond = Double(try Arguments.integer(value(), flag, min: 1, max: 1_000_000)) / 60
      case "--exchange-burst":
        exchangeLimit.burst = Double(try Arguments.integer(value(), flag, min: 1, max: 1_000_000))
      case "--exchange-per-minute":
        exchangeLimit.perSecond = Double(try Arguments.integer(value(), flag, min: 1, max: 1_000_000)) / 60
      case "--trusted-proxy":
        let text = try value()
        guard SocketAddress(text.contains(":") ? "[\(text)]:1" : "\(text):1") != nil else {
          throw UsageError("--trusted-proxy takes a numeric IP address, not '\(text)'")
        }
        trustedProxies.insert(text)
      case "--rate-limited-hold": refusalHold = try Arguments.seconds(value(), flag, zeroAllowed: true)
      case "--retention-days": retentionDays = try Arguments.integer(value(), flag, min: 0, max: 36500)
      case "--session-cache-entries":
        sessionCacheEntries = try Arguments.integer(value(), flag, min: 0, max: 1_000_000)
      case "--test-routes": testRoutes = true
      case "--print-routes": printRoutes = true
      case "--shell": shellDirectory = try value()
      case "--config": configFlag = try value()
      case "--data": dataDirectory = try value()
      default:
        throw UsageError("serve does not know '\(word)'; see band-edge serve --help")
      }
    }
    let configPath = ConfigCommand.configPath(configFlag)
    let deployment: Deployment
    switch ConfigCommand.load(configFlag) {
    case .failure(let problems):
      for line in problems.lines { fail(line) }
      fail(
        "refusing to start: the configuration has \(problems.lines.count) problem\(problems.lines.count == 1 ? "" : "s")"
      )
      return 1
    case .success(let loaded):
      deployment = loaded
    }
    // The file's listeners and limits apply where no flag said otherwise.
    if listen.isEmpty {
      for text in deployment.listen {
        guard let address = SocketAddress(text) else {
          fail("listen address '\(text)' in the configuration is not a numeric host:port")
          return 1
        }
        listen.append(address)
      }
    }
    if !listen.isEmpty { configuration.listen = listen }
    for (key, value) in deployment.limits where !givenLimits.contains(key) {
      apply(limit: key, value: value, to: &configuration)
    }
    if deployment.environment == .development,
      let open = configuration.listen.first(where: { !$0.isLoopback })
    {
      fail("development listens on loopback only (127.0.0.0/8 or ::1), not \(open)")
      return 1
    }
    // The file's TLS settings apply where no flag said otherwise.
    if tlsListen.isEmpty {
      for text in deployment.tls.listen {
        guard let address = SocketAddress(text) else {
          fail("tls.listen address '\(text)' in the configuration is not a numeric host:port")
          return 1
        }
        tlsListen.append(address)
      }
    }
    if certificates.isEmpty, let file = deployment.tls.certificate { certificates = [file] }
    if keyFiles.isEmpty, let file = deployment.tls.key { keyFiles = [file] }
    let tlsPairs = zip(certificates, keyFiles).map { (certificate: $0, key: $1) }
    if !tlsListen.isEmpty || !certificates.isEmpty || !keyFiles.isEmpty {
      guard !certificates.isEmpty, certificates.count == keyFiles.count, !tlsListen.isEmpty else {
        fail("TLS needs --tls-listen and as many --cert as --key (at least one of each)")
        return 1
      }
      switch tlsContext(pairs: tlsPairs, origin: deployment.origin) {
      case .failure(let problem):
        fail(problem.description)
        return 1
      case .success(let context):
        configuration.tls = context
        configuration.tlsListen = tlsListen
        // Staging and production serve nothing in clear text but a redirect (and /healthz);
        // development keeps plain HTTP on loopback.
        if deployment.environment != .development { configuration.httpsRedirect = deployment.origin }
      }
      if deployment.environment == .development, let open = tlsListen.first(where: { !$0.isLoopback }) {
        fail("development listens on loopback only (127.0.0.0/8 or ::1), not \(open)")
        return 1
      }
    }
    if testRoutes && deployment.environment != .development {
      fail("--test-routes is for development only, not \(deployment.environment.rawValue)")
      return 1
    }

    // Migrations run at every start, before any worker opens its own connection, in a child process.
    let databasePath = dataDirectory + "/band-edge.sqlite"
    guard migrateInChild(dataDirectory: dataDirectory) else { return 1 }
    // The retention job: at start, then hourly, each run a short-lived child.
    let retention = ["--data", dataDirectory, "retention", "--days", String(retentionDays), "--quiet"]
    @Sendable func retain() {
      if !adminInChild(retention) { Log.event("error", "retention_failed", []) }
      DispatchQueue.global().asyncAfter(deadline: .now() + 3600, execute: retain)
    }
    if !printRoutes { retain() }
    let router: Router
    do {
      router = try snapshot(
        deployment: deployment, shellDirectory: shellDirectory, databasePath: databasePath,
        lifetimes: lifetimes, sessionCacheEntries: sessionCacheEntries,
        limits: ClientLimits(
          signIn: signInLimit, exchange: exchangeLimit, trustedProxies: trustedProxies,
          refusalHold: refusalHold),
        testRoutes: testRoutes)
    } catch {
      fail("\(error)")
      return 1
    }
    if printRoutes {
      for route in router.routes {
        let execution = "\(route.execution)"
        print("\(route.method.rawValue) \(route.pattern) \(route.cacheClass.cacheControl) \(execution)")
      }
      return 0
    }
    let server = Server(configuration: configuration, router: router)
    // The reload hook reads fixed values.
    let (shellPath, withTestRoutes, sessionLifetimes, cacheEntries) = (
      shellDirectory, testRoutes, lifetimes, sessionCacheEntries
    )
    let tlsFiles = configuration.tls == nil ? nil : tlsPairs
    let clientLimits = ClientLimits(
      signIn: signInLimit, exchange: exchangeLimit, trustedProxies: trustedProxies, refusalHold: refusalHold)
    do {
      return try server.run(
        onListening: { _ in
          // Logged once serving: a failed start prints only its one error line.
          Log.event(
            "info", "deployment",
            [
              ("environment", deployment.environment.rawValue), ("origin", deployment.origin),
              ("label", deployment.label),
            ])
          // Whether password hashing can run at SCHED_IDLE (see IdlePriority), for operators.
          Log.event(
            "info", "password_hashing", [("priority", IdlePriority.available ? "sched_idle" : "nice_19")])
        },
        reload: {
          // SIGHUP: a whole new snapshot, validated off the loops; the old one serves until it is ready.
          switch DeploymentLoader.load(environment: ProcessEnvironment.all(), configPath: configPath) {
          case .failure(let problems):
            Log.event("error", "reload_refused", [("problems", problems.lines.joined(separator: "; "))])
            return nil
          case .success(let next):
            do {
              let router = try snapshot(
                deployment: next, shellDirectory: shellPath, databasePath: databasePath,
                lifetimes: sessionLifetimes, sessionCacheEntries: cacheEntries,
                limits: clientLimits, testRoutes: withTestRoutes)
              // Certificates are read again with the rest; a bad one refuses the whole reload.
              var tls: TLSContext? = nil
              if let pairs = tlsFiles {
                switch tlsContext(pairs: pairs, origin: next.origin) {
                case .failure(let problem):
                  Log.event("error", "reload_refused", [("problems", problem.description)])
                  return nil
                case .success(let context): tls = context
                }
              }
              Log.event(
                "info", "deployment",
                [("environment", next.environment.rawValue), ("origin", next.origin), ("label", next.label)])
              return Snapshot(
                router: router, tls: tls,
                httpsRedirect: tls != nil && next.environment != .development ? next.origin : nil)
            } catch {
              Log.event("error", "reload_refused", [("problems", "\(error)")])
              return nil
            }
          }
        })
    } catch {
      fail("could not start: \(error)")
      return 1
    }
  }

  /// Everything one configuration serves: health, the shell, the link files and /config.
  static func snapshot(
    deployment: Deployment, shellDirectory: String, databasePath: String, lifetimes: SessionLifetimes,
    sessionCacheEntries: Int, limits: ClientLimits, testRoutes: Bool
  ) throws -> Router {
    let shell = try ShellCatalog.load(directory: shellDirectory, lastModified: Int(time(nil)))
    let files = LinkFiles(deployment)
    guard files.apple.count <= LinkFiles.maxBytes, files.android.count <= LinkFiles.maxBytes else {
      throw ShellError("a verified-link file is larger than 128 KiB")
    }
    let client = ClientContext(
      databasePath: databasePath, deployment: deployment, lifetimes: lifetimes,
      stylesheet: shell.manifest.entries.first { $0.source == "styles.css" }?.path,
      sessionCacheEntries: sessionCacheEntries, signInLimit: limits.signIn, exchangeLimit: limits.exchange,
      trustedProxies: limits.trustedProxies, refusalHold: limits.refusalHold, clock: { Int(time(nil)) })
    return try Router(
      EdgeRoutes.health() + shell.routes + files.routes(maxAge: deployment.linkFileMaxAge)
        + SessionAPI(client).routes + WebPages(client).routes + NativeSignIn(client).routes
        + OpenAPIDocument.routes
        + (testRoutes ? EdgeRoutes.testing() : []))
  }

  /// The TLS context for the certificate/key pairs (the first is the default; others are chosen
  /// by SNI), refused when a key file is readable by other users or no certificate covers the
  /// origin's host.
  static func tlsContext(pairs: [(certificate: String, key: String)], origin: String) -> Result<
    TLSContext, TLSError
  > {
    for (_, key) in pairs {
      var info = stat()
      guard stat(key, &info) == 0 else {
        return .failure(TLSError(message: "cannot read the key file \(key)"))
      }
      if info.st_mode & S_IROTH != 0 || info.st_mode & S_IWOTH != 0 {
        let mode = String(info.st_mode & 0o777, radix: 8)
        return .failure(
          TLSError(message: "the key file \(key) is readable by every user (mode \(mode)); chmod 600 it"))
      }
    }
    let context: TLSContext
    do { context = try TLSContext(pairs: pairs) } catch { return .failure(error) }
    let host = originHost(origin)
    guard context.coversAny(host: host) else {
      let names = pairs.map(\.certificate).joined(separator: ", ")
      return .failure(
        TLSError(message: "the certificate \(names) does not cover \(host), the configured origin's host"))
    }
    return .success(context)
  }

  /// `app.example.org` from `https://app.example.org:8443`; `::1` from `http://[::1]:8080`.
  static func originHost(_ origin: String) -> String {
    var rest = Substring(origin)
    if let scheme = rest.firstRange(of: "://") { rest = rest[scheme.upperBound...] }
    if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
      return String(rest[rest.index(after: rest.startIndex)..<close])
    }
    return String(rest.prefix { $0 != ":" && $0 != "/" })
  }

  private static func apply(limit key: String, value: Double, to configuration: inout ServerConfiguration) {
    let seconds = Duration.milliseconds(Int64(value * 1000))
    let count = Int(value)
    switch key {
    case "max-target-bytes": configuration.limits.maxTargetBytes = count
    case "max-header-bytes": configuration.limits.maxHeaderBytes = count
    case "max-header-count": configuration.limits.maxHeaderCount = count
    case "max-body-bytes": configuration.limits.maxBodyBytes = count
    case "max-connections": configuration.limits.maxConnectionsPerLoop = count
    case "head-timeout": configuration.limits.headTimeout = seconds
    case "body-timeout": configuration.limits.bodyTimeout = seconds
    case "idle-timeout": configuration.limits.idleTimeout = seconds
    case "write-timeout": configuration.limits.writeTimeout = seconds
    case "linger-timeout": configuration.limits.lingerTimeout = seconds
    case "drain-timeout": configuration.drainTimeout = seconds
    default: break
    }
  }

  private static func split(_ word: String) -> (String, String?) {
    guard word.hasPrefix("--"), let eq = word.firstIndex(of: "=") else { return (word, nil) }
    return (String(word[..<eq]), String(word[word.index(after: eq)...]))
  }
}
