import Edge
import Store

/// The data the API core owns, on SQLite. Every change writes its audit event in the same
/// transaction. Emails arrive as `EmailAddress`, already in their one normalised form.
public final class ClientStore {
  package let db: MeteredDatabase
  package let clock: @Sendable () -> Int
  /// The server's key for identifiers people type (emails), made at first start and kept in the
  /// database so that every process (and later every instance) keys alike. Never logged.
  let identifierKey: [UInt8]
  /// The server's key for trusted-device cookies (`TrustedDevice`). Never logged.
  let deviceKey: [UInt8]
  /// Where last-seen writes report that they change no cached answer (SQLite's session caches).
  package var seenWrites: ChangeEpoch?

  /// Opens the SQLite database at `path`, applying migrations.
  public convenience init(path: String, clock: @escaping @Sendable () -> Int) throws(StoreError) {
    try self.init(database: try SQLiteDatabase(path: path), clock: clock)
  }

  /// A store over an open `database` of either engine, applying migrations.
  public init(database: any Database, clock: @escaping @Sendable () -> Int) throws(StoreError) {
    db = MeteredDatabase(database)
    self.clock = clock
    try Migrations.apply(to: db)
    identifierKey = try Self.serverKey("identifier", db: db, clock: clock)
    deviceKey = try Self.serverKey("device", db: db, clock: clock)
  }

  /// The schema version the database records (a cheap question that proves it answers).
  public func schemaVersion() throws(StoreError) -> Int { try db.schemaVersion() }

  /// Checks that this database can serve (see `Database.checkServable`); `name` names it in the error.
  public func checkServable(path name: String) throws(StoreError) { try db.checkServable(name: name) }

  /// The key named `name`, made now (256 random bits) if the database has none; concurrent first
  /// starts agree on one, since the insert and the read share a write transaction.
  private static func serverKey(_ name: String, db: any Database, clock: () -> Int) throws(StoreError)
    -> [UInt8]
  {
    let select = "SELECT key FROM server_keys WHERE name = ?"
    if case .blob(let key)? = try db.query(select, [.text(name)]).first?.first, key.count == 32 { return key }
    return try db.transaction { () throws(StoreError) -> [UInt8] in
      try db.query(
        "INSERT INTO server_keys (name, key, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
        [.text(name), .blob(Secrets.randomBytes(32)), .integer(Int64(clock()))])
      guard case .blob(let key)? = try db.query(select, [.text(name)]).first?.first, key.count == 32 else {
        throw StoreError.failed("the server key '\(name)' is damaged")
      }
      return key
    }
  }

  /// HMAC-SHA-256 of a normalised identifier under the server's identifier key: what the store
  /// keeps where it must recognise an identifier again without keeping it (failure counts).
  func identifierDigest(_ email: EmailAddress) -> [UInt8] {
    Secrets.hmac(key: identifierKey, Array(email.normalised.utf8))
  }

  /// What a failure counter is kept under: the email's digest, or for a trusted device the
  /// account's one budget for all its trusted devices together (the account ID under the same key,
  /// in its own domain so that the two never meet): however many device cookies someone holds,
  /// they share one lockout.
  func failureKey(_ email: EmailAddress, device: TrustedDevice?) -> [UInt8] {
    guard let device else { return identifierDigest(email) }
    return Secrets.hmac(key: identifierKey, Array("devices:\(device.accountID)".utf8))
  }

  // MARK: accounts

  /// Creates an account; refuses a second account with the same email.
  public func createAccount(
    email address: EmailAddress, displayName: String, passwordHash: String, actor: String
  )
    throws(StoreError) -> Account
  {
    let email = address.normalised
    guard !displayName.isEmpty else { throw StoreError.refused("an account needs a name") }
    return try db.transaction { () throws(StoreError) -> Account in
      guard try db.query("SELECT 1 FROM accounts WHERE email = ?", [.text(email)]).isEmpty else {
        throw StoreError.refused("an account with that email already exists")
      }
      let account = Account(
        id: Secrets.identifier("acc"), email: email, displayName: displayName, disabled: false)
      try db.query(
        "INSERT INTO accounts (id, email, display_name, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
        [.text(account.id), .text(email), .text(displayName), .text(passwordHash), .integer(Int64(clock()))])
      try audit(actor: actor, action: "account.created", subject: account.id)
      return account
    }
  }

  /// The account with `email` and its password hash.
  public func account(email: EmailAddress) throws(StoreError) -> (Account, passwordHash: String)? {
    let rows = try db.query(
      "SELECT id, email, display_name, disabled, password_hash FROM accounts WHERE email = ?",
      [.text(email.normalised)])
    guard let row = rows.first, case .text(let hash) = row[4] else { return nil }
    return (Self.account(row), hash)
  }

  /// The account with `id`.
  public func account(id: String) throws(StoreError) -> Account? {
    try db.query("SELECT id, email, display_name, disabled FROM accounts WHERE id = ?", [.text(id)]).first
      .map(
        Self.account)
  }

  /// Disables or enables an account; disabling ends everything its credentials issued at once
  /// (`endCredentials`). Disabling the only administrator of a school is refused unless `force`.
  public func setDisabled(email: EmailAddress, _ disabled: Bool, actor: String, force: Bool = false)
    throws(StoreError) -> Account
  {
    guard let (account, _) = try self.account(email: email) else {
      throw StoreError.refused("no account with that email")
    }
    return try setDisabled(account, disabled, actor: actor, force: force)
  }

  /// Disables or enables the account with `id` (for accounts whose stored email is not an address
  /// any more, see `accountsWithUnusableEmails`).
  public func setDisabled(id: String, _ disabled: Bool, actor: String, force: Bool = false) throws(StoreError)
    -> Account
  {
    guard let account = try self.account(id: id) else { throw StoreError.refused("no account with that ID") }
    return try setDisabled(account, disabled, actor: actor, force: force)
  }

  /// IDs of live accounts whose stored email is not in the one normalised form: written before
  /// `EmailAddress` (any text with an `@` was taken), they can no longer be signed in to or named
  /// by email; operators address them by ID.
  public func accountsWithUnusableEmails() throws(StoreError) -> [String] {
    try db.query("SELECT id, email FROM accounts WHERE erased_at IS NULL ORDER BY id").compactMap { row in
      guard case .text(let id) = row[0], case .text(let email) = row[1] else { return nil }
      return EmailAddress(email)?.normalised == email ? nil : id
    }
  }

  private func setDisabled(_ account: Account, _ disabled: Bool, actor: String, force: Bool)
    throws(StoreError)
    -> Account
  {
    return try db.transaction { () throws(StoreError) -> Account in
      let deleted = try db.query(
        "SELECT 1 FROM accounts WHERE id = ? AND deleted_at IS NOT NULL", [.text(account.id)])
      guard disabled || deleted.isEmpty else {
        throw StoreError.refused("that account was deleted by its owner and cannot be enabled again")
      }
      if disabled, !force {
        let schools = try schoolsOnlyAdministeredBy(accountID: account.id)
        guard schools.isEmpty else {
          throw StoreError.refused(
            "that account is the only administrator of \(schools.map(\.slug).joined(separator: ", ")); "
              + "make someone else an administrator there first, or add --force to leave "
              + (schools.count == 1 ? "it" : "them") + " without one")
        }
      }
      try db.query(
        "UPDATE accounts SET disabled = ? WHERE id = ?", [.integer(disabled ? 1 : 0), .text(account.id)])
      if disabled { try endCredentials(accountID: account.id, .disabled) }
      try audit(actor: actor, action: disabled ? "account.disabled" : "account.enabled", subject: account.id)
      return Account(
        id: account.id, email: account.email, displayName: account.displayName, disabled: disabled)
    }
  }

  // MARK: schools and memberships

  /// Creates a school with a unique slug (lower-case letters, digits and hyphens).
  public func createSchool(name: String, slug: String, actor: String) throws(StoreError) -> School {
    guard !name.isEmpty, !slug.isEmpty,
      slug.allSatisfy({ ($0.isLetter && $0.isLowercase) || $0.isNumber || $0 == "-" })
    else {
      throw StoreError.refused("a school needs a name and a slug of lower-case letters, digits and hyphens")
    }
    return try db.transaction { () throws(StoreError) -> School in
      guard try db.query("SELECT 1 FROM schools WHERE slug = ?", [.text(slug)]).isEmpty else {
        throw StoreError.refused("a school with slug '\(slug)' already exists")
      }
      let school = School(id: Secrets.identifier("sch"), name: name, slug: slug)
      try db.query(
        "INSERT INTO schools (id, name, slug, created_at) VALUES (?, ?, ?, ?)",
        [.text(school.id), .text(name), .text(slug), .integer(Int64(clock()))])
      try audit(actor: actor, action: "school.created", subject: school.id)
      return school
    }
  }

  /// Gives the account a role in the school (replacing an earlier or revoked one); a role below
  /// administrator withdraws the invitations they sent there.
  public func addMember(email: EmailAddress, schoolSlug: String, role: Role, actor: String) throws(StoreError)
  {
    let (account, school) = try accountAndSchool(email, schoolSlug)
    try db.transaction { () throws(StoreError) in
      if role != .administrator {
        try withdrawInvitations(sentBy: account.id, in: school.id, because: "inviter_demoted")
      }
      try db.query(
        """
        INSERT INTO memberships (account_id, school_id, role, created_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (account_id, school_id) DO UPDATE SET role = excluded.role, revoked_at = NULL
        """, [.text(account.id), .text(school.id), .text(role.rawValue), .integer(Int64(clock()))])
      try audit(
        actor: actor, action: "membership.granted", subject: account.id,
        detail: "\(school.id) \(role.rawValue)")
    }
  }

  /// Revokes the account's membership of the school (it disappears from the next answer) and
  /// withdraws the invitations they sent there.
  public func revokeMember(email: EmailAddress, schoolSlug: String, actor: String) throws(StoreError) {
    let (account, school) = try accountAndSchool(email, schoolSlug)
    try db.transaction { () throws(StoreError) in
      try db.query(
        "UPDATE memberships SET revoked_at = ? WHERE account_id = ? AND school_id = ? AND revoked_at IS NULL",
        [.integer(Int64(clock())), .text(account.id), .text(school.id)])
      guard db.changes == 1 else {
        throw StoreError.refused("no live membership of \(schoolSlug) for that account")
      }
      try withdrawInvitations(sentBy: account.id, in: school.id, because: "inviter_removed")
      try audit(actor: actor, action: "membership.revoked", subject: account.id, detail: school.id)
    }
  }

  /// The account's live memberships, by school name.
  public func memberships(accountID: String) throws(StoreError) -> [Membership] {
    try db.query(
      """
      SELECT s.id, s.name, s.slug, m.role FROM memberships m JOIN schools s ON s.id = m.school_id
      WHERE m.account_id = ? AND m.revoked_at IS NULL ORDER BY s.name, s.id
      """, [.text(accountID)]
    ).compactMap { row in
      guard case .text(let id) = row[0], case .text(let name) = row[1], case .text(let slug) = row[2],
        case .text(let role) = row[3], let parsed = Role(rawValue: role)
      else { return nil }
      return Membership(school: School(id: id, name: name, slug: slug), role: parsed)
    }
  }

  // MARK: fleet-wide jobs

  /// Runs the periodic job `name` unless it already ran, on this database, less than `period`
  /// seconds ago (0: always runs) — so N instances each starting it hourly run it once an hour
  /// between them. Instances starting it at the same moment queue on one lock, and each sees the
  /// run of the one before. Returns the job's result, or nil when it was not due.
  public func runJob<T>(_ name: String, oncePer period: Int, _ job: () throws(StoreError) -> T)
    throws(StoreError) -> T?
  {
    try db.exclusiveTransaction(.jobs) { () throws(StoreError) -> T? in
      let now = clock()
      if period > 0,
        case .integer(let last)? = try db.query(
          "SELECT last_run_at FROM job_runs WHERE job = ?", [.text(name)]
        )
        .first?.first, now - Int(last) < period
      {
        return nil
      }
      let result = try job()
      try db.query(
        """
        INSERT INTO job_runs (job, last_run_at) VALUES (?, ?)
        ON CONFLICT (job) DO UPDATE SET last_run_at = excluded.last_run_at
        """, [.text(name), .integer(Int64(now))])
      return result
    }
  }

  /// Records that instance `id` is alive now, forgets instances silent for a minute, and returns
  /// how many were seen within the last `window` seconds (this one included).
  public func heartbeat(instance id: String, window: Int) throws(StoreError) -> Int {
    let now = clock()
    try db.query(
      "INSERT INTO instances (id, seen_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
      [.text(id), .integer(Int64(now))])
    try db.query("DELETE FROM instances WHERE seen_at < ?", [.integer(Int64(now - 60))])
    guard
      case .integer(let n)? = try db.query(
        "SELECT count(*) FROM instances WHERE seen_at >= ?", [.integer(Int64(now - window))]
      ).first?.first
    else { return 1 }
    return max(1, Int(n))
  }

  /// Forgets instance `id` (it is stopping).
  public func leave(instance id: String) throws(StoreError) {
    try db.query("DELETE FROM instances WHERE id = ?", [.text(id)])
  }

  // MARK: audit

  /// The audited actions after which a session's answer (`GET /session`: live or not, the account,
  /// its schools) may differ. Every change of access is a security action and so audited; the
  /// audit is where it is announced, so no such change can forget to be.
  static let changesSessionAnswers: Set<String> = [
    "session.revoked", "account.disabled", "account.enabled", "account.deletion_requested", "account.erased",
    "membership.granted", "membership.revoked", "membership.role_changed", "invitation.accepted",
    // A password set by link or changed ends sessions; a new name or email is in the answer.
    "account.password_reset", "account.password_set", "account.password_changed", "account.name_changed",
    "account.email_changed", "account.email_restored",
  ]

  /// Appends an audit event (inside the caller's transaction); for an action that changes session
  /// answers, also bumps the change counter and announces the change to the fleet at commit.
  package func audit(actor: String?, action: String, subject: String?, detail: String? = nil)
    throws(StoreError)
  {
    try db.query(
      "INSERT INTO audit_events (at, actor, action, subject, detail) VALUES (?, ?, ?, ?, ?)",
      [
        .integer(Int64(clock())), actor.map { .text($0) } ?? .null, .text(action),
        subject.map { .text($0) } ?? .null,
        detail.map { .text($0) } ?? .null,
      ])
    if Self.changesSessionAnswers.contains(action) { try db.announceChange() }
    if let (id, series) = Self.metric(action: action, detail: detail) { db.note(id, series) }
  }

  /// The counter an audited action moves, if any (counted when its transaction commits).
  package static func metric(action: String, detail: String?) -> (MetricHandle, Int)? {
    switch (action, detail) {
    case ("session.created", "native"?): (.sessionsCreated, SignInChannel.native.rawValue)
    case ("session.created", _): (.sessionsCreated, SignInChannel.web.rawValue)
    case ("session.revoked", let reason): (.sessionsRevoked, revocationSeries(reason))
    case ("handoff.created", _): (.handoffsCreated, 0)
    case ("sign_in.succeeded", "native"?): (.nativeExchanges, ExchangeMetric.issued.rawValue)
    case ("handoff.retried", _): (.nativeExchanges, ExchangeMetric.idempotentRetry.rawValue)
    case ("handoff.refused", _): (.nativeExchanges, ExchangeMetric.invalidGrant.rawValue)
    case ("handoff.replayed", _): (.nativeExchanges, ExchangeMetric.replayRevoked.rawValue)
    case ("sign_in.failed", "locked"?): (.lockoutsStarted, 0)
    default: nil
    }
  }

  /// The `reason` label's index for a revocation reason the store writes.
  static func revocationSeries(_ reason: String?) -> Int {
    let reasons = AccountMetrics.revocationReasons
    return reason.flatMap { reasons.firstIndex(of: $0) } ?? reasons.count - 1
  }

  /// The change counter: how many changes of session answers have been announced.
  public func changeCount() throws(StoreError) -> Int { try db.changeCount() }

  /// Audit events at or after `since`, oldest first.
  public func auditEvents(since: Int = 0) throws(StoreError) -> [AuditEvent] {
    try db.query(
      "SELECT at, actor, action, subject, detail FROM audit_events WHERE at >= ? ORDER BY seq",
      [
        .integer(Int64(since))
      ]
    ).map { row in
      AuditEvent(
        at: row[0].int ?? 0, actor: row[1].text, action: row[2].text ?? "", subject: row[3].text,
        detail: row[4].text)
    }
  }

  // MARK: helpers

  private func accountAndSchool(_ email: EmailAddress, _ slug: String) throws(StoreError) -> (Account, School)
  {
    guard let (account, _) = try account(email: email) else {
      throw StoreError.refused("no account with that email")
    }
    guard let row = try db.query("SELECT id, name, slug FROM schools WHERE slug = ?", [.text(slug)]).first,
      case .text(let id) = row[0], case .text(let name) = row[1]
    else { throw StoreError.refused("no school with slug '\(slug)'") }
    return (account, School(id: id, name: name, slug: slug))
  }

  package static func account(_ row: [DatabaseValue]) -> Account {
    Account(
      id: row[0].text ?? "", email: row[1].text ?? "", displayName: row[2].text ?? "",
      disabled: (row[3].int ?? 0) != 0)
  }
}
