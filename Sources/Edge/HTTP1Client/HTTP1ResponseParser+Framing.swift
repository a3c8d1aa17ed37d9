extension HTTP1ResponseParser {
  /// The head [0, headEnd) is complete: report an interim response, or apply the message-framing
  /// rules (RFC 9112 §6.3) and go on to the body.
  mutating func endOfHead(_ buffer: UnsafeRawBufferPointer) throws(ResponseParseError) -> ResponseParseResult?
  {
    // RFC 9110 §15.2: an interim response has no body, and the final response follows it.
    if status < 200 {
      let (interim, consumed) = (status, reader.headEnd)
      skipInterim(consumed: consumed)
      return .informational(status: interim, consumed: consumed)
    }
    let (framing, close) = try readFraming(buffer)
    // RFC 9112 §9.3: HTTP/1.0 (taken here as close), `Connection: close` and a body delimited by
    // the close end the connection.
    keepAlive = version == .http11 && !close && framing != .untilClose
    return reader.startBody(framing) ? nil : complete(buffer, consumed: reader.headEnd)
  }

  /// What the framing fields of the head say (RFC 9112 §6.3), and whether `Connection: close` is
  /// among them.
  private func readFraming(_ buffer: UnsafeRawBufferPointer) throws(ResponseParseError) -> (
    HTTP1Framing, close: Bool
  ) {
    var length: Int? = nil
    var lengthDigits = 0..<0
    var sawTransferEncoding = false
    var codings = 0
    var onlyChunked = true
    var close = false
    for field in fields {
      let nameStart = Int(field.nameStart)
      var elements = ListElements(buffer, Int(field.valueStart), Int(field.valueEnd))
      switch Int(field.nameEnd) - nameStart {
      case 14 where HTTP1Parser.nameIs(buffer, nameStart, "content-length"):
        // RFC 9110 §8.6, RFC 9112 §6.3 (5): one value repeated is that value; any other is invalid.
        while let digits = elements.next() {
          let value = try Self.contentLength(buffer, digits)
          if length == nil {
            length = value
            lengthDigits = digits
          } else if !Self.sameBytes(buffer, digits, lengthDigits) {
            throw .conflictingContentLength
          }
        }
      case 17 where HTTP1Parser.nameIs(buffer, nameStart, "transfer-encoding"):
        sawTransferEncoding = true
        // RFC 9110 §5.6.1: empty list elements are ignored.
        while let coding = elements.next() {
          if coding.isEmpty { continue }
          codings += 1
          if !Self.isLowercase(buffer, coding, "chunked") { onlyChunked = false }
        }
      case 10 where HTTP1Parser.nameIs(buffer, nameStart, "connection"):
        while let option = elements.next() {
          if Self.isLowercase(buffer, option, "close") { close = true }
        }
      default:
        break
      }
    }
    // RFC 9112 §6.3 (3): both fields is the shape of smuggling or response splitting: refused.
    if sawTransferEncoding && length != nil { throw .contentLengthWithTransferEncoding }
    // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message means its framing is faulty.
    if sawTransferEncoding && version == .http10 { throw .transferEncodingInHTTP10 }
    // RFC 9112 §6.3 (1): no body after HEAD, 204 or 304, whatever the fields say.
    if isHead || status == 204 || status == 304 { return (.none, close) }
    if sawTransferEncoding {
      // RFC 9112 §6.3 (4): chunked must be final; no other coding is decoded here, so it must be alone.
      guard codings == 1 && onlyChunked else { throw .unsupportedTransferCoding }
      return (.chunked, close)
    }
    if let length {
      // RFC 9112 §6.3 (6): a declared body larger than allowed is refused before it arrives.
      if length > limits.maxBodyBytes { throw .bodyTooLarge }
      return (.fixed(length), close)
    }
    // RFC 9112 §6.3 (8): the body runs until the connection closes.
    return (.untilClose, close)
  }

  /// Content-Length = 1*DIGIT (RFC 9110 §8.6): no sign, no blank, no value past `Int.max`.
  private static func contentLength(
    _ buffer: UnsafeRawBufferPointer, _ digits: Range<Int>
  ) throws(ResponseParseError) -> Int {
    guard !digits.isEmpty else { throw .invalidContentLength }
    var value = 0
    for i in digits {
      let digit = buffer[i] &- 48
      guard digit < 10 else { throw .invalidContentLength }
      let (tens, over) = value.multipliedReportingOverflow(by: 10)
      let (sum, overAgain) = tens.addingReportingOverflow(Int(digit))
      guard !over && !overAgain else { throw .invalidContentLength }
      value = sum
    }
    return value
  }

  private static func sameBytes(_ buffer: UnsafeRawBufferPointer, _ a: Range<Int>, _ b: Range<Int>) -> Bool {
    guard a.count == b.count else { return false }
    for k in 0..<a.count where buffer[a.lowerBound + k] != buffer[b.lowerBound + k] { return false }
    return true
  }

  /// Whether `range` of `buffer` is `lowercase`, compared case-insensitively.
  private static func isLowercase(
    _ buffer: UnsafeRawBufferPointer, _ range: Range<Int>, _ lowercase: StaticString
  ) -> Bool {
    range.count == lowercase.utf8CodeUnitCount && HTTP1Parser.nameIs(buffer, range.lowerBound, lowercase)
  }
}

/// The elements of a comma-separated list (RFC 9110 §5.6.1) in a field value, each without the
/// whitespace around it; an empty element comes out as an empty range.
struct ListElements {
  private let buffer: UnsafeRawBufferPointer
  private var position: Int
  private let end: Int
  private var done = false

  init(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) {
    self.buffer = buffer
    position = start
    self.end = end
  }

  mutating func next() -> Range<Int>? {
    guard !done else { return nil }
    var start = position
    while start < end && ASCII.isWhitespace(buffer[start]) { start += 1 }
    var stop = start
    while stop < end && buffer[stop] != UInt8(ascii: ",") { stop += 1 }
    if stop == end { done = true } else { position = stop + 1 }
    var last = stop
    while last > start && ASCII.isWhitespace(buffer[last - 1]) { last -= 1 }
    return start..<last
  }
}
