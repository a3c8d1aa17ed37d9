/// What checking a typed email and password found.
enum SignInCheck: Equatable {
  /// The password is the account's: the account, and a new hash when the stored one's parameters
  /// are old.
  case passed(Account, upgradedHash: String?)
  /// Not an account that can sign in with this password (or not an email address at all).
  case refused
  /// The email is locked after repeated failures (said for every email alike).
  case locked
}

extension WebPages {
  /// Checks a sign-in attempt of the web or native form. The typed email is normalised once
  /// (`EmailAddress`); text that is not an address is refused like a wrong password. Exactly one
  /// Argon2id verification whether or not the account exists or the email is locked (an unknown
  /// email is checked against the decoy), so every failure costs the same; a failure is audited
  /// and counted towards the email's lockout.
  func checkPassword(email typed: String, password: String, store: ClientStore) throws(StoreError)
    -> SignInCheck
  {
    let email = EmailAddress(typed)
    var locked = false
    var found: (Account, passwordHash: String)? = nil
    if let email {
      locked = try store.isLocked(email: email)
      found = try store.account(email: email)
    }
    let matches = context.hasher.verify(password, against: found?.passwordHash ?? decoyHash)
    guard let email else { return .refused }
    guard !locked, let (account, hash) = found, matches, !account.disabled else {
      let lockedNow = try store.recordSignInFailure(accountID: found?.0.id, email: email)
      return lockedNow ? .locked : .refused
    }
    try store.clearSignInFailures(email: email)
    return .passed(
      account, upgradedHash: context.hasher.needsRehash(hash) ? context.hasher.hash(password) : nil)
  }
}
