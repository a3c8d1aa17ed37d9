extension Assertion {
  /// The JSON of `claims`: members in one fixed order (who, where, when, then the request's
  /// binding for a write), no whitespace, times as integers; `av` left out when there is none.
  public static func payload(_ claims: AssertionClaims) -> [UInt8] {
    var object = JSONObject()
    object.string("iss", claims.issuer)
    object.string("aud", claims.audience)
    object.string("sub", claims.caller.account)
    object.string("sid", claims.caller.session)
    object.string("school", claims.caller.school)
    object.string("role", claims.caller.role.rawValue)
    object.string("chn", claims.caller.channel.rawValue)
    if let version = claims.caller.appVersion { object.string("av", version) }
    object.string("scp", claims.scope.rawValue)
    object.integer("iat", claims.issuedAt)
    object.integer("exp", claims.expiresAt)
    if let request = claims.request {
      object.string("htm", request.method)
      object.string("htp", request.target)
      object.string("bh", request.bodyHash)
      object.string("idk", request.idempotencyKey)
      object.string("jti", request.requestID)
    }
    return object.finished()
  }
}
