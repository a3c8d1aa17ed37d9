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
  public var canonical: String {
    var out = ""
    write(to: &out)
    return out
  }

  private func write(to out: inout String) {
    switch self {
    case .null: out += "null"
    case .bool(let b): out += b ? "true" : "false"
    case .number(let n):
      if n == n.rounded(), abs(n) < 1e15 { out += String(Int64(n)) } else { out += String(n) }
    case .string(let s): Self.writeString(s, to: &out)
    case .array(let items):
      out += "["
      for (i, item) in items.enumerated() {
        if i > 0 { out += "," }
        item.write(to: &out)
      }
      out += "]"
    case .object(let members):
      out += "{"
      for (i, key) in members.keys.sorted(by: { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        .enumerated()
      {
        if i > 0 { out += "," }
        Self.writeString(key, to: &out)
        out += ":"
        members[key]!.write(to: &out)
      }
      out += "}"
    }
  }

  private static func writeString(_ s: String, to out: inout String) {
    out += "\"" + Log.escape(s) + "\""
  }
}
