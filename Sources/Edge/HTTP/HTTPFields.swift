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

  /// Fields made from (name, value) pairs, in order, for in-process callers and tests.
  public init(_ pairs: [(String, String)]) {
    var bytes: [UInt8] = []
    var fields: [Field] = []
    for (name, value) in pairs {
      let nameStart = Int32(bytes.count)
      bytes.append(utf8: name)
      let nameEnd = Int32(bytes.count)
      bytes.append(utf8: value)
      fields.append(
        .init(nameStart: nameStart, nameEnd: nameEnd, valueStart: nameEnd, valueEnd: Int32(bytes.count)))
    }
    self.init(bytes: bytes, fields: fields)
  }

  /// How many field lines there are.
  public var count: Int { fields.count }

  /// How many bytes the fields' copy holds (an upper bound for their names and values together).
  public var byteCount: Int { bytes.count }

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

  /// Every value of the fields named `name`, as received (bytes), in order: for what runs on the
  /// loop for every request.
  public func valueBytes(_ name: FieldName) -> [ArraySlice<UInt8>] {
    var result: [ArraySlice<UInt8>] = []
    for f in fields where name.matches(bytes[Int(f.nameStart)..<Int(f.nameEnd)]) {
      result.append(bytes[Int(f.valueStart)..<Int(f.valueEnd)])
    }
    return result
  }

  /// How many fields are named `name`, and the first one's value as received (bytes): for what
  /// runs on the loop for every request (nothing allocated).
  public func firstValue(_ name: FieldName) -> (value: ArraySlice<UInt8>?, count: Int) {
    var first: ArraySlice<UInt8>? = nil
    var count = 0
    for f in fields where name.matches(bytes[Int(f.nameStart)..<Int(f.nameEnd)]) {
      if first == nil { first = bytes[Int(f.valueStart)..<Int(f.valueEnd)] }
      count += 1
    }
    return (first, count)
  }

  /// Calls `body` with the value of each field named `name` as received (bytes), from the last
  /// field to the first, until it returns false: for what runs on the loop for every request.
  public func forEachValueFromLast(_ name: FieldName, _ body: (ArraySlice<UInt8>) -> Bool) {
    for f in fields.reversed() where name.matches(bytes[Int(f.nameStart)..<Int(f.nameEnd)]) {
      guard body(bytes[Int(f.valueStart)..<Int(f.valueEnd)]) else { return }
    }
  }

  /// The values of every field named `name` joined with ", " (RFC 9110 §5.3), or nil when absent.
  public func combined(_ name: String) -> String? {
    var result: String? = nil
    for i in fields.indices where nameEquals(i, name) {
      if let earlier = result { result = earlier + ", " + value(at: i) } else { result = value(at: i) }
    }
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
    guard name.utf8.count == length else { return false }
    var k = start
    for c in name.utf8 {
      guard ASCII.lower(bytes[k]) == ASCII.lower(c) else { return false }
      k += 1
    }
    return true
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
  /// (RFC 9110 §5.6.2), as a 128-bit mask in two literals (no lazily initialised global table).
  @inline(__always) static func isToken(_ b: UInt8) -> Bool {
    inMask(b, low: 0x03FF_6CFA_0000_0000, high: 0x57FF_FFFF_C7FF_FFFE)
  }

  /// Characters of uri-host [ ":" port ] (RFC 3986 §3.2.2): unreserved, sub-delims, "%", ":", "[", "]".
  @inline(__always) static func isHostCharacter(_ b: UInt8) -> Bool {
    inMask(b, low: 0x2FFF_7FF2_0000_0000, high: 0x47FF_FFFE_AFFF_FFFE)
  }

  @inline(__always) private static func inMask(_ b: UInt8, low: UInt64, high: UInt64) -> Bool {
    b < 64 ? (low >> UInt64(b)) & 1 == 1 : b < 128 ? (high >> UInt64(b - 64)) & 1 == 1 : false
  }

  /// field-vchar / SP / HTAB: VCHAR and obs-text; never NUL, CR, LF or another control.
  @inline(__always) static func isFieldValue(_ b: UInt8) -> Bool {
    b == htab || (b >= 0x20 && b != 0x7F)
  }

  @inline(__always) static func lower(_ b: UInt8) -> UInt8 {
    b &- 65 < 26 ? b | 0x20 : b
  }

  @inline(__always) static func isWhitespace(_ b: UInt8) -> Bool { b == sp || b == htab }
}
