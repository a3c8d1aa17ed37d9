import Deployment

/// Verifies a forwarded request's `Band-Licence-Assertion` exactly as docs/gateway.md tells an API
/// core to, in that order, and stops at the first check that fails. A value over two shared
/// objects (the key set and the seen `jti`s), so every connection's thread may hold a copy.
public struct AssertionVerifier: Sendable {
  /// The field the assertion travels in.
  public static let field = "Band-Licence-Assertion"
  /// The longest `exp - iat` accepted, in seconds.
  public static let maximumLifetime = 60
  /// The clock skew allowed each way, in seconds.
  public static let skew = 5

  /// `iss`: band-edge's origin (`http://127.0.0.1:8080`).
  public let issuer: String
  /// `aud`: this core's name, the upstream's name in band-edge's configuration (`core`).
  public let audience: String
  /// The JWKS's keys.
  public let keys: KeySet
  /// The write assertions' `jti`s seen, each kept until its `exp` plus the skew.
  public let seen: SeenTokens

  /// A verifier for assertions from `issuer` to `audience`, with keys from `keys`.
  public init(issuer: String, audience: String, keys: KeySet, seen: SeenTokens = SeenTokens()) {
    self.issuer = issuer
    self.audience = audience
    self.keys = keys
    self.seen = seen
  }

  /// What of a request the checks read.
  public struct Input: Sendable {
    /// Every value of the request's `Band-Licence-Assertion` fields, one per field line.
    public var fields: [String]
    /// The method, as received (`POST`).
    public var method: String
    /// The request-target, path and query, byte for byte as received.
    public var target: String
    /// The body, as received.
    public var body: [UInt8]
    /// The path's `:schoolId`.
    public var school: String
    /// The least role the route allows this method for.
    public var minimumRole: CoreRole

    /// An input with every part given.
    public init(
      fields: [String], method: String, target: String, body: [UInt8], school: String, minimumRole: CoreRole
    ) {
      self.fields = fields
      self.method = method
      self.target = target
      self.body = body
      self.school = school
      self.minimumRole = minimumRole
    }
  }

  /// The assertion's claims once every check (1 to 10) has passed at `now`; else the refusal of the
  /// first that failed. A write's `jti` is recorded as seen when it passes check 8.
  public func verify(_ input: Input, now: Int) throws(AssertionRefusal) -> VerifiedAssertion {
    // 1. Exactly one field: never pick one of several.
    guard input.fields.count == 1, let token = input.fields.first else {
      throw AssertionRefusal(
        .header, input.fields.isEmpty ? "no \(Self.field) field" : "more than one \(Self.field) field")
    }
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let headerBytes = CoreCrypto.base64urlDecode(parts[0]),
      let payloadBytes = CoreCrypto.base64urlDecode(parts[1]),
      let signature = CoreCrypto.base64urlDecode(parts[2])
    else {
      throw AssertionRefusal(.format, "the assertion is not three base64url parts (a compact JWS)")
    }
    // 2, 3: the header pins the algorithm and the type, and names the key.
    let kid = try Self.keyID(header: headerBytes)
    guard let publicKey = keys.publicKey(kid: kid, now: now) else {
      throw AssertionRefusal(.key, "the kid is not in the JWKS, even fetched again")
    }
    // 4. The signature over the two parts as received, with that key only.
    let signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
    guard CoreCrypto.ed25519Verifies(signature, of: signingInput, publicKey: publicKey) else {
      throw AssertionRefusal(.signature, "the Ed25519 signature does not verify under the kid's key")
    }
    return try checkClaims(ClaimReader(payloadBytes), input, now: now)
  }

  /// The header's `kid`, once it is a JSON object whose `alg` and `typ` are the pinned values
  /// (never the token's choice of algorithm; RFC 8725 §3.1, §3.11) and names no `crit` extension.
  static func keyID(header: [UInt8]) throws(AssertionRefusal) -> String {
    guard case .object(let members)? = try? JSONValue.parse(header) else {
      throw AssertionRefusal(.format, "the JWS header is not a JSON object")
    }
    guard members["alg"] == .string("EdDSA") else {
      throw AssertionRefusal(.algorithm, "the JWS header's alg is not EdDSA")
    }
    guard members["typ"] == .string("band-assertion+jwt") else {
      throw AssertionRefusal(.type, "the JWS header's typ is not band-assertion+jwt")
    }
    // RFC 7515 §4.1.11: an extension the recipient does not understand is refused.
    guard members["crit"] == nil else {
      throw AssertionRefusal(.format, "the JWS header names a crit extension")
    }
    guard case .string(let kid)? = members["kid"], !kid.isEmpty else {
      throw AssertionRefusal(.format, "the JWS header has no kid")
    }
    return kid
  }
}
