/// Everything a connection needs from its loop while it decides: the routes, the access log and
/// the `Date` line. One per loop; passed in so that the machine stays pure.
public struct ConnectionContext: Sendable {
  /// The current route table.
  public var router: Router
  /// The loop's access-log buffer.
  public var log: AccessLog
  /// Where plain-HTTP requests are sent (`308` to this origin plus the same path and query), when
  /// set; `/healthz` is still answered in the clear, for load balancers.
  public var httpsRedirect: String? = nil
  var date = HTTPDate()

  /// A context over `router`.
  public init(router: Router, log: AccessLog) {
    self.router = router
    self.log = log
    date.refresh()
  }
}

/// The life of one HTTP/1.1 connection as a state machine over an injectable clock.
///
/// It is fed events (bytes received, bytes written, end of input, a handler's answer, a deadline,
/// the server draining) and answers with a `Step` the loop executes: hand a request to the worker
/// pool, shut the write side down, or close. Responses go to `output`, which the loop writes.
/// It performs no I/O and reads no clock but its own, so every timeout is testable instantly.
struct ConnectionMachine<Clock: EdgeClock> {
  enum State: Equatable {
    /// Between requests (or before the first): waiting for a first byte.
    case awaitingRequest
    /// Inside a request's head.
    case readingHead
    /// Inside a request's body.
    case readingBody
    /// A pooled handler is working on a request.
    case handling
    /// The last response is written; reading and discarding until the peer closes.
    case lingering
  }

  enum Close: Equatable {
    case none
    /// Shut the write side down (after everything is written) and linger.
    case shutdownWrite
    /// Close the socket at once.
    case now
  }

  /// A request for the worker pool. A class, so that `Step` stays two words: steps are returned
  /// from every event, dispatches are rare.
  final class Dispatch {
    let request: Request
    let route: Route
    init(request: Request, route: Route) {
      self.request = request
      self.route = route
    }
  }

  struct Step {
    /// A request for the worker pool; its answer comes back through `handlerFinished`.
    var dispatch: Dispatch? = nil
    var close = Close.none
  }

  private struct InFlight {
    let method: HTTPMethod
    let path: String
    let cacheClass: CacheClass
    let headOnly: Bool
    let connection: ConnectionHeader
    let started: Instant
  }

  let clock: Clock
  let limits: Limits
  let client: String
  /// Whether this connection arrived over TLS: its responses carry HSTS.
  let secure: Bool
  private(set) var state = State.awaitingRequest
  private var parser: HTTP1Parser
  private(set) var input: [UInt8] = []
  var output = OutputQueue()
  private var readDeadline: Instant
  private var writeDeadline = Instant.never
  private var closeAfterWrite = false
  private var inputClosed = false
  private var draining = false
  private var inFlight: InFlight?
  /// A fast-path answer held until `readDeadline` (see `Response.holdFor`).
  private var held: Response?
  /// Whether a request has completed on this connection; until then the head is due a head
  /// timeout after accept (a late first byte must not restart the clock: slowloris).
  private var servedOne = false

  init(clock: Clock, limits: Limits, client: String, secure: Bool = false) {
    self.clock = clock
    self.limits = limits
    self.client = client
    self.secure = secure
    parser = HTTP1Parser(limits: limits)
    // A new connection must send its first head within the head timeout (slowloris).
    readDeadline = clock.now().adding(limits.headTimeout)
  }

  /// When the loop must call `deadlinePassed` next.
  var deadline: Instant { output.isEmpty ? readDeadline : writeDeadline }

  /// Whether the loop should read from the socket now (back-pressure otherwise).
  var wantsInput: Bool {
    state == .lingering || (state != .handling && output.isEmpty && !closeAfterWrite && !inputClosed)
  }

  // MARK: events

  /// Bytes arrived from the peer.
  mutating func received(_ bytes: UnsafeRawBufferPointer, context: inout ConnectionContext) -> Step {
    if state == .lingering || bytes.isEmpty { return Step() }
    if input.isEmpty {
      return process(bytes, context: &context)
    }
    input.append(contentsOf: bytes.bytes(0..<bytes.count))
    let buffered = input
    return buffered.withUnsafeBytes { process($0, context: &context) }
  }

  /// The pooled handler answered.
  mutating func handlerFinished(_ response: Response, context: inout ConnectionContext) -> Step {
    guard state == .handling, let inFlight else { return Step() }
    if let hold = response.holdFor, hold > .zero {
      var response = response
      response.holdFor = nil
      held = response
      readDeadline = clock.now().adding(hold)
      return Step()
    }
    self.inFlight = nil
    state = .awaitingRequest
    readDeadline = clock.now().adding(limits.idleTimeout)
    emit(
      response, cacheClass: inFlight.cacheClass, headOnly: inFlight.headOnly, connection: inFlight.connection,
      method: inFlight.method, path: inFlight.path, started: inFlight.started, inline: false,
      context: &context)
    let buffered = input
    return buffered.withUnsafeBytes { process($0, context: &context) }
  }

  /// The loop wrote `count` bytes of `output`.
  mutating func wrote(_ count: Int) -> Step {
    output.consume(count)
    let now = clock.now()
    writeDeadline = now.adding(limits.writeTimeout)
    guard output.isEmpty else { return Step() }
    writeDeadline = .never
    if closeAfterWrite {
      if inputClosed { return Step(close: .now) }
      state = .lingering
      readDeadline = now.adding(limits.lingerTimeout)
      return Step(close: .shutdownWrite)
    }
    if state == .awaitingRequest { readDeadline = now.adding(limits.idleTimeout) }
    return Step()
  }

  /// The peer closed its sending side (read returned 0).
  mutating func inputEnded() -> Step {
    inputClosed = true
    switch state {
    case .lingering:
      return Step(close: .now)
    case .readingHead, .readingBody:
      // An unfinished request can never be answered.
      return output.isEmpty ? Step(close: .now) : markClosing()
    case .awaitingRequest:
      return output.isEmpty ? Step(close: .now) : markClosing()
    case .handling:
      return markClosing()
    }
  }

  private mutating func markClosing() -> Step {
    closeAfterWrite = true
    return Step()
  }

  /// A deadline may have passed; lazy timers call this at or after `deadline`.
  mutating func deadlinePassed(context: inout ConnectionContext) -> Step {
    let now = clock.now()
    guard now >= deadline else { return Step() }
    if !output.isEmpty { return Step(close: .now) }  // the client stopped reading
    switch state {
    case .awaitingRequest, .lingering:
      return Step(close: .now)
    case .readingHead, .readingBody:
      // RFC 9110 §15.5.9: tell the client, then close.
      failRequest(.requestTimeout, "The request did not arrive in time.\n", context: &context)
      writeDeadline = now.adding(min(limits.writeTimeout, limits.lingerTimeout))
      return Step()
    case .handling:
      guard let response = held else { return Step() }
      held = nil
      return handlerFinished(response, context: &context)
    }
  }

  /// The server is stopping: finish what is in flight, then close.
  mutating func drain() -> Step {
    draining = true
    if state == .awaitingRequest && output.isEmpty && input.isEmpty { return Step(close: .now) }
    if state == .lingering { return Step(close: .now) }
    return Step()
  }

  // MARK: requests

  private mutating func process(_ buffer: UnsafeRawBufferPointer, context: inout ConnectionContext) -> Step {
    var offset = 0
    var step = Step()
    let now = clock.now()
    parsing: while state != .handling && !closeAfterWrite && offset < buffer.count {
      if state == .awaitingRequest {
        state = .readingHead
        if servedOne { readDeadline = now.adding(limits.headTimeout) }
      }
      let window = UnsafeRawBufferPointer(rebasing: buffer[offset...])
      let result: HTTP1Parser.Progress
      do throws(HTTPParseError) {
        result = try parser.advance(window)
      } catch {
        offset = buffer.count
        failRequest(error.status, Self.message(for: error), context: &context)
        break parsing
      }
      switch result {
      case .needMore:
        if state == .readingBody || parser.isReadingBody {
          state = .readingBody
          readDeadline = now.adding(limits.bodyTimeout)  // progress resets the body timeout
        }
        break parsing
      case .continueExpected:
        output.append("HTTP/1.1 100 Continue\r\n\r\n".utf8)
        state = .readingBody
        readDeadline = now.adding(limits.bodyTimeout)
      case .complete(let consumed):
        offset += consumed
        servedOne = true
        state = .awaitingRequest
        readDeadline = now.adding(limits.idleTimeout)
        if let dispatch = respond(window, now: now, context: &context) {
          step.dispatch = dispatch
        }
      }
    }
    // Keep what was not consumed (a partial request, or requests pipelined behind a pooled one).
    if offset == buffer.count {
      input.removeAll(keepingCapacity: input.capacity <= 16384)
    } else if offset > 0 || input.isEmpty {
      input = Array(buffer.bytes(offset..<buffer.count))
    }
    return step
  }

  /// Routes the request the parser holds, then answers it. A prebuilt answer needs nothing of the
  /// request but its method and path, so no `Request` is built for it.
  private mutating func respond(
    _ window: UnsafeRawBufferPointer, now: Instant, context: inout ConnectionContext
  ) -> Dispatch? {
    let method = parser.requestMethod
    let path = parser.path(window)
    let keepAlive = parser.requestKeepAlive && !draining && !inputClosed
    let connection: ConnectionHeader =
      !keepAlive ? .close : parser.requestVersion == .http10 ? .keepAlive : .none
    if !keepAlive { closeAfterWrite = true }
    let headOnly = method == .head
    if !secure, let origin = context.httpsRedirect, path != "/healthz" {
      // HTTPS only: the same path and query on the configured origin, method and body kept (308).
      let request = parser.takeRequest(window, path: path)
      let location = origin + request.path + (request.query.map { "?" + $0 } ?? "")
      emit(
        Response(status: .permanentRedirect, headers: [("Location", location)]), cacheClass: .private,
        headOnly: headOnly, connection: connection, method: method, path: path, started: now,
        context: &context)
      return nil
    }
    let match = context.router.match(method, path)
    if case .found(let route, _, let getForHead) = match, case .fixed(let prebuilt) = route.handler {
      parser.skipRequest()
      emit(
        prebuilt.response, cacheClass: route.cacheClass, headOnly: headOnly || getForHead,
        connection: connection,
        method: method, path: path, started: now, context: &context)
      return nil
    }
    let request = parser.takeRequest(window, path: path)
    switch match {
    case .found(let route, let parameters, let getForHead):
      var request = request
      request.parameters = parameters
      request.client = client
      let answer: Response
      if route.execution != .inline {
        let fast = route.fastPath?(request)
        if let fast, let hold = fast.holdFor, hold > .zero {
          inFlight = InFlight(
            method: request.method, path: request.path, cacheClass: route.cacheClass,
            headOnly: headOnly || getForHead, connection: connection, started: now)
          state = .handling
          var response = fast
          response.holdFor = nil
          held = response
          readDeadline = now.adding(hold)
          return nil
        }
        guard let fast else {
          inFlight = InFlight(
            method: request.method, path: request.path, cacheClass: route.cacheClass,
            headOnly: headOnly || getForHead,
            connection: connection, started: now)
          state = .handling
          readDeadline = .never
          return Dispatch(request: request, route: route)
        }
        answer = fast
      } else {
        answer = route.respond(to: request)
      }
      emit(
        answer, cacheClass: route.cacheClass, headOnly: headOnly || getForHead,
        connection: connection, method: request.method, path: request.path, started: now, context: &context)
    case .methodNotAllowed(let allow):
      emit(
        Self.refusal(
          .methodNotAllowed, request, code: "method_not_allowed", "This method is not allowed here.",
          headers: [("Allow", allow)], page: context.router.errorPage),
        cacheClass: .private, headOnly: headOnly, connection: connection, method: request.method,
        path: request.path, started: now, context: &context)
    case .notFound:
      emit(
        Self.refusal(.notFound, request, code: "not_found", "Not found.", page: context.router.errorPage),
        cacheClass: .private,
        headOnly: headOnly, connection: connection,
        method: request.method, path: request.path, started: now, context: &context)
    }
    return nil
  }

  /// The router's own refusals: under `/api/` in the API's error shape (every API answer is JSON);
  /// an HTML page for a browser (`Accept` names `text/html`) outside `/.well-known/`, when the
  /// composition gave one; else plain text.
  static func refusal(
    _ status: Status, _ request: Request, code: String, _ message: String,
    headers: [(name: String, value: String)] = [], page: ErrorPage? = nil
  ) -> Response {
    let path = request.path
    guard path.hasPrefix("/api/") else {
      if let page, !path.hasPrefix("/.well-known/"), acceptsHTML(request.headers.combined("accept")) {
        var response = page(status, message)
        for (name, value) in headers { response.add(name, value) }
        return response
      }
      return .text(status, message + "\n", headers: headers)
    }
    return Response(
      status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers,
      body: .bytes(Array("{\"error\":\"\(code)\",\"message\":\"\(message)\"}".utf8)))
  }

  /// Whether an `Accept` field asks for HTML: a `text/html` range whose weight is not zero
  /// (RFC 9110 §12.5.1).
  static func acceptsHTML(_ accept: String?) -> Bool {
    guard let accept else { return false }
    for range in accept.split(separator: ",") {
      let parts = range.split(separator: ";").map { $0.filter { $0 != " " && $0 != "\t" }.lowercased() }
      guard parts.first == "text/html" else { continue }
      let weight = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
      if weight > 0 { return true }
    }
    return false
  }

  private mutating func emit(
    _ response: Response, cacheClass: CacheClass, headOnly: Bool, connection: ConnectionHeader,
    method: HTTPMethod?, path: String?, started: Instant, inline: Bool = true,
    context: inout ConnectionContext
  ) {
    var connection = connection
    if draining && connection != .close {
      // The server began stopping after this request was read: make this the last answer.
      connection = .close
      closeAfterWrite = true
    }
    let wasEmpty = output.isEmpty
    let bytes = output.append(
      response, cacheClass: cacheClass, headOnly: headOnly, connection: connection, date: context.date.line,
      hsts: secure)
    // Inline answers take the instant of their request; pooled ones read the clock once.
    let now = inline ? started : clock.now()
    if wasEmpty { writeDeadline = now.adding(limits.writeTimeout) }
    let elapsed = now.nanoseconds &- started.nanoseconds
    context.log.record(
      method: method, path: path, status: response.status.code, bytes: bytes,
      durationNanoseconds: elapsed, client: client)
  }

  /// Answers a request that cannot be parsed or finished, and closes after the answer.
  private mutating func failRequest(_ status: Status, _ message: String, context: inout ConnectionContext) {
    closeAfterWrite = true
    state = .awaitingRequest
    emit(
      .text(status, message), cacheClass: .private, headOnly: false, connection: .close, method: nil,
      path: nil,
      started: clock.now(), context: &context)
  }

  /// The plain-language message for each refusal: what was wrong, never what was received.
  static func message(for error: HTTPParseError) -> String {
    let detail: String =
      switch error {
      case .bareLineFeed: "a line ended in a bare LF; HTTP/1.1 lines end in CRLF"
      case .bareCarriageReturn: "a bare CR appeared outside a line ending"
      case .invalidRequestLine: "the request line is not 'METHOD target HTTP/1.1'"
      case .invalidMethod: "the method is not a valid token"
      case .methodTooLong: "the method is longer than any this server implements"
      case .invalidTarget: "the request target is not a valid path"
      case .fragmentInTarget: "the request target contains a fragment (#), which is never sent"
      case .invalidVersion: "the HTTP version is malformed"
      case .unsupportedVersion: "only HTTP/1.0 and HTTP/1.1 are served here"
      case .targetTooLong: "the request target is too long"
      case .headerSectionTooLarge: "the header fields are too large"
      case .tooManyHeaderFields: "there are too many header fields"
      case .invalidFieldName: "a header field name is invalid"
      case .whitespaceBeforeColon: "a header field name is followed by whitespace before its colon"
      case .obsoleteLineFolding: "a header field is folded over several lines"
      case .invalidFieldValue: "a header field value contains a control character"
      case .missingHost: "an HTTP/1.1 request needs a Host header field"
      case .duplicateHost: "the Host header field appears more than once"
      case .invalidHost: "the Host header field is invalid"
      case .emptyHost: "the Host header field is empty"
      case .invalidContentLength: "the Content-Length header field is invalid"
      case .duplicateContentLength: "the Content-Length header field appears more than once"
      case .contentLengthWithTransferEncoding: "Content-Length and Transfer-Encoding cannot both be sent"
      case .transferEncodingInHTTP10: "Transfer-Encoding is not allowed in an HTTP/1.0 request"
      case .chunkedNotFinal: "chunked must be the final transfer coding, applied once"
      case .unsupportedTransferCoding: "only the chunked transfer coding is supported"
      case .invalidChunkSize: "a chunk size is invalid"
      case .invalidChunkExtension: "a chunk extension is invalid"
      case .chunkExtensionTooLong: "a chunk extension is too long"
      case .invalidChunkTerminator: "chunk data is not followed by CRLF"
      case .bodyTooLarge: "the request body is too large"
      case .unsupportedExpectation: "only the 100-continue expectation is supported"
      }
    return "\(error.status.reason): \(detail).\n"
  }
}

extension HTTP1Parser {
  /// Whether the head is done and the body is being read.
  var isReadingBody: Bool { hasHead }
}
