import Accounts
import ClientAPI
import Deployment
import Dispatch
import Edge
import FoundationEssentials
import Gateway
import LinkAssoc
import Shell
import Store

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
      --key-encryption-key FILE
                              the gateway's key-encryption key: 64 hex digits, mode 0600 (also
                              BAND_LICENCE_KEK_FILE); development makes data/gateway-kek when none
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

  /// Serve, step by step: the flags, the configuration, the listeners and limits it adds, the
  /// store, the routes, then the server until it has drained.
  static func run(_ arguments: Arguments) throws(UsageError) -> Int32 {
    guard var options = try ServeOptions.read(arguments) else {
      print(help)
      return 0
    }
    do throws(StartFailure) {
      let deployment = try loadConfiguration(options.configFlag)
      try applyListeners(deployment, to: &options)
      try applyLimits(deployment, to: &options)
      try requireLoopback(options.settings.server.listen, in: deployment)
      let tlsPairs = try applyTLS(deployment, to: &options)
      let hasAdminListener = try applyAdminListener(deployment, to: &options)
      // The application's metric families join the engine's before anything counts or is shown.
      AccountMetrics.register()
      GatewayMetrics.register()
      Metrics.process.namespace = EngineRules.metricNamespace
      Metrics.process.enabled = options.metricsOn
      // Off, the registry still serves its gauges (queue depths among them); no thread gets a shard.
      options.settings.server.metrics = Metrics.process
      if options.testRoutes && deployment.environment != .development {
        throw StartFailure("--test-routes is for development only, not \(deployment.environment.rawValue)")
      }
      let smtp = try mail(deployment, options)
      let store = try openStore(deployment, options)
      let services = makeServices(options, store: store, smtp: smtp)
      let keys = try gatewayKeys(deployment, options, store: store, services: services)
      // A fleet shares the gateway's per-address and per-account limits as it shares the others.
      if let keys { services.heartbeat?.share(keys.gateway.limiters) }
      let router = try routes(deployment, options, services: services, keys: keys)
      if options.printRoutes {
        printRoutes(router)
        return 0
      }
      let adminRouter = hasAdminListener ? try adminRoutes(deployment, services: services, keys: keys) : nil
      let reload = ServeReload(
        configPath: ConfigCommand.configPath(options.configFlag), started: deployment,
        shellDirectory: options.shellDirectory, services: services, keys: keys,
        testRoutes: options.testRoutes,
        http2: options.http2, tlsFiles: options.settings.server.tls == nil ? nil : tlsPairs,
        loops: options.settings.server.threads)
      options.settings.server.upstreams = upstreams(deployment, loops: options.settings.server.threads)
      options.settings.server.upstreamMetrics = UpstreamMetrics.register(
        upstreams: deployment.upstreams.keys.sorted())
      return try serve(
        deployment, options, router: router, adminRouter: adminRouter, reload: reload, database: store)
    } catch {
      for line in error.lines { fail(line) }
      return 1
    }
  }

  /// The loops' endpoints for `deployment`'s upstreams; each that cannot be reached as configured
  /// is switched off and logged (`upstream_unreachable`), so its routes answer 503.
  static func upstreams(_ deployment: Deployment, loops: Int) -> [UpstreamEndpoint] {
    let made = UpstreamEndpoints.make(deployment, loops: loops)
    for line in made.problems { Log.event("warning", "upstream_unreachable", [("problem", line)]) }
    return made.endpoints
  }

  /// Why serve does not start: the lines it prints (none when a child printed its own); exit 1.
  struct StartFailure: Error {
    let lines: [String]

    init(_ line: String) { lines = [line] }
    init(lines: [String]) { self.lines = lines }
  }

  /// The deployment, or every problem with it.
  static func loadConfiguration(_ configFlag: String?) throws(StartFailure) -> Deployment {
    switch ConfigCommand.load(configFlag) {
    case .failure(let problems):
      let count = problems.lines.count
      throw StartFailure(
        lines: problems.lines + [
          "refusing to start: the configuration has \(count) problem\(count == 1 ? "" : "s")"
        ])
    case .success(let deployment):
      return deployment
    }
  }

  /// The file's listeners apply where no flag said otherwise.
  static func applyListeners(_ deployment: Deployment, to options: inout ServeOptions) throws(StartFailure) {
    if options.listen.isEmpty {
      for text in deployment.listen {
        guard let address = SocketAddress(text) else {
          throw StartFailure("listen address '\(text)' in the configuration is not a numeric host:port")
        }
        options.listen.append(address)
      }
    }
    if !options.listen.isEmpty { options.settings.server.listen = options.listen }
  }

  /// The file's limits apply where no flag said otherwise, and must work together.
  static func applyLimits(_ deployment: Deployment, to options: inout ServeOptions) throws(StartFailure) {
    // Checked already by ConfigCommand.load: only the applying is left.
    _ = LimitTable.apply(file: deployment.limits, except: options.givenLimits, to: &options.settings)
    let conflicts =
      LimitTable.crossCheck(options.settings)
      + GatewayRoutes.crossCheck(deployment, settings: options.settings)
    guard conflicts.isEmpty else { throw StartFailure(lines: conflicts) }
  }

  /// Development listens on loopback only.
  static func requireLoopback(_ addresses: [SocketAddress], in deployment: Deployment) throws(StartFailure) {
    if deployment.environment == .development, let open = addresses.first(where: { !$0.isLoopback }) {
      throw StartFailure("development listens on loopback only (127.0.0.0/8 or ::1), not \(open)")
    }
  }

  /// The file's TLS settings apply where no flag said otherwise; with any of them, the TLS
  /// context. Returns the certificate/key pairs.
  static func applyTLS(_ deployment: Deployment, to options: inout ServeOptions) throws(StartFailure)
    -> [(certificate: String, key: String)]
  {
    if options.tlsListen.isEmpty {
      for text in deployment.tls.listen {
        guard let address = SocketAddress(text) else {
          throw StartFailure("tls.listen address '\(text)' in the configuration is not a numeric host:port")
        }
        options.tlsListen.append(address)
      }
    }
    if options.certificates.isEmpty, let file = deployment.tls.certificate { options.certificates = [file] }
    if options.keyFiles.isEmpty, let file = deployment.tls.key { options.keyFiles = [file] }
    let pairs = zip(options.certificates, options.keyFiles).map { (certificate: $0, key: $1) }
    guard !options.tlsListen.isEmpty || !options.certificates.isEmpty || !options.keyFiles.isEmpty else {
      return pairs
    }
    guard !options.certificates.isEmpty, options.certificates.count == options.keyFiles.count,
      !options.tlsListen.isEmpty
    else {
      throw StartFailure("TLS needs --tls-listen and as many --cert as --key (at least one of each)")
    }
    switch tlsContext(pairs: pairs, origin: deployment.origin, http2: options.http2) {
    case .failure(let problem):
      throw StartFailure(problem.description)
    case .success(let context):
      options.settings.server.tls = context
      options.settings.server.tlsListen = options.tlsListen
      // Staging and production serve nothing in clear text but a redirect (and /healthz);
      // development keeps plain HTTP on loopback.
      if deployment.environment != .development { options.settings.server.httpsRedirect = deployment.origin }
      options.settings.server.clearPaths = EngineRules.clearPaths
    }
    try requireLoopback(options.tlsListen, in: deployment)
    return pairs
  }

  /// The admin listener (the flag, else the file) and the networks it serves; false when there is none.
  static func applyAdminListener(_ deployment: Deployment, to options: inout ServeOptions)
    throws(StartFailure)
    -> Bool
  {
    guard let text = options.adminListenFlag ?? deployment.admin.listen else { return false }
    switch Operators.admin(listen: text, allow: options.adminAllowFlag ?? deployment.admin.allow) {
    case .failure(let problem):
      throw StartFailure(problem.message)
    case .success(let (address, networks)):
      try requireLoopback([address], in: deployment)
      options.settings.server.adminListen = [address]
      options.settings.server.adminAllow = networks
      return true
    }
  }

  /// The mail relay (see `mailSettings`), with the outbox's timing from the limits.
  static func mail(_ deployment: Deployment, _ options: ServeOptions) throws(StartFailure) -> SMTPSettings? {
    switch mailSettings(deployment: deployment, flag: options.smtpFlag) {
    case .failure(let problem):
      throw StartFailure(problem.message)
    case .success(var smtp):
      smtp?.interval = options.settings.mailInterval
      smtp?.firstRetry = options.settings.mailRetry
      smtp?.timeout = options.settings.mailTimeout
      return smtp
    }
  }

  /// The store (`--database`/`--data`, else `BAND_LICENCE_DATABASE_URL`, else the file), migrated.
  /// Migrations run at every start, before any worker opens its own connection, in a child process
  /// (which prints its own error line). Then the retention job starts, unless serve only prints routes.
  static func openStore(_ deployment: Deployment, _ options: ServeOptions) throws(StartFailure)
    -> DatabaseLocation
  {
    let store: DatabaseLocation
    switch StoreChoice.resolve(
      flag: options.databaseFlag, environment: ProcessEnvironment.value("BAND_LICENCE_DATABASE_URL"),
      file: deployment.database)
    {
    case .success(let choice): store = choice.location
    case .failure(let problem): throw StartFailure(problem.message)
    }
    guard migrateInChild(store) else { throw StartFailure(lines: []) }
    if !options.printRoutes { startRetention(days: options.settings.retentionDays, store: store) }
    return store
  }

  /// The retention job: at start, then hourly, each run a short-lived child. With several
  /// instances on one database, the first to reach each hour runs it (--once-per).
  static func startRetention(days: Int, store: DatabaseLocation) {
    let retention = ["retention", "--days", String(days), "--once-per", "3000", "--quiet"]
    @Sendable func retain() {
      if !adminInChild(retention, database: store) { Log.event("error", "retention_failed", []) }
      DispatchQueue.global().asyncAfter(deadline: .now() + 3600, execute: retain)
    }
    retain()
  }

  /// What lives as long as the process (store connections, the session cache, the rate limiters'
  /// buckets) is built once here; a reload builds only what the configuration determines.
  static func makeServices(_ options: ServeOptions, store: DatabaseLocation, smtp: SMTPSettings?)
    -> ClientServices
  {
    let settings = options.settings
    return ClientServices(
      database: store, settings: settings.database, lifetimes: settings.lifetimes,
      sessionCacheEntries: settings.sessionCacheEntries,
      signInLimit: settings.signInLimit, exchangeLimit: settings.exchangeLimit,
      trustedProxies: options.trustedProxies,
      refusalHold: settings.refusalHold, invitationLimits: settings.invitationLimits, smtp: smtp,
      clock: { Int(time(nil)) })
  }

  /// The gateway's keys at start (`GatewayKeys.start`): the KEK, the store's first key made if
  /// it has none.
  static func gatewayKeys(
    _ deployment: Deployment, _ options: ServeOptions, store: DatabaseLocation, services: ClientServices
  ) throws(StartFailure) -> GatewayKeys? {
    do {
      return try GatewayKeys.start(
        flag: options.kekFlag, deployment: deployment, store: store, services: services,
        limits: (options.settings.gatewayAddressLimit, options.settings.gatewayAccountLimit))
    } catch {
      throw StartFailure("gateway: \(error)")
    }
  }

  /// The first snapshot's routes (see `snapshot`).
  static func routes(
    _ deployment: Deployment, _ options: ServeOptions, services: ClientServices, keys: GatewayKeys?
  ) throws(StartFailure) -> Router {
    do {
      return try snapshot(
        deployment: deployment, shellDirectory: options.shellDirectory, services: services, keys: keys,
        testRoutes: options.testRoutes)
    } catch {
      throw StartFailure("\(error)")
    }
  }

  /// `--print-routes`: one line per route: method, path, cache class, execution.
  static func printRoutes(_ router: Router) {
    for route in router.routes {
      let execution = "\(route.execution)"
      print("\(route.method.rawValue) \(route.pattern) \(route.cacheClass.cacheControl) \(execution)")
    }
  }

  /// The admin listener's routes, with the process gauges published for it.
  static func adminRoutes(_ deployment: Deployment, services: ClientServices, keys: GatewayKeys?)
    throws(StartFailure) -> Router
  {
    let client = ClientContext(services: services, deployment: deployment, stylesheet: nil)
    Operators.publishProcess(Metrics.process, readiness: ReadinessWatch(client))
    let jwks = keys.map { [JWKSRoute.route($0.gateway)] } ?? []
    do {
      return try Operators.router(readiness: Readiness.routes(client) + jwks, metrics: Metrics.process)
    } catch {
      throw StartFailure("\(error)")
    }
  }

  /// Serves until SIGTERM or SIGINT has drained the server; SIGHUP calls `reload`.
  static func serve(
    _ deployment: Deployment, _ options: ServeOptions, router: Router, adminRouter: Router?,
    reload: ServeReload, database: DatabaseLocation
  ) throws(StartFailure) -> Int32 {
    Operators.publish(deployment, tls: options.settings.server.tls, to: Metrics.process)
    let server = Server(configuration: options.settings.server, router: router, adminRouter: adminRouter)
    do {
      let status = try server.run(
        onListening: { _ in
          // The gateway's background writers start once serving (every start check passed, the
          // listeners bound): a start refused earlier must not exit with a thread in the store.
          if let keys = reload.keys {
            keys.keepCurrent(
              database: database, settings: options.settings.database,
              interval: options.settings.gatewayKeysRefresh)
            keys.writeAudits(database: database, settings: options.settings.database)
          }
          // Logged once serving: a failed start prints only its one error line.
          Log.event(
            "info", "deployment",
            [
              ("environment", deployment.environment.rawValue), ("origin", deployment.origin),
              ("label", deployment.label),
            ])
          GatewayRoutes.log(deployment)
          // Whether password hashing can run at SCHED_IDLE (see IdlePriority), for operators.
          Log.event(
            "info", "password_hashing", [("priority", IdlePriority.available ? "sched_idle" : "nice_19")])
        },
        reload: { reload.next() })
      // The forwarded mutations answered during the drain: their audit events, written now.
      if let keys = reload.keys, let store = try? reload.services.store() {
        keys.gateway.writeAudits(to: store)
      }
      return status
    } catch {
      throw StartFailure("could not start: \(error)")
    }
  }

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
    // Mail is sent by libcurl, loaded only when there is mail to send: a relay without it is
    // refused at start, not at the first message.
    if let failure = SMTPSender.libraryFailure {
      return .failure(UsageError("mail needs libcurl: \(failure)"))
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

  /// Everything one configuration serves: health, the shell, the link files and /config, over the
  /// process's `services`.
  static func snapshot(
    deployment: Deployment, shellDirectory: String, services: ClientServices, keys: GatewayKeys?,
    testRoutes: Bool
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
    let all = routes + LinkFallback.routes(deployment: deployment, stylesheet: stylesheet, existing: routes)
    // `config check` held the forward routes to the client API's school routes; here, to all.
    try GatewayRoutes.check(deployment, routes: all)
    let gateway = try GatewayKeys.routes(keys, deployment: deployment, services: services)
    return try Router(
      all + gateway,
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
}
