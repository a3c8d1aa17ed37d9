/// Makes a deployment's assertions: its issuer and their lifetime, over any upstream and key.
/// Reads (GET, HEAD) are signed once per caller, upstream and key and reused from the calling
/// loop's `ReadAssertionCache`; each write is signed for its own request. A value: every loop may
/// hold a copy.
public struct AssertionSigner: Sendable {
  /// `iss`: the deployment's origin.
  public let issuer: String
  /// `exp - iat`, in seconds.
  public let lifetime: Int

  /// A signer for `issuer` (the deployment's origin) whose assertions live `lifetime` seconds:
  /// 1 to `Assertion.maximumLifetime` (60), which is what verifiers allow.
  public init(issuer: String, lifetime: Int = Assertion.maximumLifetime) throws(GatewayError) {
    guard (1...Assertion.maximumLifetime).contains(lifetime) else {
      throw GatewayError.configuration(
        "an assertion lives 1 to \(Assertion.maximumLifetime) seconds, not \(lifetime)")
    }
    self.issuer = issuer
    self.lifetime = lifetime
  }

  /// The claims for `caller` on `audience` issued at `now`: a read's when `request` is nil, else
  /// the write's, bound to that request.
  public func claims(_ caller: Caller, audience: String, request: WriteRequest? = nil, now: Int)
    -> AssertionClaims
  {
    AssertionClaims(
      issuer: issuer, audience: audience, caller: caller, issuedAt: now, expiresAt: now + lifetime,
      request: request)
  }

  /// A read's assertion (`scp` `read`): the one in `cache` while it has long enough to live,
  /// else a new one, signed with `key` and kept there.
  public func read(
    _ caller: Caller, audience: String, key: SigningKey, now: Int, cache: ReadAssertionCache
  ) throws(GatewayError) -> String {
    let cacheKey = ReadAssertionCache.Key(issuer: issuer, audience: audience, caller: caller, kid: key.kid)
    if let token = cache.token(for: cacheKey, now: now) { return token }
    let made = claims(caller, audience: audience, now: now)
    let token = try Assertion.compact(claims: made, key: key)
    cache.keep(token, for: cacheKey, issuedAt: made.issuedAt, expiresAt: made.expiresAt)
    return token
  }

  /// A write's assertion (`scp` `write`), bound to `request`: signed for every request, never cached.
  public func write(_ caller: Caller, audience: String, request: WriteRequest, key: SigningKey, now: Int)
    throws(GatewayError) -> String
  {
    try Assertion.compact(claims: claims(caller, audience: audience, request: request, now: now), key: key)
  }
}
