extension HTTP1ResponseParser {
  /// Reads chunk data and the CRLF after it (RFC 9112 §7.1); false when more bytes are needed.
  mutating func chunkData(_ buffer: UnsafeRawBufferPointer) throws(ResponseParseError) -> Bool {
    let count = buffer.count
    if case .chunkData(let remaining) = phase {
      let take = min(count - lineStart, remaining)
      if take > 0 {
        body.append(contentsOf: buffer.bytes(lineStart..<(lineStart + take)))
        lineStart += take
      }
      if take < remaining {
        phase = .chunkData(remaining - take)
        scanned = lineStart
        return false
      }
      phase = .chunkDataEnd
    }
    // RFC 9112 §7.1: chunk-data is followed by CRLF, nothing else.
    guard count > lineStart else { return false }
    if buffer[lineStart] == ASCII.lf { throw .bareLineFeed }
    guard buffer[lineStart] == ASCII.cr else { throw .invalidChunkTerminator }
    guard count > lineStart + 1 else { return false }
    guard buffer[lineStart + 1] == ASCII.lf else { throw .bareCarriageReturn }
    lineStart += 2
    scanned = lineStart
    phase = .chunkSize
    return true
  }

  /// chunk-size [ chunk-ext ] (RFC 9112 §7.1): hex digits, then `;name[=value]` extensions,
  /// checked and dropped. More than 15 hex digits is more than any body allowance.
  static func chunkSize(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int
  ) throws(ResponseParseError) -> Int {
    var i = start
    var size = 0
    while i < end, let digit = HTTP1Parser.hexValue(buffer[i]) {
      if i - start >= 15 { throw .bodyTooLarge }
      size = size << 4 | digit
      i += 1
    }
    guard i > start else {
      if i < end && buffer[i] == ASCII.cr { throw .bareCarriageReturn }
      throw .invalidChunkSize
    }
    guard i < end else { return size }
    do throws(HTTPParseError) {
      try HTTP1Parser.checkChunkExtensions(buffer, i, end)
    } catch {
      throw ResponseParseError(error)
    }
    return size
  }
}
