import Accounts
import COpenSSL

/// An Ed25519 signing key (RFC 8032) held by OpenSSL, with its public half and its key ID.
///
/// `@unchecked Sendable`, and why that holds: the only mutable state is OpenSSL's `EVP_PKEY`, which
/// is made in `init`, never modified afterwards and freed in `deinit`. Each signature runs in its
/// own `EVP_MD_CTX` (and so its own `EVP_PKEY_CTX`); OpenSSL documents objects as safe for use by
/// many threads at once as long as the calls made do not modify them, and names two threads
/// signing through two contexts as such a case (openssl-threads(7)). Taking a reference to the key
/// for a context is OpenSSL's own atomic reference count.
public final class SigningKey: @unchecked Sendable {
  private let key: OpaquePointer
  /// The raw 32-byte public key (RFC 8032 §5.1.5), the JWK's `x`.
  public let publicKey: [UInt8]
  /// The key ID: the RFC 7638 thumbprint of the public JWK.
  public let kid: String
  /// The assertion's JWS header for this key, base64url-encoded once (`Assertion.header`).
  let encodedHeader: String

  /// The key whose 32-byte private key (the RFC 8032 seed) is `privateKey`.
  public init(privateKey: [UInt8]) throws(GatewayError) {
    guard privateKey.count == 32 else {
      throw GatewayError.invalidKey("an Ed25519 private key is 32 bytes, not \(privateKey.count)")
    }
    guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, privateKey, 32) else {
      throw GatewayError.crypto("make an Ed25519 key")
    }
    var publicKey = [UInt8](repeating: 0, count: 32)
    var length = 32
    guard EVP_PKEY_get_raw_public_key(key, &publicKey, &length) == 1, length == 32 else {
      EVP_PKEY_free(key)
      throw GatewayError.crypto("read an Ed25519 public key")
    }
    let kid = SigningKey.thumbprint(x: Secrets.base64url(publicKey))
    self.key = key
    self.publicKey = publicKey
    self.kid = kid
    encodedHeader = Secrets.base64url(Assertion.header(kid: kid))
  }

  /// A new key from 32 bytes of the system's random generator.
  public static func generate() throws(GatewayError) -> SigningKey {
    try SigningKey(privateKey: Secrets.randomBytes(32))
  }

  deinit { EVP_PKEY_free(key) }

  /// The Ed25519 signature of `message` (64 bytes; RFC 8032 §5.1.6, so the same message always
  /// gets the same signature): OpenSSL's one-shot `EVP_DigestSign`, which Ed25519 requires, with no
  /// digest of its own.
  public func sign(_ message: [UInt8]) throws(GatewayError) -> [UInt8] {
    guard let context = EVP_MD_CTX_new() else { throw GatewayError.crypto("allocate a signing context") }
    defer { EVP_MD_CTX_free(context) }
    guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1 else {
      throw GatewayError.crypto("start an Ed25519 signature")
    }
    var signature = [UInt8](repeating: 0, count: 64)
    var length = 64
    guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == 64 else {
      throw GatewayError.crypto("sign with Ed25519")
    }
    return signature
  }

  /// The 32-byte private key, for sealing it at rest (`KeyEncryptionKey.seal`); never logged.
  package func privateKey() throws(GatewayError) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: 32)
    var length = 32
    guard EVP_PKEY_get_raw_private_key(key, &bytes, &length) == 1, length == 32 else {
      throw GatewayError.crypto("read an Ed25519 private key")
    }
    return bytes
  }
}
