import Store

extension ClientStore {
  /// Starts a session for `accountID`; the token's digest is stored, never the token.
  public func createSession(
    accountID: String, kind: SessionRecord.Kind, platform: String?, appVersion: String?, token: String,
    lifetimes: SessionLifetimes, browser: String? = nil, network: String? = nil
  ) throws(StoreError) -> SessionRecord {
    let now = clock()
    let absolute = lifetimes.absolute(kind)
    let record = SessionRecord(
      id: Secrets.identifier("ses"), accountID: accountID, kind: kind, platform: platform,
      appVersion: appVersion,
      createdAt: now, lastSeenAt: now, expiresAt: now + absolute, revokedAt: nil, revokedReason: nil,
      browser: browser, network: network)
    try db.transaction { () throws(StoreError) in
      try db.query(
        """
        INSERT INTO sessions (id, token_digest, account_id, kind, platform, app_version, created_at, last_seen_at, expires_at,
          browser, network)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [
          .text(record.id), .blob(Secrets.digest(token)), .text(accountID), .text(kind.rawValue),
          platform.map { .text($0) } ?? .null, appVersion.map { .text($0) } ?? .null, .integer(Int64(now)),
          .integer(Int64(now)), .integer(Int64(record.expiresAt)), browser.map { .text($0) } ?? .null,
          network.map { .text($0) } ?? .null,
        ])
      try audit(actor: accountID, action: "session.created", subject: record.id, detail: kind.rawValue)
    }
    return record
  }

  /// The live session a token names and its account: not revoked, the account enabled, within both
  /// lifetimes. Marks it seen (at most once a minute, so reads rarely write), from `network` (the
  /// request's `networkHint`) when known.
  public func session(token: String, lifetimes: SessionLifetimes, network: String? = nil) throws(StoreError)
    -> (
      SessionRecord, Account
    )?
  {
    let rows = try db.query(
      """
      SELECT s.id, s.account_id, s.kind, s.platform, s.app_version, s.created_at, s.last_seen_at, s.expires_at, s.browser,
             a.id, a.email, a.display_name, a.disabled
      FROM sessions s JOIN accounts a ON a.id = s.account_id
      WHERE s.token_digest = ? AND s.revoked_at IS NULL
      """, [.blob(Secrets.digest(token))])
    guard let row = rows.first else { return nil }
    let record = Self.session(Array(row[0..<9]), revokedAt: nil, reason: nil)
    let account = Self.account(Array(row[9..<13]))
    return try liveSeenAt(record, account, lifetimes, network: network) == nil ? nil : (record, account)
  }

  /// The live session a token names, its account and the account's live memberships, in one
  /// statement (one read transaction): what `GET /session` answers. Same rules as `session`.
  public func sessionView(token: String, lifetimes: SessionLifetimes) throws(StoreError) -> SessionView? {
    try sessionViews(tokens: [token], lifetimes: lifetimes)[0]
  }

  /// `sessionView` for several tokens in one statement (the pool's batch of `GET /session`
  /// reads): one answer per token, in order, nil where the token names no live session.
  /// `networks[i]`, when given, is where `tokens[i]` was presented from (`networkHint`).
  public func sessionViews(tokens: [String], lifetimes: SessionLifetimes, networks: [String?] = [])
    throws(StoreError) -> [SessionView?]
  {
    guard !tokens.isEmpty else { return [] }
    let digests = tokens.map { Secrets.digest($0) }
    var distinct: [[UInt8]] = []
    for digest in digests where !distinct.contains(digest) { distinct.append(digest) }
    // A few statement texts only (1, 2, 4, ... placeholders, the last digest repeated), so each is
    // prepared once per connection.
    var width = 1
    while width < distinct.count { width *= 2 }
    let parameters = (0..<width).map { DatabaseValue.blob(distinct[min($0, distinct.count - 1)]) }
    let rows = try db.query(
      """
      SELECT s.token_digest, s.id, s.account_id, s.kind, s.platform, s.app_version, s.created_at, s.last_seen_at,
             s.expires_at, s.browser, a.id, a.email, a.display_name, a.disabled, sc.id, sc.name, sc.slug, m.role
      FROM sessions s JOIN accounts a ON a.id = s.account_id
      LEFT JOIN memberships m ON m.account_id = a.id AND m.revoked_at IS NULL
      LEFT JOIN schools sc ON sc.id = m.school_id
      WHERE s.token_digest IN (\(Array(repeating: "?", count: width).joined(separator: ", "))) AND s.revoked_at IS NULL
      ORDER BY sc.name, sc.id
      """, parameters)
    var found: [[UInt8]: SessionView] = [:]
    for digest in distinct {
      let mine = rows.filter { $0[0] == .blob(digest) }
      guard let first = mine.first else { continue }
      let stored = Self.session(Array(first[1..<10]), revokedAt: nil, reason: nil)
      let account = Self.account(Array(first[10..<14]))
      let network = digests.indices.first { digests[$0] == digest && $0 < networks.count }.flatMap {
        networks[$0]
      }
      guard let seenAt = try liveSeenAt(stored, account, lifetimes, network: network) else { continue }
      let record = SessionRecord(
        id: stored.id, accountID: stored.accountID, kind: stored.kind, platform: stored.platform,
        appVersion: stored.appVersion, createdAt: stored.createdAt, lastSeenAt: seenAt,
        expiresAt: stored.expiresAt,
        revokedAt: nil, revokedReason: nil, browser: stored.browser)
      let memberships: [Membership] = mine.compactMap { row in
        guard case .text(let id) = row[14], case .text(let name) = row[15], case .text(let slug) = row[16],
          case .text(let role) = row[17], let parsed = Role(rawValue: role)
        else { return nil }
        return Membership(school: School(id: id, name: name, slug: slug), role: parsed)
      }
      found[digest] = SessionView(session: record, account: account, memberships: memberships)
    }
    return digests.map { found[$0] }
  }

  /// Within both lifetimes and the account enabled: then marks the session seen (at most once a
  /// minute, so that reads rarely write; with the `network` it was used from, when known) and
  /// returns its last-seen time as now stored; else nil.
  private func liveSeenAt(
    _ record: SessionRecord, _ account: Account, _ lifetimes: SessionLifetimes, network: String?
  ) throws(StoreError) -> Int? {
    let now = clock()
    let idle = lifetimes.idle(record.kind)
    guard !account.disabled, now < record.expiresAt, now - record.lastSeenAt < idle else { return nil }
    guard now - record.lastSeenAt >= ClientStore.seenResolution else { return record.lastSeenAt }
    let write = { () throws(StoreError) -> Bool in
      try self.markSeen(id: record.id, at: now, network: network)
    }
    // Judged only when the write is its own transaction (and so never waits for `unannounced`'s
    // turn while holding SQLite's write lock).
    if let seenWrites, !db.inTransaction { try seenWrites.unannounced(write) } else { _ = try write() }
    return now
  }

  /// Sets session `id`'s last-seen time to `now` (and its network, when known) if it is earlier;
  /// whether a row changed. Never rewrites a row with the bytes it holds: SQLite reports such an
  /// UPDATE as one change though it writes and commits nothing, and `ChangeEpoch.unannounced` would
  /// then take another connection's commit in the same moment for this one.
  package func markSeen(id: String, at now: Int, network: String?) throws(StoreError) -> Bool {
    try db.query(
      "UPDATE sessions SET last_seen_at = ?, network = coalesce(?, network) WHERE id = ? AND last_seen_at < ?",
      [.integer(Int64(now)), network.map { .text($0) } ?? .null, .text(id), .integer(Int64(now))])
    return db.changes == 1
  }

  /// How stale `last_seen_at` may be, in seconds: reads write it at most this often.
  public static let seenResolution = 60

  /// Revokes one session at once.
  public func revokeSession(id: String, reason: String, actor: String) throws(StoreError) {
    try db.transaction { () throws(StoreError) in
      try db.query(
        "UPDATE sessions SET revoked_at = ?, revoked_reason = ? WHERE id = ? AND revoked_at IS NULL",
        [.integer(Int64(clock())), .text(reason), .text(id)])
      if db.changes == 1 { try audit(actor: actor, action: "session.revoked", subject: id, detail: reason) }
    }
  }

  /// Revokes every live session of `accountID` but `keeping` (the owner's "sign out of all other
  /// devices"), in one transaction, with what those devices could still turn into a session or a
  /// lockout budget: unexchanged handoff codes, and every trusted browser but the one
  /// whose cookie is `keepingDevice`. Returns how many sessions ended.
  @discardableResult
  public func revokeOtherSessions(
    accountID: String, keeping: String, keepingDevice: String? = nil, reason: String
  ) throws(StoreError) -> Int {
    try db.transaction { () throws(StoreError) -> Int in
      try forgetDevices(accountID: accountID, except: keepingDevice)
      let ids = try db.query(
        "SELECT id FROM sessions WHERE account_id = ? AND id <> ? AND revoked_at IS NULL",
        [.text(accountID), .text(keeping)]
      ).compactMap { row -> String? in if case .text(let id) = row[0] { id } else { nil } }
      for id in ids {
        try db.query(
          "UPDATE sessions SET revoked_at = ?, revoked_reason = ? WHERE id = ? AND revoked_at IS NULL",
          [.integer(Int64(clock())), .text(reason), .text(id)])
        try audit(actor: accountID, action: "session.revoked", subject: id, detail: reason)
      }
      return ids.count
    }
  }

  /// Live sessions matching `filter`, newest first.
  public func sessions(_ filter: SessionFilter) throws(StoreError) -> [SessionRecord] {
    let (clause, parameters) = try Self.where(filter)
    return try db.query(
      """
      SELECT s.id, s.account_id, s.kind, s.platform, s.app_version, s.created_at, s.last_seen_at, s.expires_at,
             s.browser, s.network
      FROM sessions s JOIN accounts a ON a.id = s.account_id WHERE s.revoked_at IS NULL AND \(clause)
      ORDER BY s.created_at DESC, s.id
      """, parameters
    ).map { Self.session($0, revokedAt: nil, reason: nil) }.filter { Self.matchesVersion($0, filter) }
  }

  /// Revokes every live session matching `filter`; returns how many.
  @discardableResult
  public func revokeSessions(_ filter: SessionFilter, reason: String, actor: String) throws(StoreError) -> Int
  {
    let targets = try sessions(filter)
    try db.transaction { () throws(StoreError) in
      // An account's sessions all ending: so do its handoff codes and trusted browsers.
      switch filter {
      case .account, .accountID:
        for account in Set(targets.map(\.accountID)) { try forgetDevices(accountID: account, except: nil) }
      case .all, .platform: break
      }
      for session in targets {
        try db.query(
          "UPDATE sessions SET revoked_at = ?, revoked_reason = ? WHERE id = ? AND revoked_at IS NULL",
          [.integer(Int64(clock())), .text(reason), .text(session.id)])
        try audit(actor: actor, action: "session.revoked", subject: session.id, detail: reason)
      }
    }
    return targets.count
  }

  private static func `where`(_ filter: SessionFilter) throws(StoreError) -> (String, [DatabaseValue]) {
    switch filter {
    case .all: ("1 = 1", [])
    case .account(let email): ("a.email = ?", [.text(email.normalised)])
    case .accountID(let id): ("a.id = ?", [.text(id)])
    case .platform(let platform, _): ("s.kind = 'native' AND s.platform = ?", [.text(platform)])
    }
  }

  private static func matchesVersion(_ session: SessionRecord, _ filter: SessionFilter) -> Bool {
    guard case .platform(_, let below?) = filter else { return true }
    guard let version = session.appVersion else { return true }
    return compareVersions(version, below) < 0
  }

  /// Compares MAJOR.MINOR[.PATCH] numerically (missing parts count as 0).
  public static func compareVersions(_ a: String, _ b: String) -> Int {
    let x = a.split(separator: ".").map { Int($0) ?? 0 }
    let y = b.split(separator: ".").map { Int($0) ?? 0 }
    for i in 0..<max(x.count, y.count) {
      let (p, q) = (i < x.count ? x[i] : 0, i < y.count ? y[i] : 0)
      if p != q { return p < q ? -1 : 1 }
    }
    return 0
  }

  package static func session(_ row: [DatabaseValue], revokedAt: Int?, reason: String?) -> SessionRecord {
    SessionRecord(
      id: row[0].text ?? "", accountID: row[1].text ?? "",
      kind: row[2].text.flatMap(SessionRecord.Kind.init(rawValue:)) ?? .web, platform: row[3].text,
      appVersion: row[4].text, createdAt: row[5].int ?? 0, lastSeenAt: row[6].int ?? 0,
      expiresAt: row[7].int ?? 0, revokedAt: revokedAt, revokedReason: reason,
      browser: row.count > 8 ? row[8].text : nil, network: row.count > 9 ? row[9].text : nil)
  }
}
