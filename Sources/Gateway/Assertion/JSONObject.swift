import Edge

/// A JSON object (RFC 8259 §4) written member by member, in the order the caller gives, with no
/// whitespace: how the assertion's header and claims, the JWKs and the JWKS keep one exact byte
/// form. Strings go through the code base's one escaper (`JSONString`); integers are written as
/// integers.
struct JSONObject {
  private var bytes: [UInt8] = [UInt8(ascii: "{")]

  /// An empty object, ready for its first member.
  init() {}

  /// Adds `"name":"value"`.
  mutating func string(_ name: String, _ value: String) {
    member(name)
    JSONString.append(value, to: &bytes)
  }

  /// Adds `"name":value` with the integer in decimal.
  mutating func integer(_ name: String, _ value: Int) {
    member(name)
    bytes.append(contentsOf: String(value).utf8)
  }

  /// Adds `"name":` followed by `json`, a value already written (an array of objects).
  mutating func json(_ name: String, _ json: [UInt8]) {
    member(name)
    bytes.append(contentsOf: json)
  }

  /// The object's bytes, closed.
  consuming func finished() -> [UInt8] {
    bytes.append(UInt8(ascii: "}"))
    return bytes
  }

  private mutating func member(_ name: String) {
    if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
    JSONString.append(name, to: &bytes)
    bytes.append(UInt8(ascii: ":"))
  }
}
