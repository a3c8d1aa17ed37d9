/// When the gateway's keys are made, sign and leave the JWKS, in seconds. A verifier caches the
/// JWKS for up to five minutes and refetches on an unknown `kid`, so a new key is published well
/// before it signs, and an old one stays published until every assertion it signed has expired.
public struct KeyPolicy: Sendable, Equatable {
  /// From a key's creation (when it is published) to its first signature. The first key of a
  /// store signs at once: no verifier can have cached a JWKS without it.
  public var activationDelay = 600
  /// The longest assertion lifetime any instance uses (`Assertion.maximumLifetime`).
  public var maximumAssertionLifetime = Assertion.maximumLifetime
  /// The clock skew between band-edge and a verifier that the verifier allows.
  public var skew = 5
  /// A key older than this is due to be replaced (`KeyRing.rotationDue`).
  public var rotationAge = 30 * 86_400

  /// Published 10 minutes before signing; kept 65 s after being replaced; rotated every 30 days.
  public init() {}

  /// How long a replaced key stays published after its successor starts to sign.
  public var retention: Int { maximumAssertionLifetime + skew }
}
