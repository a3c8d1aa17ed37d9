import Edge
import FoundationEssentials

/// A JSON value: read from a configuration file with every key kept (so unknown keys can be
/// reported), and written canonically (sorted keys, no whitespace) so that generated files are
/// byte-stable.
public indirect enum JSONValue: Equatable, Sendable, Decodable {
  case null
  case bool(Bool)
  case number(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

  public init(from decoder: Decoder) throws {
    let container = try decoder.singleValueContainer()
    if container.decodeNil() {
      self = .null
    } else if let value = try? container.decode(Bool.self) {
      self = .bool(value)
    } else if let value = try? container.decode(Double.self) {
      self = .number(value)
    } else if let value = try? container.decode(String.self) {
      self = .string(value)
    } else if let value = try? container.decode([JSONValue].self) {
      self = .array(value)
    } else {
      self = .object(try container.decode([String: JSONValue].self))
    }
  }

  /// Parses UTF-8 JSON text.
  public static func parse(_ bytes: [UInt8]) throws -> JSONValue {
    try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
  }

  /// Canonical text: object keys sorted by their UTF-8 bytes, no insignificant whitespace,
  /// `/` not escaped, integers without a fraction.
  public var canonical: String { String(decoding: canonicalBytes, as: UTF8.self) }

  /// The canonical text as UTF-8 bytes (what responses send).
  public var canonicalBytes: [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(256)
    write(to: &out)
    return out
  }

  private func write(to out: inout [UInt8]) {
    switch self {
    case .null: out += "null".utf8
    case .bool(let b): out += (b ? "true" : "false").utf8
    case .number(let n):
      if n == n.rounded(), abs(n) < 1e15 { out += String(Int64(n)).utf8 } else { out += String(n).utf8 }
    case .string(let s): Self.appendString(s, to: &out)
    case .array(let items):
      out.append(UInt8(ascii: "["))
      for (i, item) in items.enumerated() {
        if i > 0 { out.append(UInt8(ascii: ",")) }
        item.write(to: &out)
      }
      out.append(UInt8(ascii: "]"))
    case .object(let members):
      out.append(UInt8(ascii: "{"))
      for (i, member) in members.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) })
        .enumerated()
      {
        if i > 0 { out.append(UInt8(ascii: ",")) }
        Self.appendString(member.key, to: &out)
        out.append(UInt8(ascii: ":"))
        member.value.write(to: &out)
      }
      out.append(UInt8(ascii: "}"))
    }
  }

  /// Appends `s` as a JSON string (RFC 8259 §7): quotes, backslashes and control characters
  /// escaped; every other byte of the UTF-8 text as it is. Text with nothing to escape (nearly
  /// all of it) is copied in one piece.
  public static func appendString(_ s: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    var s = s
    s.withUTF8 { bytes in
      if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
        out.append(contentsOf: bytes)
        return
      }
      let hex = Array("0123456789abcdef".utf8)
      for byte in bytes {
        switch byte {
        case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
        case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
        case UInt8(ascii: "\n"): out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
        case UInt8(ascii: "\r"): out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
        case UInt8(ascii: "\t"): out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
        case 0..<0x20:
          out += [
            UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)],
          ]
        default: out.append(byte)
        }
      }
    }
    out.append(UInt8(ascii: "\""))
  }
}
