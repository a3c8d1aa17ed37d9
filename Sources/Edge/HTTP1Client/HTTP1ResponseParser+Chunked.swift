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

  /// chunk-size [ chunk-ext ] (RFC 9112 §7.1), read as the request parser reads it.
  static func chunkSize(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int
  ) throws(ResponseParseError) -> Int {
    do throws(HTTPParseError) {
      return try HTTP1Parser.parseChunkLine(buffer, start, end)
    } catch .bodyTooLarge {
      throw .bodyTooLarge
    } catch .invalidChunkSize {
      throw .invalidChunkSize
    } catch {
      throw ResponseParseError(error)
    }
  }
}
