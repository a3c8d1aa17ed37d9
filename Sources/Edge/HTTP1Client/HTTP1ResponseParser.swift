/// What `HTTP1ResponseParser.parse` reached.
public enum ResponseParseResult: Sendable, HTTP1Answer {
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
public struct HTTP1ResponseParser: Sendable, HTTP1MessageParser {
  let limits: ResponseLimits
  /// Whether the request was HEAD, whose response never has a body (RFC 9110 §9.3.2).
  let isHead: Bool
  /// Where the parse stands (the line being read, the bytes scanned) and the body read so far.
  var reader = HTTP1Reader<ResponseParseError>()
  /// Head bytes this message may take: `maxHeadBytes` less what interim responses took.
  var headRoom: Int
  /// Whether an interim response came before this message.
  var sawInterim = false
  /// The status code, as its digits arrive.
  var status = 0
  var version = HTTPVersion.http11
  /// End of the reason phrase (the status line's CR); the phrase starts at 13 when there is one.
  var reasonEnd = 0
  var fields: [HTTPFields.Field] = []
  /// Trailer field lines read (and dropped) so far.
  var trailerLines = 0
  /// Where a trailer line is parsed before it is dropped (its capacity is kept).
  var scratch: [HTTPFields.Field] = []
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
    while true {
      switch reader.phase {
      case .startLine:
        guard let lineEnd = try scanStatusLine(buffer) else { return .needMore }
        reasonEnd = lineEnd
        reader.startFields(after: lineEnd)
      case .untilClose:
        // RFC 9112 §6.3: the body ends when the connection does (`finish`); bounded meanwhile.
        if buffer.count - reader.headEnd > limits.maxBodyBytes { throw .bodyTooLarge }
        return .needMore
      default:
        if let result = try step(buffer) { return result }
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
        switch reader.phase {
        case .startLine: throw rest.isEmpty && !sawInterim ? ResponseParseError.noResponse : .truncatedHead
        case .fields: throw .truncatedHead
        case .untilClose:
          reader.body = Array(rest.bytes(reader.headEnd..<rest.count))
          return take(rest)
        case .fixedBody, .chunkSize, .chunkData, .chunkDataEnd, .trailers: throw .truncatedBody
        }
      }
    }
  }

  /// The status line and the field lines draw on `headRoom`.
  var headBound: Int { headRoom }

  var bodyLimit: Int { limits.maxBodyBytes }

  var maxChunkExtensionBytes: Int { limits.maxChunkExtensionBytes }

  mutating func fieldLine(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int)
    throws(ResponseParseError)
  {
    try Self.field(buffer, start, end, into: &fields)
    if fields.count > limits.maxFieldCount { throw .tooManyFields }
  }

  /// RFC 9110 §6.5.1: trailer fields are checked, then dropped.
  mutating func trailerLine(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int)
    throws(ResponseParseError)
  {
    scratch.removeAll(keepingCapacity: true)
    try Self.field(buffer, start, end, into: &scratch)
    trailerLines += 1
    if fields.count + trailerLines > limits.maxFieldCount { throw .tooManyFields }
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
      fields: HTTPFields(bytes: Array(buffer.bytes(0..<reader.headEnd)), fields: fields), body: reader.body,
      keepAlive: keepAlive)
    // The fields went out with the response: keeping their capacity (`startOver`) would allocate a
    // copy that the next response's parser (a new one, `UpstreamSocket.start`) never uses.
    fields = []
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
    reader.startOver()
    reader.headEnd = 0
    reader.trailersStart = 0
    status = 0
    version = .http11
    reasonEnd = 0
    fields.removeAll(keepingCapacity: true)
    trailerLines = 0
    keepAlive = true
  }
}
