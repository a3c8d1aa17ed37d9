/// A browser that has signed in to an account before ("device cookies", OWASP's answer to
/// lockout as a denial of service): a successful sign-in leaves `__Host-bl_device` behind,
/// `<issued>.<nonce>.<mac>` with the MAC over the normalised email, the account, its credential
/// epoch, the issue time and the nonce under the server's device key. The server keeps each
/// device's nonce (as a digest), at most `perAccount` per account, and forgets them all at every
/// credential change, so a cookie is trusted only while it is on that list and its MAC
/// names the account's current epoch.
///
/// A later attempt that presents a trusted device for the email it names is not held by the
/// email's lock, which anyone can set by typing wrong passwords: its failures count against the
/// account's trusted devices together, on the same schedule (`ClientStore.failureKey`). So a
/// teacher's own browser keeps working while a stranger keeps the email locked everywhere else,
/// and stolen device cookies, however many, buy no more guesses than one lockout allows.
package struct TrustedDevice: Equatable {
  /// The cookie's name; `__Host-` so that it is Secure, host-only and `Path=/`.
  package static let cookie = "__Host-bl_device"
  /// How long a device stays trusted after its last successful sign-in.
  package static let lifetime = 180 * 86400
  /// The most trusted devices an account keeps; a new one makes the least recently used go.
  static let perAccount = 5

  /// The device's own identity (its nonce).
  package let nonce: String
  /// The account it is trusted for.
  package let accountID: String

  /// A cookie value as presented, before the server's list is asked.
  struct Presented: Equatable {
    package let issued: Int
    package let nonce: String
    let mac: String

    /// The parts of `value`, or nil when it is malformed, from the future or older than `lifetime`.
    package init?(_ value: String?, now: Int) {
      guard let value, value.utf8.count <= 128 else { return nil }
      let parts = value.split(separator: ".", omittingEmptySubsequences: false)
      guard parts.count == 3, parts[0].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
        parts[0].utf8.count <= 12, let issued = Int(parts[0]), issued <= now,
        now - issued <= TrustedDevice.lifetime, !parts[1].isEmpty
      else { return nil }
      self.issued = issued
      nonce = String(parts[1])
      mac = String(parts[2])
    }

    /// Whether the MAC is the one the server made for `email`, `accountID` and `epoch`.
    package func verifies(email: EmailAddress, accountID: String, epoch: Int, key: [UInt8]) -> Bool {
      let expected = TrustedDevice.mac(
        email: email, accountID: accountID, epoch: epoch, issued: issued, nonce: nonce, key: key)
      return Secrets.equal(Array(mac.utf8), Array(expected.utf8))
    }
  }

  /// The cookie value for `nonce`, issued at `now` to `accountID` at credential `epoch`.
  package static func value(
    email: EmailAddress, accountID: String, epoch: Int, nonce: String, key: [UInt8], now: Int
  ) -> String {
    "\(now).\(nonce).\(mac(email: email, accountID: accountID, epoch: epoch, issued: now, nonce: nonce, key: key))"
  }

  static func mac(
    email: EmailAddress, accountID: String, epoch: Int, issued: Int, nonce: String, key: [UInt8]
  ) -> String {
    Secrets.base64url(
      Secrets.hmac(
        key: key, Array("device v2|\(email.normalised)|\(accountID)|\(epoch)|\(issued)|\(nonce)".utf8)))
  }
}
