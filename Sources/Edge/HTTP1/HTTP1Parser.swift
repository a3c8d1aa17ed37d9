#if canImport(Glibc)
  import Glibc
#endif

/// What the parser holds after a call.
public enum ParseResult: Sendable {
  /// The bytes so far are a valid prefix of a request; call again with more appended.
  case needMore
  /// The head is complete and the client waits for `100 Continue` before it sends the body
  /// (RFC 9110 §10.1.1). Returned at most once per request; call again with the same bytes.
  case continueExpected
  /// A whole request; `consumed` bytes of the buffer belong to it.
  case complete(Request, consumed: Int)
}

/// A pure, incremental, strict HTTP/1.1 request parser (RFC 9112).
///
/// Each call gets every unconsumed byte of the current message from its first byte on; the bytes of
/// the previous call must be a prefix of the next call's. After `.complete`, drop `consumed`
/// bytes and go on with the rest. Work already done is never repeated, so feeding a request one
/// byte at a time costs the same as feeding it whole. Every limit is checked as bytes arrive.
public struct HTTP1Parser: Sendable, HTTP1MessageParser {
  private let limits: Limits
  /// Where the parse stands (the line being read, the bytes searched) and the body read so far.
  var reader = HTTP1Reader<HTTPParseError>()
  /// Where the request-line scan stands (it resumes there when more bytes arrive).
  private enum LineState: Sendable { case start, method, target, version }
  private var lineState = LineState.start
  private var methodEnd = 0
  private var versionStart = 0
  private var method = HTTPMethod.get
  private var version = HTTPVersion.http11
  private var targetStart = 0
  private var targetEnd = 0
  private var fieldsStart = 0
  private var fields: [HTTPFields.Field] = []
  private var trailerFields: [HTTPFields.Field] = []
  private var messageEnd = 0
  private var keepAlive = true
  private var expectsContinue = false
  /// Whether every field line of the head has been read (the framing rules may still refuse it).
  private var fieldsComplete = false

  /// Whether the current request's head is complete (its body is being read).
  var hasHead: Bool {
    switch reader.phase {
    case .startLine, .fields: false
    default: true
    }
  }

  /// A parser enforcing `limits`.
  public init(limits: Limits = Limits()) {
    self.limits = limits
    bodyLimit = limits.maxBodyBytes
  }

  /// Parses as much of `buffer` as it can; see the type's documentation for the contract.
  public mutating func parse(_ buffer: UnsafeRawBufferPointer) throws(HTTPParseError) -> ParseResult {
    switch try advance(buffer) {
    case .needMore: return .needMore
    case .head:
      if expectsContinue && buffer.count == reader.headEnd { return .continueExpected }
      return try parse(buffer)
    case .complete(let consumed):
      return .complete(takeRequest(buffer, path: path(buffer)), consumed: consumed)
    }
  }

  /// What `advance` reached: like `ParseResult`, without building the request.
  enum Progress: HTTP1Answer {
    case needMore
    /// The head is complete and a body follows: the route can be chosen (and the body limited, or
    /// the request refused) before any of it is read. Returned once per request; call again with
    /// the same bytes to read the body.
    case head
    /// A whole request of `consumed` bytes; read it with `method`, `path(_:)`, `keepAlive`, then
    /// `takeRequest` or `skipRequest` before the next call.
    case complete(consumed: Int)
  }

  /// The request's method, once `advance` reported `.complete`.
  var requestMethod: HTTPMethod { method }
  /// The request's version, once complete.
  var requestVersion: HTTPVersion { version }
  /// Whether the connection stays open after this request, once the head is read.
  var requestKeepAlive: Bool { keepAlive }
  /// Whether the client waits for `100 Continue`, once the head is read.
  var requestExpectsContinue: Bool { expectsContinue }
  /// The body the head announces, once it is read: 0 for none, nil for a chunked body.
  var announcedBodyLength: Int? {
    switch reader.phase {
    case .fixedBody(let length): length
    case .chunkSize, .chunkData, .chunkDataEnd, .trailers, .untilClose: nil
    case .startLine, .fields: 0
    }
  }
  /// Whether any byte past the head is in `buffer` (a body has begun to arrive).
  func bodyBegun(_ buffer: UnsafeRawBufferPointer) -> Bool { buffer.count > reader.headEnd }

  /// The most bytes of body the current request may carry: `Limits.maxBodyBytes`, or less once
  /// its route says so (`limitBody`).
  private(set) var bodyLimit: Int

  /// After `.head`: the body may carry at most `bytes` (never more than `Limits.maxBodyBytes`); a
  /// chunked body past it is refused as it arrives.
  mutating func limitBody(to bytes: Int) { bodyLimit = min(bodyLimit, max(0, bytes)) }

  /// The value of the head's field `name` (lower case), joined with ", " when it repeats; nil when
  /// absent. Only once the head is read.
  func field(_ buffer: UnsafeRawBufferPointer, _ name: StaticString) -> String? {
    Self.field(buffer, fields, name)
  }

  /// The head's field lines, once it is read (for `field(_:_:_:)`).
  var headFields: [HTTPFields.Field] { fields }

  /// `field(_:_:)` over the field lines `fields` of the head in `buffer`.
  static func field(_ buffer: UnsafeRawBufferPointer, _ fields: [HTTPFields.Field], _ name: StaticString)
    -> String?
  {
    var found: String? = nil
    for field in fields where Int(field.nameEnd - field.nameStart) == name.utf8CodeUnitCount {
      guard Self.nameIs(buffer, Int(field.nameStart), name) else { continue }
      let value = String(decoding: buffer[Int(field.valueStart)..<Int(field.valueEnd)], as: UTF8.self)
      found = found.map { $0 + ", " + value } ?? value
    }
    return found
  }

  /// What an error answer may depend on, for the message being parsed (or refused) in `buffer`:
  /// its path once the request line is read (nil before), and its `Accept` field: the parsed one
  /// once every field line is read, else whatever complete `Accept` lines the buffered bytes hold
  /// (so a browser's 414 or 431 still gets its page; only the answer's shape depends on them).
  func errorContext(_ buffer: UnsafeRawBufferPointer) -> (path: String, accept: String?)? {
    // Nothing past the largest head is looked at.
    let window = UnsafeRawBufferPointer(rebasing: buffer[0..<min(buffer.count, limits.maxHeadBytes)])
    if case .startLine = reader.phase {
      // A refused request line: the target as far as it was read (a 414's prefix still names its
      // part of the site).
      let end =
        switch lineState {
        case .target: min(reader.scanned, buffer.count)
        case .version: targetEnd
        case .start, .method: targetStart
        }
      guard lineState == .target || lineState == .version, end > targetStart,
        buffer[targetStart] == UInt8(ascii: "/")
      else { return nil }
      // The field lines, if any arrived, follow the request line's line feed.
      let accept = Self.findLineFeed(window, from: reader.scanned).flatMap { lf in
        Self.bufferedAccept(window, from: lf + 1, to: min(window.count, lf + 1 + limits.maxHeaderBytes))
      }
      return (Request.splitTarget(buffer.bytes(targetStart..<end)).path, accept)
    }
    guard fieldsComplete else {
      let end = min(window.count, fieldsStart + limits.maxHeaderBytes)
      return (path(buffer), Self.bufferedAccept(window, from: fieldsStart, to: end))
    }
    return (
      path(buffer),
      HTTPFields(bytes: Array(buffer.bytes(0..<reader.headEnd)), fields: fields).combined("accept")
    )
  }

  /// Bytes the parser holds for the body being read.
  var bodyCapacity: Int { reader.body.capacity }

  /// The request's path (no query), once complete.
  func path(_ buffer: UnsafeRawBufferPointer) -> String {
    Request.splitTarget(buffer.bytes(targetStart..<targetEnd)).path
  }

  /// The request's path (no query), once complete; `router`'s own string when it is one of its
  /// exact routes (no copy).
  func path(_ buffer: UnsafeRawBufferPointer, _ router: Router) -> String {
    let target = buffer.bytes(targetStart..<targetEnd)
    return router.path(UnsafeBufferPointer(rebasing: target[Request.targetParts(target).path]))
  }

  /// The path and its query (`?` and all, when there is one), once the request line is read.
  func target(_ buffer: UnsafeRawBufferPointer) -> String {
    let split = Request.splitTarget(buffer.bytes(targetStart..<targetEnd))
    guard let queryStart = split.queryStart else { return split.path }
    return split.path + "?" + String(decoding: buffer[(targetStart + queryStart)..<targetEnd], as: UTF8.self)
  }

  /// Parses like `parse`, but leaves a complete request unbuilt, so that a prebuilt answer costs no
  /// allocation at all.
  mutating func advance(_ buffer: UnsafeRawBufferPointer) throws(HTTPParseError) -> Progress {
    while true {
      guard case .startLine = reader.phase else {
        if let progress = try step(buffer) { return progress }
        continue
      }
      guard let lineEnd = try scanRequestLine(buffer) else { return .needMore }
      try finishRequestLine(buffer, lineEnd)
      reader.startFields(after: lineEnd)
      fieldsStart = reader.lineStart
    }
  }

  /// The field section may run up to `Limits.maxHeaderBytes` from its start.
  var headBound: Int { fieldsStart + limits.maxHeaderBytes }

  var maxChunkExtensionBytes: Int { limits.maxChunkExtensionBytes }

  mutating func fieldLine(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) throws(HTTPParseError) {
    try Self.parseField(buffer, start, end, into: &fields)
    if fields.count > limits.maxHeaderCount { throw .tooManyHeaderFields }
  }

  mutating func trailerLine(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) throws(HTTPParseError)
  {
    try Self.parseField(buffer, start, end, into: &trailerFields)
    if fields.count + trailerFields.count > limits.maxHeaderCount { throw .tooManyHeaderFields }
  }

  /// Longest method accepted: longer than any registered method (RFC 9112 §3: a method longer than
  /// any the server implements gets 501).
  static let maxMethodBytes = 32

  // MARK: request line

  /// Scans the request line (RFC 9112 §3: method SP request-target SP HTTP-version, single spaces)
  /// from `scanned` on, refusing it at the first byte that cannot belong to it: a TLS ClientHello
  /// or other stray bytes are answered at once, not when a line feed or a timeout comes. Returns
  /// the index of the line's CR once its CRLF is there.
  private mutating func scanRequestLine(_ buffer: UnsafeRawBufferPointer) throws(HTTPParseError) -> Int? {
    let count = buffer.count
    var i = reader.scanned
    defer { reader.scanned = i }
    while i < count {
      let b = buffer[i]
      if b == ASCII.lf { throw .bareLineFeed }  // RFC 9112 §2.2: lines end in CRLF.
      if b == ASCII.cr {
        guard i + 1 < count else { return nil }  // the next byte decides
        guard buffer[i + 1] == ASCII.lf else { throw .bareCarriageReturn }
        switch lineState {
        case .start:
          // RFC 9112 §2.2: ignore empty lines received before the request-line.
          i += 2
          reader.lineStart = i
          if i > limits.maxRequestLineBytes { throw .invalidRequestLine }
          continue
        case .method, .target: throw .invalidRequestLine
        case .version:
          guard i - versionStart == 8 else { throw .invalidVersion }
          let end = i
          i += 2
          return end
        }
      }
      switch lineState {
      case .start:
        guard ASCII.isToken(b) else { throw .invalidRequestLine }
        lineState = .method
      case .method:
        if b == ASCII.sp {
          methodEnd = i
          targetStart = i + 1
          lineState = .target
        } else {
          guard ASCII.isToken(b) else { throw .invalidMethod }
          if i - reader.lineStart >= Self.maxMethodBytes { throw .methodTooLong }
        }
      case .target:
        if b == ASCII.sp {
          guard i > targetStart else { throw .invalidRequestLine }
          targetEnd = i
          versionStart = i + 1
          lineState = .version
        } else {
          // RFC 9112 §3.2: the target is visible ASCII; controls, DEL and non-ASCII are refused.
          guard b > 0x20 && b < 0x7F else { throw .invalidTarget }
          // RFC 9112 §3.2: origin-form is absolute-path [ "?" query ]; a fragment is never sent.
          if b == UInt8(ascii: "#") { throw .fragmentInTarget }
          if i == targetStart && !Self.mayStartTarget(b) { throw .invalidTarget }
          if i - targetStart >= limits.maxTargetBytes { throw .targetTooLong }
        }
      case .version:
        // HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3).
        guard Self.fitsVersion(b, at: i - versionStart) else { throw .invalidVersion }
      }
      i += 1
    }
    return nil
  }

  /// origin-form starts with "/", asterisk-form is "*", absolute-form starts with a scheme (http).
  private static func mayStartTarget(_ b: UInt8) -> Bool {
    b == UInt8(ascii: "/") || b == UInt8(ascii: "*") || ASCII.lower(b) == UInt8(ascii: "h")
  }

  private static func fitsVersion(_ b: UInt8, at k: Int) -> Bool {
    switch k {
    case 0: b == UInt8(ascii: "H")
    case 1, 2: b == UInt8(ascii: "T")
    case 3: b == UInt8(ascii: "P")
    case 4: b == UInt8(ascii: "/")
    case 5, 7: b &- 48 < 10
    case 6: b == UInt8(ascii: ".")
    default: false
    }
  }

  /// The request line [lineStart, lineEnd) has passed the scan: read its parts.
  private mutating func finishRequestLine(_ buffer: UnsafeRawBufferPointer, _ lineEnd: Int)
    throws(HTTPParseError)
  {
    method = Self.method(buffer, reader.lineStart, methodEnd)
    version = try Self.version(buffer, versionStart, lineEnd)
    try checkTargetForm(buffer)
  }

  /// origin-form, absolute-form (http/https), or asterisk-form for OPTIONS (RFC 9112 §3.2).
  private func checkTargetForm(_ buffer: UnsafeRawBufferPointer) throws(HTTPParseError) {
    let first = buffer[targetStart]
    if first == UInt8(ascii: "/") { return }
    if first == UInt8(ascii: "*") {
      guard targetEnd - targetStart == 1, method == .options else { throw .invalidTarget }
      return
    }
    for scheme in ["http://", "https://"] where targetEnd - targetStart > scheme.utf8.count {
      var matches = true
      for (k, c) in scheme.utf8.enumerated() where ASCII.lower(buffer[targetStart + k]) != c {
        matches = false
        break
      }
      if matches { return }
    }
    throw .invalidTarget
  }

  private static func method(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> HTTPMethod {
    let length = end - start
    if length == 3 && buffer[start] == 71 && buffer[start + 1] == 69 && buffer[start + 2] == 84 {
      return .get
    }
    if length == 4 && buffer[start] == 72 && buffer[start + 1] == 69 && buffer[start + 2] == 65
      && buffer[start + 3] == 68
    {
      return .head
    }
    return HTTPMethod(String(decoding: buffer[start..<end], as: UTF8.self))
  }

  /// The version the scan found well-formed; a major other than 1 gets 505 (RFC 9110 §6.2).
  private static func version(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int
  ) throws(HTTPParseError) -> HTTPVersion {
    guard buffer[start + 5] == UInt8(ascii: "1") else { throw .unsupportedVersion }
    return buffer[start + 7] == UInt8(ascii: "0") ? .http10 : .http11
  }

  // MARK: fields

  /// field-line = field-name ":" OWS field-value OWS (RFC 9112 §5).
  static func parseField(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int, into fields: inout [HTTPFields.Field]
  ) throws(HTTPParseError) {
    // RFC 9112 §5.2: obs-fold is refused; so is whitespace before the first field.
    if ASCII.isWhitespace(buffer[start]) { throw .obsoleteLineFolding }
    var colon = start
    while colon < end {
      let b = buffer[colon]
      if b == ASCII.colon { break }
      // RFC 9112 §5.1: no whitespace between the field name and the colon.
      if ASCII.isWhitespace(b) { throw .whitespaceBeforeColon }
      if b == ASCII.cr { throw .bareCarriageReturn }
      guard ASCII.isToken(b) else { throw .invalidFieldName }
      colon += 1
    }
    guard colon < end, colon > start else { throw .invalidFieldName }
    var valueStart = colon + 1
    var valueEnd = end
    while valueStart < valueEnd && ASCII.isWhitespace(buffer[valueStart]) { valueStart += 1 }
    while valueEnd > valueStart && ASCII.isWhitespace(buffer[valueEnd - 1]) { valueEnd -= 1 }
    // RFC 9110 §5.5: NUL, CR, LF and other controls are never valid in a value.
    for i in valueStart..<valueEnd where !ASCII.isFieldValue(buffer[i]) {
      throw buffer[i] == ASCII.cr ? .bareCarriageReturn : .invalidFieldValue
    }
    // Room for a usual head at once, not grown one field at a time (an allocation each).
    if fields.capacity == 0 { fields.reserveCapacity(16) }
    fields.append(
      .init(
        nameStart: Int32(start), nameEnd: Int32(colon), valueStart: Int32(valueStart),
        valueEnd: Int32(valueEnd)))
  }

  /// The head is complete: apply the message-framing rules of RFC 9112 §6 and RFC 9110 §7.2.
  mutating func endOfHead(_ buffer: UnsafeRawBufferPointer) throws(HTTPParseError) -> Progress? {
    fieldsComplete = true
    var hosts = 0
    var contentLength: Int? = nil
    var transferCodings: [Substring] = []
    var sawTransferEncoding = false
    var close = false
    var keepAliveToken = false
    var expectation = false
    for field in fields {
      let ns = Int(field.nameStart)
      let vs = Int(field.valueStart)
      let ve = Int(field.valueEnd)
      switch Int(field.nameEnd) - ns {
      case 4 where Self.nameIs(buffer, ns, "host"):
        hosts += 1
        try Self.checkHost(buffer, vs, ve)
      case 14 where Self.nameIs(buffer, ns, "content-length"):
        // RFC 9112 §6.3: several or invalid Content-Length values are unrecoverable framing errors.
        if contentLength != nil { throw .duplicateContentLength }
        contentLength = try Self.contentLength(buffer, vs, ve)
      case 17 where Self.nameIs(buffer, ns, "transfer-encoding"):
        sawTransferEncoding = true
        transferCodings += Self.listElements(buffer, vs, ve)
      case 10 where Self.nameIs(buffer, ns, "connection"):
        for option in Self.listElements(buffer, vs, ve) {
          if option == "close" { close = true } else if option == "keep-alive" { keepAliveToken = true }
        }
      case 6 where Self.nameIs(buffer, ns, "expect"):
        // RFC 9110 §10.1.1: a 1.0 request's expectation is ignored; only 100-continue is known.
        guard version == .http11 else { break }
        let value = String(decoding: buffer[vs..<ve], as: UTF8.self).lowercased()
        guard value == "100-continue" else { throw .unsupportedExpectation }
        expectation = true
      default:
        break
      }
    }
    // RFC 9112 §3.2: a 1.1 request has exactly one Host; no request has two.
    if hosts > 1 { throw .duplicateHost }
    if hosts == 0 && version == .http11 { throw .missingHost }

    var framing = HTTP1Framing.none
    if sawTransferEncoding {
      // RFC 9112 §6.1: Transfer-Encoding with Content-Length is refused, as is any 1.0 use.
      if contentLength != nil { throw .contentLengthWithTransferEncoding }
      if version == .http10 { throw .transferEncodingInHTTP10 }
      // RFC 9112 §6.3: chunked must be the final coding, applied once.
      guard let last = transferCodings.last, last == "chunked" else { throw .chunkedNotFinal }
      for coding in transferCodings.dropLast() {
        if coding == "chunked" { throw .chunkedNotFinal }
        throw .unsupportedTransferCoding
      }
      framing = .chunked
    } else if let contentLength, contentLength > 0 {
      if contentLength > limits.maxBodyBytes { throw .bodyTooLarge }
      framing = .fixed(contentLength)
    }
    keepAlive = version == .http11 ? !close : keepAliveToken && !close
    guard reader.startBody(framing) else { return complete(buffer, consumed: reader.headEnd) }
    expectsContinue = expectation
    return .head
  }

  static func nameIs(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ lowercase: StaticString)
    -> Bool
  {
    let p = lowercase.utf8Start
    for k in 0..<lowercase.utf8CodeUnitCount where ASCII.lower(buffer[start + k]) != p[k] { return false }
    return true
  }

  /// Content-Length = 1*DIGIT (RFC 9110 §8.6); values beyond 18 digits are refused as too large.
  private static func contentLength(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int
  ) throws(HTTPParseError) -> Int {
    guard end > start else { throw .invalidContentLength }
    var value = 0
    for i in start..<end {
      let d = buffer[i] &- 48
      guard d < 10 else { throw .invalidContentLength }
      if i - start >= 18 { throw .bodyTooLarge }
      value = value * 10 + Int(d)
    }
    return value
  }

  /// Host = uri-host [ ":" port ] (RFC 9110 §7.2): reg-name, IP literal and port characters only.
  private static func checkHost(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int)
    throws(HTTPParseError)
  {
    // RFC 9110 §4.2.1: an http(s) URI's host is never empty, so an empty Host names nothing here.
    guard end > start else { throw .emptyHost }
    for i in start..<end where !ASCII.isHostCharacter(buffer[i]) { throw .invalidHost }
  }

  /// Lower-cased, trimmed, non-empty elements of a comma-separated list (RFC 9110 §5.6.1).
  private static func listElements(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> [Substring]
  {
    let text = String(decoding: buffer[start..<end], as: UTF8.self).lowercased()
    return text.split(separator: ",").compactMap { element in
      let trimmed = element.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }
      let value = Substring(String(trimmed.reversed()))
      return value.isEmpty ? nil : value
    }
  }

  // MARK: chunked framing

  /// chunk-size [ chunk-ext ] (RFC 9112 §7.1): hex digits, then `;name[=value]` extensions,
  /// checked and dropped. More than 15 hex digits is more than any body allowance. The response
  /// parser reads its chunks with it too.
  static func chunkSize(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int
  ) throws(HTTPParseError) -> Int {
    var i = start
    var size = 0
    while i < end, let digit = Self.hexValue(buffer[i]) {
      if i - start >= 15 { throw .bodyTooLarge }
      size = size << 4 | digit
      i += 1
    }
    guard i > start else {
      if i < end && buffer[i] == ASCII.cr { throw .bareCarriageReturn }
      throw .invalidChunkSize
    }
    if i < end { try Self.checkChunkExtensions(buffer, i, end) }
    return size
  }

  /// chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )
  static func checkChunkExtensions(
    _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int
  ) throws(HTTPParseError) {
    var i = start
    func skipWhitespace() { while i < end && ASCII.isWhitespace(buffer[i]) { i += 1 } }
    func token() -> Bool {
      let from = i
      while i < end && ASCII.isToken(buffer[i]) { i += 1 }
      return i > from
    }
    while i < end {
      skipWhitespace()
      guard i < end, buffer[i] == UInt8(ascii: ";") else { throw invalidExtension(buffer, start, end) }
      i += 1
      skipWhitespace()
      guard token() else { throw invalidExtension(buffer, start, end) }
      skipWhitespace()
      guard i < end, buffer[i] == UInt8(ascii: "=") else { continue }
      i += 1
      skipWhitespace()
      if i < end && buffer[i] == UInt8(ascii: "\"") {
        i += 1
        var closed = false
        while i < end {
          let b = buffer[i]
          if b == UInt8(ascii: "\"") {
            closed = true
            i += 1
            break
          }
          if b == UInt8(ascii: "\\") { i += 1 }
          guard i < end, ASCII.isFieldValue(buffer[i]) else { throw invalidExtension(buffer, start, end) }
          i += 1
        }
        guard closed else { throw invalidExtension(buffer, start, end) }
      } else {
        guard token() else { throw invalidExtension(buffer, start, end) }
      }
    }
  }

  private static func invalidExtension(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int)
    -> HTTPParseError
  {
    for i in start..<end where buffer[i] == ASCII.cr { return .bareCarriageReturn }
    return .invalidChunkExtension
  }

  @inline(__always) static func hexValue(_ b: UInt8) -> Int? {
    switch b {
    case 48...57: Int(b - 48)
    case 65...70: Int(b - 55)
    case 97...102: Int(b - 87)
    default: nil
    }
  }

  // MARK: completion

  mutating func complete(_ buffer: UnsafeRawBufferPointer, consumed: Int) -> Progress {
    messageEnd = consumed
    return .complete(consumed: consumed)
  }

  /// Builds the complete request (copying what it needs out of `buffer`) and readies the parser
  /// for the next one.
  mutating func takeRequest(_ buffer: UnsafeRawBufferPointer, path: String) -> Request {
    let consumed = messageEnd
    let head = Array(buffer.bytes(0..<reader.headEnd))
    var trailers = HTTPFields.empty
    if !trailerFields.isEmpty {
      let base = Int32(reader.trailersStart)
      let rebased = trailerFields.map {
        HTTPFields.Field(
          nameStart: $0.nameStart - base, nameEnd: $0.nameEnd - base, valueStart: $0.valueStart - base,
          valueEnd: $0.valueEnd - base)
      }
      trailers = HTTPFields(bytes: Array(buffer.bytes(reader.trailersStart..<consumed)), fields: rebased)
    }
    let queryStart = Request.targetParts(buffer.bytes(targetStart..<targetEnd)).queryStart
    let request = Request(
      method: method, version: version, targetRange: targetStart..<targetEnd,
      queryStart: queryStart.map { targetStart + $0 }, path: path,
      headers: HTTPFields(bytes: head, fields: fields), body: reader.body, trailers: trailers,
      keepAlive: keepAlive,
      expectsContinue: expectsContinue)
    reset()
    return request
  }

  /// Drops the complete request unbuilt and readies the parser for the next one.
  mutating func skipRequest() { reset() }

  private mutating func reset() {
    reader.startOver()
    lineState = .start
    fields.removeAll(keepingCapacity: true)
    if !trailerFields.isEmpty { trailerFields = [] }
    keepAlive = true
    expectsContinue = false
    fieldsComplete = false
    bodyLimit = limits.maxBodyBytes
  }

  @inline(__always) static func findLineFeed(_ buffer: UnsafeRawBufferPointer, from: Int) -> Int? {
    guard from < buffer.count, let base = buffer.baseAddress else { return nil }
    guard let hit = memchr(base + from, Int32(ASCII.lf), buffer.count - from) else { return nil }
    return base.distance(to: UnsafeRawPointer(hit))
  }
}
