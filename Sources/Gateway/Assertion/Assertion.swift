import Accounts

/// The identity assertion the gateway adds to every forwarded request: a compact JWS (RFC 7515
/// §7.1) signed with Ed25519 (`EdDSA`, RFC 8037 §3.1), of an explicit type (RFC 8725 §3.11), whose
/// claims say who is asking, in which school, with which role, and for a write which request.
public enum Assertion {
  /// The one header field the assertion travels in; the gateway replaces any a client sent.
  public static let field = "Band-Licence-Assertion"
  /// The JWS `alg` (RFC 8037 §3.1), pinned: verifiers allow this value only.
  public static let algorithm = "EdDSA"
  /// The JWS `typ` (RFC 8725 §3.11), pinned: verifiers allow this value only.
  public static let type = "band-assertion+jwt"
  /// The longest an assertion lives (`exp - iat`), in seconds.
  public static let maximumLifetime = 60

  /// The JWS header for `kid`: `{"alg":"EdDSA","kid":"…","typ":"band-assertion+jwt"}`.
  static func header(kid: String) -> [UInt8] {
    var object = JSONObject()
    object.string("alg", algorithm)
    object.string("kid", kid)
    object.string("typ", type)
    return object.finished()
  }

  /// The compact JWS of `claims` signed by `key`: the same claims and key always give the same
  /// text (Ed25519 is deterministic). Throws only when OpenSSL fails.
  public static func compact(claims: AssertionClaims, key: SigningKey) throws(GatewayError) -> String {
    try compact(encodedHeader: key.encodedHeader, payload: payload(claims), key: key)
  }

  /// The compact JWS of any `header` and `payload` (RFC 7515 §7.1): the signing input is
  /// `BASE64URL(header) "." BASE64URL(payload)` (§5.1), signed as it is (RFC 8037 §3.1).
  package static func compact(header: [UInt8], payload: [UInt8], key: SigningKey) throws(GatewayError)
    -> String
  {
    try compact(encodedHeader: Secrets.base64url(header), payload: payload, key: key)
  }

  private static func compact(encodedHeader: String, payload: [UInt8], key: SigningKey) throws(GatewayError)
    -> String
  {
    let input = encodedHeader + "." + Secrets.base64url(payload)
    return input + "." + Secrets.base64url(try key.sign(Array(input.utf8)))
  }
}
