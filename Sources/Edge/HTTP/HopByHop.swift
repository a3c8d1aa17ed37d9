/// The fields that belong to one connection, not to the message (RFC 9110 §7.6.1): what a proxy
/// removes before it forwards a request or a response. Read from the received bytes, since this runs
/// for every field of every forwarded message.
public enum HopByHop {
  /// Connection-specific whatever `Connection` says: the ones RFC 9110 §7.6.1 names
  /// (`Connection`, `Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`, `Upgrade`), the
  /// proxy credentials of RFC 9110 §11.7, `Trailer` (the framing is rebuilt) and `HTTP2-Settings`
  /// (RFC 7540 §3.2.1, only meaningful with `Upgrade`). Lower case.
  public static let always: [FieldName] = [
    "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade", "trailer",
    "proxy-authorization", "proxy-authenticate", "http2-settings",
  ]

  static let connection: FieldName = "connection"

  /// Bit n set when a name in `always` is n bytes long: most fields are passed over by their length.
  static let alwaysLengths: UInt64 = always.reduce(0) { $0 | 1 << UInt64($1.bytes.count) }

  /// Whether `name` (as received) is one of `always`.
  @inline(__always) static func isAlways(_ name: ArraySlice<UInt8>) -> Bool {
    name.count < 64 && alwaysLengths >> UInt64(name.count) & 1 == 1 && always.contains(matching: name)
  }

  /// Calls `body` with each field name the `Connection` fields of `fields` nominate (RFC 9110
  /// §7.6.1), as a range of `fields.bytes`, until it returns false; allocates nothing.
  static func forEachNominated(by fields: HTTPFields, _ body: (Range<Int>) -> Bool) {
    for i in fields.fields.indices where fields.name(i, is: connection) {
      let field = fields.fields[i]
      var start = Int(field.valueStart)
      let end = Int(field.valueEnd)
      while start < end {
        var stop = start
        while stop < end, fields.bytes[stop] != UInt8(ascii: ",") { stop += 1 }
        var (low, high) = (start, stop)
        while low < high, ASCII.isWhitespace(fields.bytes[low]) { low += 1 }
        while high > low, ASCII.isWhitespace(fields.bytes[high - 1]) { high -= 1 }
        if low < high, !body(low..<high) { return }
        start = stop + 1
      }
    }
  }

  /// Whether a `Connection` field of `fields` nominates `name` (bytes as received, any case).
  static func isNominated(_ name: ArraySlice<UInt8>, by fields: HTTPFields) -> Bool {
    var found = false
    forEachNominated(by: fields) { token in
      found = FieldName.equal(fields.bytes[token], name)
      return !found
    }
    return found
  }
}

/// A field name in lower case, compared with received bytes in any case and without a `String`.
public struct FieldName: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
  /// The name's bytes, lower case.
  public let bytes: [UInt8]

  /// `name`, lower-cased.
  public init(_ name: String) { bytes = name.utf8.map(ASCII.lower) }

  public init(stringLiteral name: String) { self.init(name) }

  /// The name as text.
  public var description: String { String(decoding: bytes, as: UTF8.self) }

  /// Whether `other` (bytes as received) is this name in any case.
  @inline(__always) public func matches(_ other: ArraySlice<UInt8>) -> Bool {
    guard other.count == bytes.count else { return false }
    var i = other.startIndex
    for byte in bytes {
      guard ASCII.lower(other[i]) == byte else { return false }
      i += 1
    }
    return true
  }

  /// Whether `name` is this name in any case.
  @inline(__always) public func matches(_ name: String) -> Bool {
    guard name.utf8.count == bytes.count else { return false }
    return zip(name.utf8, bytes).allSatisfy { ASCII.lower($0) == $1 }
  }
}

extension [FieldName] {
  /// Whether one of the names is `name` (bytes as received, any case).
  @inline(__always) public func contains(matching name: ArraySlice<UInt8>) -> Bool {
    contains { $0.matches(name) }
  }
}

extension HTTPFields {
  /// Calls `body` with the name and value of every field that belongs to the message, in order
  /// received: not one of `HopByHop.always` and not one a `Connection` field nominates. Apply it to
  /// what was received, before adding any field of one's own, so that no sender can make a proxy drop
  /// what the proxy adds.
  public func forEachEndToEnd(_ body: (_ name: ArraySlice<UInt8>, _ value: ArraySlice<UInt8>) throws -> Void)
    rethrows
  {
    // The nominated names are gathered once, on the stack (a message naming more than `kept` is
    // checked field by field instead).
    let kept = 8
    try withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: kept) { tokens in
      var count = 0
      var overflow = false
      HopByHop.forEachNominated(by: self) { token in
        guard count < kept else {
          overflow = true
          return false
        }
        tokens.initializeElement(at: count, to: token)
        count += 1
        return true
      }
      for field in fields {
        let name = bytes[Int(field.nameStart)..<Int(field.nameEnd)]
        if HopByHop.isAlways(name) { continue }
        if overflow {
          if HopByHop.isNominated(name, by: self) { continue }
        } else if (0..<count).contains(where: { FieldName.equal(bytes[tokens[$0]], name) }) {
          continue
        }
        try body(name, bytes[Int(field.valueStart)..<Int(field.valueEnd)])
      }
    }
  }

  /// Whether a `Connection` field nominates one of `names` (RFC 9110 §7.6.1).
  public func connectionNominates(anyOf names: [FieldName]) -> Bool {
    var found = false
    HopByHop.forEachNominated(by: self) { token in
      found = names.contains(matching: bytes[token])
      return !found
    }
    return found
  }

  /// Whether the name of field `i` is `name`, in any case.
  @inline(__always) func name(_ i: Int, is name: FieldName) -> Bool {
    name.matches(bytes[Int(fields[i].nameStart)..<Int(fields[i].nameEnd)])
  }
}

extension FieldName {
  /// Whether two received names are equal in any case.
  static func equal(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy { ASCII.lower($0) == ASCII.lower($1) }
  }
}
