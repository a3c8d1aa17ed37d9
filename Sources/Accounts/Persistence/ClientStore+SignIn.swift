import Store

/// The lockout schedule: the 5th failure
/// in a row locks the email for 1 minute; a failure while it is locked changes nothing; each
/// failure after a lock has run out locks it again for twice as long, up to 15 minutes. So a lock
/// always ends at most 15 minutes after the failure that set it, whatever is tried meanwhile.
public enum Lockout {
  /// Failures in a row before the first lock.
  public static let threshold = 5
  /// The first lock, and the longest.
  public static let first = 60
  public static let longest = 15 * 60

  /// When an email with `failures` in a row (counting the one just made, outside a lock) is locked
  /// until (0: not locked).
  public static func lockedUntil(failures: Int, now: Int) -> Int {
    guard failures >= threshold else { return 0 }
    let doublings = min(failures - threshold, 10)
    return now + min(first << doublings, longest)
  }
}

extension ClientStore {
  /// Records a failed sign-in for `email`; returns whether the email is locked afterwards. The
  /// subject is the account when one exists. The typed email is not kept (people type passwords
  /// into the email field): failures are counted under its HMAC with the server's identifier key.
  /// A failure while locked neither counts nor extends the lock (see `Lockout`).
  /// With a trusted `device`, the failure counts against that device instead (`TrustedDevice`).
  @discardableResult
  func recordSignInFailure(accountID: String?, email: EmailAddress, device: TrustedDevice?)
    throws(StoreError)
    -> Bool
  {
    let key = failureKey(email, device: device)
    // One counter at a time, fleet-wide: each failure reads the count the one before it wrote, so
    // none is lost however many instances take failures for this email at once (and none has to
    // be retried, as concurrent SERIALIZABLE transactions on one row would be).
    return try db.exclusiveTransaction(.failures(key)) { () throws(StoreError) -> Bool in
      let now = clock()
      let row = try db.query(
        "SELECT failures, locked_until FROM sign_in_failures WHERE email_key = ?", [.blob(key)]
      ).first
      func integer(_ index: Int) -> Int {
        guard let row, case .integer(let n) = row[index] else { return 0 }
        return Int(n)
      }
      if integer(1) > now {
        try db.query(
          "UPDATE sign_in_failures SET last_failure_at = ? WHERE email_key = ?",
          [.integer(Int64(now)), .blob(key)])
        try audit(actor: nil, action: "sign_in.failed", subject: accountID, detail: "while_locked")
        return true
      }
      let failures = integer(0) + 1
      let lockedUntil = Lockout.lockedUntil(failures: failures, now: now)
      try db.query(
        """
        INSERT INTO sign_in_failures (email_key, failures, locked_until, last_failure_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (email_key) DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until,
          last_failure_at = excluded.last_failure_at
        """,
        [.blob(key), .integer(Int64(failures)), .integer(Int64(lockedUntil)), .integer(Int64(now))])
      try audit(
        actor: nil, action: "sign_in.failed", subject: accountID, detail: lockedUntil > 0 ? "locked" : nil)
      return lockedUntil > 0
    }
  }

  /// Records a failed sign-in for `email` from an untrusted client (see the variant with a device).
  @discardableResult
  public func recordSignInFailure(accountID: String?, email: EmailAddress) throws(StoreError) -> Bool {
    try recordSignInFailure(accountID: accountID, email: email, device: nil)
  }

  /// Whether sign-in for `email` is locked now (for a trusted `device`: whether that device is).
  func isLocked(email: EmailAddress, device: TrustedDevice?) throws(StoreError) -> Bool {
    let rows = try db.query(
      "SELECT locked_until FROM sign_in_failures WHERE email_key = ?",
      [.blob(failureKey(email, device: device))])
    guard case .integer(let until)? = rows.first?.first else { return false }
    return Int(until) > clock()
  }

  /// Whether sign-in for `email` is locked now for an untrusted client.
  public func isLocked(email: EmailAddress) throws(StoreError) -> Bool {
    try isLocked(email: email, device: nil)
  }

  /// A successful sign-in resets the email's count.
  public func clearSignInFailures(email: EmailAddress) throws(StoreError) {
    try clearSignInFailures(email: email, device: nil)
  }

  /// A successful sign-in resets the email's count and, from a trusted device, the device's.
  func clearSignInFailures(email: EmailAddress, device: TrustedDevice?) throws(StoreError) {
    try db.query("DELETE FROM sign_in_failures WHERE email_key = ?", [.blob(identifierDigest(email))])
    if let device {
      try db.query(
        "DELETE FROM sign_in_failures WHERE email_key = ?", [.blob(failureKey(email, device: device))])
    }
  }

  /// A successful web sign-in, in one transaction: the session the browser held before (if any)
  /// is revoked so that the cookie's value changes, the password hash is upgraded when its
  /// parameters are old, a new web session starts, and the sign-in is audited.
  public func signIn(
    accountID: String, token: String, replacing oldToken: String?, upgradedHash: String?,
    lifetimes: SessionLifetimes, browser: String? = nil, network: String? = nil
  ) throws(StoreError) -> SessionRecord {
    try db.transaction { () throws(StoreError) -> SessionRecord in
      if let oldToken {
        let rows = try db.query(
          "SELECT id FROM sessions WHERE token_digest = ? AND revoked_at IS NULL",
          [.blob(Secrets.digest(oldToken))])
        for row in rows {
          if case .text(let id) = row[0] {
            try revokeSession(id: id, reason: "replaced_at_sign_in", actor: accountID)
          }
        }
      }
      if let upgradedHash {
        try db.query(
          "UPDATE accounts SET password_hash = ? WHERE id = ?", [.text(upgradedHash), .text(accountID)])
        try audit(actor: accountID, action: "account.password_rehashed", subject: accountID)
      }
      let session = try createSession(
        accountID: accountID, kind: .web, platform: nil, appVersion: nil, token: token, lifetimes: lifetimes,
        browser: browser, network: network)
      try audit(actor: accountID, action: "sign_in.succeeded", subject: session.id, detail: "web")
      return session
    }
  }

  /// The person asked for deletion (and proved it with their password): in one transaction the
  /// account is marked deleted and disabled, everything its credentials issued ends
  /// (`endCredentials`), and it is audited. Refused (the schools returned, nothing changed) while
  /// the account is the only administrator of a school. Personal fields stay until the
  /// retention window has passed (`eraseDeletedAccounts`).
  @discardableResult
  public func requestDeletion(accountID: String) throws(StoreError) -> [School] {
    try db.transaction { () throws(StoreError) -> [School] in
      let schools = try schoolsOnlyAdministeredBy(accountID: accountID)
      guard schools.isEmpty else { return schools }
      try db.query(
        "UPDATE accounts SET deleted_at = ?, disabled = 1 WHERE id = ? AND deleted_at IS NULL",
        [.integer(Int64(clock())), .text(accountID)])
      guard db.changes == 1 else { return [] }
      try endCredentials(accountID: accountID, .deleted)
      try audit(actor: accountID, action: "account.deletion_requested", subject: accountID)
      return []
    }
  }

  /// Erases the personal fields (email, name, password hash) and memberships of accounts deleted
  /// at least `window` seconds ago. The opaque account ID stays, so the audit trail keeps a
  /// pseudonymous subject. Returns how many were erased.
  @discardableResult
  public func eraseDeletedAccounts(window: Int) throws(StoreError) -> Int {
    try db.transaction { () throws(StoreError) -> Int in
      let now = clock()
      let rows = try db.query(
        "SELECT id FROM accounts WHERE deleted_at IS NOT NULL AND deleted_at <= ? AND erased_at IS NULL",
        [.integer(Int64(now - window))])
      for row in rows {
        guard case .text(let id) = row[0] else { continue }
        try db.query(
          "UPDATE accounts SET email = ?, display_name = '', password_hash = '!', erased_at = ? WHERE id = ?",
          [.text("erased-\(id)@invalid"), .integer(Int64(now)), .text(id)])
        try db.query("DELETE FROM memberships WHERE account_id = ?", [.text(id)])
        try db.query("DELETE FROM handoffs WHERE account_id = ?", [.text(id)])
        try db.query("DELETE FROM trusted_devices WHERE account_id = ?", [.text(id)])
        try audit(actor: "retention", action: "account.erased", subject: id)
      }
      return rows.count
    }
  }

  /// Forgets what is only needed for a while: handoffs a day past their expiry (a retry or replay
  /// can no longer name them usefully) and failure counts untouched for a day (the lockout has long
  /// ended). Returns how many rows went.
  @discardableResult
  public func pruneExpired() throws(StoreError) -> Int {
    try db.transaction { () throws(StoreError) -> Int in
      let cutoff = Int64(clock() - 86400)
      try db.query("DELETE FROM handoffs WHERE expires_at < ?", [.integer(cutoff)])
      var removed = db.changes
      try db.query(
        "DELETE FROM sign_in_failures WHERE locked_until < ? AND last_failure_at < ?",
        [.integer(cutoff), .integer(cutoff)])
      removed += db.changes
      // Single-use links a day past their end, used or not; the bodies of mail never delivered
      // after a week (their links ran out long before).
      try db.query("DELETE FROM action_tokens WHERE expires_at < ?", [.integer(cutoff)])
      removed += db.changes
      // Trusted browsers whose cookies have run out.
      try db.query(
        "DELETE FROM trusted_devices WHERE last_used_at < ?",
        [.integer(Int64(clock() - TrustedDevice.lifetime))])
      removed += db.changes
      removed += try eraseStaleMail(window: 7 * 86400)
      // Invitations a day after they ended: accepted, withdrawn or expired.
      try db.query(
        "DELETE FROM invitations WHERE coalesce(accepted_at, revoked_at, expires_at) < ? OR expires_at < ?",
        [.integer(cutoff), .integer(cutoff)])
      removed += db.changes
      return removed
    }
  }

  /// Replaces an account's password hash with one made with the current parameters.
  public func upgradeHash(accountID: String, to hash: String) throws(StoreError) {
    try db.transaction { () throws(StoreError) in
      try db.query("UPDATE accounts SET password_hash = ? WHERE id = ?", [.text(hash), .text(accountID)])
      try audit(actor: accountID, action: "account.password_rehashed", subject: accountID)
    }
  }

  /// Revokes `sessionID` only if it is a live session of `accountID`; false (and nothing changed)
  /// otherwise, so that nobody can revoke another person's session by guessing its ID.
  public func revokeOwnSession(id: String, accountID: String, reason: String) throws(StoreError) -> Bool {
    try db.transaction { () throws(StoreError) -> Bool in
      try db.query(
        "UPDATE sessions SET revoked_at = ?, revoked_reason = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL",
        [.integer(Int64(clock())), .text(reason), .text(id), .text(accountID)])
      guard db.changes == 1 else { return false }
      try audit(actor: accountID, action: "session.revoked", subject: id, detail: reason)
      return true
    }
  }
}
