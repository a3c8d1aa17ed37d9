import Store

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
  /// (Email change) the link is for another account than the one signed in.
  case otherAccount
}

/// What following the old address's way back did.
public enum RestoreOutcome: Equatable, Sendable {
  /// The address is the account's again; `recoveryToken` chooses its new password.
  case restored(Account, recoveryToken: String)
  /// The link is unknown, expired or used.
  case expired
  /// An older way back of the same account is still live: that one must be used.
  case superseded
  /// Another account uses the address now.
  case addressTaken
}

extension ClientStore {
  /// At most this many unused recovery links per email address per hour.
  public static let recoveryLinksPerHour = 3

  /// A recovery request for `email`, in one transaction whatever it finds,
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
  func unusedTokens(_ purpose: TokenPurpose, email: EmailAddress, since: Int) throws(StoreError)
    -> Int
  {
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

  /// Sets a password through a recovery or set-password link, in one transaction: the
  /// link is used, the hash set, everything the old credentials issued ended (`endCredentials`:
  /// sessions, links, handoff codes, trusted devices, invitations sent), the lockout counter
  /// cleared, the email marked verified (a link sent to it was followed), `mail(account)` enqueued
  /// and the change audited (`account.password_reset` or `account.password_set`).
  public func setPassword(
    viaLink token: String, purpose: TokenPurpose, hash: String, host: String, mail: (Account) -> MailMessage
  ) throws(StoreError) -> LinkOutcome {
    precondition(purpose == .recovery || purpose == .setPassword, "only these links set a password")
    return try db.transaction { () throws(StoreError) -> LinkOutcome in
      guard let record = try consumeToken(token, purpose: purpose),
        let account = try account(id: record.accountID), !account.disabled, account.email == record.email,
        let email = EmailAddress(account.email)
      else { return .expired }
      try db.query("UPDATE accounts SET password_hash = ? WHERE id = ?", [.text(hash), .text(account.id)])
      let reason: CredentialChange = purpose == .recovery ? .passwordReset : .passwordSet
      try endCredentials(accountID: account.id, reason)
      try clearSignInFailures(email: email)
      try markVerified(accountID: account.id)
      try enqueueMail(mail(account), host: host)
      try audit(actor: account.id, action: "account.\(reason.rawValue)", subject: account.id)
      return .done(account)
    }
  }

  /// The person changed their password on `/account` (the current one proven by the caller): in
  /// one transaction the hash is set, everything the old credentials issued ended but the session
  /// `keeping` (`endCredentials`), `mail` enqueued and it is audited (`account.password_changed`).
  public func changePassword(
    accountID: String, keeping sessionID: String, hash: String, host: String, mail: MailMessage
  ) throws(StoreError) {
    try db.transaction { () throws(StoreError) in
      try db.query("UPDATE accounts SET password_hash = ? WHERE id = ?", [.text(hash), .text(accountID)])
      try endCredentials(accountID: accountID, .passwordChanged, keeping: sessionID)
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
      guard db.changes == 1 else { throw StoreError.refused("no account with that ID") }
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

  /// Asks to move `account` to `newEmail`, in one transaction, answering
  /// alike whether or not another account has the address: any earlier pending change
  /// is cancelled; when the address is free an email-change token for it is issued and
  /// `confirm(token)` enqueued to it, else `inUse` is enqueued to it (its owner learns that
  /// someone tried; the asker learns nothing); `notice` goes to the old address either way, and it
  /// is audited (`account.email_change_requested`). Nothing about the account changes yet.
  /// Returns whether a link was issued (for tests; the pages say the same either way).
  @discardableResult
  public func requestEmailChange(
    account: Account, to newEmail: EmailAddress, host: String, confirm: (String) -> MailMessage,
    inUse: MailMessage, notice: MailMessage
  ) throws(StoreError) -> Bool {
    try db.transaction { () throws(StoreError) -> Bool in
      let taken = try emailTaken(newEmail, except: account.id)
      try voidTokens(accountID: account.id, [.emailChange])
      if taken {
        try enqueueMail(inUse, host: host)
      } else {
        try enqueueMail(
          confirm(try issueToken(.emailChange, accountID: account.id, email: newEmail)), host: host)
      }
      try enqueueMail(notice, host: host)
      try audit(
        actor: account.id, action: "account.email_change_requested", subject: account.id,
        detail: taken ? "address_in_use" : nil)
      return !taken
    }
  }

  /// The account's pending email change (the newest live email-change link), if any.
  public func pendingEmailChange(accountID: String) throws(StoreError) -> ActionToken? {
    let rows = try db.query(
      """
      SELECT email, expires_at, created_at FROM action_tokens
      WHERE account_id = ? AND purpose = 'email_change' AND used_at IS NULL AND expires_at > ?
      ORDER BY created_at DESC LIMIT 1
      """, [.text(accountID), .integer(Int64(clock()))])
    guard let row = rows.first, case .text(let email) = row[0], case .integer(let expires) = row[1],
      case .integer(let created) = row[2]
    else { return nil }
    return ActionToken(
      purpose: .emailChange, accountID: accountID, email: email, expiresAt: Int(expires),
      createdAt: Int(created))
  }

  /// Cancels the account's pending email change (its link stops working); audited
  /// `account.email_change_cancelled`. False when there was none.
  public func cancelEmailChange(accountID: String) throws(StoreError) -> Bool {
    try db.transaction { () throws(StoreError) -> Bool in
      try db.query(
        "UPDATE action_tokens SET used_at = ? WHERE account_id = ? AND purpose = 'email_change' AND used_at IS NULL",
        [.integer(Int64(clock())), .text(accountID)])
      guard db.changes > 0 else { return false }
      try audit(actor: accountID, action: "account.email_change_cancelled", subject: accountID)
      return true
    }
  }

  /// Follows an email-change link for the signed-in `accountID` (the link alone is not
  /// enough), in one transaction: the link is used, the account's email becomes the link's address
  /// and is verified, the account's other links are voided (they went to the old address), a way
  /// back (`email_revert`, 7 days) is issued to the old address and `notice(account, oldAddress,
  /// token)` enqueued to it, and it is audited (`account.email_changed`). Sessions stay.
  public func confirmEmailChange(
    _ token: String, accountID: String, host: String, notice: (Account, EmailAddress, String) -> MailMessage
  ) throws(StoreError) -> LinkOutcome {
    try db.transaction { () throws(StoreError) -> LinkOutcome in
      guard let pending = try peekToken(token, purpose: .emailChange) else { return .expired }
      guard pending.accountID == accountID else { return .otherAccount }
      guard let record = try consumeToken(token, purpose: .emailChange),
        let account = try account(id: record.accountID), !account.disabled,
        let email = EmailAddress(record.email)
      else { return .expired }
      guard !(try emailTaken(email, except: account.id)) else { return .addressTaken }
      try db.query(
        "UPDATE accounts SET email = ?, email_verified_at = ? WHERE id = ?",
        [.text(email.normalised), .integer(Int64(clock())), .text(account.id)])
      try voidTokens(accountID: account.id, [.recovery, .setPassword, .emailChange])
      if let old = EmailAddress(account.email) {
        let back = try issueToken(.emailRevert, accountID: account.id, email: old)
        try enqueueMail(notice(account, old, back), host: host)
      }
      try audit(actor: account.id, action: "account.email_changed", subject: account.id)
      return .done(
        Account(id: account.id, email: email.normalised, displayName: account.displayName, disabled: false))
    }
  }

  /// The old address takes the account back, in one transaction: the `email_revert`
  /// link is used (refused while an older one of the account is still live: the first address
  /// wins, so an attacker who changed the address twice cannot get there first with the second
  /// link), the email becomes the link's address again, verified; the password is replaced by
  /// `unknownHash` (nobody's, so whoever knew it cannot sign in again), everything the old
  /// credentials issued ends (`endCredentials`), every way back is voided, and a recovery link for
  /// the restored address is issued and returned, so the person chooses a password at once.
  /// Audited `account.email_restored`.
  public func restoreEmail(_ token: String, unknownHash: String) throws(StoreError) -> RestoreOutcome {
    try db.transaction { () throws(StoreError) -> RestoreOutcome in
      guard let pending = try peekToken(token, purpose: .emailRevert) else { return .expired }
      let older = try db.query(
        """
        SELECT 1 FROM action_tokens WHERE account_id = ? AND purpose = 'email_revert' AND used_at IS NULL
          AND expires_at > ? AND created_at < ?
        """, [.text(pending.accountID), .integer(Int64(clock())), .integer(Int64(pending.createdAt))])
      guard older.isEmpty else { return .superseded }
      guard let record = try consumeToken(token, purpose: .emailRevert),
        let account = try account(id: record.accountID), let email = EmailAddress(record.email)
      else { return .expired }
      guard !(try emailTaken(email, except: account.id)) else { return .addressTaken }
      try db.query(
        "UPDATE accounts SET email = ?, email_verified_at = ?, password_hash = ? WHERE id = ?",
        [.text(email.normalised), .integer(Int64(clock())), .text(unknownHash), .text(account.id)])
      try endCredentials(accountID: account.id, .emailRestored)
      try voidTokens(accountID: account.id, [.emailRevert])
      let recovery = try issueToken(.recovery, accountID: account.id, email: email)
      try audit(actor: account.id, action: "account.email_restored", subject: account.id)
      return .restored(
        Account(
          id: account.id, email: email.normalised, displayName: account.displayName,
          disabled: account.disabled),
        recoveryToken: recovery)
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
        link: ("Choose your password", origin + TokenPurpose.setPassword.path + "?token=" + token),
        reason:
          "You got this email because someone who runs Band Licence made an account for this address. "
          + "If you did not expect it, ignore it: nobody can sign in until a password is chosen.")
      try enqueueMail(message, host: WebSecurity.host(of: origin))
      return account
    }
  }
}

/// The rules for what a person may call themselves. A name reaches other people's mail (an
/// invitation names its sender), so it may carry no text that a mail client would show as a link
/// or that reorders what is shown: the mail rule "no link but the deployment's own
/// origin" holds for text a client can type.
public enum AccountRules {
  /// The most characters in a display name.
  public static let maxNameCharacters = 100

  /// `typed` trimmed of surrounding spaces when it is a display name (1 to 100 characters; no
  /// control or format characters — bidi overrides and isolates, zero-width joiners and the like,
  /// Unicode general category Cc or Cf; nothing that reads as a web or email address), else nil.
  public static func displayName(_ typed: String) -> String? {
    let trimmed = String(
      typed.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    guard !trimmed.isEmpty, trimmed.count <= maxNameCharacters,
      !trimmed.unicodeScalars.contains(where: {
        [.control, .format, .lineSeparator, .paragraphSeparator].contains($0.properties.generalCategory)
      }),
      !looksLikeAddress(trimmed)
    else { return nil }
    return trimmed
  }

  /// Whether `name` holds something a mail client may turn into a link: a scheme (`://`), `www.`,
  /// an `@`, a slash or backslash, or a dot with a letter or digit on each side where two or more
  /// letters or digits follow it ("example.test", but not "J. R. Hartley" or "J.R. Hartley").
  static func looksLikeAddress(_ name: String) -> Bool {
    let lower = name.lowercased()
    if lower.contains("://") || lower.contains("www.") || lower.contains("@") || lower.contains("/")
      || lower.contains("\\")
    {
      return true
    }
    let scalars = Array(lower.unicodeScalars)
    func word(_ s: Unicode.Scalar) -> Bool { s.properties.isAlphabetic || s.properties.numericType != nil }
    for i in scalars.indices where scalars[i] == "." || scalars[i] == "\u{FF0E}" || scalars[i] == "\u{3002}" {
      guard i > 0, word(scalars[i - 1]) else { continue }
      var run = 0
      var j = i + 1
      while j < scalars.count, word(scalars[j]) {
        run += 1
        j += 1
      }
      if run >= 2 { return true }
    }
    return false
  }

  /// The sentence for a name that `displayName` refuses.
  public static let nameProblem =
    "Enter a name of 1 to 100 characters, without line breaks, tabs, invisible characters, "
    + "or web or email addresses."
}
