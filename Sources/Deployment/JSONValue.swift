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

  /// Parses UTF-8 JSON text; an object naming a key twice is refused (RFC 7493 §2.3), since the
  /// decoder would otherwise keep one of the values without a word.
  public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
    let value: JSONValue
    do {
      value = try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    } catch {
      throw .invalid
    }
    if let key = firstRepeatedKey(bytes) { throw .repeatedKey(key) }
    return value
  }

  /// The first key that an object in `bytes` (valid JSON text) names twice, nil if none. Keys are
  /// compared after their escapes are read (`"a"` and `"\u0061"` are one key), as the `String`s
  /// the decoder makes them, so canonically equivalent keys are one key too, as in its dictionary.
  static func firstRepeatedKey(_ bytes: [UInt8]) -> String? {
    // Per open container, innermost last: an object's keys so far, or nil for an array.
    var open: [Set<String>?] = []
    var i = 0
    while i < bytes.count {
      switch bytes[i] {
      case UInt8(ascii: "{"): open.append([])
      case UInt8(ascii: "["): open.append(nil)
      case UInt8(ascii: "}"), UInt8(ascii: "]"): _ = open.popLast()
      case UInt8(ascii: "\""):
        let (text, end) = string(in: bytes, from: i + 1)
        var next = end
        while next < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[next]) { next += 1 }
        // A string followed by `:` is a key of the innermost container, an object in valid JSON.
        if next < bytes.count, bytes[next] == UInt8(ascii: ":"), let last = open.indices.last,
          open[last]?.insert(text).inserted == false
        {
          return text
        }
        i = end
        continue
      default: break
      }
      i += 1
    }
    return nil
  }

  /// The text of the JSON string whose contents start at `start` (after its opening quote), its
  /// escapes read (RFC 8259 §7), and the index after its closing quote.
  private static func string(in bytes: [UInt8], from start: Int) -> (String, end: Int) {
    var units: [UInt16] = []
    var run = start
    var i = start
    func flush(_ end: Int) { units += String(decoding: bytes[run..<end], as: UTF8.self).utf16 }
    while i < bytes.count {
      switch bytes[i] {
      case UInt8(ascii: "\""):
        flush(i)
        return (String(decoding: units, as: UTF16.self), i + 1)
      case UInt8(ascii: "\\") where i + 1 < bytes.count:
        flush(i)
        let escaped = bytes[i + 1]
        i += 2
        switch escaped {
        case UInt8(ascii: "b"): units.append(0x08)
        case UInt8(ascii: "f"): units.append(0x0C)
        case UInt8(ascii: "n"): units.append(0x0A)
        case UInt8(ascii: "r"): units.append(0x0D)
        case UInt8(ascii: "t"): units.append(0x09)
        case UInt8(ascii: "u") where i + 4 <= bytes.count:
          units.append(UInt16(String(decoding: bytes[i..<i + 4], as: UTF8.self), radix: 16) ?? 0xFFFD)
          i += 4
        default: units.append(UInt16(escaped))
        }
        run = i
      default:
        i += 1
      }
    }
    flush(bytes.count)
    return (String(decoding: units, as: UTF16.self), bytes.count)
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

  /// Appends `s` as a JSON string (RFC 8259 §7), with the engine's one escaper (`JSONString`).
  public static func appendString(_ s: String, to out: inout [UInt8]) { JSONString.append(s, to: &out) }
}

/// Why `JSONValue.parse` refused its input.
public enum JSONParseError: Error, Sendable, Equatable {
  /// The bytes are not JSON text (RFC 8259).
  case invalid
  /// An object names this key more than once (RFC 8259 §4 SHOULD, RFC 7493 §2.3 MUST).
  case repeatedKey(String)
}
