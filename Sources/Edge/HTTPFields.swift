/// The header (or trailer) fields of a received request, kept as ranges into one byte copy.
///
/// Names compare case-insensitively (RFC 9110 §5.1). Values are returned with surrounding
/// whitespace already removed (RFC 9112 §5).
public struct HTTPFields: Sendable {
  struct Field: Sendable {
    var nameStart: Int32
    var nameEnd: Int32
    var valueStart: Int32
    var valueEnd: Int32
  }

  let bytes: [UInt8]
  let fields: [Field]

  init(bytes: [UInt8], fields: [Field]) {
    self.bytes = bytes
    self.fields = fields
  }

  /// No fields.
  public static let empty = HTTPFields(bytes: [], fields: [])

  /// How many field lines there are.
  public var count: Int { fields.count }

  /// The value of the first field named `name`, or nil.
  public subscript(name: String) -> String? {
    guard let index = firstIndex(name) else { return nil }
    return value(at: index)
  }

  /// Every value of the fields named `name`, in order received.
  public func values(_ name: String) -> [String] {
    var result: [String] = []
    for i in fields.indices where nameEquals(i, name) { result.append(value(at: i)) }
    return result
  }

  /// The fields as (name, value) pairs, in order received.
  public var pairs: [(name: String, value: String)] {
    fields.indices.map { (name(at: $0), value(at: $0)) }
  }

  func firstIndex(_ name: String) -> Int? {
    fields.indices.first { nameEquals($0, name) }
  }

  func name(at i: Int) -> String {
    let f = fields[i]
    return String(decoding: bytes[Int(f.nameStart)..<Int(f.nameEnd)], as: UTF8.self)
  }

  func value(at i: Int) -> String {
    let f = fields[i]
    return String(decoding: bytes[Int(f.valueStart)..<Int(f.valueEnd)], as: UTF8.self)
  }

  func nameEquals(_ i: Int, _ name: String) -> Bool {
    let f = fields[i]
    let start = Int(f.nameStart)
    let length = Int(f.nameEnd) - start
    var utf8 = name.utf8.makeIterator()
    var k = 0
    while let c = utf8.next() {
      guard k < length, ASCII.lower(bytes[start + k]) == ASCII.lower(c) else { return false }
      k += 1
    }
    return k == length
  }
}

/// Byte classes from RFC 9110 §5.6.2 and RFC 9112 §2.2, as lookup tables.
enum ASCII {
  static let cr: UInt8 = 13
  static let lf: UInt8 = 10
  static let sp: UInt8 = 32
  static let htab: UInt8 = 9
  static let colon: UInt8 = 58

  /// tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
  static let tchar: [Bool] = (0..<256).map { b in
    switch UInt8(b) {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
      UInt8(ascii: "A")...UInt8(ascii: "Z"):
      true
    default: "!#$%&'*+-.^_`|~".utf8.contains(UInt8(b))
    }
  }

  @inline(__always) static func isToken(_ b: UInt8) -> Bool { tchar[Int(b)] }

  /// field-vchar / SP / HTAB: VCHAR and obs-text; never NUL, CR, LF or another control.
  @inline(__always) static func isFieldValue(_ b: UInt8) -> Bool {
    b == htab || (b >= 0x20 && b != 0x7F)
  }

  @inline(__always) static func lower(_ b: UInt8) -> UInt8 {
    b &- 65 < 26 ? b | 0x20 : b
  }

  @inline(__always) static func isWhitespace(_ b: UInt8) -> Bool { b == sp || b == htab }
}
