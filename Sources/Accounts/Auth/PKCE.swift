import COpenSSL

/// The parameters of the native sign-in handoff (RFC 7636): pure checks, so that every rule has a
/// table test.
public enum PKCE {
  /// RFC 3986 unreserved characters: `A-Z a-z 0-9 - . _ ~`.
  static func isUnreserved(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
      UInt8(ascii: "~"):
      true
    default: false
    }
  }

  static func isBase64URL(_ byte: UInt8) -> Bool {
    isUnreserved(byte) && byte != UInt8(ascii: ".") && byte != UInt8(ascii: "~")
  }

  /// A code challenge: exactly 43 base64url characters (a SHA-256 digest without padding).
  public static func validChallenge(_ text: String) -> Bool {
    text.utf8.count == 43 && text.utf8.allSatisfy(isBase64URL)
  }

  /// A code verifier: 43 to 128 unreserved characters (RFC 7636 §4.1).
  public static func validVerifier(_ text: String) -> Bool {
    (43...128).contains(text.utf8.count) && text.utf8.allSatisfy(isUnreserved)
  }

  /// A state: 16 to 512 URL-safe (unreserved) characters, so it travels byte for byte.
  public static func validState(_ text: String) -> Bool {
    (16...512).contains(text.utf8.count) && text.utf8.allSatisfy(isUnreserved)
  }

  /// An app version: `MAJOR.MINOR[.PATCH]`, each part 1 to 6 digits.
  public static func validAppVersion(_ text: String) -> Bool {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    return (2...3).contains(parts.count)
      && parts.allSatisfy {
        (1...6).contains($0.utf8.count) && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
      }
  }

  /// `BASE64URL(SHA256(ASCII(verifier)))` (RFC 7636 §4.2).
  public static func challenge(forVerifier verifier: String) -> String {
    Secrets.base64url(Secrets.digest(verifier))
  }

  /// Whether `verifier` hashes to `challenge` (constant time).
  public static func matches(verifier: String, challenge: String) -> Bool {
    Secrets.equal(Array(Self.challenge(forVerifier: verifier).utf8), Array(challenge.utf8))
  }
}

/// AES-256-GCM sealing, in one place for the code base: an idempotent exchange's answer under a key
/// derived from the client's code verifier (the store can give a retry its session token back, yet
/// never holds the token in a form it can read by itself), and the gateway's signing keys under the
/// key-encryption key. `associated` data (GCM's AAD) is authenticated, not encrypted: a box opens
/// only with the same bytes, so a box bound to one row's key ID cannot be moved to another row.
package enum Seal {
  /// The key a native handoff's answer is sealed under, derived from the client's code verifier.
  package static func key(verifier: String) -> [UInt8] {
    Secrets.digest("band-edge handoff seal v1:" + verifier)
  }

  /// nonce (12) + ciphertext + tag (16), under a 32-byte `key` and a fresh random nonce; nil when
  /// the key is not 32 bytes or OpenSSL fails.
  package static func seal(_ plaintext: [UInt8], key: [UInt8], associated: [UInt8] = []) -> [UInt8]? {
    guard key.count == 32 else { return nil }
    let nonce = Secrets.randomBytes(12)
    guard let context = EVP_CIPHER_CTX_new() else { return nil }
    defer { EVP_CIPHER_CTX_free(context) }
    var out = [UInt8](repeating: 0, count: plaintext.count + 16)
    var length: Int32 = 0
    var tag = [UInt8](repeating: 0, count: 16)
    guard EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1,
      authenticate(associated, context, encrypting: true),
      EVP_EncryptUpdate(context, &out, &length, plaintext, Int32(plaintext.count)) == 1
    else { return nil }
    var final: Int32 = 0
    guard EVP_EncryptFinal_ex(context, &out[Int(length)], &final) == 1,
      EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1
    else { return nil }
    return nonce + out[0..<Int(length + final)] + tag
  }

  /// The plaintext, or nil when the key or the associated data is wrong or the box was altered.
  package static func open(_ box: [UInt8], key: [UInt8], associated: [UInt8] = []) -> [UInt8]? {
    guard box.count >= 28, key.count == 32 else { return nil }
    let nonce = Array(box[0..<12])
    let ciphertext = Array(box[12..<(box.count - 16)])
    var tag = Array(box[(box.count - 16)...])
    guard let context = EVP_CIPHER_CTX_new() else { return nil }
    defer { EVP_CIPHER_CTX_free(context) }
    var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
    var length: Int32 = 0
    guard EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1,
      authenticate(associated, context, encrypting: false),
      EVP_DecryptUpdate(context, &out, &length, ciphertext, Int32(ciphertext.count)) == 1,
      EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1
    else { return nil }
    var final: Int32 = 0
    guard EVP_DecryptFinal_ex(context, &out[Int(length)], &final) == 1 else { return nil }
    return Array(out[0..<Int(length + final)])
  }

  /// Feeds `associated` to GCM as AAD (an update with no output buffer); nothing to do when empty.
  private static func authenticate(_ associated: [UInt8], _ context: OpaquePointer, encrypting: Bool) -> Bool
  {
    guard !associated.isEmpty else { return true }
    var length: Int32 = 0
    let count = Int32(associated.count)
    let status =
      encrypting
      ? EVP_EncryptUpdate(context, nil, &length, associated, count)
      : EVP_DecryptUpdate(context, nil, &length, associated, count)
    return status == 1
  }
}
