/// The claims of one identity assertion. A read carries who and where; a write is also bound to
/// its request (`request`), so that a captured write assertion is good for that request only.
public struct AssertionClaims: Equatable, Sendable {
  /// `iss`: the deployment's origin (`https://host`).
  public var issuer: String
  /// `aud`: the upstream's name (`api-core`).
  public var audience: String
  /// `sub`, `sid`, `school`, `role`, `chn`, `av`.
  public var caller: Caller
  /// `iat`, in seconds since 1970.
  public var issuedAt: Int
  /// `exp`: `issuedAt` plus the assertion's lifetime (at most `Assertion.maximumLifetime`).
  public var expiresAt: Int
  /// `htm`, `htp`, `bh`, `idk`, `jti`: present for a write, nil for a read.
  public var request: WriteRequest?

  /// `scp`: `read` for GET and HEAD, `write` for anything else.
  public enum Scope: String, Sendable {
    /// A GET or HEAD: changes nothing.
    case read
    /// Any other method.
    case write
  }

  /// `scp`, which follows from whether the claims are bound to a request.
  public var scope: Scope { request == nil ? .read : .write }

  /// Claims with every member given.
  public init(
    issuer: String, audience: String, caller: Caller, issuedAt: Int, expiresAt: Int, request: WriteRequest?
  ) {
    self.issuer = issuer
    self.audience = audience
    self.caller = caller
    self.issuedAt = issuedAt
    self.expiresAt = expiresAt
    self.request = request
  }
}
