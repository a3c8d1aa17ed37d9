#if canImport(Glibc)
  import Glibc
#endif

/// Where an HTTP/1.1 parser stands in the message it reads.
enum HTTP1Phase: Sendable, Equatable {
  /// The request line or the status line.
  case startLine
  case fields
  case fixedBody(Int)
  case chunkSize
  case chunkData(Int)
  case chunkDataEnd
  case trailers
  /// A response body that ends when the connection closes (RFC 9112 §6.3); never a request's.
  case untilClose
}

/// How the body of a message ends, as its head's framing fields say (RFC 9112 §6.3).
enum HTTP1Framing: Equatable {
  case none
  case fixed(Int)
  case chunked
  /// When the connection closes (a response only).
  case untilClose
}

/// The refusals of line endings and body framing that both HTTP/1.1 parsers make, each in its own
/// error type.
protocol HTTP1FramingError: Error {
  static var bareLineFeed: Self { get }
  static var bareCarriageReturn: Self { get }
  static var invalidChunkTerminator: Self { get }
  static var chunkExtensionTooLong: Self { get }
  static var bodyTooLarge: Self { get }
  /// The head, or the trailers with it, is larger than allowed.
  static var headTooLarge: Self { get }
}

extension HTTPParseError: HTTP1FramingError {
  static var headTooLarge: HTTPParseError { .headerSectionTooLarge }
}

/// What a parser answers after a step; both parsers have an answer for "more bytes, please".
protocol HTTP1Answer {
  static var needMore: Self { get }
}

/// The position of an HTTP/1.1 parser in its buffer and the body it has read, with the steps the
/// request and the response parser take alike: lines that end in CRLF, a body of known length,
/// chunk data and the CRLF after it.
struct HTTP1Reader<Failure: HTTP1FramingError>: Sendable {
  var phase = HTTP1Phase.startLine
  /// Start of the line being read (or of the body framing being read).
  var lineStart = 0
  /// Bytes already scanned (for the start line) or searched for a line feed.
  var scanned = 0
  /// End of the head: the index after the empty line that ends the field section.
  var headEnd = 0
  /// Where the trailer section starts, once the last chunk is announced.
  var trailersStart = 0
  /// The body as read so far.
  var body: [UInt8] = []

  /// The start line, whose CR is at `lineEnd`, is read: the field lines come next.
  mutating func startFields(after lineEnd: Int) {
    lineStart = lineEnd + 2
    scanned = lineStart
    phase = .fields
  }

  /// The head [0, headEnd) is read: goes on to a body framed as `framing`; false when there is no
  /// body (`none`, or a length of 0) and the message is complete.
  mutating func startBody(_ framing: HTTP1Framing) -> Bool {
    switch framing {
    case .none, .fixed(0):
      return false
    case .fixed(let length):
      phase = .fixedBody(length)
    case .chunked:
      scanned = headEnd
      phase = .chunkSize
    case .untilClose:
      phase = .untilClose
    }
    return true
  }

  /// Readies the position for another message (the body is dropped).
  mutating func startOver() {
    phase = .startLine
    lineStart = 0
    scanned = 0
    if !body.isEmpty { body = [] }
  }

  // MARK: lines

  /// The next line feed from `scanned` on, which then stands past it; nil when none has come yet
  /// (every byte has then been searched).
  mutating func lineFeed(_ buffer: UnsafeRawBufferPointer) -> Int? {
    guard let lf = HTTP1Parser.findLineFeed(buffer, from: scanned) else {
      scanned = buffer.count
      return nil
    }
    scanned = lf + 1
    return lf
  }

  /// The line that the line feed at `lf` ends, CRLF excluded; the next line starts after it.
  mutating func takeLine(_ buffer: UnsafeRawBufferPointer, endingAt lf: Int) throws(Failure) -> Range<Int> {
    // RFC 9112 §2.2: lines end in CRLF; a bare LF is refused.
    guard lf > lineStart, buffer[lf - 1] == ASCII.cr else { throw .bareLineFeed }
    let line = lineStart..<(lf - 1)
    lineStart = lf + 1
    return line
  }

  // MARK: body

  /// A body of `length` bytes after the head: copied into `body` once it is all there (true).
  mutating func readFixedBody(_ buffer: UnsafeRawBufferPointer, _ length: Int) -> Bool {
    guard buffer.count - headEnd >= length else { return false }
    body = Array(buffer.bytes(headEnd..<(headEnd + length)))
    return true
  }

  /// A chunk-size line announced `size` bytes: the last chunk (0) leads to the trailers; any other
  /// chunk must fit within `bodyLimit` bytes after the head, framing included.
  mutating func startChunk(size: Int, bodyLimit: Int) throws(Failure) {
    if size == 0 {
      trailersStart = lineStart
      phase = .trailers
      return
    }
    // Framing counts against the body limit: the chunk's data must fit after what came before.
    if lineStart - headEnd + size > bodyLimit { throw .bodyTooLarge }
    if body.isEmpty { body.reserveCapacity(size) }
    phase = .chunkData(size)
  }

  /// Up to `remaining` bytes of chunk data into `body`; true once they are all read.
  mutating func readChunkData(_ buffer: UnsafeRawBufferPointer, _ remaining: Int) -> Bool {
    let take = min(buffer.count - lineStart, remaining)
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
    return true
  }

  /// The CRLF after chunk data; true once it is read, false when more bytes are needed.
  mutating func readChunkDataEnd(_ buffer: UnsafeRawBufferPointer) throws(Failure) -> Bool {
    // RFC 9112 §7.1: chunk-data is followed by CRLF, nothing else.
    guard buffer.count > lineStart else { return false }
    if buffer[lineStart] == ASCII.lf { throw .bareLineFeed }
    guard buffer[lineStart] == ASCII.cr else { throw .invalidChunkTerminator }
    guard buffer.count > lineStart + 1 else { return false }
    guard buffer[lineStart + 1] == ASCII.lf else { throw .bareCarriageReturn }
    lineStart += 2
    scanned = lineStart
    phase = .chunkSize
    return true
  }

  // MARK: limits

  /// Size limits on a chunk-size line whose bytes run up to `end`: chunk-size (more than 15 hex
  /// digits is refused as too large), at most `maxExtensionBytes` of extensions, then CRLF; and
  /// the body, framing included, within `bodyLimit` bytes after the head.
  func checkChunkSizeLine(
    _ buffer: UnsafeRawBufferPointer, end: Int, maxExtensionBytes: Int, bodyLimit: Int
  ) throws(Failure) {
    var digitsEnd = lineStart
    while digitsEnd < min(end, lineStart + 16) && HTTP1Parser.hexValue(buffer[digitsEnd]) != nil {
      digitsEnd += 1
    }
    try Self.firstCrossed(
      end, digitsEnd + maxExtensionBytes + 2, .chunkExtensionTooLong, headEnd + bodyLimit, .bodyTooLarge)
  }

  /// Size limits on a trailer line whose bytes run up to `end`: trailers count against what the
  /// head left of its allowance (which ends at `headBound`) and, as part of the chunked body,
  /// against `bodyLimit`.
  func checkTrailerLine(end: Int, headBound: Int, bodyLimit: Int) throws(Failure) {
    try Self.firstCrossed(
      end, trailersStart + headBound - headEnd, .headTooLarge, headEnd + bodyLimit, .bodyTooLarge)
  }

  /// Throws the error of whichever bound the bytes up to `end` crossed first (a bound is the last
  /// index allowed), so that the answer does not depend on how many bytes each read brought.
  @inline(__always) private static func firstCrossed(
    _ end: Int, _ a: Int, _ aError: Failure, _ b: Int, _ bError: Failure
  ) throws(Failure) {
    if end > min(a, b) { throw a <= b ? aError : bError }
  }
}

/// An HTTP/1.1 parser over an `HTTP1Reader`: what it decides itself, for `step` to call.
protocol HTTP1MessageParser {
  associatedtype Failure: HTTP1FramingError
  associatedtype Answer: HTTP1Answer
  var reader: HTTP1Reader<Failure> { get set }
  /// The last index the head may reach (the trailers draw on what it leaves).
  var headBound: Int { get }
  /// The most bytes of extensions on one chunk-size line.
  var maxChunkExtensionBytes: Int { get }
  /// Reads one field line [start, end) of the head.
  mutating func fieldLine(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) throws(Failure)
  /// The empty line ended the head [0, reader.headEnd): its answer, or nil when a body follows.
  mutating func endOfHead(_ buffer: UnsafeRawBufferPointer) throws(Failure) -> Answer?
  /// Reads one trailer line [start, end).
  mutating func trailerLine(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) throws(Failure)
  /// The size that the chunk-size line [start, end) announces (RFC 9112 §7.1).
  static func chunkSize(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) throws(Failure) -> Int
  /// The most bytes of body the message may carry, chunk framing and trailers included.
  var bodyLimit: Int { get }
  /// The message is whole: the first `consumed` bytes of `buffer`.
  mutating func complete(_ buffer: UnsafeRawBufferPointer, consumed: Int) -> Answer
}

extension HTTP1MessageParser {
  /// One step past the start line, through the lines, a body of known length and chunk data: the
  /// parser's answer (`needMore` included), or nil to go on. The start line and a body that the
  /// close ends are the parser's own.
  mutating func step(_ buffer: UnsafeRawBufferPointer) throws(Failure) -> Answer? {
    switch reader.phase {
    case .fields, .trailers, .chunkSize:
      guard let lf = reader.lineFeed(buffer) else {
        try checkLine(buffer, end: buffer.count)
        return .needMore
      }
      // Size first, then syntax: the same line must fail the same way however its bytes arrived
      // (the size check may already have refused it before its line feed came).
      try checkLine(buffer, end: lf + 1)
      return try line(buffer, reader.takeLine(buffer, endingAt: lf))
    case .fixedBody(let length):
      guard reader.readFixedBody(buffer, length) else { return .needMore }
      return complete(buffer, consumed: reader.headEnd + length)
    case .chunkData(let remaining):
      return reader.readChunkData(buffer, remaining) ? nil : .needMore
    case .chunkDataEnd:
      return try reader.readChunkDataEnd(buffer) ? nil : .needMore
    case .startLine, .untilClose:
      preconditionFailure("the parser reads its start line and a body until close itself")
    }
  }

  /// Size limits on the line being read, whose bytes run up to `end`: the bytes received so far
  /// while it is open, or its line feed plus one once it is complete. One rule at both points, so
  /// a line is refused the same way however its bytes arrived.
  private func checkLine(_ buffer: UnsafeRawBufferPointer, end: Int) throws(Failure) {
    switch reader.phase {
    case .fields:
      if end > headBound { throw .headTooLarge }
    case .trailers:
      try reader.checkTrailerLine(end: end, headBound: headBound, bodyLimit: bodyLimit)
    default:
      try reader.checkChunkSizeLine(
        buffer, end: end, maxExtensionBytes: maxChunkExtensionBytes, bodyLimit: bodyLimit)
    }
  }

  /// Handles one complete line (CRLF excluded) of the fields, the trailers or a chunk size.
  private mutating func line(_ buffer: UnsafeRawBufferPointer, _ line: Range<Int>) throws(Failure) -> Answer?
  {
    switch reader.phase {
    case .fields where line.isEmpty:
      reader.headEnd = reader.lineStart
      return try endOfHead(buffer)
    case .fields:
      try fieldLine(buffer, line.lowerBound, line.upperBound)
    case .trailers where line.isEmpty:
      return complete(buffer, consumed: reader.lineStart)
    case .trailers:
      try trailerLine(buffer, line.lowerBound, line.upperBound)
    default:
      try reader.startChunk(
        size: Self.chunkSize(buffer, line.lowerBound, line.upperBound), bodyLimit: bodyLimit)
    }
    return nil
  }
}
