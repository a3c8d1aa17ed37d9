/// Why the example core refused a request's assertion: the check of docs/gateway.md ("What the
/// API core verifies, in order") that failed first, and what was wrong. Answered as 401 with
/// `{"error":"assertion_<check>","message":…}`; the message never quotes the token.
public struct AssertionRefusal: Error, Equatable, Sendable, CustomStringConvertible {
  /// The checks, in the order they run; the number is the step of docs/gateway.md.
  public enum Check: String, Sendable, CaseIterable {
    /// 1. Exactly one `Band-Licence-Assertion` field: none, or two, is refused.
    case header
    /// 2. Three base64url parts, the first a JSON object with a `kid`.
    case format
    /// 2. `alg` exactly `EdDSA`.
    case algorithm
    /// 2. `typ` exactly `band-assertion+jwt`.
    case type
    /// 3. A `kid` the JWKS names (refetched at most every 30 s on an unknown one).
    case key
    /// 4. The Ed25519 signature, under that one key.
    case signature
    /// 5. The payload: a JSON object naming the caller (`sub`, `sid`).
    case claims
    /// 5. `iss` equals the configured origin.
    case issuer
    /// 5. `aud` equals this core's name.
    case audience
    /// 6. `exp - iat` ≤ 60, `iat` ≤ now + 5, `exp` > now − 5.
    case lifetime
    /// 7. `read` for GET and HEAD, `write` for anything else.
    case scope
    /// 8. A write carries `htm`, `htp`, `bh`, `idk` and `jti`.
    case binding
    /// 8. `htm` equals the request's method.
    case method
    /// 8. `htp` equals the request's target, byte for byte.
    case target
    /// 8. `bh` equals base64url(SHA-256(body)).
    case body
    /// 8. The `jti` was not seen before.
    case replay
    /// 9. `school` equals the path's `:schoolId`.
    case school
    /// 10. `role` reaches the route's minimum for the method.
    case role
  }

  /// The check that failed.
  public let check: Check
  /// What was wrong, for the answer and the log.
  public let message: String

  /// A refusal at `check` because of `message`.
  public init(_ check: Check, _ message: String) {
    self.check = check
    self.message = message
  }

  /// The answer's `error` code: `assertion_` and the check.
  public var code: String { "assertion_" + check.rawValue }

  public var description: String { "\(code): \(message)" }
}
