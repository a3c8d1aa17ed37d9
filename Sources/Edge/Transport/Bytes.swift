extension Array where Element == UInt8 {
  /// Appends the bytes of a literal with one copy.
  @inline(__always) public mutating func append(static text: StaticString) {
    append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
  }

  /// Appends the UTF-8 bytes of `text` with one copy (native strings are contiguous).
  @inline(__always) public mutating func append(utf8 text: String) {
    var text = text
    text.withUTF8 { append(contentsOf: $0) }
  }
}

extension UnsafeRawBufferPointer {
  /// Bytes `range` as a typed buffer, so that arrays copy them with one memcpy.
  @inline(__always) func bytes(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> {
    UnsafeRawBufferPointer(rebasing: self[range]).assumingMemoryBound(to: UInt8.self)
  }
}

/// Bytes written into memory sized beforehand to a bound of what goes in: one capacity check for a
/// whole head or log line instead of one per piece, each piece one copy. Writing past the bound
/// traps (a wrong bound is a programming error, never a client's doing).
public struct BoundedWriter {
  private let buffer: UnsafeMutableBufferPointer<UInt8>
  /// Bytes written so far.
  public private(set) var count = 0

  /// A writer filling `buffer` from its start.
  public init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

  @inline(__always) public mutating func put(_ bytes: UnsafeRawBufferPointer) {
    precondition(bytes.count <= buffer.count - count, "a write outgrew its bound")
    guard let source = bytes.baseAddress, let base = buffer.baseAddress else { return }
    UnsafeMutableRawPointer(base + count).copyMemory(from: source, byteCount: bytes.count)
    count += bytes.count
  }

  @inline(__always) public mutating func put(_ byte: UInt8) {
    precondition(count < buffer.count, "a write outgrew its bound")
    buffer[count] = byte
    count += 1
  }

  @inline(__always) public mutating func put(static text: StaticString) {
    put(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
  }

  @inline(__always) public mutating func put(utf8 text: String) {
    var text = text
    text.withUTF8 { put(UnsafeRawBufferPointer($0)) }
  }

  @inline(__always) public mutating func put(_ bytes: ArraySlice<UInt8>) {
    bytes.withUnsafeBytes { put($0) }
  }

  @inline(__always) public mutating func put(_ bytes: [UInt8]) {
    bytes.withUnsafeBytes { put($0) }
  }

  /// The decimal digits of `value` (at most 20 bytes; a negative value writes its sign).
  public mutating func put(decimal value: Int) {
    if value < 0 { put(UInt8(ascii: "-")) }
    var v = value.magnitude
    guard v >= 10 else { return put(UInt8(48 + v)) }
    var digits = 0
    var probe = v
    while probe > 0 {
      digits += 1
      probe /= 10
    }
    precondition(digits <= buffer.count - count, "a write outgrew its bound")
    var i = count + digits
    while v > 0 {
      i -= 1
      buffer[i] = UInt8(48 + v % 10)
      v /= 10
    }
    count += digits
  }

  /// The most bytes `put(decimal:)` writes.
  public static let maxDecimalBytes = 20
}

extension Array where Element == UInt8 {
  /// Appends what `body` writes, at most `bound` bytes: room is made once (growing geometrically),
  /// and the bytes land in place.
  @inline(__always) public mutating func append(bound: Int, _ body: (inout BoundedWriter) -> Void) {
    let start = count
    if capacity - start < bound { reserveCapacity(Swift.max(start + bound, 2 * capacity)) }
    // Arrays have no uninitialised tail to write into: the room is zeroed first, then trimmed to
    // what was written (so a bound should be close: every byte of it is zeroed).
    append(contentsOf: repeatElement(0, count: bound))
    let written = withUnsafeMutableBufferPointer { all in
      var out = BoundedWriter(UnsafeMutableBufferPointer(rebasing: all[start...]))
      body(&out)
      return out.count
    }
    removeLast(bound - written)
  }
}
