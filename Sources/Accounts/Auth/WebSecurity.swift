import COpenSSL
import Deployment
import Edge

/// The browser side of authentication: the
/// session cookie, CSRF tokens, the same-origin check and form bodies.
public enum WebSecurity {
  /// The web session's cookie: `__Host-` so that it is Secure, host-only and `Path=/` by rule.
  public static let sessionCookie = "__Host-bl_session"
  /// The signed-out visitor's CSRF binding, so that the sign-in form itself is protected.
  public static let csrfCookie = "__Host-bl_csrf"

  /// A `Set-Cookie` value with exactly the contract's attributes; `maxAge` 0 deletes it.
  public static func setCookie(_ name: String, _ value: String, maxAge: Int) -> String {
    "\(name)=\(value); Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=\(maxAge)"
  }

  /// The value of cookie `name` in the request's `Cookie` fields (RFC 6265 §5.4), or nil.
  public static func cookie(_ name: String, in request: Request) -> String? {
    guard let header = request.headers["cookie"] else { return nil }
    for pair in header.split(separator: ";") {
      let trimmed = pair.drop { $0 == " " }
      guard let eq = trimmed.firstIndex(of: "="), trimmed[..<eq] == name else { continue }
      let value = trimmed[trimmed.index(after: eq)...]
      return value.isEmpty ? nil : String(value)
    }
    return nil
  }

  /// The CSRF token bound to `binding` (the session token, or the signed-out visitor's CSRF
  /// cookie): HMAC-SHA256 keyed by the binding, so it needs no server secret, works on every
  /// instance, and cannot be made without reading an HttpOnly cookie.
  public static func csrfToken(binding: String) -> String {
    let key = Array(binding.utf8)
    let message = Array("band-edge csrf v1".utf8)
    var out = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    _ = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &out, &length)
    return Secrets.base64url(out)
  }

  /// Whether `presented` is the CSRF token for `binding` (constant time).
  public static func csrfValid(_ presented: String?, binding: String?) -> Bool {
    guard let presented, let binding else { return false }
    return Secrets.equal(Array(presented.utf8), Array(csrfToken(binding: binding).utf8))
  }

  /// The host of an origin: `app.example.test` from `https://app.example.test:8443`, `::1` from
  /// `http://[::1]:8080`.
  public static func host(of origin: String) -> String {
    var rest = Substring(origin)
    if let scheme = rest.firstRange(of: "://") { rest = rest[scheme.upperBound...] }
    if rest.hasPrefix("[") { return String(rest.dropFirst().prefix { $0 != "]" }) }
    return String(rest.prefix { $0 != ":" && $0 != "/" })
  }

  /// Whether a state-changing request comes from one of our own pages: its `Origin` (or, without
  /// one, its `Referer`) is the deployment's origin. In development, which listens on loopback
  /// only, the origin the browser used (`http://` or `https://` + `Host`) counts too, so that tests
  /// on random ports work. `Origin: null` and a missing pair are refused.
  public static func sameOrigin(_ request: Request, deployment: Deployment) -> Bool {
    var allowed = [deployment.origin]
    if deployment.environment == .development, let host = request.headers["host"] {
      allowed += ["http://" + host, "https://" + host]
    }
    if let origin = request.headers["origin"] { return allowed.contains(origin) }
    guard let referer = request.headers["referer"] else { return false }
    return allowed.contains { referer == $0 || referer.hasPrefix($0 + "/") }
  }

  /// The fields of an `application/x-www-form-urlencoded` body (WHATWG URL §5.1); nil when the
  /// body is not that (a `charset` other than UTF-8 included), is not UTF-8 or names a field twice.
  public static func form(_ request: Request) -> [String: String]? {
    guard let type = request.mediaType, type.is("application", "x-www-form-urlencoded"), type.isUTF8 else {
      return nil
    }
    return fields(request.body)
  }

  /// `name=value&...` pairs, percent-decoded (`+` is a space); nil when not UTF-8 or a name
  /// repeats (a repeated parameter is ambiguous, so it is refused rather than guessed).
  public static func fields<C: Collection<UInt8>>(_ bytes: C) -> [String: String]? {
    var fields: [String: String] = [:]
    for pair in Array(bytes).split(separator: UInt8(ascii: "&")) {
      let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
      guard let name = percentDecode(parts[0]), let value = percentDecode(parts.count > 1 ? parts[1] : []),
        fields[name] == nil
      else { return nil }
      fields[name] = value
    }
    return fields
  }

  static func percentDecode(_ bytes: ArraySlice<UInt8>) -> String? {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = bytes.startIndex
    while i < bytes.endIndex {
      let byte = bytes[i]
      if byte == UInt8(ascii: "+") {
        out.append(UInt8(ascii: " "))
      } else if byte == UInt8(ascii: "%") {
        guard i + 2 < bytes.endIndex, let high = hex(bytes[i + 1]), let low = hex(bytes[i + 2]) else {
          return nil
        }
        out.append(high << 4 | low)
        i += 2
      } else {
        out.append(byte)
      }
      i += 1
    }
    return String(validating: out, as: UTF8.self)
  }

  private static func hex(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
  }
}
