/// What `HTTP1ResponseParser.parse` reached.
public enum ResponseParseResult: Sendable {
  /// The bytes so far are a valid prefix of a response; call again with more appended, or call
  /// `finish` when the connection has closed.
  case needMore
  /// An interim response (1xx other than 101) of `consumed` bytes: drop them and call again with
  /// the rest, which holds the final response (or another interim one).
  case informational(status: Int, consumed: Int)
  /// A whole response; `consumed` bytes of the buffer belong to it.
  case complete(UpstreamResponse, consumed: Int)
}

/// A pure, incremental, strict HTTP/1.1 response parser (RFC 9112), for responses read from an
/// upstream server.
///
/// Make one per response, with the method of the request it answers (a response to HEAD has no
/// body). Each call gets every unconsumed byte of the current message from its first byte on; the
/// bytes of the previous call must be a prefix of the next call's. After `.informational`, drop
/// `consumed` bytes and call again with the rest; after `.complete`, the response is whole and
/// the parser is ready for another response to the same method. When the connection closes
/// during `.needMore`, call `finish`: it completes a body delimited by the close, and refuses a
/// message cut short. Work already done is never repeated, so feeding a response one byte at a
/// time costs the same as feeding it whole; every limit is checked as bytes arrive.
///
/// Lines end in CRLF only: a bare LF or a bare CR is refused, as the request parser refuses them
/// (RFC 9112 §2.2 allows either choice). Any thrown error means: answer 502 and close the
/// connection to the upstream.
public struct HTTP1ResponseParser: Sendable {
  enum Phase: Sendable {
    case statusLine
    case fields
    case fixedBody(Int)
    case chunkSize
    case chunkData(Int)
    case chunkDataEnd
    case trailers
    case untilClose
  }

  let limits: ResponseLimits
  /// Whether the request was HEAD, whose response never has a body (RFC 9110 §9.3.2).
  let isHead: Bool
  var phase = Phase.statusLine
  /// Start of the line being read (or of the body framing being read).
  var lineStart = 0
  /// Bytes already scanned (for the status line) or searched for a line feed.
  var scanned = 0
  /// Head bytes this message may take: `maxHeadBytes` less what interim responses took.
  var headRoom: Int
  /// Whether an interim response came before this message.
  var sawInterim = false
  /// The status code, as its digits arrive.
  var status = 0
  var version = HTTPVersion.http11
  /// End of the reason phrase (the status line's CR); the phrase starts at 13 when there is one.
  var reasonEnd = 0
  var headEnd = 0
  var fields: [HTTPFields.Field] = []
  /// Trailer field lines read (and dropped) so far.
  var trailerLines = 0
  /// Where a trailer line is parsed before it is dropped (its capacity is kept).
  var scratch: [HTTPFields.Field] = []
  var trailersStart = 0
  var body: [UInt8] = []
  var keepAlive = true

  /// A parser for the response to a request of `method`, enforcing `limits`.
  public init(method: HTTPMethod, limits: ResponseLimits = ResponseLimits()) {
    self.limits = limits
    isHead = method == .head
    headRoom = limits.maxHeadBytes
  }

  /// Parses as much of `buffer` as it can; see the type's documentation for the contract.
  public mutating func parse(_ buffer: UnsafeRawBufferPointer) throws(ResponseParseError)
    -> ResponseParseResult
  {
    let count = buffer.count
    while true {
      switch phase {
      case .statusLine:
        guard let lineEnd = try scanStatusLine(buffer) else { return .needMore }
        reasonEnd = lineEnd
        lineStart = lineEnd + 2
        scanned = lineStart
        phase = .fields
      case .fields, .trailers, .chunkSize:
        guard let lf = HTTP1Parser.findLineFeed(buffer, from: scanned) else {
          scanned = count
          try checkLine(buffer, end: count)
          return .needMore
        }
        scanned = lf + 1
        // Size first, then syntax: a line fails the same way however its bytes arrived.
        try checkLine(buffer, end: lf + 1)
        // RFC 9112 §2.2: lines end in CRLF; a bare LF is refused.
        guard lf > lineStart, buffer[lf - 1] == ASCII.cr else { throw .bareLineFeed }
        let start = lineStart
        lineStart = lf + 1
        if let result = try line(buffer, start, lf - 1) { return result }
      case .fixedBody(let length):
        guard count - headEnd >= length else { return .needMore }
        body = Array(buffer.bytes(headEnd..<(headEnd + length)))
        return complete(buffer, consumed: headEnd + length)
      case .chunkData, .chunkDataEnd:
        guard try chunkData(buffer) else { return .needMore }
      case .untilClose:
        // RFC 9112 §6.3: the body ends when the connection does (`finish`); bounded meanwhile.
        if count - headEnd > limits.maxBodyBytes { throw .bodyTooLarge }
        return .needMore
      }
    }
  }

  /// The connection closed after the bytes in `buffer` (every unconsumed byte, as for `parse`):
  /// returns the response whose body the close delimits, or the response `buffer` completes;
  /// throws for a head or a framed body cut short, and for no response at all.
  public mutating func finish(_ buffer: UnsafeRawBufferPointer) throws(ResponseParseError) -> UpstreamResponse
  {
    var rest = buffer
    while true {
      switch try parse(rest) {
      case .complete(let response, _): return response
      case .informational(_, let consumed): rest = UnsafeRawBufferPointer(rebasing: rest[consumed...])
      case .needMore:
        switch phase {
        case .statusLine: throw rest.isEmpty && !sawInterim ? ResponseParseError.noResponse : .truncatedHead
        case .fields: throw .truncatedHead
        case .untilClose:
          body = Array(rest.bytes(headEnd..<rest.count))
          return take(rest)
        case .fixedBody, .chunkSize, .chunkData, .chunkDataEnd, .trailers: throw .truncatedBody
        }
      }
    }
  }

  /// Handles one complete line [start, end) (CRLF excluded) in a line-oriented phase.
  private mutating func line(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int
  ) throws(ResponseParseError) -> ResponseParseResult? {
    switch phase {
    case .fields:
      if start == end {
        headEnd = lineStart
        return try endOfHead(buffer)
      }
      try Self.field(buffer, start, end, into: &fields)
      if fields.count > limits.maxFieldCount { throw .tooManyFields }
    case .trailers:
      if start == end { return complete(buffer, consumed: lineStart) }
      // RFC 9110 §6.5.1: trailer fields are checked, then dropped.
      scratch.removeAll(keepingCapacity: true)
      try Self.field(buffer, start, end, into: &scratch)
      trailerLines += 1
      if fields.count + trailerLines > limits.maxFieldCount { throw .tooManyFields }
    case .chunkSize:
      let size = try Self.chunkSize(buffer, start, end)
      if size == 0 {
        trailersStart = lineStart
        phase = .trailers
      } else {
        // Framing counts against the body limit: the chunk's data must fit after what came before.
        if lineStart - headEnd + size > limits.maxBodyBytes { throw .bodyTooLarge }
        if body.isEmpty { body.reserveCapacity(size) }
        phase = .chunkData(size)
      }
    default:
      break
    }
    return nil
  }

  /// Size limits on the line being read, whose bytes run up to `end`: the bytes received so far
  /// while it is open, or its line feed plus one once it is complete. One rule at both points, so
  /// a line is refused the same way however its bytes arrived.
  private func checkLine(_ buffer: UnsafeRawBufferPointer, end: Int) throws(ResponseParseError) {
    switch phase {
    case .fields:
      if end > headRoom { throw .headTooLarge }
    case .trailers:
      // Trailers count against the head allowance and, as part of the chunked body, the body's.
      try Self.firstCrossed(
        end, trailersStart + headRoom - headEnd, .headTooLarge, headEnd + limits.maxBodyBytes, .bodyTooLarge)
    case .chunkSize:
      // chunk-size (more than 15 hex digits is refused as too large), its extensions, then CRLF.
      var digitsEnd = lineStart
      while digitsEnd < min(end, lineStart + 16) && HTTP1Parser.hexValue(buffer[digitsEnd]) != nil {
        digitsEnd += 1
      }
      try Self.firstCrossed(
        end, digitsEnd + limits.maxChunkExtensionBytes + 2, .chunkExtensionTooLong,
        headEnd + limits.maxBodyBytes, .bodyTooLarge)
    default:
      break
    }
  }

  /// Throws the error of whichever bound the bytes up to `end` crossed first (a bound is the last
  /// index allowed), so that the answer does not depend on how many bytes each read brought.
  @inline(__always) private static func firstCrossed(
    _ end: Int, _ a: Int, _ aError: ResponseParseError, _ b: Int, _ bError: ResponseParseError
  ) throws(ResponseParseError) {
    if end > min(a, b) { throw a <= b ? aError : bError }
  }

  /// field-line = field-name ":" OWS field-value OWS (RFC 9112 §5), as the request parser reads it.
  private static func field(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int, into fields: inout [HTTPFields.Field]
  ) throws(ResponseParseError) {
    do throws(HTTPParseError) {
      try HTTP1Parser.parseField(buffer, start, end, into: &fields)
    } catch {
      throw ResponseParseError(error)
    }
  }

  // MARK: completion

  /// The response is whole: `consumed` bytes of `buffer` (taken before the parser starts over).
  mutating func complete(_ buffer: UnsafeRawBufferPointer, consumed: Int) -> ResponseParseResult {
    .complete(take(buffer), consumed: consumed)
  }

  /// Builds the whole response (copying what it needs out of `buffer`) and readies the parser
  /// for another response.
  mutating func take(_ buffer: UnsafeRawBufferPointer) -> UpstreamResponse {
    let reason = reasonEnd > 13 ? String(decoding: buffer.bytes(13..<reasonEnd), as: UTF8.self) : ""
    let response = UpstreamResponse(
      status: status, reason: reason, version: version,
      fields: HTTPFields(bytes: Array(buffer.bytes(0..<headEnd)), fields: fields), body: body,
      keepAlive: keepAlive)
    startOver()
    headRoom = limits.maxHeadBytes
    sawInterim = false
    return response
  }

  /// An interim response of `consumed` bytes is done: the next message starts after it, and its
  /// head draws on what is left of the head allowance.
  mutating func skipInterim(consumed: Int) {
    startOver()
    headRoom -= consumed
    sawInterim = true
  }

  private mutating func startOver() {
    phase = .statusLine
    lineStart = 0
    scanned = 0
    status = 0
    version = .http11
    reasonEnd = 0
    headEnd = 0
    fields.removeAll(keepingCapacity: true)
    trailerLines = 0
    trailersStart = 0
    if !body.isEmpty { body = [] }
    keepAlive = true
  }
}
