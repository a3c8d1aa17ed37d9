/// A media type as a `Content-Type` field carries it (RFC 9110 §8.3.1): `type/subtype` and its
/// parameters, with white space allowed around each `;` (§5.6.6) and quoted parameter values
/// (§5.6.4). Type, subtype and parameter names compare case-insensitively and are kept lower-case;
/// parameter values are kept as sent, unquoted.
public struct MediaType: Equatable, Sendable {
  /// `application` in `application/json`, lower-case.
  public let type: String
  /// `json` in `application/json`, lower-case.
  public let subtype: String
  /// Parameters in order, names lower-case, values unquoted.
  public let parameters: [Parameter]

  /// One `name=value` parameter.
  public struct Parameter: Equatable, Sendable {
    public let name: String
    public let value: String
  }

  /// The media type in `text`, or nil when it is not `type/subtype *( OWS ";" OWS parameter )`.
  public init?(_ text: String) {
    var scanner = Scanner(Array(text.utf8))
    scanner.skipWhitespace()
    guard let type = scanner.token(), scanner.take(UInt8(ascii: "/")), let subtype = scanner.token() else {
      return nil
    }
    var parameters: [Parameter] = []
    scanner.skipWhitespace()
    while scanner.take(UInt8(ascii: ";")) {
      scanner.skipWhitespace()
      // An empty parameter (`text/plain;`, `a/b; ;c=d`) is allowed by the grammar's list rule.
      if scanner.atEnd || scanner.peek == UInt8(ascii: ";") { continue }
      guard let name = scanner.token(), scanner.take(UInt8(ascii: "=")),
        let value = scanner.peek == UInt8(ascii: "\"") ? scanner.quotedString() : scanner.token()
      else { return nil }
      parameters.append(Parameter(name: name.lowercased(), value: value))
      scanner.skipWhitespace()
    }
    guard scanner.atEnd else { return nil }
    self.type = type.lowercased()
    self.subtype = subtype.lowercased()
    self.parameters = parameters
  }

  /// Whether this is `type/subtype` (compared case-insensitively).
  public func `is`(_ type: String, _ subtype: String) -> Bool {
    self.type == type.lowercased() && self.subtype == subtype.lowercased()
  }

  /// The value of the first parameter named `name` (case-insensitive), if any.
  public func parameter(_ name: String) -> String? {
    let name = name.lowercased()
    return parameters.first { $0.name == name }?.value
  }

  /// Whether the body is UTF-8 as far as the `charset` parameter says: absent, or `utf-8` in any case.
  public var isUTF8: Bool { parameter("charset").map { $0.lowercased() == "utf-8" } ?? true }

  private struct Scanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }
    var peek: UInt8? { atEnd ? nil : bytes[index] }

    mutating func take(_ byte: UInt8) -> Bool {
      guard peek == byte else { return false }
      index += 1
      return true
    }

    /// OWS (RFC 9110 §5.6.3).
    mutating func skipWhitespace() {
      while let b = peek, b == 0x20 || b == 0x09 { index += 1 }
    }

    /// A token (RFC 9110 §5.6.2), or nil when none starts here.
    mutating func token() -> String? {
      let start = index
      while let b = peek, ASCII.isToken(b) { index += 1 }
      return index == start ? nil : String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// A quoted-string's content with its quoted-pairs undone (RFC 9110 §5.6.4).
    mutating func quotedString() -> String? {
      guard take(UInt8(ascii: "\"")) else { return nil }
      var out: [UInt8] = []
      while let b = peek {
        index += 1
        switch b {
        case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
        case UInt8(ascii: "\\"):
          guard let escaped = peek, escaped == 0x09 || (escaped >= 0x20 && escaped != 0x7F) else {
            return nil
          }
          out.append(escaped)
          index += 1
        case 0x09, 0x20...0x7E, 0x80...0xFF:
          out.append(b)
        default: return nil
        }
      }
      return nil
    }
  }
}

extension Request {
  /// The request's `Content-Type`, parsed; nil when absent or malformed.
  public var mediaType: MediaType? { headers["content-type"].flatMap(MediaType.init) }
}
