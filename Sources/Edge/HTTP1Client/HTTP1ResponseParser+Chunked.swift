extension HTTP1ResponseParser {
  /// chunk-size [ chunk-ext ] (RFC 9112 §7.1), read as the request parser reads it.
  static func chunkSize(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int
  ) throws(ResponseParseError) -> Int {
    do throws(HTTPParseError) {
      return try HTTP1Parser.chunkSize(buffer, start, end)
    } catch .bodyTooLarge {
      throw .bodyTooLarge
    } catch .invalidChunkSize {
      throw .invalidChunkSize
    } catch {
      throw ResponseParseError(error)
    }
  }
}
