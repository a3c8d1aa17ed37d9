import Accounts
import ClientAPI
import Deployment
import Edge
import Gateway
import Store

#if canImport(Glibc)
  import Glibc
#endif

/// One function per `band-edge admin` command: each prints what it changed, or throws (a
/// `UsageError` for exit status 2, anything else for 1).
extension AdminCommand {
  /// `account create`: with a password read from standard input, or `--send-set-password` (a link
  /// in the outbox, on the deployment's origin).
  static func createAccount(_ options: Options, _ store: ClientStore) throws {
    let email = try options.email("--email")
    let name = try options.required("--name")
    if options.flag("--send-set-password") {
      guard let displayName = AccountRules.displayName(name) else {
        throw UsageError(AccountRules.nameProblem)
      }
      let origin: String
      switch ConfigCommand.load(options.value("--config")) {
      case .success(let deployment): origin = deployment.origin
      case .failure(let problems): throw StoreError.refused(problems.lines.joined(separator: "; "))
      }
      let account = try store.createAccountWithSetPasswordLink(
        email: email, displayName: displayName, unknownHash: PasswordHasher().decoy(), actor: "cli",
        origin: origin)
      print("created account \(account.id) \(account.email); a set-password link is in the outbox")
      return
    }
    let password = readPassword()
    if let problem = PasswordPolicy.problem(password, email: email) { throw StoreError.refused(problem) }
    let account = try store.createAccount(
      email: email, displayName: name, passwordHash: PasswordHasher().hash(password), actor: "cli")
    print("created account \(account.id) \(account.email)")
  }

  /// `account disable|enable (--email E | --id ID) [--force]`.
  static func setDisabled(_ options: Options, _ store: ClientStore) throws {
    let disable = options.verb == "disable"
    let account =
      if let id = options.value("--id") {
        try store.setDisabled(id: id, disable, actor: "cli", force: options.flag("--force"))
      } else {
        try store.setDisabled(
          email: try options.email("--email"), disable, actor: "cli", force: options.flag("--force"))
      }
    print("\(disable ? "disabled" : "enabled") account \(account.id) \(account.email)")
  }

  /// `school create --name N --slug S`.
  static func createSchool(_ options: Options, _ store: ClientStore) throws {
    let school = try store.createSchool(
      name: try options.required("--name"), slug: try options.required("--slug"), actor: "cli")
    print("created school \(school.id) \(school.slug)")
  }

  /// `member add --email E --school SLUG --role R`.
  static func addMember(_ options: Options, _ store: ClientStore) throws {
    guard let role = Role(rawValue: try options.required("--role")) else {
      throw UsageError("--role takes administrator, teacher or read_only")
    }
    let (email, slug) = (try options.email("--email"), try options.required("--school"))
    try store.addMember(email: email, schoolSlug: slug, role: role, actor: "cli")
    print("granted \(role.rawValue) in \(slug) to \(email)")
  }

  /// `member revoke --email E --school SLUG`.
  static func revokeMember(_ options: Options, _ store: ClientStore) throws {
    let (email, slug) = (try options.email("--email"), try options.required("--school"))
    try store.revokeMember(email: email, schoolSlug: slug, actor: "cli")
    print("revoked the membership of \(email) in \(slug)")
  }

  /// `sessions list FILTER`: one line per session.
  static func listSessions(_ options: Options, _ store: ClientStore) throws {
    for s in try store.sessions(try options.sessionFilter()) {
      print(
        "\(s.id) \(s.accountID) \(s.kind) \(s.platform ?? "-") \(s.appVersion ?? "-") created \(s.createdAt) seen \(s.lastSeenAt)"
      )
    }
  }

  /// `sessions revoke FILTER`.
  static func revokeSessions(_ options: Options, _ store: ClientStore) throws {
    let count = try store.revokeSessions(try options.sessionFilter(), reason: "operator", actor: "cli")
    print("revoked \(count) session\(count == 1 ? "" : "s")")
  }

  /// `audit [--json] [--since EPOCH-SECONDS]`: one line per event.
  static func audit(_ options: Options, _ store: ClientStore) throws {
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
  }

  /// `outbox list [--limit N]`: the newest messages, one line each.
  static func listOutbox(_ options: Options, _ store: ClientStore) throws {
    for m in try store.outbox(limit: Int(options.value("--limit") ?? "50") ?? 50) {
      let state = m.sentAt.map { "sent \($0)" } ?? "waiting (\(m.attempts) attempts)"
      print("\(m.id) \(m.kind) \(m.to) \(state) \(m.messageID)")
    }
  }

  /// `outbox test --to E`: the operator's check of the relay, a message the running servers
  /// deliver like any other.
  static func queueTestMail(_ options: Options, _ store: ClientStore) throws {
    let to = try options.email("--to")
    let message = MailTemplates.message(
      kind: "relay_test", to: to, name: nil, subject: "Band Licence: a test message",
      paragraphs: ["This message checks that Band Licence can send mail. There is nothing to do."],
      reason: "An operator of this Band Licence service sent it with band-edge admin outbox test.")
    let id = try store.enqueueMail(message, host: "band-edge.invalid")
    print("queued \(id) to \(to)")
  }

  /// `outbox show --id N`: one message; its text only in development.
  static func showOutboxEntry(_ options: Options, _ store: ClientStore) throws {
    guard let id = Int(try options.required("--id")), let m = try store.outboxEntry(id: id) else {
      throw StoreError.refused("no message with that number in the outbox")
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
  }

  /// `retention [--days N] [--once-per S] [--quiet]`.
  static func retention(_ options: Options, _ store: ClientStore) throws {
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
  }

  /// `migrate [--quiet]`: the store is opened (which migrates it) and must be able to serve.
  static func migrate(_ options: Options, _ store: ClientStore, database: DatabaseLocation) throws {
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
  }

  /// `sync`: on PostgreSQL, returns once every running instance's change listener has heard every
  /// change committed before it (`PostgresDatabase.awaitListeners`), so that a change of access made
  /// by SQL is honoured by the next request anywhere; band-edge's own changes wait so by themselves.
  static func sync(_ store: ClientStore) throws {
    guard let postgres = store.db.engine as? PostgresDatabase else {
      print("nothing to wait for: on SQLite every instance sees a commit at once")
      return
    }
    let unheard = try postgres.awaitListeners(except: nil, within: ChangeListener.acknowledgementWait)
    guard unheard == 0 else {
      throw StoreError.failed(
        "\(unheard) listening instance(s) did not say they heard within 1 s; they honour every change within 1 s of it anyway"
      )
    }
    print("every listening instance has heard every change committed before now")
  }

  /// `keys rotate`: a new gateway key, published now, signing after the policy's delay; keys
  /// retired from the JWKS are deleted. The KEK is found as `serve` finds it.
  static func rotateKeys(_ options: Options, _ store: ClientStore, database: DatabaseLocation) throws {
    let name = ProcessEnvironment.value("BAND_LICENCE_ENV") ?? "development"
    guard let environment = Environment(rawValue: name.isEmpty ? "development" : name) else {
      throw UsageError("BAND_LICENCE_ENV must be development, staging or production")
    }
    guard
      let path = GatewayKeys.path(
        flag: options.value("--key-encryption-key"), environment: environment, store: database)
    else { throw GatewayError.keyFile(path: "(none)", reason: "is needed: pass --key-encryption-key FILE") }
    let kek = try GatewayKeys.kek(path: path, environment: environment)
    let ring = try GatewayKeyStore(store: store, kek: kek).rotate(now: Int(time(nil)), actor: "admin")
    guard let newest = ring.newest else { return }
    print("gateway key \(newest.key.kid) made; it signs from \(newest.signsFrom) (epoch seconds)")
    print("published keys: \(ring.published(at: Int(time(nil))).map(\.key.kid).joined(separator: ", "))")
  }
}
