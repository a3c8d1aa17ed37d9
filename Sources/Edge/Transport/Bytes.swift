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
