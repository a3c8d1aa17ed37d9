/// Everything a connection needs from its loop while it decides: the routes, the access log and
/// the `Date` line. One per loop; passed in so that the machine stays pure.
public struct ConnectionContext: Sendable {
  /// The dispatcher: the route table and the listener's policy.
  public var dispatcher: Dispatcher
  /// The loop's access-log buffer.
  public var log: AccessLog
  /// The loop's metric shard; nil when metrics are off.
  public var metrics: MetricShard?
  var date = HTTPDate()

  /// The current route table.
  public var router: Router {
    get { dispatcher.router }
    set { dispatcher.router = newValue }
  }

  /// Where plain-HTTP requests are sent (`Dispatcher.httpsRedirect`).
  public var httpsRedirect: String? {
    get { dispatcher.httpsRedirect }
    set { dispatcher.httpsRedirect = newValue }
  }

  /// Paths answered in the clear all the same (`Dispatcher.clearPaths`).
  public var clearPaths: Set<String> {
    get { dispatcher.clearPaths }
    set { dispatcher.clearPaths = newValue }
  }

  /// A context over `router`.
  public init(router: Router, log: AccessLog, metrics: MetricShard? = nil) {
    dispatcher = Dispatcher(router: router)
    self.log = log
    self.metrics = metrics
    date.refresh()
  }

  /// Where every protocol's answers end: one access-log line (`bytes`: what the protocol counts as
  /// written) and the request's metrics (`bodyBytes`: the body sent).
  mutating func served(
    route: RouteIndex, method: HTTPMethod?, path: String?, protocol: MetricProtocol, status: Int, bytes: Int,
    bodyBytes: Int, cacheClass: CacheClass, durationNanoseconds: UInt64, client: String,
    upstream: UpstreamNote? = nil
  ) {
    log.record(
      method: method, path: path, protocol: `protocol`, status: status, bytes: bytes,
      durationNanoseconds: durationNanoseconds, client: client, upstream: upstream)
    metrics?.served(
      route: route, method: method, protocol: `protocol`, status: status, cacheClass: cacheClass,
      bytes: bodyBytes, durationNanoseconds: durationNanoseconds)
  }
}

/// The head fields of the request an HTTP/1 parser holds, for the dispatcher.
struct ParsedHeadFields: HeadFields {
  let fields: [HTTPFields.Field]
  let buffer: UnsafeRawBufferPointer

  func value(_ name: StaticString) -> String? { HTTP1Parser.field(buffer, fields, name) }
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
    /// Set when the answer is an upstream's: the loop sends this call instead of using the pool.
    let call: UpstreamCall?
    init(request: Request, route: Route, call: UpstreamCall? = nil) {
      self.request = request
      self.route = route
      self.call = call
    }
  }

  struct Step {
    /// A request for the worker pool; its answer comes back through `handlerFinished`.
    var dispatch: Dispatch? = nil
    var close = Close.none
  }

  let clock: Clock
  let limits: Limits
  let client: String
  /// Whether this connection arrived over TLS: its responses carry HSTS.
  private(set) var secure: Bool
  /// The process-wide allowance the bytes of this connection's bodies are counted in (nil: none).
  let budget: RequestBudget?
  /// Bytes this connection has reserved in `budget`.
  private(set) var reservedBytes = 0
  /// The body size of the request a pooled handler is working on.
  private var inFlightBodyBytes = 0
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
  /// Why the connection is ending, once that is decided by more than the peer (for metrics).
  private(set) var closeReason: CloseReason?
  /// A fast-path answer held until `readDeadline` (see `Response.holdFor`).
  private var held: Response?
  /// The route chosen on the head of the request whose body is being read.
  private var routed: Routed?
  /// The request whose body is being read was answered on its head: the body is dropped.
  private var discarding = false
  /// Whether a request has completed on this connection; until then the head is due a head
  /// timeout after accept (a late first byte must not restart the clock: slowloris).
  private var servedOne = false

  init(clock: Clock, limits: Limits, client: String, secure: Bool = false, budget: RequestBudget? = nil) {
    self.clock = clock
    self.limits = limits
    self.client = client
    self.secure = secure
    self.budget = budget
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
    let step: Step
    if input.isEmpty {
      step = process(bytes, context: &context)
    } else {
      input.append(contentsOf: bytes.bytes(0..<bytes.count))
      let buffered = input
      step = buffered.withUnsafeBytes { process($0, context: &context) }
    }
    return settleBudget(step, context: &context)
  }

  /// A TLS listener received bytes that are not a TLS record (plain HTTP sent to the HTTPS port):
  /// answer 400 in the clear, like nginx, then close. From now on the connection is plain.
  ///
  /// `received` is what has arrived so far (left unread on the socket): the answer takes the
  /// engine's error shape for the target it shows (no `Accept` is read).
  mutating func refusePlainHTTP(_ received: UnsafeRawBufferPointer, context: inout ConnectionContext) {
    secure = false
    var probe = HTTP1Parser(limits: limits)
    _ = try? probe.advance(received)
    failRequest(
      context.router.errors.refusal(
        .badRequest, path: probe.errorContext(received)?.path, accept: nil,
        "Bad Request: plain HTTP was sent to the HTTPS port; use https://."), context: &context)
  }

  /// Reserves (or gives back) what this connection now holds for a body in the process-wide
  /// budget. When the budget is spent the body is refused with 503 at once and the connection
  /// closes, so that what all connections hold stays under `Limits.maxBufferedRequestBytes`.
  private mutating func settleBudget(_ step: Step, context: inout ConnectionContext) -> Step {
    guard let budget else { return step }
    let holding =
      state == .readingBody || state == .handling
      ? input.capacity + parser.bodyCapacity + inFlightBodyBytes : 0
    let delta = holding - reservedBytes
    if delta <= 0 || budget.reserve(delta) {
      if delta < 0 { budget.release(-delta) }
      reservedBytes = holding
      return step
    }
    let message = "The server is busy; try again shortly."
    let retry = [(name: "Retry-After", value: "1")]
    closeReason = .limit
    if discarding {
      // Its answer went out on the head: the body it was dropping is not worth the memory.
      discarding = false
      closeAfterWrite = true
      state = .awaitingRequest
      input = []
      releaseBudget()
      return Step(close: output.isEmpty ? .now : .none)
    } else if let dispatch = step.dispatch, let inFlight {
      // The request is complete but its handler has not been given it: answer it here instead.
      self.inFlight = nil
      inFlightBodyBytes = 0
      state = .awaitingRequest
      closeAfterWrite = true
      emit(
        context.router.errors.refusal(.serviceUnavailable, dispatch.request, message, headers: retry),
        cacheClass: .private, headOnly: inFlight.headOnly, connection: .close, method: inFlight.method,
        path: inFlight.path, started: inFlight.started, route: inFlight.route, context: &context)
    } else {
      let target = input.withUnsafeBytes { parser.errorContext($0) }
      failRequest(
        context.router.errors.refusal(
          .serviceUnavailable, path: target?.path, accept: target?.accept, message, headers: retry),
        context: &context)
    }
    input = []
    releaseBudget()
    return Step()
  }

  /// Gives back everything this connection reserved (it is closing).
  mutating func releaseBudget() {
    guard reservedBytes > 0 else { return }
    budget?.release(reservedBytes)
    reservedBytes = 0
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
    inFlightBodyBytes = 0
    state = .awaitingRequest
    readDeadline = clock.now().adding(limits.idleTimeout)
    emit(
      response, cacheClass: inFlight.cacheClass, headOnly: inFlight.headOnly, connection: inFlight.connection,
      method: inFlight.method, path: inFlight.path, started: inFlight.started, inline: false,
      route: inFlight.route, context: &context)
    let buffered = input
    let step = buffered.withUnsafeBytes { process($0, context: &context) }
    return settleBudget(step, context: &context)
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
    if state != .handling { closeReason = closeReason ?? .timeout }
    if !output.isEmpty { return Step(close: .now) }  // the client stopped reading
    switch state {
    case .awaitingRequest, .lingering:
      return Step(close: .now)
    case .readingHead, .readingBody:
      // A body dropped after an answer on its head is not answered again.
      if discarding { return Step(close: .now) }
      // RFC 9110 §15.5.9: tell the client, then close.
      let target = input.withUnsafeBytes { parser.errorContext($0) }
      failRequest(
        context.router.errors.refusal(
          .requestTimeout, path: target?.path, accept: target?.accept, "The request did not arrive in time."),
        context: &context)
      writeDeadline = now.adding(min(limits.writeTimeout, limits.lingerTimeout))
      return Step()
    case .handling:
      guard let response = held else { return Step() }
      held = nil
      return handlerFinished(response, context: &context)
    }
  }

  /// Another protocol on this connection (HTTP/2) has ended it and written its last bytes: shut
  /// the write side down and read and drop what still arrives until the peer closes or the linger
  /// timeout passes, as after an HTTP/1 answer that closes.
  mutating func linger(reason: CloseReason) -> Step {
    closeReason = closeReason ?? reason
    state = .lingering
    readDeadline = clock.now().adding(limits.lingerTimeout)
    return Step(close: .shutdownWrite)
  }

  /// The server is stopping: finish what is in flight, then close.
  mutating func drain() -> Step {
    draining = true
    closeReason = closeReason ?? .drain
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
        if refuse(error, window, context: &context) { step.close = .now }
        break parsing
      }
      switch result {
      case .needMore:
        if state == .readingBody || parser.isReadingBody {
          state = .readingBody
          readDeadline = now.adding(limits.bodyTimeout)  // progress resets the body timeout
        }
        break parsing
      case .head:
        // A body follows: the head alone chooses the route (or the refusal) before any of it is
        // read and before `100 Continue`.
        state = .readingBody
        readDeadline = now.adding(limits.bodyTimeout)
        if !routeHead(window, now: now, context: &context) {
          // Answered, and closing: what else arrives is read and dropped while lingering.
          offset = buffer.count
          parser.skipRequest()
          state = .awaitingRequest
          break parsing
        }
      case .complete(let consumed):
        offset += consumed
        complete(window, now: now, step: &step, context: &context)
      }
    }
    keepUnconsumed(buffer, from: offset)
    return step
  }

  /// A request the parser refused: answered, and the connection closes after the answer; or, if
  /// its body was being dropped after an answer on its head, just closed. True: close now.
  private mutating func refuse(
    _ error: HTTPParseError, _ window: UnsafeRawBufferPointer, context: inout ConnectionContext
  ) -> Bool {
    if discarding {
      // Answered on its head already: a body that breaks its framing or the limit while it is
      // dropped ends the connection, without a second answer.
      discarding = false
      closeAfterWrite = true
      state = .awaitingRequest
      return output.isEmpty
    }
    // Once the target is known the answer takes the engine's error shape (the composition's);
    // a body past its route's limit gets the route's own refusal.
    let target = parser.errorContext(window)
    let routeRefusal = error == .bodyTooLarge ? routed?.route.body.tooLarge : nil
    routed = nil
    // Past a size limit (413, 414, 431) it is a limit; anything else broke the framing.
    closeReason = [413, 414, 431].contains(error.status.code) ? .limit : .parseError
    failRequest(
      routeRefusal
        ?? context.router.errors.refusal(
          error.status, path: target?.path, accept: target?.accept, Dispatcher.message(for: error)),
      context: &context)
    return false
  }

  /// A request the parser holds whole: answered, handed to the pool (`step.dispatch`), or, when
  /// it was answered on its head, its body dropped.
  private mutating func complete(
    _ window: UnsafeRawBufferPointer, now: Instant, step: inout Step, context: inout ConnectionContext
  ) {
    servedOne = true
    state = .awaitingRequest
    readDeadline = now.adding(limits.idleTimeout)
    guard discarding else {
      if let dispatch = respond(window, now: now, context: &context) { step.dispatch = dispatch }
      return
    }
    // Its answer went out on the head; the body is read past and dropped.
    discarding = false
    parser.skipRequest()
    if draining {
      // The server began stopping meanwhile: this connection has had its last answer.
      closeAfterWrite = true
      if output.isEmpty { step.close = .now }
    }
  }

  /// Keeps what was not consumed (a partial request, or requests pipelined behind a pooled one).
  private mutating func keepUnconsumed(_ buffer: UnsafeRawBufferPointer, from offset: Int) {
    if offset == buffer.count {
      input.removeAll(keepingCapacity: input.capacity <= 16384)
    } else if offset > 0 || input.isEmpty {
      input = Array(buffer.bytes(offset..<buffer.count))
    }
  }

  /// The route a head with a body chose, kept while the body is read.
  private struct Routed {
    let route: Route
    let parameters: RouteParameters
    let headOnly: Bool
  }

  /// Whether the connection stays open after the request the parser holds, and the field that
  /// says so.
  private mutating func connectionHeader() -> ConnectionHeader {
    let keepAlive = parser.requestKeepAlive && !draining && !inputClosed
    if !keepAlive { closeAfterWrite = true }
    return !keepAlive ? .close : parser.requestVersion == .http10 ? .keepAlive : .none
  }

  /// The dispatcher's decision on the head the parser holds. A prebuilt answer is written from its
  /// `Response`, which carries the prebuilt head lines (`OutputQueue.append`).
  private func decide(_ window: UnsafeRawBufferPointer, path: String, context: ConnectionContext)
    -> Dispatcher.Decision
  {
    context.dispatcher.decide(
      method: parser.requestMethod, path: path,
      target: { self.parser.target(window) }, secure: secure, bodyLength: parser.announcedBodyLength,
      fields: ParsedHeadFields(fields: parser.headFields, buffer: window))
  }

  /// A head with a body: routes it, or answers it at once. False when the connection closes after
  /// that answer (a 413, or a client waiting for `100 Continue` that must not now send its body
  /// into the next request); otherwise the body is read, for its route or to be dropped.
  private mutating func routeHead(
    _ window: UnsafeRawBufferPointer, now: Instant, context: inout ConnectionContext
  ) -> Bool {
    let method = parser.requestMethod
    let path = parser.path(window, context.dispatcher.router)
    switch decide(window, path: path, context: context) {
    case .route(let route, let parameters, let headOnly, let limit):
      if let limit { parser.limitBody(to: limit) }
      routed = Routed(route: route, parameters: parameters, headOnly: headOnly)
      if parser.requestExpectsContinue && !parser.bodyBegun(window) {
        output.append("HTTP/1.1 100 Continue\r\n\r\n".utf8)
      }
      return true
    case .answer(let response, let cacheClass, let headOnly, let route):
      return answerHead(
        response, cacheClass, headOnly: headOnly, method: method, path: path, route: route, now: now,
        context: &context)
    case .prebuilt(let prebuilt, let cacheClass, let headOnly, let route):
      return answerHead(
        prebuilt.response, cacheClass, headOnly: headOnly, method: method, path: path, route: route, now: now,
        context: &context)
    case .refuse(let response, let closing, let route):
      let closes = closing || parser.requestExpectsContinue
      if closes { closeAfterWrite = true }
      if closing { closeReason = .limit }
      let connection = closes ? .close : connectionHeader()
      emit(
        response, cacheClass: .private, headOnly: method == .head, connection: connection, method: method,
        path: path, started: now, route: route, context: &context)
      discarding = !closeAfterWrite
      return !closeAfterWrite
    }
  }

  /// Answers a head whose body follows, before reading it; false when the connection closes after
  /// the answer (a client waiting for `100 Continue`).
  private mutating func answerHead(
    _ response: Response, _ cacheClass: CacheClass, headOnly: Bool, method: HTTPMethod, path: String,
    route: RouteIndex, now: Instant, context: inout ConnectionContext
  ) -> Bool {
    let closing = parser.requestExpectsContinue
    if closing { closeAfterWrite = true }
    let connection = closing ? .close : connectionHeader()
    emit(
      response, cacheClass: cacheClass, headOnly: headOnly, connection: connection, method: method,
      path: path, started: now, route: route, context: &context)
    discarding = !closeAfterWrite
    return !closeAfterWrite
  }

  /// Answers the complete request the parser holds: with the route its head chose, or (no body)
  /// as the dispatcher decides now. A prebuilt answer needs nothing of the request but its method
  /// and path, so no `Request` is built for it.
  private mutating func respond(
    _ window: UnsafeRawBufferPointer, now: Instant, context: inout ConnectionContext
  ) -> Dispatch? {
    let method = parser.requestMethod
    let path = parser.path(window, context.dispatcher.router)
    let connection = connectionHeader()
    let route: Route
    let parameters: RouteParameters
    let headOnly: Bool
    if let routed {
      self.routed = nil
      (route, parameters, headOnly) = (routed.route, routed.parameters, routed.headOnly)
    } else {
      switch decide(window, path: path, context: context) {
      case .route(let r, let p, let h, _):
        (route, parameters, headOnly) = (r, p, h)
      case .answer(let response, let cacheClass, let headOnly, let route):
        parser.skipRequest()
        emit(
          response, cacheClass: cacheClass, headOnly: headOnly, connection: connection, method: method,
          path: path, started: now, route: route, context: &context)
        return nil
      case .prebuilt(let prebuilt, let cacheClass, let headOnly, let route):
        // Written from its `Response`, which points at the prebuilt head lines (`OutputQueue`).
        parser.skipRequest()
        emit(
          prebuilt.response, cacheClass: cacheClass, headOnly: headOnly, connection: connection,
          method: method,
          path: path, started: now, route: route, context: &context)
        return nil
      case .refuse(let response, let closing, let route):
        parser.skipRequest()
        if closing {
          closeAfterWrite = true
          closeReason = .limit
        }
        emit(
          response, cacheClass: .private, headOnly: method == .head,
          connection: closing ? .close : connection,
          method: method, path: path, started: now, route: route, context: &context)
        return nil
      }
    }
    var request = parser.takeRequest(window, path: path)
    request.parameters = parameters
    request.client = client
    switch context.dispatcher.action(route, request) {
    case .answer(let answer):
      emit(
        answer, cacheClass: route.cacheClass, headOnly: headOnly, connection: connection, method: method,
        path: path, started: now, route: route.metricIndex, context: &context)
    case .hold(let response, let hold):
      inFlight = InFlight(
        method: method, path: path, route: route, headOnly: headOnly, connection: connection, started: now)
      state = .handling
      held = response
      readDeadline = now.adding(hold)
    case .pool:
      return handOver(request, route, call: nil, headOnly: headOnly, connection: connection, now: now)
    case .forward(let call):
      return handOver(request, route, call: call, headOnly: headOnly, connection: connection, now: now)
    }
    return nil
  }

  /// The request goes to the pool (or, with `call`, to its upstream); its answer comes back
  /// through `handlerFinished`.
  private mutating func handOver(
    _ request: Request, _ route: Route, call: UpstreamCall?, headOnly: Bool, connection: ConnectionHeader,
    now: Instant
  ) -> Dispatch {
    inFlight = InFlight(
      method: request.method, path: request.path, route: route, headOnly: headOnly, connection: connection,
      started: now)
    state = .handling
    readDeadline = .never
    inFlightBodyBytes = request.body.count
    return Dispatch(request: request, route: route, call: call)
  }

  private mutating func emit(
    _ response: Response, cacheClass: CacheClass, headOnly: Bool, connection: ConnectionHeader,
    method: HTTPMethod?, path: String?, started: Instant, inline: Bool = true, route: RouteIndex = 0,
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
    context.served(
      route: route, method: method, path: path, protocol: .http1, status: response.status.code, bytes: bytes,
      bodyBytes: headOnly ? 0 : response.body.count, cacheClass: cacheClass,
      durationNanoseconds: now.nanoseconds &- started.nanoseconds, client: client, upstream: response.upstream
    )
  }

  /// Answers a request that cannot be parsed or finished, and closes after the answer.
  private mutating func failRequest(_ response: Response, context: inout ConnectionContext) {
    closeAfterWrite = true
    state = .awaitingRequest
    emit(
      response, cacheClass: .private, headOnly: false, connection: .close, method: nil,
      path: nil,
      started: clock.now(), context: &context)
  }
}

extension HTTP1Parser {
  /// Whether the head is done and the body is being read.
  var isReadingBody: Bool { hasHead }
}
