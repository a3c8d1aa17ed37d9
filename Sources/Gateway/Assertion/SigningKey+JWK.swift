import Accounts
import COpenSSL

extension SigningKey {
  /// The public JWK (RFC 8037 §2) with its key ID, algorithm and use, members in lexicographic
  /// order: `{"alg":"EdDSA","crv":"Ed25519","kid":...,"kty":"OKP","use":"sig","x":...}`.
  public var jwk: [UInt8] {
    var object = JSONObject()
    object.string("alg", Assertion.algorithm)
    object.string("crv", "Ed25519")
    object.string("kid", kid)
    object.string("kty", "OKP")
    object.string("use", "sig")
    object.string("x", Secrets.base64url(publicKey))
    return object.finished()
  }

  /// The RFC 7638 thumbprint of the Ed25519 public key whose base64url text is `x`: SHA-256 of
  /// the required members only (RFC 8037 §2: `crv`, `kty`, `x`), in lexicographic order with no
  /// whitespace (RFC 7638 §3.2), base64url without padding.
  public static func thumbprint(x: String) -> String {
    var object = JSONObject()
    object.string("crv", "Ed25519")
    object.string("kty", "OKP")
    object.string("x", x)
    return Secrets.base64url(Secrets.digest(bytes: object.finished()))
  }

  /// Whether `signature` is `publicKey`'s Ed25519 signature of `message` (what a verifier does;
  /// the gateway signs only, the tests check with it).
  package static func verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
    guard publicKey.count == 32, signature.count == 64,
      let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, 32)
    else { return false }
    defer { EVP_PKEY_free(key) }
    guard let context = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(context) }
    guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
    return EVP_DigestVerify(context, signature, 64, message, message.count) == 1
  }
}
