import Accounts

/// The key-encryption key (KEK): 32 random bytes, read from a file outside the store, under which
/// every gateway private key is sealed (AES-256-GCM) before it is written to the store. A copy of
/// the database alone (a backup, a replica, `copy-store`) holds no usable signing key.
///
/// The file (`load(path:)`): exactly 64 hexadecimal digits, optionally followed by one newline —
/// what `(umask 077; openssl rand -hex 32 > FILE)` writes. Hex rather than raw bytes so that it
/// survives an editor, a secret store or a copy through a terminal unchanged; rather than base64 so
/// that there is one spelling of each key. It must be a regular file owned by the user band-edge
/// runs as, with no permission for group or others (mode 0600 or 0400).
public struct KeyEncryptionKey: Sendable {
  private let bytes: [UInt8]

  /// The key of exactly 32 `bytes`.
  package init(bytes: [UInt8]) throws(GatewayError) {
    guard bytes.count == 32 else {
      throw GatewayError.invalidKey("a key-encryption key is 32 bytes, not \(bytes.count)")
    }
    self.bytes = bytes
  }

  /// `privateKey` sealed for the row of `kid`: the kid is the sealed box's associated data, so the
  /// box opens only in that row (`open`). Nil only when OpenSSL fails.
  package func seal(_ privateKey: [UInt8], kid: String) -> [UInt8]? {
    Seal.seal(privateKey, key: bytes, associated: Self.associated(kid))
  }

  /// The private key sealed in `box` for `kid`, or nil: another KEK, another row's box, or an
  /// altered one.
  package func open(_ box: [UInt8], kid: String) -> [UInt8]? {
    Seal.open(box, key: bytes, associated: Self.associated(kid))
  }

  /// What a box is bound to: its purpose and version, then the row's key ID.
  private static func associated(_ kid: String) -> [UInt8] { Array("band-edge gateway key v1:\(kid)".utf8) }

  /// The KEK's file text: 64 lower-case hexadecimal digits and a newline.
  var fileText: [UInt8] {
    let digits = Array("0123456789abcdef".utf8)
    return bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] } + [UInt8(ascii: "\n")]
  }

  /// The key in a KEK file's `text`: 64 hexadecimal digits (either case), then at most one newline.
  static func parse(_ text: [UInt8]) -> KeyEncryptionKey? {
    let digits = text.last == UInt8(ascii: "\n") ? text.dropLast() : text[...]
    guard digits.count == 64 else { return nil }
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
      guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
      bytes.append(high << 4 | low)
      index += 2
    }
    return try? KeyEncryptionKey(bytes: bytes)
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
  }
}
