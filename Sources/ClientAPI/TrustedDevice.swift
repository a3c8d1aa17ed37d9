/// A browser that has signed in to an account before ("device cookies", OWASP's answer to
/// lockout as a denial of service): a successful sign-in leaves `__Host-bl_device` behind,
/// `<issued>.<nonce>.<mac>` with the MAC over the normalised email, the issue time and the nonce
/// under the server's device key. A later attempt that presents a valid one for the email it
/// names is not held by the email's lock, which anyone can set by typing wrong passwords: its
/// failures count against that device alone, on the same schedule. So a teacher's own browser
/// keeps working while a stranger keeps the email locked everywhere else, and a stolen device
/// cookie still buys no more guesses than the lockout allows.
struct TrustedDevice: Equatable {
  /// The cookie's name; `__Host-` so that it is Secure, host-only and `Path=/`.
  static let cookie = "__Host-bl_device"
  /// How long a device stays trusted after its last successful sign-in.
  static let lifetime = 180 * 86400

  /// The device's own identity (its nonce), which its failure counter is keyed by.
  let id: String

  /// The cookie value for a device that has just signed in as `email` (a new nonce each time).
  static func issue(email: EmailAddress, key: [UInt8], now: Int) -> String {
    let nonce = Secrets.base64url(Secrets.randomBytes(16))
    return "\(now).\(nonce).\(mac(email: email, issued: now, nonce: nonce, key: key))"
  }

  /// The device `value` proves for `email`, or nil when it is malformed, forged, for another email,
  /// from the future or older than `lifetime`.
  init?(_ value: String?, email: EmailAddress, key: [UInt8], now: Int) {
    guard let value, value.utf8.count <= 128 else { return nil }
    let parts = value.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, parts[0].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), parts[0].utf8.count <= 12,
      let issued = Int(parts[0]), issued <= now, now - issued <= Self.lifetime
    else { return nil }
    let nonce = String(parts[1])
    let expected = Self.mac(email: email, issued: issued, nonce: nonce, key: key)
    guard Secrets.equal(Array(parts[2].utf8), Array(expected.utf8)) else { return nil }
    id = nonce
  }

  private static func mac(email: EmailAddress, issued: Int, nonce: String, key: [UInt8]) -> String {
    Secrets.base64url(Secrets.hmac(key: key, Array("device v1|\(email.normalised)|\(issued)|\(nonce)".utf8)))
  }
}
