import Deployment

/// The payload's members, read by name; nil when the payload is not a JSON object.
struct ClaimReader {
  let members: [String: JSONValue]?

  init(_ payload: [UInt8]) {
    if case .object(let members)? = try? JSONValue.parse(payload) {
      self.members = members
    } else {
      members = nil
    }
  }

  /// The string member `name`, or nil.
  func string(_ name: String) -> String? {
    if case .string(let value)? = members?[name] { value } else { nil }
  }

  /// The member `name` when it is an integer (NumericDate, RFC 7519 §2, as band-edge writes it).
  func integer(_ name: String) -> Int? {
    guard case .number(let value)? = members?[name], value == value.rounded(), abs(value) < 1e15 else {
      return nil
    }
    return Int(value)
  }
}

extension AssertionVerifier {
  /// Checks 5 to 10 on a payload whose signature verified.
  func checkClaims(_ claims: ClaimReader, _ input: Input, now: Int) throws(AssertionRefusal)
    -> VerifiedAssertion
  {
    // 5. Who it is from and for.
    guard claims.members != nil, let subject = claims.string("sub"), let session = claims.string("sid") else {
      throw AssertionRefusal(.claims, "the payload is not a JSON object with sub and sid")
    }
    guard claims.string("iss") == issuer else { throw AssertionRefusal(.issuer, "iss is not \(issuer)") }
    guard claims.string("aud") == audience else {
      throw AssertionRefusal(.audience, "aud is not \(audience)")
    }
    // 6. How long it lives, with the skew.
    let (issuedAt, expiresAt) = try Self.lifetime(claims, now: now)
    // 7. A read assertion never authorises a change.
    let safe = input.method == "GET" || input.method == "HEAD"
    guard claims.string("scp") == (safe ? "read" : "write") else {
      throw AssertionRefusal(
        .scope, safe ? "a \(input.method) needs scp read" : "a \(input.method) needs scp write")
    }
    // 8. A write is bound to this one request.
    let write = safe ? nil : try binding(claims, input, expiresAt: expiresAt, now: now)
    // 9. The school of the path.
    guard let school = claims.string("school"), school == input.school else {
      throw AssertionRefusal(.school, "school is not the path's school")
    }
    // 10. The role, read live by band-edge, against the route's rule.
    guard let named = claims.string("role"), let role = CoreRole(rawValue: named) else {
      throw AssertionRefusal(.role, "role is not read_only, teacher or administrator")
    }
    guard role >= input.minimumRole else {
      throw AssertionRefusal(.role, "a \(role.rawValue) may not \(input.method) here")
    }
    return VerifiedAssertion(
      subject: subject, session: session, school: school, role: role, issuedAt: issuedAt,
      expiresAt: expiresAt,
      write: write)
  }

  /// `iat` and `exp` when they are integers, `exp - iat` is at most 60, `iat` is not after now + 5
  /// and `exp` is after now − 5.
  static func lifetime(_ claims: ClaimReader, now: Int) throws(AssertionRefusal) -> (Int, Int) {
    guard let issuedAt = claims.integer("iat"), let expiresAt = claims.integer("exp") else {
      throw AssertionRefusal(.lifetime, "iat and exp are not integers")
    }
    guard expiresAt > issuedAt, expiresAt - issuedAt <= maximumLifetime else {
      throw AssertionRefusal(.lifetime, "exp - iat is not 1 to \(maximumLifetime) seconds")
    }
    guard issuedAt <= now + skew else { throw AssertionRefusal(.lifetime, "iat is in the future") }
    guard expiresAt > now - skew else { throw AssertionRefusal(.lifetime, "the assertion has expired") }
    return (issuedAt, expiresAt)
  }

  /// Check 8: `htm`, `htp` and `bh` against the request, then the `jti` recorded as seen until
  /// `exp` plus the skew (refused when it was already).
  func binding(_ claims: ClaimReader, _ input: Input, expiresAt: Int, now: Int) throws(AssertionRefusal)
    -> VerifiedAssertion.WriteBinding
  {
    guard let method = claims.string("htm"), let target = claims.string("htp"),
      let bodyHash = claims.string("bh"), let key = claims.string("idk"), !key.isEmpty,
      let requestID = claims.string("jti"), !requestID.isEmpty
    else {
      throw AssertionRefusal(.binding, "a write assertion needs htm, htp, bh, idk and jti")
    }
    guard method == input.method else { throw AssertionRefusal(.method, "htm is not the request's method") }
    guard target == input.target else { throw AssertionRefusal(.target, "htp is not the request's target") }
    guard bodyHash == CoreCrypto.base64url(CoreCrypto.sha256(input.body)) else {
      throw AssertionRefusal(.body, "bh is not the SHA-256 of the request's body")
    }
    guard seen.firstUse(requestID, keptUntil: expiresAt + Self.skew, now: now) else {
      throw AssertionRefusal(.replay, "this jti was seen before")
    }
    return VerifiedAssertion.WriteBinding(
      method: method, target: target, bodyHash: bodyHash, idempotencyKey: key, requestID: requestID)
  }
}
