import Store

/// Why an account's credentials changed: each ends everything issued before it.
public enum CredentialChange: String, Sendable, CaseIterable {
  /// On `/account`, with the current password (the session that did it stays).
  case passwordChanged = "password_changed"
  /// Through a recovery link.
  case passwordReset = "password_reset"
  /// Through a set-password link (an account an operator made).
  case passwordSet = "password_set"
  /// An operator disabled the account.
  case disabled = "account_disabled"
  /// The person deleted their account.
  case deleted = "account_deleted"
  /// The old address followed its way back after an email change.
  case emailRestored = "email_restored"
}

extension ClientStore {
  /// Ends everything the account's credentials had issued, inside the caller's transaction: the
  /// credential epoch advances (handoff codes and invitations made under the old one are refused,
  /// trusted-device cookies MACed over it fail); every session but `keeping` is revoked with
  /// `reason`; every unused link of every kind is voided (but the old address's way back after an
  /// email change, `email_revert`, which belongs to the address and not to the credentials);
  /// unexchanged handoff codes are deleted; the trusted devices are forgotten; and the pending
  /// invitations the person sent are withdrawn. The caller audits the change itself.
  func endCredentials(accountID: String, _ reason: CredentialChange, keeping sessionID: String? = nil)
    throws(StoreError)
  {
    let now = Int64(clock())
    try db.query(
      "UPDATE accounts SET credential_epoch = credential_epoch + 1 WHERE id = ?", [.text(accountID)])
    try db.query(
      """
      UPDATE sessions SET revoked_at = ?, revoked_reason = ?
      WHERE account_id = ? AND revoked_at IS NULL AND id <> ?
      """, [.integer(now), .text(reason.rawValue), .text(accountID), .text(sessionID ?? "")])
    db.note(.sessionsRevoked, Self.revocationSeries(reason.rawValue), by: UInt64(db.changes))
    try db.query(
      """
      UPDATE action_tokens SET used_at = ?
      WHERE account_id = ? AND used_at IS NULL AND purpose <> 'email_revert'
      """, [.integer(now), .text(accountID)])
    try forgetDevices(accountID: accountID, except: nil)
    try withdrawInvitations(sentBy: accountID, in: nil, because: reason.rawValue)
  }

  /// The account's credential epoch (0 for an unknown account).
  func credentialEpoch(accountID: String) throws(StoreError) -> Int {
    let rows = try db.query("SELECT credential_epoch FROM accounts WHERE id = ?", [.text(accountID)])
    guard case .integer(let epoch)? = rows.first?.first else { return 0 }
    return Int(epoch)
  }

  /// Withdraws the pending invitations `accountID` sent (to `schoolID`, or to every school),
  /// inside the caller's transaction, each audited `invitation.revoked` with `because`: an
  /// invitation carries its sender's authority, so it ends when that authority does.
  /// Returns how many.
  @discardableResult
  func withdrawInvitations(sentBy accountID: String, in schoolID: String?, because: String)
    throws(StoreError) -> Int
  {
    let now = Int64(clock())
    var sql = """
      SELECT id, school_id FROM invitations
      WHERE invited_by = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ?
      """
    var parameters: [DatabaseValue] = [.text(accountID), .integer(now)]
    if let schoolID {
      sql += " AND school_id = ?"
      parameters.append(.text(schoolID))
    }
    let rows = try db.query(sql, parameters)
    for row in rows {
      guard case .text(let id) = row[0], case .text(let school) = row[1] else { continue }
      try db.query("UPDATE invitations SET revoked_at = ? WHERE id = ?", [.integer(now), .text(id)])
      try audit(actor: "system", action: "invitation.revoked", subject: id, detail: "\(school) \(because)")
    }
    return rows.count
  }

  /// Inside the caller's transaction: deletes the account's unexchanged handoff codes and its
  /// trusted browsers but the one whose cookie value is `keeping`.
  func forgetDevices(accountID: String, except keeping: String?) throws(StoreError) {
    try db.query("DELETE FROM handoffs WHERE account_id = ? AND used_at IS NULL", [.text(accountID)])
    let kept = TrustedDevice.Presented(keeping, now: clock()).map { Secrets.digest($0.nonce) } ?? []
    try db.query(
      "DELETE FROM trusted_devices WHERE account_id = ? AND nonce_digest <> ?",
      [.text(accountID), .blob(kept)])
  }

  // MARK: trusted devices

  /// The trusted device `cookie` proves for `email`: well formed, on the server's list for the
  /// account with that email, and MACed over the account's current credential epoch.
  func trustedDevice(_ cookie: String?, email: EmailAddress) throws(StoreError) -> TrustedDevice? {
    guard let presented = TrustedDevice.Presented(cookie, now: clock()) else { return nil }
    let rows = try db.query(
      """
      SELECT a.id, a.credential_epoch FROM accounts a JOIN trusted_devices d ON d.account_id = a.id
      WHERE a.email = ? AND d.nonce_digest = ?
      """, [.text(email.normalised), .blob(Secrets.digest(presented.nonce))])
    guard let row = rows.first, case .text(let id) = row[0], case .integer(let epoch) = row[1],
      presented.verifies(email: email, accountID: id, epoch: Int(epoch), key: deviceKey)
    else { return nil }
    return TrustedDevice(nonce: presented.nonce, accountID: id)
  }

  /// Trusts the browser that has just signed in to `account`, in one transaction: a new nonce is
  /// kept (the browser's `previous` one forgotten, so one browser holds one place), the least
  /// recently used beyond `TrustedDevice.perAccount` go. Returns the cookie's value.
  public func trustDevice(account: Account, replacing previous: String?) throws(StoreError) -> String {
    guard let email = EmailAddress(account.email) else { return "" }
    let now = clock()
    let nonce = Secrets.base64url(Secrets.randomBytes(16))
    return try db.transaction { () throws(StoreError) -> String in
      let epoch = try credentialEpoch(accountID: account.id)
      if let old = TrustedDevice.Presented(previous, now: now) {
        try db.query(
          "DELETE FROM trusted_devices WHERE nonce_digest = ? AND account_id = ?",
          [.blob(Secrets.digest(old.nonce)), .text(account.id)])
      }
      try db.query(
        "INSERT INTO trusted_devices (nonce_digest, account_id, created_at, last_used_at) VALUES (?, ?, ?, ?)",
        [.blob(Secrets.digest(nonce)), .text(account.id), .integer(Int64(now)), .integer(Int64(now))])
      try db.query(
        """
        DELETE FROM trusted_devices WHERE account_id = ? AND nonce_digest NOT IN (
          SELECT nonce_digest FROM trusted_devices WHERE account_id = ?
          ORDER BY last_used_at DESC, created_at DESC LIMIT \(TrustedDevice.perAccount))
        """, [.text(account.id), .text(account.id)])
      return TrustedDevice.value(
        email: email, accountID: account.id, epoch: epoch, nonce: nonce, key: deviceKey, now: now)
    }
  }

  /// How many devices the account trusts now.
  public func trustedDeviceCount(accountID: String) throws(StoreError) -> Int {
    let rows = try db.query("SELECT count(*) FROM trusted_devices WHERE account_id = ?", [.text(accountID)])
    guard case .integer(let n)? = rows.first?.first else { return 0 }
    return Int(n)
  }

  // MARK: the last administrator

  /// The schools where `accountID` is the only administrator who can act (live membership,
  /// account enabled and not deleted): deleting or disabling the account would leave them with
  /// none.
  public func schoolsOnlyAdministeredBy(accountID: String) throws(StoreError) -> [School] {
    try db.query(
      """
      SELECT s.id, s.name, s.slug FROM memberships m JOIN schools s ON s.id = m.school_id
      WHERE m.account_id = ? AND m.role = 'administrator' AND m.revoked_at IS NULL
        AND NOT EXISTS (
          SELECT 1 FROM memberships o JOIN accounts a ON a.id = o.account_id
          WHERE o.school_id = m.school_id AND o.account_id <> m.account_id AND o.role = 'administrator'
            AND o.revoked_at IS NULL AND a.disabled = 0 AND a.deleted_at IS NULL)
      ORDER BY s.name, s.id
      """, [.text(accountID)]
    ).compactMap { row in
      guard case .text(let id) = row[0], case .text(let name) = row[1], case .text(let slug) = row[2] else {
        return nil
      }
      return School(id: id, name: name, slug: slug)
    }
  }
}
