import Deployment
import Synchronization

/// The Ed25519 keys of band-edge's JWKS, by `kid`, fetched when first needed and again on an
/// unknown `kid` — at most once every 30 s, so a flood of made-up `kid`s costs band-edge one
/// fetch per 30 s — or once the set is older than the JWKS's `max-age` (300 s).
public final class KeySet: Sendable {
  /// Gets the JWKS document's bytes (a GET of its URL), or says why it could not.
  public typealias Fetch = @Sendable () -> Result<[UInt8], KeySetError>

  /// The least time between two fetches, in seconds.
  public static let refetchInterval = 30
  /// How long a fetched set is used before it is fetched again (the JWKS's `max-age`), in seconds.
  public static let maximumAge = 300

  private struct State {
    var keys: [String: [UInt8]] = [:]
    var fetchedAt: Int? = nil
  }

  private let fetch: Fetch
  private let log: @Sendable (String) -> Void
  private let state = Mutex(State())

  /// A key set filled by `fetch`; `log` gets one line per fetch that failed.
  public init(fetch: @escaping Fetch, log: @escaping @Sendable (String) -> Void = { _ in }) {
    self.fetch = fetch
    self.log = log
  }

  /// The raw public key (the JWK's `x`) of `kid` at `now`: from the set held, else from a new fetch
  /// when the last was 30 s ago or more; nil when neither names it. A fetch that fails keeps the
  /// set held. Fetches run under the lock, so
  /// threads that meet an unknown `kid` together cause one fetch.
  public func publicKey(kid: String, now: Int) -> [UInt8]? {
    state.withLock { state in
      let age = state.fetchedAt.map { now - $0 }
      let stale = age.map { $0 >= Self.maximumAge } ?? true
      if !stale, let key = state.keys[kid] { return key }
      // Not stale, so the kid is unknown: fetched again only 30 s after the last fetch.
      guard age.map({ $0 >= Self.refetchInterval }) ?? true else { return nil }
      state.fetchedAt = now
      switch fetch() {
      case .success(let document):
        do throws(KeySetError) { state.keys = try Self.keys(jwks: document) } catch { log("\(error)") }
      case .failure(let error):
        log("\(error)")
      }
      return state.keys[kid]
    }
  }

  /// The Ed25519 signing keys of a JWKS document (RFC 7517 §5) by `kid`: members of `keys` with
  /// `kty` `OKP`, `crv` `Ed25519` (RFC 8037 §2), an `alg` of `EdDSA` and a `use` of `sig` when
  /// given, a 32-byte `x`, and a `kid` that is the key's RFC 7638 thumbprint. Any other member is
  /// left out; a `kid` named twice is left out altogether (which key would it be?).
  static func keys(jwks: [UInt8]) throws(KeySetError) -> [String: [UInt8]] {
    guard case .object(let document)? = try? JSONValue.parse(jwks),
      case .array(let entries)? = document["keys"]
    else { throw KeySetError.invalidDocument }
    var keys: [String: [UInt8]] = [:]
    var repeated: Set<String> = []
    for case .object(let jwk) in entries {
      guard jwk["kty"] == .string("OKP"), jwk["crv"] == .string("Ed25519"),
        jwk["alg"] == nil || jwk["alg"] == .string("EdDSA"),
        jwk["use"] == nil || jwk["use"] == .string("sig"),
        case .string(let kid)? = jwk["kid"], case .string(let x)? = jwk["x"],
        let publicKey = CoreCrypto.base64urlDecode(x[...]), publicKey.count == 32, kid == thumbprint(x: x)
      else { continue }
      if keys.updateValue(publicKey, forKey: kid) != nil { repeated.insert(kid) }
    }
    for kid in repeated { keys[kid] = nil }
    return keys
  }

  /// The RFC 7638 thumbprint of an Ed25519 JWK whose `x` is `x`: SHA-256 of its required members
  /// in lexicographic order without whitespace, base64url.
  static func thumbprint(x: String) -> String {
    let required = JSONValue.object(["crv": .string("Ed25519"), "kty": .string("OKP"), "x": .string(x)])
    return CoreCrypto.base64url(CoreCrypto.sha256(required.canonicalBytes))
  }
}

/// Why the JWKS could not be read.
public enum KeySetError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The GET failed: no connection, a timeout, a status other than 200, a body too large.
  case unreachable(String)
  /// The document is not a JSON object with a `keys` array.
  case invalidDocument

  public var description: String {
    switch self {
    case .unreachable(let reason): "the JWKS could not be fetched: \(reason)"
    case .invalidDocument: "the JWKS is not a JSON object with a keys array"
    }
  }
}
