extension ClientStore {
  /// Records a failed sign-in. The subject is the account when one exists; the typed email is not
  /// kept (people type passwords into the email field).
  public func recordSignInFailure(accountID: String?) throws(StoreError) {
    try db.transaction { () throws(StoreError) in
      try audit(actor: nil, action: "sign_in.failed", subject: accountID)
    }
  }

  /// A successful web sign-in, in one transaction: the session the browser held before (if any)
  /// is revoked so that the cookie's value changes, the password hash is upgraded when its
  /// parameters are old, a new web session starts, and the sign-in is audited.
  public func signIn(
    accountID: String, token: String, replacing oldToken: String?, upgradedHash: String?,
    lifetimes: SessionLifetimes
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
        accountID: accountID, kind: "web", platform: nil, appVersion: nil, token: token, lifetimes: lifetimes)
      try audit(actor: accountID, action: "sign_in.succeeded", subject: session.id, detail: "web")
      return session
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
