/// Writing the two bare items of structured fields (RFC 8941) that the engine's own fields use.
enum StructuredField {
  /// `value` as an sf-token when it is one (RFC 8941 §3.3.4: ALPHA or `*`, then tchar, `:` or
  /// `/`), else as an sf-string.
  static func item(_ value: String) -> String {
    isToken(value) ? value : string(value)
  }

  /// `value` as an sf-string (RFC 8941 §3.3.3): quoted, `"` and `\` escaped; a character outside
  /// printable ASCII cannot be written and is left out.
  static func string(_ value: String) -> String {
    var bytes: [UInt8] = [UInt8(ascii: "\"")]
    for byte in value.utf8 where byte >= 0x20 && byte < 0x7F {
      if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
      bytes.append(byte)
    }
    bytes.append(UInt8(ascii: "\""))
    return String(decoding: bytes, as: UTF8.self)
  }

  private static func isToken(_ value: String) -> Bool {
    guard let first = value.utf8.first else { return false }
    let alpha = (first | 0x20) >= UInt8(ascii: "a") && (first | 0x20) <= UInt8(ascii: "z")
    guard alpha || first == UInt8(ascii: "*") else { return false }
    return value.utf8.dropFirst().allSatisfy {
      ASCII.isToken($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "/")
    }
  }
}
