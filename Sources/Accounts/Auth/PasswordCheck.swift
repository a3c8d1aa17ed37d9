import Edge
import Store

/// What checking a typed email and password found.
package enum SignInCheck: Equatable {
  /// The password is the account's: the account and a new hash when the stored one's parameters
  /// are old. A sign-in then trusts the browser (`trustDevice`); other checks of the password
  /// (changing it, deleting the account) do not.
  case passed(Account, upgradedHash: String?)
  /// Not an account that can sign in with this password (or not an email address at all).
  case refused
  /// The email (or, from a trusted device, that device) is locked after repeated failures; said
  /// for every email alike.
  case locked
}

extension Authenticator {
  /// Checks a sign-in attempt of the web or native form (or the deletion form's password). The
  /// typed email is normalised once (`EmailAddress`); text that is not an address is refused like a
  /// wrong password. Exactly one Argon2id verification whether or not the account exists or the
  /// email is locked (an unknown email is checked against the decoy), so every failure costs the
  /// same; a failure is audited and counted towards the lockout: the email's, or when `request`
  /// carries a valid trusted-device cookie for this email, that device's alone.
  package func checkPassword(email typed: String, password: String, store: ClientStore, request: Request)
    throws(StoreError) -> SignInCheck
  {
    let email = EmailAddress(typed)
    var locked = false
    var found: (Account, passwordHash: String)? = nil
    var device: TrustedDevice? = nil
    if let email {
      device = try store.trustedDevice(WebSecurity.cookie(TrustedDevice.cookie, in: request), email: email)
      locked = try store.isLocked(email: email, device: device)
      found = try store.account(email: email)
    }
    let matches = services.hasher.verify(password, against: found?.passwordHash ?? services.decoyHash)
    guard let email else { return .refused }
    guard !locked, let (account, hash) = found, matches, !account.disabled else {
      let lockedNow = try store.recordSignInFailure(accountID: found?.0.id, email: email, device: device)
      return lockedNow ? .locked : .refused
    }
    try store.clearSignInFailures(email: email, device: device)
    return .passed(
      account, upgradedHash: services.hasher.needsRehash(hash) ? services.hasher.hash(password) : nil)
  }

  /// The `Set-Cookie` field that trusts the browser that has just signed in to `account`
  /// (`ClientStore.trustDevice`), replacing the device cookie it sent, if any.
  package func trustBrowser(_ account: Account, _ request: Request, _ store: ClientStore) throws(StoreError)
    -> String
  {
    let value = try store.trustDevice(
      account: account, replacing: WebSecurity.cookie(TrustedDevice.cookie, in: request))
    return WebSecurity.setCookie(TrustedDevice.cookie, value, maxAge: TrustedDevice.lifetime)
  }
}
