import Accounts
import ClientAPI
import Edge
import Gateway
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
      keys rotate [--key-encryption-key FILE]
                                            make a new gateway signing key: published at once, signing
                                            10 minutes later (running servers read it at their next
                                            reload, SIGHUP); KEK as serve finds it (BAND_LICENCE_KEK_FILE,
                                            development: gateway-kek in the data directory)
      retention [--days N] [--once-per S]   erase the personal fields of accounts deleted N days ago or more
                                            (default 30), and forget handoffs and failure counts a day
                                            old; serve runs this at start and hourly with --once-per, so
                                            that a fleet on one database runs it once an hour in all
      sync                                  PostgreSQL: wait (up to 1 s) until every running instance has
                                            heard every change committed before now (run it after
                                            changing access by SQL); exit 1 if some did not answer
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

  /// The store and the command from `arguments`, then the command, run against the store.
  static func run(_ arguments: Arguments) throws(UsageError) -> Int32 {
    let (database, words) = try readStore(arguments)
    guard let noun = words.first, noun != "--help", noun != "-h" else {
      print(help)
      return words.isEmpty ? 2 : 0
    }
    let options = Options(words.dropFirst())
    if noun == "copy-store" { return try copyStore(options) }
    do {
      let store = try open(database)
      try perform(noun, options, store: store, database: database, words: words)
      return 0
    } catch let error as UsageError {
      throw error
    } catch {
      fail("\(error)")
      return 1
    }
  }

  /// The store (`--data`, `--database`, else `BAND_LICENCE_DATABASE_URL`, else `sqlite:data`) and
  /// the other words: the command and its options.
  static func readStore(_ arguments: Arguments) throws(UsageError) -> (DatabaseLocation, [String]) {
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
    return (location ?? .sqlite(directory: "data"), words)
  }

  /// Runs the command `noun` (`options.verb`) against `store`; `words` name it in the refusal of
  /// an unknown one.
  static func perform(
    _ noun: String, _ options: Options, store: ClientStore, database: DatabaseLocation, words: [String]
  ) throws {
    switch (noun, options.verb) {
    case ("account", "create"): try createAccount(options, store)
    case ("account", "disable"), ("account", "enable"): try setDisabled(options, store)
    case ("school", "create"): try createSchool(options, store)
    case ("member", "add"): try addMember(options, store)
    case ("member", "revoke"): try revokeMember(options, store)
    case ("sessions", "list"): try listSessions(options, store)
    case ("sessions", "revoke"): try revokeSessions(options, store)
    case ("audit", _): try audit(options, store)
    case ("seed-demo", _): try seedDemo(store)
    case ("outbox", "list"): try listOutbox(options, store)
    case ("outbox", "test"): try queueTestMail(options, store)
    case ("outbox", "show"): try showOutboxEntry(options, store)
    case ("retention", _): try retention(options, store)
    case ("migrate", _): try migrate(options, store, database: database)
    case ("keys", "rotate"): try rotateKeys(options, store, database: database)
    case ("sync", _): try sync(store)
    default:
      throw UsageError("unknown admin command '\(words.joined(separator: " "))'; see band-edge admin --help")
    }
  }

  static func open(_ location: DatabaseLocation) throws -> ClientStore {
    if let file = location.sqlitePath {
      mkdir(String(file.dropLast("/band-edge.sqlite".count)), 0o700)
    }
    let database = try location.open(databaseSettings())
    // A change of access made here (a revoked session, a disabled account) is heard by every
    // running instance before the command ends.
    if let postgres = database as? PostgresDatabase {
      postgres.afterAnnouncedCommit = { ChangeListener.awaitOthers($0, except: nil) }
    }
    return try ClientStore(database: database, clock: { Int(time(nil)) })
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
      throw StoreError.refused("demo data is for development only, not \(environment)")
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
    guard emails.count == people.count else {
      throw StoreError.refused("a demo address is not an email address")
    }
    if try store.account(email: emails[0]) != nil {
      print("demo data is already there")
      return
    }
    guard try store.auditEvents().isEmpty else {
      throw StoreError.refused(
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
  /// The development key-encryption key beside a SQLite store (`gateway-kek`) goes with the store
  /// to another SQLite directory that has none: the gateway's keys in the copy open only with it.
  /// True when it was copied (0600). A KEK named by flag is the operator's file, never touched.
  static func copyDevelopmentKEK(from: DatabaseLocation, to: DatabaseLocation) -> Bool {
    guard let source = from.sqlitePath, let target = to.sqlitePath,
      let sourceDirectory = source.lastIndex(of: "/").map({ source[..<$0] }),
      let targetDirectory = target.lastIndex(of: "/").map({ target[..<$0] })
    else { return false }
    let kek = sourceDirectory + "/" + GatewayKeys.developmentFile
    let copy = targetDirectory + "/" + GatewayKeys.developmentFile
    guard access(kek, F_OK) == 0, access(copy, F_OK) != 0 else { return false }
    do {
      try KeyEncryptionKey.load(path: kek).save(to: copy)
      return true
    } catch {
      return false
    }
  }

  /// `admin copy-store --from LOCATION --to LOCATION`: `StoreCopy.copy`, then one line per table
  /// (`table rows checksum-prefix`) and a summary; locations are printed masked, rows never.
  static func copyStore(_ options: Options) throws(UsageError) -> Int32 {
    let from = try databaseLocation(try options.required("--from"), "--from")
    let to = try databaseLocation(try options.required("--to"), "--to")
    guard from.argument != to.argument else { throw UsageError("--from and --to name the same store") }
    do {
      // Opening a missing SQLite file would make an empty one: say so instead.
      if let file = from.sqlitePath, access(file, F_OK) != 0 {
        throw StoreError.refused("there is no store at \(from) (no band-edge.sqlite in that directory)")
      }
      if let file = to.sqlitePath { mkdir(String(file.dropLast("/band-edge.sqlite".count)), 0o700) }
      let summaries = try StoreCopy.copy(
        from: try from.open(databaseSettings()), to: try to.open(databaseSettings()),
        sourceName: from.description, targetName: to.description)
      for summary in summaries { print(summary.line) }
      let rows = summaries.reduce(0) { $0 + $1.rows }
      let kek = copyDevelopmentKEK(from: from, to: to) ? ", with gateway-kek" : ""
      print(
        "copied \(rows) row\(rows == 1 ? "" : "s") in \(summaries.count) tables from \(from) to \(to) "
          + "(schema version \(Migrations.latest))\(kek); row counts and SHA-256 checksums match")
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
