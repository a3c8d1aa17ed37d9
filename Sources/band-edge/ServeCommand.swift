import ClientAPI
import Dispatch
import Edge
import FoundationEssentials
import LinkAssoc
import Shell

#if canImport(Glibc)
  import Glibc
#endif

/// `band-edge serve`: parse flags into a server configuration and run it.
enum ServeCommand {
  static var help: String {
    """
    Usage: band-edge serve [options]

    Serves HTTP/1.1 until SIGTERM or SIGINT, then drains: stops accepting, finishes what is in
    flight, closes idle connections and exits within --drain-timeout. SIGHUP reloads.

    Listening:
      --listen ADDR           numeric host:port, repeatable (default 127.0.0.1:8080; port 0 picks one)
      --tls-listen ADDR       a TLS (HTTPS) listener, repeatable; needs --cert and --key (the config
                              file's "tls": {"listen", "certificate", "key"} sets the same)
      --cert FILE             PEM certificate chain; with several --cert/--key pairs the first is the
                              default and the others are chosen by the name the client asks for (SNI);
                              one of them must cover the configured origin's host
      --key FILE              PEM private key; refused when readable by other users
      --trusted-proxy IP      a proxy whose X-Forwarded-For is believed for the client address
                              (repeatable; default none)
      --no-access-log         do not write the JSON access log to stdout
      --admin-listen ADDR     the admin listener: GET /metrics (Prometheus), /healthz, /readyz;
                              host:port, or a bare PORT on 127.0.0.1 (config "admin": {"listen"});
                              off when neither is given. See docs/operations.md
      --admin-allow NETS      the client networks the admin listener serves, comma-separated CIDR
                              (config "admin": {"allow": [...]}); default loopback only, and
                              needed when it listens on a non-loopback address
      --no-metrics            count nothing (the admin listener then serves build info only)
      --no-http2              TLS listeners offer ALPN http/1.1 only (by default they offer h2
                              first, then http/1.1; --http2 says so explicitly)
      --h2c                   plain listeners also take HTTP/2 with prior knowledge (a connection
                              that opens with the HTTP/2 preface; for a TLS-terminating proxy in
                              front, and tests); never Upgrade: h2c

    Content and deployment:
      --shell DIR             the built public shell to serve (default shell-build; see band-edge shell build)
      --data DIR              the database directory (default data; band-edge.sqlite inside, migrated at start)
      --database URL          the store: sqlite:DIR (as --data) or a libpq URI postgresql://user@host/db
                              (also the config file's "database" and BAND_LICENCE_DATABASE_URL; this
                              flag wins); a password in the URI is never printed or logged
      --smtp URL              the mail relay, smtp://host:port (STARTTLS required unless on loopback)
                              or smtps://host:port; the config file's "mail" sets it with "from",
                              "username" and "passwordFile". Staging and production need one; in
                              development without one, mail stays in the outbox (admin outbox)
      --database-unprepared   PostgreSQL: send every statement with its text instead of preparing it
                              once per connection (for pgbouncer before 1.21 in transaction mode)
      --database-listen URL   PostgreSQL: where the change listener connects (LISTEN), when the
                              store URL goes through a transaction-mode pooler such as pgbouncer;
                              default the store URL (see docs/fleet.md)
      --config FILE           deployment settings (JSON; also BAND_LICENCE_CONFIG); BAND_LICENCE_ENV and
                              BAND_LICENCE_APP_URL override it; flags override its listen and limits.
                              Any problem stops start-up (see band-edge config check).

    Limits: each is a flag and the config file's "limits": {"NAME": value} alike (the flag wins);
    they take effect at start. Seconds accept fractions (0.25). See docs/limits.md.
    \(LimitTable.helpLines())

    Inspecting:
      --print-routes          print the route table (method, path, cache class, execution) and exit

    Testing:
      --test-routes           add /_test/sleep, /_test/echo, /api/_test/echo and /_test/bytes (development only)

    Exit status: 0 stopped after draining; 1 could not start (for example the address is in use);
    2 usage error.
    """
  }

  static func run(_ arguments: Arguments) throws(UsageError) -> Int32 {
    var arguments = arguments
    var settings = ServeSettings()
    var listen: [SocketAddress] = []
    var tlsListen: [SocketAddress] = []
    var certificates: [String] = []
    var keyFiles: [String] = []
    var testRoutes = false
    var http2 = true
    var shellDirectory = ShellCommand.defaultDestination
    var configFlag: String? = nil
    var databaseFlag: DatabaseLocation? = nil
    var listenURI: String? = nil
    var smtpFlag: String? = nil
    var givenLimits: Set<String> = []
    var printRoutes = false
    var trustedProxies: Set<String> = []
    var adminListenFlag: String? = nil
    var adminAllowFlag: [String]? = nil
    var metricsOn = true
    while let word = arguments.next() {
      let (flag, inline) = split(word)
      func value() throws(UsageError) -> String { try arguments.value(of: flag, inline: inline) }
      if flag.hasPrefix("--"), let limit = LimitTable.named(String(flag.dropFirst(2))) {
        switch limit.parse(try value()) {
        case .failure(let problem): throw problem
        case .success(let number): limit.write(&settings, number)
        }
        givenLimits.insert(limit.name)
        continue
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
      case "--test-routes": testRoutes = true
      case "--print-routes": printRoutes = true
      case "--shell": shellDirectory = try value()
      case "--config": configFlag = try value()
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
        listenURI = uri
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
    if !listen.isEmpty { settings.server.listen = listen }
    // Checked already by ConfigCommand.load: only the applying is left.
    _ = LimitTable.apply(file: deployment.limits, except: givenLimits, to: &settings)
    let conflicts = LimitTable.crossCheck(settings)
    guard conflicts.isEmpty else {
      for line in conflicts { fail(line) }
      return 1
    }
    if deployment.environment == .development,
      let open = settings.server.listen.first(where: { !$0.isLoopback })
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
      switch tlsContext(pairs: tlsPairs, origin: deployment.origin, http2: http2) {
      case .failure(let problem):
        fail(problem.description)
        return 1
      case .success(let context):
        settings.server.tls = context
        settings.server.tlsListen = tlsListen
        // Staging and production serve nothing in clear text but a redirect (and /healthz);
        // development keeps plain HTTP on loopback.
        if deployment.environment != .development { settings.server.httpsRedirect = deployment.origin }
        settings.server.clearPaths = EngineRules.clearPaths
      }
      if deployment.environment == .development, let open = tlsListen.first(where: { !$0.isLoopback }) {
        fail("development listens on loopback only (127.0.0.0/8 or ::1), not \(open)")
        return 1
      }
    }
    var admin: (SocketAddress, [IPNetwork])? = nil
    if let text = adminListenFlag ?? deployment.admin.listen {
      switch Operators.admin(listen: text, allow: adminAllowFlag ?? deployment.admin.allow) {
      case .failure(let problem):
        fail(problem.message)
        return 1
      case .success(let found): admin = found
      }
    }
    if let (address, networks) = admin {
      if deployment.environment == .development && !address.isLoopback {
        fail("development listens on loopback only (127.0.0.0/8 or ::1), not \(address)")
        return 1
      }
      settings.server.adminListen = [address]
      settings.server.adminAllow = networks
    }
    // The application's metric families join the engine's before anything counts or is shown.
    AccountMetrics.register()
    Metrics.process.namespace = EngineRules.metricNamespace
    Metrics.process.enabled = metricsOn
    // Off, the registry still serves its gauges (queue depths among them); no thread gets a shard.
    settings.server.metrics = Metrics.process
    if testRoutes && deployment.environment != .development {
      fail("--test-routes is for development only, not \(deployment.environment.rawValue)")
      return 1
    }
    var smtp: SMTPSettings?
    switch mailSettings(deployment: deployment, flag: smtpFlag) {
    case .success(let found):
      smtp = found
      smtp?.interval = settings.mailInterval
      smtp?.firstRetry = settings.mailRetry
      smtp?.timeout = settings.mailTimeout
    case .failure(let problem):
      fail(problem.message)
      return 1
    }

    // Migrations run at every start, before any worker opens its own connection, in a child process.
    let store: DatabaseLocation
    switch StoreChoice.resolve(
      flag: databaseFlag, environment: ProcessEnvironment.value("BAND_LICENCE_DATABASE_URL"),
      file: deployment.database)
    {
    case .success(let choice): store = choice.location
    case .failure(let problem):
      fail(problem.message)
      return 1
    }
    settings.database.listenURI = listenURI
    guard migrateInChild(store) else { return 1 }
    // The retention job: at start, then hourly, each run a short-lived child.
    // With several instances on one database, the first to reach each hour runs it (--once-per).
    let retention = ["retention", "--days", String(settings.retentionDays), "--once-per", "3000", "--quiet"]
    @Sendable func retain() {
      if !adminInChild(retention, database: store) { Log.event("error", "retention_failed", []) }
      DispatchQueue.global().asyncAfter(deadline: .now() + 3600, execute: retain)
    }
    if !printRoutes { retain() }
    // What lives as long as the process (store connections, the session cache, the rate limiters'
    // buckets) is built once here; a reload builds only what the configuration determines.
    let services = ClientServices(
      database: store, settings: settings.database, lifetimes: settings.lifetimes,
      sessionCacheEntries: settings.sessionCacheEntries,
      signInLimit: settings.signInLimit, exchangeLimit: settings.exchangeLimit,
      trustedProxies: trustedProxies,
      refusalHold: settings.refusalHold, invitationLimits: settings.invitationLimits, smtp: smtp,
      clock: { Int(time(nil)) })
    let router: Router
    do {
      router = try snapshot(
        deployment: deployment, shellDirectory: shellDirectory, services: services, testRoutes: testRoutes)
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
    var adminRouter: Router? = nil
    if admin != nil {
      let client = ClientContext(services: services, deployment: deployment, stylesheet: nil)
      Operators.publishProcess(Metrics.process, readiness: ReadinessWatch(client))
      do {
        adminRouter = try Operators.router(readiness: Readiness.routes(client), metrics: Metrics.process)
      } catch {
        fail("\(error)")
        return 1
      }
    }
    Operators.publish(deployment, tls: settings.server.tls, to: Metrics.process)
    let server = Server(configuration: settings.server, router: router, adminRouter: adminRouter)
    // The reload hook reads fixed values.
    let (shellPath, withTestRoutes, offersHTTP2) = (shellDirectory, testRoutes, http2)
    let tlsFiles = settings.server.tls == nil ? nil : tlsPairs
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
          switch ConfigCommand.load(configPath) {
          case .failure(let problems):
            Log.event("error", "reload_refused", [("problems", problems.lines.joined(separator: "; "))])
            return nil
          case .success(let next):
            do {
              let router = try snapshot(
                deployment: next, shellDirectory: shellPath, services: services, testRoutes: withTestRoutes)
              // Certificates are read again with the rest; a bad one refuses the whole reload.
              var tls: TLSContext? = nil
              if let pairs = tlsFiles {
                switch tlsContext(pairs: pairs, origin: next.origin, http2: offersHTTP2) {
                case .failure(let problem):
                  Log.event("error", "reload_refused", [("problems", problem.description)])
                  return nil
                case .success(let context): tls = context
                }
              }
              Log.event(
                "info", "deployment",
                [("environment", next.environment.rawValue), ("origin", next.origin), ("label", next.label)])
              // Limits and listeners are fixed at start: say which changes wait for a restart.
              let changed =
                Set(next.limits.keys).union(deployment.limits.keys)
                .filter { next.limits[$0] != deployment.limits[$0] }.sorted()
                + (next.listen != deployment.listen ? ["listen"] : [])
                + (next.tls.listen != deployment.tls.listen ? ["tls.listen"] : [])
                + (next.admin != deployment.admin ? ["admin"] : [])
              if !changed.isEmpty {
                Log.event(
                  "warning", "restart_needed",
                  [
                    ("settings", changed.joined(separator: " ")),
                    ("advice", "these take effect at the next start"),
                  ])
              }
              Operators.publish(next, tls: tls, to: Metrics.process)
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

  /// Everything one configuration serves: health, the shell, the link files and /config, over the
  /// process's `services`.
  /// The relay from `--smtp` (winning) or the file's `"mail"`, its sender and its password (read
  /// from `passwordFile`); nil in development without one. Staging and production need both a
  /// relay and a sender: mail is how people recover their accounts.
  static func mailSettings(deployment: Deployment, flag: String?) -> Result<SMTPSettings?, UsageError> {
    let url = flag ?? deployment.mail.smtp
    guard let url else {
      if deployment.environment == .development { return .success(nil) }
      return .failure(
        UsageError(
          "\(deployment.environment.rawValue) needs mail: set \"mail\": {\"smtp\", \"from\"} in the configuration "
            + "(or --smtp URL); people recover their accounts by mail"))
    }
    guard let from = deployment.mail.from else {
      if deployment.environment == .development {
        return .success(SMTPSettings(url: url, from: "Band Licence <no-reply@example.test>"))
      }
      return .failure(UsageError("mail.from is needed with a relay: the address mail is sent from"))
    }
    var settings = SMTPSettings(url: url, from: from)
    settings.username = deployment.mail.username
    if let file = deployment.mail.passwordFile {
      guard let data = FileManager.default.contents(atPath: file) else {
        return .failure(UsageError("mail.passwordFile \(file) cannot be read"))
      }
      var password = String(decoding: data, as: UTF8.self)
      while password.last?.isNewline == true { password.removeLast() }
      settings.password = password
    }
    return .success(settings)
  }

  static func snapshot(
    deployment: Deployment, shellDirectory: String, services: ClientServices, testRoutes: Bool
  ) throws -> Router {
    let shell = try ShellCatalog.load(directory: shellDirectory, lastModified: Int(time(nil)))
    let files = LinkFiles(deployment)
    guard files.apple.count <= LinkFiles.maxBytes, files.android.count <= LinkFiles.maxBytes else {
      throw ShellError("a verified-link file is larger than 128 KiB")
    }
    let stylesheet = shell.manifest.entries.first { $0.source == "styles.css" }?.path
    let client = ClientContext(
      services: services, deployment: deployment, stylesheet: stylesheet)
    // `/favicon.ico` under its stable name (browsers ask for it unprompted), revalidated.
    let favicon = shell.manifest.entries.first { $0.source == "favicon.ico" }.flatMap {
      Favicon.route(file: shellDirectory + "/" + $0.file)
    }
    let routes =
      EdgeRoutes.health() + shell.routes + (favicon.map { [$0] } ?? [])
      + files.routes(maxAge: deployment.linkFileMaxAge)
      + SessionAPI(client).routes + WebPages(client).routes + NativeSignIn(client).routes
      + AccountAPI(client).routes
      + Readiness.routes(client)
      + SchoolsAPI(client).routes + PeoplePages(client).routes + InvitationPages(client).routes
      + OpenAPIDocument.routes
      + (testRoutes ? EdgeRoutes.testing() : [])
    // Every approved app-link path nothing else answers gets its web page (the app is not installed).
    return try Router(
      routes + LinkFallback.routes(deployment: deployment, stylesheet: stylesheet, existing: routes),
      privatePrefixes: EngineRules.privatePrefixes,
      errors: EngineRules.errors(page: ErrorPages.renderer(deployment: deployment, stylesheet: stylesheet)))
  }

  /// The TLS context for the certificate/key pairs (the first is the default; others are chosen
  /// by SNI), refused when a key file is readable by other users or no certificate covers the
  /// origin's host.
  static func tlsContext(pairs: [(certificate: String, key: String)], origin: String, http2: Bool) -> Result<
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
    do { context = try TLSContext(pairs: pairs, http2: http2) } catch { return .failure(error) }
    let host = WebSecurity.host(of: origin)
    guard context.coversAny(host: host) else {
      let names = pairs.map(\.certificate).joined(separator: ", ")
      return .failure(
        TLSError(message: "the certificate \(names) does not cover \(host), the configured origin's host"))
    }
    return .success(context)
  }

  private static func split(_ word: String) -> (String, String?) {
    guard word.hasPrefix("--"), let eq = word.firstIndex(of: "=") else { return (word, nil) }
    return (String(word[..<eq]), String(word[word.index(after: eq)...]))
  }
}
