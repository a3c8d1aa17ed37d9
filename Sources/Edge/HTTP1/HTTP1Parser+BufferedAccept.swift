#if canImport(Glibc)
  import Glibc
#endif

extension HTTP1Parser {
  /// The `Accept` field of a head that is not complete (or was refused before it was): every
  /// `Accept` line that is whole (ends in CRLF) in `buffer[start..<end]`, combined as one list
  /// (RFC 9110 §5.3), or nil. The scan stops at the first line that is not whole or ends in a bare
  /// LF, and at the empty line that ends the head; nothing is copied but a matching value.
  static func bufferedAccept(_ buffer: UnsafeRawBufferPointer, from start: Int, to end: Int) -> String? {
    guard start < end, end <= buffer.count, let base = buffer.baseAddress else { return nil }
    var result: String? = nil
    var lineStart = start
    while lineStart < end, let hit = memchr(base + lineStart, Int32(ASCII.lf), end - lineStart) {
      let lf = base.distance(to: UnsafeRawPointer(hit))
      // RFC 9112 §2.2: lines end in CRLF; the empty line ends the head.
      guard lf > lineStart + 1, buffer[lf - 1] == ASCII.cr else { break }
      if let value = acceptValue(buffer, lineStart, lf - 1) {
        result = result.map { $0 + ", " + value } ?? value
      }
      lineStart = lf + 1
    }
    return result
  }

  /// The value of the field line [start, end) if its name is `Accept`: `accept` (any case), the
  /// colon right after it, then OWS field-value OWS (RFC 9112 §5); nil for any other line or a
  /// value with a byte no field value may hold (RFC 9110 §5.5).
  private static func acceptValue(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> String? {
    let name: StaticString = "accept"
    let length = name.utf8CodeUnitCount
    guard end - start > length, buffer[start + length] == ASCII.colon else { return nil }
    let p = name.utf8Start
    for k in 0..<length where ASCII.lower(buffer[start + k]) != p[k] { return nil }
    var valueStart = start + length + 1
    var valueEnd = end
    while valueStart < valueEnd && ASCII.isWhitespace(buffer[valueStart]) { valueStart += 1 }
    while valueEnd > valueStart && ASCII.isWhitespace(buffer[valueEnd - 1]) { valueEnd -= 1 }
    for i in valueStart..<valueEnd where !ASCII.isFieldValue(buffer[i]) { return nil }
    return String(decoding: buffer.bytes(valueStart..<valueEnd), as: UTF8.self)
  }
}
