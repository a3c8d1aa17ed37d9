/// The claims of an assertion that passed every check: who asks, where, as what, and for a write
/// which request it was signed for.
public struct VerifiedAssertion: Equatable, Sendable {
  /// `sub`: the account's ID.
  public let subject: String
  /// `sid`: the session's ID (not its token).
  public let session: String
  /// `school`: the school of the request's path.
  public let school: String
  /// `role`: the caller's live role there.
  public let role: CoreRole
  /// `iat` and `exp`, in seconds since 1970.
  public let issuedAt: Int
  public let expiresAt: Int
  /// A write's binding; nil for a read.
  public let write: WriteBinding?

  /// What a write assertion is bound to (`htm`, `htp`, `bh`, `idk`, `jti`).
  public struct WriteBinding: Equatable, Sendable {
    /// `htm`.
    public let method: String
    /// `htp`: path and query, as received.
    public let target: String
    /// `bh`: base64url of the body's SHA-256.
    public let bodyHash: String
    /// `idk`: the request's `Idempotency-Key`.
    public let idempotencyKey: String
    /// `jti`: the request's ID.
    public let requestID: String
  }
}
