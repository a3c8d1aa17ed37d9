/// What a request for a recovery link did (the page says the same whatever it was).
public enum RecoveryOutcome: Equatable, Sendable {
  /// A link was mailed to the account.
  case mailed
  /// No live account uses the address: nothing was mailed.
  case noAccount
  /// The address has had `ClientStore.recoveryLinksPerHour` links in the last hour: none more.
  case limited
}

/// What following a link did.
public enum LinkOutcome: Equatable, Sendable {
  /// Done, for this account.
  case done(Account)
  /// The link is unknown, expired, used, or no longer matches its account.
  case expired
  /// (Email change) another account took the address meanwhile.
  case addressTaken
}

extension ClientStore {
  /// At most this many unused recovery links per email address per hour.
  public static let recoveryLinksPerHour = 3

  /// A recovery request for `email` (issue 14, "Recovery"), in one transaction whatever it finds,
  /// so that a known and an unknown address cost the same: the account is looked up, its unused
  /// links of the last hour counted, the request audited (subject: the account, if any); for a
  /// live account under its limit, a recovery token is issued and `mail(account, token)` enqueued.
  public func requestRecovery(
    email: EmailAddress, host: String, mail: (Account, String) -> MailMessage
  ) throws(StoreError) -> RecoveryOutcome {
    try db.transaction { () throws(StoreError) -> RecoveryOutcome in
      let found = try account(email: email)?.0
      let recent = try unusedTokens(.recovery, email: email, since: clock() - 3600)
      let outcome: RecoveryOutcome
      if let account = found, !account.disabled {
        if recent >= Self.recoveryLinksPerHour {
          outcome = .limited
        } else {
          let token = try issueToken(.recovery, accountID: account.id, email: email)
          try enqueueMail(mail(account, token), host: host)
          outcome = .mailed
        }
      } else {
        outcome = .noAccount
      }
      try audit(
        actor: nil, action: "account.recovery_requested", subject: found?.id,
        detail: outcome == .limited ? "limited" : nil)
      return outcome
    }
  }

  /// Unused links of `purpose` sent to `email` since `since`.
  func unusedTokens(_ purpose: TokenPurpose, email: EmailAddress, since: Int) throws(StoreError) -> Int {
    let rows = try db.query(
      """
      SELECT count(*) FROM action_tokens
      WHERE email = ? AND purpose = ? AND used_at IS NULL AND created_at > ?
      """, [.text(email.normalised), .text(purpose.rawValue), .integer(Int64(since))])
    guard case .integer(let n)? = rows.first?.first else { return 0 }
    return Int(n)
  }

  /// The live account a live link of `purpose` names, if the link was sent to the account's
  /// current address (to show the link's form; nothing is used).
  public func accountForLink(_ token: String, purpose: TokenPurpose) throws(StoreError) -> Account? {
    guard let record = try peekToken(token, purpose: purpose),
      let account = try account(id: record.accountID), !account.disabled
    else { return nil }
    // An email-change link names the new address; every other link the account's own.
    guard purpose == .emailChange || account.email == record.email else { return nil }
    return account
  }

  /// Sets a password through a recovery or set-password link (issue 14), in one transaction: the
  /// link is used, the hash set, every session of the account revoked, the lockout counter
  /// cleared, every recovery and set-password link voided, the email marked verified (a link sent
  /// to it was followed), `mail(account)` enqueued and the change audited
  /// (`account.password_reset` or `account.password_set`).
  public func setPassword(
    viaLink token: String, purpose: TokenPurpose, hash: String, host: String, mail: (Account) -> MailMessage
  ) throws(StoreError) -> LinkOutcome {
    precondition(purpose != .emailChange, "an email-change link sets no password")
    return try db.transaction { () throws(StoreError) -> LinkOutcome in
      guard let record = try consumeToken(token, purpose: purpose),
        let account = try account(id: record.accountID), !account.disabled, account.email == record.email,
        let email = EmailAddress(account.email)
      else { return .expired }
      let now = Int64(clock())
      try db.query("UPDATE accounts SET password_hash = ? WHERE id = ?", [.text(hash), .text(account.id)])
      let reason = purpose == .recovery ? "password_reset" : "password_set"
      try db.query(
        "UPDATE sessions SET revoked_at = ?, revoked_reason = ? WHERE account_id = ? AND revoked_at IS NULL",
        [.integer(now), .text(reason), .text(account.id)])
      db.note(.sessionsRevoked, Self.revocationSeries(reason), by: UInt64(db.changes))
      try clearSignInFailures(email: email)
      try voidTokens(accountID: account.id, [.recovery, .setPassword])
      try markVerified(accountID: account.id)
      try enqueueMail(mail(account), host: host)
      try audit(actor: account.id, action: "account.\(reason)", subject: account.id)
      return .done(account)
    }
  }

  /// The person changed their password on `/account` (the current one proven by the caller): in
  /// one transaction the hash is set, every other session revoked (`keeping` stays), the
  /// recovery and set-password links voided, `mail` enqueued and it is audited
  /// (`account.password_changed`).
  public func changePassword(
    accountID: String, keeping sessionID: String, hash: String, host: String, mail: MailMessage
  ) throws(StoreError) {
    try db.transaction { () throws(StoreError) in
      try db.query("UPDATE accounts SET password_hash = ? WHERE id = ?", [.text(hash), .text(accountID)])
      try db.query(
        """
        UPDATE sessions SET revoked_at = ?, revoked_reason = 'password_changed'
        WHERE account_id = ? AND id <> ? AND revoked_at IS NULL
        """, [.integer(Int64(clock())), .text(accountID), .text(sessionID)])
      db.note(.sessionsRevoked, Self.revocationSeries("password_changed"), by: UInt64(db.changes))
      try voidTokens(accountID: accountID, [.recovery, .setPassword])
      try enqueueMail(mail, host: host)
      try audit(actor: accountID, action: "account.password_changed", subject: accountID)
    }
  }

  /// Changes the account's display name (already checked, see `AccountRules.displayName`);
  /// audited `account.name_changed` (the name itself is not in the audit trail).
  public func rename(accountID: String, to displayName: String) throws(StoreError) {
    try db.transaction { () throws(StoreError) in
      try db.query(
        "UPDATE accounts SET display_name = ? WHERE id = ?", [.text(displayName), .text(accountID)])
      guard db.changes == 1 else { throw StoreError("no account with that ID") }
      try audit(actor: accountID, action: "account.name_changed", subject: accountID)
    }
  }

  /// Whether an account other than `accountID` uses `email` (deleted accounts keep theirs until
  /// they are erased).
  public func emailTaken(_ email: EmailAddress, except accountID: String) throws(StoreError) -> Bool {
    !(try db.query(
      "SELECT 1 FROM accounts WHERE email = ? AND id <> ?", [.text(email.normalised), .text(accountID)]
    ).isEmpty)
  }

  /// Asks to move `account` to `newEmail` (issue 14, "Correction"), in one transaction: refused
  /// (false) when another account has the address; else an email-change token for the new
  /// address is issued, `confirm(token)` enqueued to it, `notice` enqueued to the old address, and
  /// it is audited (`account.email_change_requested`). Nothing about the account changes yet.
  public func requestEmailChange(
    account: Account, to newEmail: EmailAddress, host: String, confirm: (String) -> MailMessage,
    notice: MailMessage
  ) throws(StoreError) -> Bool {
    try db.transaction { () throws(StoreError) -> Bool in
      guard !(try emailTaken(newEmail, except: account.id)) else { return false }
      try voidTokens(accountID: account.id, [.emailChange])
      let token = try issueToken(.emailChange, accountID: account.id, email: newEmail)
      try enqueueMail(confirm(token), host: host)
      try enqueueMail(notice, host: host)
      try audit(actor: account.id, action: "account.email_change_requested", subject: account.id)
      return true
    }
  }

  /// Follows an email-change link, in one transaction: the link is used, the account's email
  /// becomes the link's address and is verified, the account's other links are voided (they went
  /// to the old address), and it is audited (`account.email_changed`). Sessions stay.
  public func confirmEmailChange(_ token: String) throws(StoreError) -> LinkOutcome {
    try db.transaction { () throws(StoreError) -> LinkOutcome in
      guard let record = try consumeToken(token, purpose: .emailChange),
        let account = try account(id: record.accountID), !account.disabled,
        let email = EmailAddress(record.email)
      else { return .expired }
      guard !(try emailTaken(email, except: account.id)) else { return .addressTaken }
      try db.query(
        "UPDATE accounts SET email = ?, email_verified_at = ? WHERE id = ?",
        [.text(email.normalised), .integer(Int64(clock())), .text(account.id)])
      try voidTokens(accountID: account.id, [.recovery, .setPassword, .emailChange])
      try audit(actor: account.id, action: "account.email_changed", subject: account.id)
      return .done(
        Account(id: account.id, email: email.normalised, displayName: account.displayName, disabled: false))
    }
  }

  /// Creates an account whose password nobody knows and mails it a set-password link to
  /// `{origin}/account/set-password?token=..` (`admin account create --send-set-password`), in one
  /// transaction. `unknownHash` is `PasswordHasher.decoy()`: a sign-in attempt costs the same as
  /// for any account, and nothing verifies against it.
  public func createAccountWithSetPasswordLink(
    email: EmailAddress, displayName: String, unknownHash: String, actor: String, origin: String
  ) throws(StoreError) -> Account {
    try db.transaction { () throws(StoreError) -> Account in
      let account = try createAccount(
        email: email, displayName: displayName, passwordHash: unknownHash, actor: actor)
      let token = try issueToken(.setPassword, accountID: account.id, email: email)
      let message = MailTemplates.message(
        kind: "set_password", to: email, name: displayName, subject: "Your Band Licence account is ready",
        paragraphs: [
          "An account on Band Licence has been made for you. Follow the link to choose your password. "
            + "It works once, for the next 7 days."
        ],
        link: ("Choose your password", origin + LinkFlow.setPassword.path + "?token=" + token),
        reason:
          "You got this email because someone who runs Band Licence made an account for this address. "
          + "If you did not expect it, ignore it: nobody can sign in until a password is chosen.")
      try enqueueMail(message, host: WebSecurity.host(of: origin))
      return account
    }
  }
}

/// The rules for what a person may call themselves.
public enum AccountRules {
  /// The most characters in a display name.
  public static let maxNameCharacters = 100

  /// `typed` trimmed of surrounding spaces when it is a display name (1 to 100 characters, no
  /// control characters), else nil.
  public static func displayName(_ typed: String) -> String? {
    let trimmed = String(
      typed.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    guard !trimmed.isEmpty, trimmed.count <= maxNameCharacters,
      !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    else { return nil }
    return trimmed
  }

  /// The sentence for a name that `displayName` refuses.
  public static let nameProblem = "Enter a name of 1 to 100 characters, with no line breaks or tabs."
}
