import COpenSSL

/// The few primitives a verifier needs, written here rather than borrowed from the gateway's
/// signer: the example core checks band-edge's assertions as an independent API core would.
enum CoreCrypto {
  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  /// The bytes of base64url text without padding (RFC 4648 §5, RFC 7515 §2), or nil for any other
  /// text: a byte outside the alphabet, `=`, a length that is 1 more than a multiple of 4, or
  /// unused low bits that are not zero (so that one byte string has exactly one spelling).
  static func base64urlDecode(_ text: Substring) -> [UInt8]? {
    var values: [UInt8] = []
    values.reserveCapacity(text.utf8.count)
    for byte in text.utf8 {
      guard let value = alphabet.firstIndex(of: byte) else { return nil }
      values.append(UInt8(value))
    }
    guard values.count % 4 != 1 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(values.count * 3 / 4)
    var accumulator = 0
    var bits = 0
    for value in values {
      accumulator = (accumulator << 6 | Int(value)) & 0xFFFF
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8(truncatingIfNeeded: accumulator >> bits))
      }
    }
    guard accumulator & ((1 << bits) - 1) == 0 else { return nil }
    return out
  }

  /// base64url of `bytes` without padding, through OpenSSL's base64 with the two letters swapped.
  static func base64url(_ bytes: [UInt8]) -> String {
    var encoded = [UInt8](repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
    let length = Int(EVP_EncodeBlock(&encoded, bytes, Int32(bytes.count)))
    let text = encoded[..<length].compactMap { byte -> UInt8? in
      switch byte {
      case UInt8(ascii: "+"): UInt8(ascii: "-")
      case UInt8(ascii: "/"): UInt8(ascii: "_")
      case UInt8(ascii: "="): nil
      default: byte
      }
    }
    return String(decoding: text, as: UTF8.self)
  }

  /// SHA-256 of `bytes`.
  static func sha256(_ bytes: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    bytes.withUnsafeBufferPointer { _ = SHA256($0.baseAddress, $0.count, &out) }
    return out
  }

  /// Whether `signature` is the Ed25519 signature (RFC 8032 §5.1.7) of `message` under the raw
  /// 32-byte `publicKey`, through OpenSSL's one-shot verification.
  static func ed25519Verifies(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
    guard publicKey.count == 32, signature.count == 64,
      let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count)
    else { return false }
    defer { EVP_PKEY_free(key) }
    guard let context = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(context) }
    return EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1
      && EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
  }
}
