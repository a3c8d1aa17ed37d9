import Store

/// What a single-use link proves: recovering a forgotten password, setting a first
/// password (an account an operator made), confirming a new email address, or the old
/// address taking the account back after its email was changed.
public enum TokenPurpose: String, Sendable, CaseIterable {
  case recovery
  case setPassword = "set_password"
  case emailChange = "email_change"
  case emailRevert = "email_revert"

  /// How long a link of this purpose works, in seconds.
  public var lifetime: Int {
    switch self {
    case .recovery: 30 * 60
    case .setPassword: 7 * 86400
    case .emailChange: 24 * 3600
    case .emailRevert: 7 * 86400
    }
  }

  /// The page a link of this purpose opens (its token in the query).
  public var path: String {
    switch self {
    case .recovery: "/account/reset"
    case .setPassword: "/account/set-password"
    case .emailChange: "/account/email/confirm"
    case .emailRevert: "/account/email/restore"
    }
  }
}

/// A live single-use token: whose it is and for which address.
public struct ActionToken: Sendable, Equatable {
  public let purpose: TokenPurpose
  public let accountID: String
  /// The address the link was sent to (for an email change: the new address).
  public let email: String
  public let expiresAt: Int
  /// When it was issued.
  public var createdAt: Int = 0
}

extension ClientStore {
  /// Issues a single-use token of `purpose` for `accountID`, mailed to `email` (inside the caller's
  /// transaction, with the mail that carries it). 256 random bits; only its SHA-256 is stored.
  public func issueToken(_ purpose: TokenPurpose, accountID: String, email: EmailAddress) throws(StoreError)
    -> String
  {
    let token = Secrets.token()
    let now = clock()
    try db.query(
      """
      INSERT INTO action_tokens (digest, purpose, account_id, email, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?)
      """,
      [
        .blob(Secrets.digest(token)), .text(purpose.rawValue), .text(accountID), .text(email.normalised),
        .integer(Int64(now)), .integer(Int64(now + purpose.lifetime)),
      ])
    return token
  }

  /// The token's record while it is unused and unexpired, without using it (to show its form).
  public func peekToken(_ token: String, purpose: TokenPurpose) throws(StoreError) -> ActionToken? {
    let rows = try db.query(
      """
      SELECT account_id, email, expires_at, created_at FROM action_tokens
      WHERE digest = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?
      """, [.blob(Secrets.digest(token)), .text(purpose.rawValue), .integer(Int64(clock()))])
    guard let row = rows.first, case .text(let account) = row[0], case .text(let email) = row[1],
      case .integer(let expires) = row[2], case .integer(let created) = row[3]
    else { return nil }
    return ActionToken(
      purpose: purpose, accountID: account, email: email, expiresAt: Int(expires), createdAt: Int(created))
  }

  /// Uses the token (inside the caller's transaction): its record if it was live, and never again.
  public func consumeToken(_ token: String, purpose: TokenPurpose) throws(StoreError) -> ActionToken? {
    guard let record = try peekToken(token, purpose: purpose) else { return nil }
    try db.query(
      "UPDATE action_tokens SET used_at = ? WHERE digest = ? AND used_at IS NULL",
      [.integer(Int64(clock())), .blob(Secrets.digest(token))])
    guard db.changes == 1 else { return nil }
    return record
  }

  /// Voids every unused token of `accountID` with one of `purposes` (a password change voids the
  /// recovery and set-password links still in someone's inbox).
  public func voidTokens(accountID: String, _ purposes: [TokenPurpose]) throws(StoreError) {
    for purpose in purposes {
      try db.query(
        "UPDATE action_tokens SET used_at = ? WHERE account_id = ? AND purpose = ? AND used_at IS NULL",
        [.integer(Int64(clock())), .text(accountID), .text(purpose.rawValue)])
    }
  }

  /// Marks the account's email verified (a link sent to it was followed).
  public func markVerified(accountID: String) throws(StoreError) {
    try db.query(
      "UPDATE accounts SET email_verified_at = ? WHERE id = ? AND email_verified_at IS NULL",
      [.integer(Int64(clock())), .text(accountID)])
  }

  /// Whether the account's email has been verified.
  public func isVerified(accountID: String) throws(StoreError) -> Bool {
    guard
      case .integer? = try db.query("SELECT email_verified_at FROM accounts WHERE id = ?", [.text(accountID)])
        .first?.first
    else { return false }
    return true
  }
}
