import Accounts
import ClientAPI
import Edge
import Store

#if canImport(Glibc)
  import Glibc
#endif

/// `band-edge admin ...`: accounts, schools, memberships, sessions and the audit trail.
enum AdminCommand {
  static let help = """
    Usage: band-edge admin [--data DIR | --database URL] <command>

      account create --email E --name N     the password is read from standard input (never an argument)
      account create --email E --name N --send-set-password [--config FILE]
                                            reads no password: mails a link (valid 7 days) to choose one,
                                            on the deployment's origin (BAND_LICENCE_APP_URL or the config)
      account disable|enable (--email E | --id ACCOUNT-ID) [--force]
                                            disabling ends every session, link, handoff code, trusted
                                            device and pending invitation of the account at once; it is
                                            refused for a school's only administrator unless --force
      school create --name N --slug S
      member add --email E --school SLUG --role administrator|teacher|read_only
      member revoke --email E --school SLUG
      sessions list|revoke (--account E | --account-id ID | --all | --platform ios|android [--below-version V])
      audit [--json] [--since EPOCH-SECONDS]
      outbox list [--limit N]               the newest messages: number, kind, recipient, state
      outbox show --id N                    one message; its text (with its link) only with
                                            BAND_LICENCE_ENV=development
      outbox test --to E                    queue a test message (the running servers deliver it)
      seed-demo                             fictional demo data; development only (BAND_LICENCE_ENV)
      migrate                               apply migrations and exit (serve runs this at every start)
      retention [--days N] [--once-per S]   erase the personal fields of accounts deleted N days ago or more
                                            (default 30), and forget handoffs and failure counts a day
                                            old; serve runs this at start and hourly with --once-per, so
                                            that a fleet on one database runs it once an hour in all
      copy-store --from LOCATION --to LOCATION
                                            copy every table of a store (sqlite:DIR or a postgresql:// URI)
                                            into an empty one of either engine, in one transaction, then
                                            read the copy back and compare it with what was read (row
                                            counts and SHA-256 per table); a value not of its column's
                                            type, or text not UTF-8, is refused; stop servers first

    The store is --database URL (sqlite:DIR or a postgresql:// URI), --data DIR (DIR/band-edge.sqlite),
    else BAND_LICENCE_DATABASE_URL, else data/band-edge.sqlite; migrations apply on open. Each command
    prints what it changed. Exit status: 0 done; 1 refused (one line on stderr says why); 2 usage error.
    """

  static func run(_ arguments: Arguments) throws(UsageError) -> Int32 {
    var arguments = arguments
    var location: DatabaseLocation? = nil
    var words: [String] = []
    while let word = arguments.next() {
      switch word {
      case "--data": location = .sqlite(directory: try arguments.value(of: word, inline: nil))
      case "--database":
        location = try databaseLocation(try arguments.value(of: word, inline: nil), "--database")
      case "--database-unprepared": setenv("BAND_LICENCE_DATABASE_UNPREPARED", "1", 1)
      default: words.append(word)
      }
    }
    // Serve hands its children the location through the environment: a URI's password never
    // stands on a command line, where other users could read it.
    if location == nil, let text = ProcessEnvironment.value("BAND_LICENCE_DATABASE_URL"), !text.isEmpty {
      location = try databaseLocation(text, "BAND_LICENCE_DATABASE_URL")
    }
    let database = location ?? .sqlite(directory: "data")
    guard let noun = words.first, noun != "--help", noun != "-h" else {
      print(help)
      return words.isEmpty ? 2 : 0
    }
    let options = Options(words.dropFirst())
    if noun == "copy-store" { return try copyStore(options) }
    do {
      let store = try open(database)
      switch (noun, options.verb) {
      case ("account", "create"):
        let email = try options.email("--email")
        let name = try options.required("--name")
        if options.flag("--send-set-password") {
          guard let displayName = AccountRules.displayName(name) else {
            throw UsageError(AccountRules.nameProblem)
          }
          let origin: String
          switch ConfigCommand.load(options.value("--config")) {
          case .success(let deployment): origin = deployment.origin
          case .failure(let problems): throw StoreError(problems.lines.joined(separator: "; "))
          }
          let account = try store.createAccountWithSetPasswordLink(
            email: email, displayName: displayName, unknownHash: PasswordHasher().decoy(), actor: "cli",
            origin: origin)
          print("created account \(account.id) \(account.email); a set-password link is in the outbox")
          return 0
        }
        let password = readPassword()
        if let problem = PasswordPolicy.problem(password, email: email) { throw StoreError(problem) }
        let account = try store.createAccount(
          email: email, displayName: name, passwordHash: PasswordHasher().hash(password), actor: "cli")
        print("created account \(account.id) \(account.email)")
      case ("account", "disable"), ("account", "enable"):
        let disable = options.verb == "disable"
        let account =
          if let id = options.value("--id") {
            try store.setDisabled(id: id, disable, actor: "cli", force: options.flag("--force"))
          } else {
            try store.setDisabled(
              email: try options.email("--email"), disable, actor: "cli", force: options.flag("--force"))
          }
        print("\(disable ? "disabled" : "enabled") account \(account.id) \(account.email)")
      case ("school", "create"):
        let school = try store.createSchool(
          name: try options.required("--name"), slug: try options.required("--slug"), actor: "cli")
        print("created school \(school.id) \(school.slug)")
      case ("member", "add"):
        guard let role = Role(rawValue: try options.required("--role")) else {
          throw UsageError("--role takes administrator, teacher or read_only")
        }
        let (email, slug) = (try options.email("--email"), try options.required("--school"))
        try store.addMember(email: email, schoolSlug: slug, role: role, actor: "cli")
        print("granted \(role.rawValue) in \(slug) to \(email)")
      case ("member", "revoke"):
        let (email, slug) = (try options.email("--email"), try options.required("--school"))
        try store.revokeMember(email: email, schoolSlug: slug, actor: "cli")
        print("revoked the membership of \(email) in \(slug)")
      case ("sessions", "list"):
        for s in try store.sessions(try options.sessionFilter()) {
          print(
            "\(s.id) \(s.accountID) \(s.kind) \(s.platform ?? "-") \(s.appVersion ?? "-") created \(s.createdAt) seen \(s.lastSeenAt)"
          )
        }
      case ("sessions", "revoke"):
        let count = try store.revokeSessions(try options.sessionFilter(), reason: "operator", actor: "cli")
        print("revoked \(count) session\(count == 1 ? "" : "s")")
      case ("audit", _):
        let since = Int(options.value("--since") ?? "0") ?? 0
        for e in try store.auditEvents(since: since) {
          if options.flag("--json") {
            print(
              "{\"at\":\(e.at),\"actor\":\"\(Log.escape(e.actor ?? ""))\",\"action\":\"\(Log.escape(e.action))\","
                + "\"subject\":\"\(Log.escape(e.subject ?? ""))\",\"detail\":\"\(Log.escape(e.detail ?? ""))\"}"
            )
          } else {
            print("\(e.at) \(e.actor ?? "-") \(e.action) \(e.subject ?? "-") \(e.detail ?? "")")
          }
        }
      case ("seed-demo", _):
        try seedDemo(store)
      case ("outbox", "list"):
        for m in try store.outbox(limit: Int(options.value("--limit") ?? "50") ?? 50) {
          let state = m.sentAt.map { "sent \($0)" } ?? "waiting (\(m.attempts) attempts)"
          print("\(m.id) \(m.kind) \(m.to) \(state) \(m.messageID)")
        }
      case ("outbox", "test"):
        // The operator's check of the relay: a message the running servers deliver like any other.
        let to = try options.email("--to")
        let message = MailTemplates.message(
          kind: "relay_test", to: to, name: nil, subject: "Band Licence: a test message",
          paragraphs: ["This message checks that Band Licence can send mail. There is nothing to do."],
          reason: "An operator of this Band Licence service sent it with band-edge admin outbox test.")
        let id = try store.enqueueMail(message, host: "band-edge.invalid")
        print("queued \(id) to \(to)")
      case ("outbox", "show"):
        guard let id = Int(try options.required("--id")), let m = try store.outboxEntry(id: id) else {
          throw StoreError("no message with that number in the outbox")
        }
        print("Message-ID: \(m.messageID)\nKind: \(m.kind)\nTo: \(m.to)\nSubject: \(m.subject)")
        print(
          "Created: \(m.createdAt)\nAttempts: \(m.attempts)\nSent: \(m.sentAt.map(String.init) ?? "not yet")")
        if let error = m.lastError { print("Last error: \(error)") }
        // The body holds a link with a token: only an outbox said to be a development one shows it
        // (BAND_LICENCE_ENV=development); unset is not enough, since a production host may set its
        // environment in the configuration file only.
        let environment = ProcessEnvironment.value("BAND_LICENCE_ENV") ?? ""
        if environment == "development" {
          print("\n" + (m.text ?? "(the body was erased once the message was delivered)"))
        } else if environment.isEmpty {
          print("\n(bodies are shown in development only: run with BAND_LICENCE_ENV=development to see it)")
        } else {
          print("\n(bodies are shown in development only; this is \(environment))")
        }
      case ("retention", _):
        var days = 30
        if let text = options.value("--days") {
          days = try Arguments.integer(text, "--days", min: 0, max: 36500)
        }
        var every = 0
        if let text = options.value("--once-per") {
          every = try Arguments.integer(text, "--once-per", min: 1, max: 86400 * 366)
        }
        // With --once-per (serve's hourly job): once per period for every instance on this database.
        let ran = try store.runJob("retention", oncePer: every) { () throws(StoreError) -> Int in
          let erased = try store.eraseDeletedAccounts(window: days * 86400)
          try store.pruneExpired()
          return erased
        }
        if !options.flag("--quiet") {
          if let erased = ran {
            print("erased \(erased) deleted account\(erased == 1 ? "" : "s")")
          } else {
            print("retention already ran within the last \(every) seconds (another instance); nothing done")
          }
        }
      case ("migrate", _):
        // Serve runs this at every start: a store that cannot write is a failed start, not a 500 later.
        try store.checkServable(path: database.description)
        // Accounts written before emails had one normalisation, which nobody can sign in to now:
        // said at every start (IDs only, never an address) until an operator deals with them.
        let unusable = try store.accountsWithUnusableEmails()
        if !unusable.isEmpty {
          Log.event(
            "warning", "emails_not_addresses",
            [
              ("count", "\(unusable.count)"), ("accounts", unusable.prefix(20).joined(separator: " ")),
              (
                "advice",
                "these accounts' stored email is not an address band-edge accepts, so they cannot sign in; "
                  + "disable them with band-edge admin account disable --id ID"
              ),
            ])
        }
        // --quiet when serve runs it: the server's standard output is the JSON access log.
        if !options.flag("--quiet") { print("schema version \(Migrations.latest)") }
      default:
        throw UsageError(
          "unknown admin command '\(words.joined(separator: " "))'; see band-edge admin --help")
      }
      return 0
    } catch let error as UsageError {
      throw error
    } catch {
      fail("\(error)")
      return 1
    }
  }

  static func open(_ location: DatabaseLocation) throws -> ClientStore {
    if let file = location.sqlitePath {
      mkdir(String(file.dropLast("/band-edge.sqlite".count)), 0o700)
    }
    return try ClientStore(database: try location.open(databaseSettings()), clock: { Int(time(nil)) })
  }

  /// The connection settings of a one-off command: statements unprepared when serve (whose child
  /// this may be) or `--database-unprepared` says so (through pgbouncer before 1.21).
  static func databaseSettings() -> DatabaseSettings {
    var settings = DatabaseSettings()
    settings.preparedStatements = ProcessEnvironment.value("BAND_LICENCE_DATABASE_UNPREPARED") != "1"
    return settings
  }

  /// The location `text` names, or a usage error saying what the forms are.
  static func databaseLocation(_ text: String, _ source: String) throws(UsageError) -> DatabaseLocation {
    guard let location = DatabaseLocation(text) else {
      throw UsageError("\(source) takes sqlite:DIR or a postgresql:// URI")
    }
    return location
  }

  /// Fictional demo data for development: two schools, an administrator, a teacher and a
  /// read-only member, all `example.test`; one random password, printed once.
  static func seedDemo(_ store: ClientStore) throws {
    let environment = ProcessEnvironment.value("BAND_LICENCE_ENV") ?? "development"
    guard environment.isEmpty || environment == "development" else {
      throw StoreError("demo data is for development only, not \(environment)")
    }
    let people: [(EmailAddress?, String, [(String, Role)])] = [
      (
        EmailAddress("ada.administrator@example.test"), "Ada Example",
        [("northfield", .administrator), ("riverside", .teacher)]
      ),
      (EmailAddress("tom.teacher@example.test"), "Tom Example", [("northfield", .teacher)]),
      (EmailAddress("rhea.readonly@example.test"), "Rhea Example", [("riverside", .readOnly)]),
    ]
    let emails = people.compactMap(\.0)
    guard emails.count == people.count else { throw StoreError("a demo address is not an email address") }
    if try store.account(email: emails[0]) != nil {
      print("demo data is already there")
      return
    }
    guard try store.auditEvents().isEmpty else {
      throw StoreError(
        "the database already holds other data; demo data goes only into an empty development database")
    }
    let password = Secrets.base64url(Secrets.randomBytes(12))
    let hash = PasswordHasher().hash(password)
    _ = try store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "seed")
    _ = try store.createSchool(name: "Riverside Music Academy", slug: "riverside", actor: "seed")
    for (email, (_, name, roles)) in zip(emails, people) {
      _ = try store.createAccount(email: email, displayName: name, passwordHash: hash, actor: "seed")
      for (slug, role) in roles {
        try store.addMember(email: email, schoolSlug: slug, role: role, actor: "seed")
      }
    }
    print("seeded 2 schools and 3 accounts: \(emails.map(\.normalised).joined(separator: ", "))")
    print("demo password (shown once, the same for all three): \(password)")
  }

  /// The password from standard input: prompted without echo on a terminal, else the first line.
  static func readPassword() -> String {
    let terminal = isatty(0) == 1
    var saved = termios()
    if terminal {
      var line = Array("Password: ".utf8)
      _ = write(2, &line, line.count)
      tcgetattr(0, &saved)
      var quiet = saved
      quiet.c_lflag &= ~tcflag_t(ECHO)
      tcsetattr(0, TCSANOW, &quiet)
    }
    defer {
      if terminal {
        tcsetattr(0, TCSANOW, &saved)
        var newline: [UInt8] = [10]
        _ = write(2, &newline, 1)
      }
    }
    return readLine(strippingNewline: true) ?? ""
  }

  /// `--name value` options after the verb.
  struct Options {
    let verb: String
    private var values: [String: String] = [:]
    private var flags: Set<String> = []

    init(_ words: ArraySlice<String>) {
      var words = Array(words)
      verb = words.first.map { $0.hasPrefix("--") ? "" : $0 } ?? ""
      if !verb.isEmpty { words.removeFirst() }
      var i = 0
      while i < words.count {
        if i + 1 < words.count, !words[i + 1].hasPrefix("--") {
          values[words[i]] = words[i + 1]
          i += 2
        } else {
          flags.insert(words[i])
          i += 1
        }
      }
    }

    func value(_ name: String) -> String? { values[name] }

    /// The email address option `name`, normalised (`EmailAddress`), or a usage error.
    func email(_ name: String) throws(UsageError) -> EmailAddress {
      let text = try required(name)
      guard let email = EmailAddress(text) else {
        throw UsageError("\(name) takes an email address such as ada@example.test")
      }
      return email
    }
    func flag(_ name: String) -> Bool { flags.contains(name) }

    func required(_ name: String) throws(UsageError) -> String {
      guard let value = values[name], !value.isEmpty else { throw UsageError("\(name) is required") }
      return value
    }

    func sessionFilter() throws(UsageError) -> SessionFilter {
      if values["--account"] != nil { return .account(email: try email("--account")) }
      if let id = values["--account-id"] { return .accountID(id) }
      if flags.contains("--all") { return .all }
      if let platform = values["--platform"], platform == "ios" || platform == "android" {
        return .platform(platform, below: values["--below-version"])
      }
      throw UsageError(
        "say which sessions: --account EMAIL, --account-id ID, --all, or --platform ios|android [--below-version V]"
      )
    }
  }
}

extension AdminCommand {
  /// `admin copy-store --from LOCATION --to LOCATION`: `StoreCopy.copy`, then one line per table
  /// (`table rows checksum-prefix`) and a summary; locations are printed masked, rows never.
  static func copyStore(_ options: Options) throws(UsageError) -> Int32 {
    let from = try databaseLocation(try options.required("--from"), "--from")
    let to = try databaseLocation(try options.required("--to"), "--to")
    guard from.argument != to.argument else { throw UsageError("--from and --to name the same store") }
    do {
      // Opening a missing SQLite file would make an empty one: say so instead.
      if let file = from.sqlitePath, access(file, F_OK) != 0 {
        throw StoreError("there is no store at \(from) (no band-edge.sqlite in that directory)")
      }
      if let file = to.sqlitePath { mkdir(String(file.dropLast("/band-edge.sqlite".count)), 0o700) }
      let summaries = try StoreCopy.copy(
        from: try from.open(databaseSettings()), to: try to.open(databaseSettings()),
        sourceName: from.description, targetName: to.description)
      for summary in summaries { print(summary.line) }
      let rows = summaries.reduce(0) { $0 + $1.rows }
      print(
        "copied \(rows) row\(rows == 1 ? "" : "s") in \(summaries.count) tables from \(from) to \(to) "
          + "(schema version \(Migrations.latest)); row counts and SHA-256 checksums match")
      return 0
    } catch {
      fail("\(error)")
      return 1
    }
  }
}

/// Runs `band-edge admin --data DIR migrate` as a short-lived child and waits for it: migrations
/// apply at every start, while the server process itself loads SQLite only when a pooled request
/// first needs it (a server answering static routes never does). The child prints its own error line.
func migrateInChild(_ database: DatabaseLocation) -> Bool {
  adminInChild(["migrate", "--quiet"], database: database)
}

/// Runs `band-edge admin ARGUMENTS` against `database` as a short-lived child and waits for it: the
/// serving process never loads a store for maintenance work. The location goes in the child's
/// environment (`BAND_LICENCE_DATABASE_URL`), never on its command line. True when it exited 0.
func adminInChild(_ words: [String], database: DatabaseLocation) -> Bool {
  let arguments = ["band-edge", "admin"] + words
  var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  defer { for p in argv { free(p) } }
  var environment: [UnsafeMutablePointer<CChar>?] = [strdup("BAND_LICENCE_DATABASE_URL=" + database.argument)]
  var i = 0
  while let entry = environ[i] {
    if strncmp(entry, "BAND_LICENCE_DATABASE_URL=", 26) != 0 { environment.append(strdup(entry)) }
    i += 1
  }
  environment.append(nil)
  defer { for p in environment { free(p) } }
  var pid = pid_t()
  guard posix_spawn(&pid, "/proc/self/exe", nil, nil, &argv, &environment) == 0 else { return false }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
  return status == 0
}
