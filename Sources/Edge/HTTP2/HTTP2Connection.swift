/// One HTTP/2 connection as its loop drives it: the session's frames in and out, every stream
/// through the same `Dispatcher` as HTTP/1 — decided on its head, so 404, 405, 413 and 415 come
/// before its body is read; then inline, a fast path or the pool — answers written on their own
/// streams in any order, the access log, and the connection's deadlines. Owned by its loop's
/// thread (a class, so the loop mutates it in place).
///
/// Deadlines, as HTTP/1's: a header block must end within the head timeout of its first frame
/// (else GOAWAY and close); a body may pause at most the body timeout (else that stream gets
/// 408); a connection with no stream open, nothing in flight and nothing to write waits the idle
/// timeout (the head timeout before its first request) and is not kept open by PING, SETTINGS or
/// WINDOW_UPDATE; a client that stops reading is cut at the write deadline.
final class HTTP2Connection<Clock: EdgeClock> {
  /// What the loop must do after an event.
  struct Step {
    /// Requests for the worker pool, each with its stream; answers come back through `finished`.
    var dispatches: [(stream: Int32, dispatch: ConnectionMachine<Clock>.Dispatch)] = []
    /// Close the connection now (what is queued was written, or the peer is gone).
    var close = false
  }

  /// A stream decided on its head, whose body is being read.
  private struct Routed {
    /// What the answer to a body that does not arrive in time needs of the head.
    let method: HTTPMethod
    let path: String
    let accept: String?
    let route: Route
    let parameters: RouteParameters
    let headOnly: Bool
    let started: Instant
    var bodyDeadline: Instant
  }

  let session: HTTP2Session
  var output = OutputQueue()
  /// The routes and listener policy of the snapshot the connection was opened under: a reload
  /// sends the connection GOAWAY (`drain`) and its last streams finish on this one; the client
  /// opens a new connection for the next.
  private let dispatcher: Dispatcher
  private let clock: Clock
  /// The limits it keeps to: the session's settings (a `Limits` is larger; each connection keeps
  /// only these).
  private var limits: HTTP2Session.Settings { session.settings }
  private let client: String
  private let secure: Bool
  private var inFlight: [Int32: InFlight] = [:]
  private var routed: [Int32: Routed] = [:]
  /// Streams answered on their head whose body may still come, and when they are reset if it has
  /// not ended by then (the body timeout from the answer).
  private var dropping: [Int32: Instant] = [:]
  /// How many streams the table of bodies still coming holds (for tests).
  var droppingCount: Int { dropping.count }
  /// How many `Request`s were built (for tests: a prebuilt or fixed answer, a refusal and a 404 need
  /// none).
  private(set) var requestsBuilt = 0
  private var idleDeadline: Instant
  private var headerBlockDeadline = Instant.never
  private var writeDeadline = Instant.never
  private var draining = false
  private var inputClosed = false
  /// An answer was queued since the output was last empty.
  private var answerQueued = false
  /// A deadline ended the connection.
  private var timedOut = false
  /// The session's events of one read, in a buffer kept between reads.
  private var events: [HTTP2Session.Event] = []
  /// When the connection last read or wrote; once it has been idle `quietDelay` since, the
  /// session's read and write buffers are given back (`quieted`) until it is busy again.
  private var lastActive: Instant
  private var quieted = false
  /// How long an idle connection keeps its frame buffer's pages: long enough that a client asking
  /// in bursts does not fault them in again for every burst.
  static var quietDelay: Duration { .milliseconds(500) }

  /// Why the connection is ending (for metrics): a deadline, a GOAWAY for a flood (a limit) or a
  /// protocol error, a drain, or else the peer.
  var closeReason: CloseReason {
    if timedOut { return .timeout }
    switch session.lastGoaway {
    case nil, HTTP2Error.noError.rawValue?: return draining ? .drain : .normal
    case HTTP2Error.enhanceYourCalm.rawValue?: return .limit
    default: return .parseError
    }
  }

  /// Whether the connection, once ended, should linger before it closes: it ended gracefully (a
  /// drain, a reload, the peer's own GOAWAY; not a deadline, a flood or a protocol error, which
  /// RFC 9113 §5.4.1 closes at once), all is written, and the peer may still be sending.
  var lingers: Bool {
    output.isEmpty && !inputClosed && !session.failed && (closeReason == .drain || closeReason == .normal)
  }

  /// A connection whose peer sent the HTTP/2 connection preface (h2c) or chose `h2` by ALPN.
  init(
    clock: Clock, limits: Limits, client: String, secure: Bool, dispatcher: Dispatcher,
    budget: RequestBudget? = nil, metrics: MetricShard? = nil
  ) {
    self.clock = clock
    self.dispatcher = dispatcher
    self.client = client
    self.secure = secure
    session = HTTP2Session(settings: .init(limits), budget: budget)
    session.metrics = metrics
    // Like an HTTP/1 connection: its first request within the head timeout.
    let now = clock.now()
    idleDeadline = now.adding(limits.headTimeout)
    lastActive = now
    flushSession()
  }

  /// Moves what the session has ready into `output`.
  private func flushSession() {
    let wasEmpty = output.isEmpty
    session.output(into: &output)
    if wasEmpty && !output.isEmpty { writeDeadline = clock.now().adding(limits.writeTimeout) }
  }

  /// When the loop must call `deadlinePassed` next.
  var deadline: Instant {
    var next = headerBlockDeadline
    if !output.isEmpty || session.sending { next = min(next, writeDeadline) }
    for stream in routed.values { next = min(next, stream.bodyDeadline) }
    for deadline in dropping.values { next = min(next, deadline) }
    if isIdle {
      next = min(next, idleDeadline)
      if !quieted { next = min(next, lastActive.adding(Self.quietDelay)) }
    }
    return next
  }

  /// After a drain's GOAWAY, every stream it let finish is done: none waits for its body, for its
  /// answer, or for the client's window to send the rest of its answer. (Streams answered on their
  /// head are not waited for: their body is dropped anyway.)
  private var drained: Bool { inFlight.isEmpty && routed.isEmpty && !session.sending }

  /// Nothing open, in flight or to write: the idle timeout runs.
  private var isIdle: Bool {
    routed.isEmpty && inFlight.isEmpty && output.isEmpty && !session.sending && session.openHeaderBlock == nil
  }

  /// Whether the loop should read from the socket now.
  var wantsInput: Bool { !inputClosed && output.pending < limits.maxQueuedBytes && !session.failed }

  /// Bytes arrived from the peer.
  func received(_ bytes: UnsafeRawBufferPointer, context: inout ConnectionContext) -> Step {
    var step = Step()
    let now = clock.now()
    active(now)
    let blockWasOpen = session.openHeaderBlock != nil
    _ = session.received(bytes, now: now)
    session.takeEvents(into: &events)
    for event in events {
      if let dispatch = handle(event, now: now, context: &context) {
        step.dispatches.append((event.stream, dispatch))
      }
    }
    // Handled: the records they hold may serve later streams.
    events.removeAll(keepingCapacity: true)
    for stream in session.takeProgressed() {
      routed[stream]?.bodyDeadline = now.adding(limits.bodyTimeout)
    }
    if session.openHeaderBlock == nil {
      headerBlockDeadline = .never
    } else if !blockWasOpen {
      headerBlockDeadline = now.adding(limits.headTimeout)
    }
    flushSession()
    step.close = output.isEmpty && (session.failed || session.finished)
    return step
  }

  /// One event on a stream: a head decided, a request run, a refusal answered. Events of a stream
  /// already answered (on its head, or refused) are past.
  private func handle(_ event: HTTP2Session.Event, now: Instant, context: inout ConnectionContext)
    -> ConnectionMachine<Clock>.Dispatch?
  {
    switch event {
    case .head(let stream):
      guard !stream.answered else { return nil }
      decideHead(stream, now: now, context: &context)
      return nil
    case .request(let stream, let headFirst):
      guard !stream.answered else { return nil }
      guard headFirst else { return decideWhole(stream, now: now, context: &context) }
      guard let decided = routed.removeValue(forKey: stream.id) else { return nil }  // answered on its head
      var request = request(of: stream)
      request.parameters = decided.parameters
      return run(
        stream.id, request, decided.route, headOnly: decided.headOnly, started: decided.started,
        context: &context)
    case .bodyTooLarge(let stream):
      guard !stream.answered else { return nil }
      let policy = routed.removeValue(forKey: stream.id)?.route.body
      refuse(
        stream, .contentTooLarge, "The request body is too large.", instead: policy?.tooLarge, now: now,
        context: &context)
      return nil
    case .overBudget(let stream):
      guard !stream.answered else { return nil }
      routed[stream.id] = nil
      refuse(
        stream, .serviceUnavailable, "The server is busy; try again shortly.",
        headers: [("Retry-After", "1")],
        now: now, context: &context)
      return nil
    case .fieldsTooLarge(let stream):
      guard !stream.answered else { return nil }
      routed[stream.id] = nil
      refuse(
        stream, .requestHeaderFieldsTooLarge, "The header fields are too large.", now: now, context: &context)
      return nil
    }
  }

  /// Answers `stream` with the engine's refusal (`instead`: the route's own answer), in the shape
  /// its path and Accept call for.
  private func refuse(
    _ stream: HTTP2Stream, _ status: Status, _ message: String, headers: [(name: String, value: String)] = [],
    instead: Response? = nil, now: Instant, context: inout ConnectionContext
  ) {
    let path = stream.path(dispatcher.router)
    let response =
      instead
      ?? dispatcher.router.errors.refusal(
        status, path: path, accept: stream.value("accept"), message, headers: headers)
    answer(
      stream.id, response, cacheClass: .private, headOnly: stream.requestMethod == .head,
      method: stream.requestMethod, path: path, started: now, route: 0, context: &context)
  }

  /// What the dispatcher makes of `stream`'s head (from its buffer: no `Request` is built).
  private func decision(_ stream: HTTP2Stream, path: String, bodyLength: Int?) -> Dispatcher.Decision {
    dispatcher.decide(
      method: stream.requestMethod, path: path, target: { stream.targetString }, secure: secure,
      bodyLength: bodyLength, fields: stream)
  }

  /// A head whose body follows: answered now (its body then dropped), or routed with its body limit.
  private func decideHead(_ stream: HTTP2Stream, now: Instant, context: inout ConnectionContext) {
    // The session has checked that a content-length is a number the DATA frames will match.
    let announced = stream.value("content-length").flatMap { Int($0) }
    // A body answered on its head is read and dropped (its frames checked as on any open stream)
    // unless it announces more than the stream's window: that one is reset once answered.
    let announcesMore = (announced ?? 0) > limits.initialWindowSize
    let id = stream.id
    let method = stream.requestMethod
    let path = stream.path(dispatcher.router)
    switch decision(stream, path: path, bodyLength: announced) {
    case .answer(let response, let cacheClass, let headOnly, let route):
      session.discardBody(id, resetting: announcesMore)
      if !announcesMore { drop(id, now: now) }
      answer(
        id, response, cacheClass: cacheClass, headOnly: headOnly, method: method, path: path, started: now,
        route: route, context: &context)
    case .prebuilt(let prebuilt, let cacheClass, let headOnly, let route):
      session.discardBody(id, resetting: announcesMore)
      if !announcesMore { drop(id, now: now) }
      answer(
        stream, prebuilt, cacheClass: cacheClass, headOnly: headOnly, method: method, path: path,
        started: now,
        route: route, context: &context)
    case .refuse(let response, _, let route):
      // A body refused for its size (413) is not wanted at all.
      let resetting = announcesMore || response.status.code == 413
      session.discardBody(id, resetting: resetting)
      if !resetting { drop(id, now: now) }
      answer(
        id, response, cacheClass: .private, headOnly: method == .head, method: method, path: path,
        started: now, route: route, context: &context)
    case .route(let route, let parameters, let headOnly, let bodyLimit):
      session.limitBody(id, to: min(bodyLimit ?? limits.maxBodyBytes, limits.maxBodyBytes))
      routed[id] = Routed(
        method: method, path: path, accept: stream.value("accept"), route: route, parameters: parameters,
        headOnly: headOnly, started: now, bodyDeadline: now.adding(limits.bodyTimeout))
    }
  }

  /// `stream` was answered on its head and its body may still come: it is reset at the body timeout
  /// unless it ends first. Streams that ended meanwhile leave the table before it passes the
  /// concurrency limit, so it never holds more than twice that (a client answering every stream's
  /// answer with its END_STREAM cannot grow it, nor the deadline's scan of it).
  private func drop(_ stream: Int32, now: Instant) {
    if dropping.count >= limits.maxConcurrentStreams {
      dropping = dropping.filter { session.isReceiving($0.key) }
    }
    dropping[stream] = now.adding(limits.bodyTimeout)
  }

  /// A request that arrived whole (no body, or END_STREAM on its HEADERS). A prebuilt or fixed
  /// answer is decided from the head alone, as HTTP/1 decides it; a `Request` is built only for a
  /// route that runs.
  private func decideWhole(_ stream: HTTP2Stream, now: Instant, context: inout ConnectionContext)
    -> ConnectionMachine<Clock>.Dispatch?
  {
    let method = stream.requestMethod
    let path = stream.path(dispatcher.router)
    switch decision(stream, path: path, bodyLength: stream.body.count) {
    case .answer(let response, let cacheClass, let headOnly, let route):
      answer(
        stream.id, response, cacheClass: cacheClass, headOnly: headOnly, method: method, path: path,
        started: now, route: route, context: &context)
    case .prebuilt(let prebuilt, let cacheClass, let headOnly, let route):
      answer(
        stream, prebuilt, cacheClass: cacheClass, headOnly: headOnly, method: method, path: path,
        started: now,
        route: route, context: &context)
    case .refuse(let response, _, let route):
      answer(
        stream.id, response, cacheClass: .private, headOnly: method == .head, method: method, path: path,
        started: now, route: route, context: &context)
    case .route(let route, let parameters, let headOnly, _):
      var request = request(of: stream)
      request.parameters = parameters
      return run(stream.id, request, route, headOnly: headOnly, started: now, context: &context)
    }
    return nil
  }

  /// The `Request` a route runs on, from `stream`'s head and body.
  private func request(of stream: HTTP2Stream) -> Request {
    requestsBuilt += 1
    var request = stream.request()
    request.client = client
    return request
  }

  /// A routed request with its body: answered inline or by a fast path, or handed to the pool.
  private func run(
    _ stream: Int32, _ request: Request, _ route: Route, headOnly: Bool, started: Instant,
    context: inout ConnectionContext
  ) -> ConnectionMachine<Clock>.Dispatch? {
    switch dispatcher.action(route, request) {
    case .answer(let response), .hold(let response, _):
      // A held refusal is answered at once on HTTP/2: the stream, not the connection, waits.
      answer(
        stream, response, cacheClass: route.cacheClass, headOnly: headOnly, method: request.method,
        path: request.path, started: started, inline: false, route: route.metricIndex, context: &context)
      return nil
    case .pool:
      inFlight[stream] = InFlight(
        method: request.method, path: request.path, route: route, headOnly: headOnly, started: started)
      return ConnectionMachine<Clock>.Dispatch(request: request, route: route)
    case .forward(let call):
      inFlight[stream] = InFlight(
        method: request.method, path: request.path, route: route, headOnly: headOnly, started: started)
      return ConnectionMachine<Clock>.Dispatch(request: request, route: route, call: call)
    }
  }

  /// Answers `stream` with `response`; `inline` when it was decided on the loop as its request's
  /// bytes were read (it then takes the instant of its request, as HTTP/1's inline answers do),
  /// not by the pool or an upstream.
  private func answer(
    _ stream: Int32, _ response: Response, cacheClass: CacheClass, headOnly: Bool, method: HTTPMethod,
    path: String, started: Instant, inline: Bool = true, route: RouteIndex, context: inout ConnectionContext
  ) {
    session.respond(
      stream: stream, response, cacheClass: cacheClass, headOnly: headOnly, date: context.date.value,
      hsts: secure)
    let now = inline ? started : clock.now()
    idleDeadline = now.adding(limits.idleTimeout)
    answerQueued = true
    context.served(
      route: route, method: method, path: path, protocol: .h2, status: response.status.code,
      bytes: response.body.count, bodyBytes: headOnly ? 0 : response.body.count, cacheClass: cacheClass,
      durationNanoseconds: now.nanoseconds &- started.nanoseconds, client: client, upstream: response.upstream
    )
  }

  /// Answers `stream` with a response built at load; one of another cache class than the route's
  /// (which no route table builds) is answered as any response, its fields laid out anew.
  private func answer(
    _ stream: HTTP2Stream, _ prebuilt: PrebuiltResponse, cacheClass: CacheClass, headOnly: Bool,
    method: HTTPMethod, path: String, started: Instant, route: RouteIndex, context: inout ConnectionContext
  ) {
    guard prebuilt.cacheClass == cacheClass else {
      answer(
        stream.id, prebuilt.response, cacheClass: cacheClass, headOnly: headOnly, method: method, path: path,
        started: started, route: route, context: &context)
      return
    }
    session.respond(stream, prebuilt: prebuilt, headOnly: headOnly, date: context.date.value, hsts: secure)
    // Decided on the loop as the request's bytes were read: the instant of its request.
    let now = started
    idleDeadline = now.adding(limits.idleTimeout)
    answerQueued = true
    let bytes = prebuilt.body.count
    context.served(
      route: route, method: method, path: path, protocol: .h2, status: prebuilt.status.code, bytes: bytes,
      bodyBytes: headOnly ? 0 : bytes, cacheClass: cacheClass,
      durationNanoseconds: now.nanoseconds &- started.nanoseconds, client: client, upstream: nil)
  }

  /// A pooled handler answered `stream` (which may have been reset meanwhile: then nothing is sent).
  func finished(stream: Int32, _ response: Response, context: inout ConnectionContext) -> Step {
    guard let flight = inFlight.removeValue(forKey: stream) else { return Step() }
    answer(
      stream, response, cacheClass: flight.cacheClass, headOnly: flight.headOnly, method: flight.method,
      path: flight.path, started: flight.started, inline: false, route: flight.route, context: &context)
    flushSession()
    return Step()
  }

  /// The loop wrote `count` bytes of `output`; true when the connection should close now.
  func wrote(_ count: Int) -> Bool {
    output.consume(count)
    let now = clock.now()
    active(now)
    writeDeadline = now.adding(limits.writeTimeout)
    flushSession()
    guard output.isEmpty else { return false }
    // A body still waiting for the peer's window keeps the write deadline from this write on.
    if !session.sending {
      writeDeadline = .never
      // The idle wait starts when the last answer is written (not a PING's or SETTINGS' ACK).
      if answerQueued {
        answerQueued = false
        idleDeadline = clock.now().adding(limits.idleTimeout)
      }
    }
    return session.failed || session.finished || (draining && drained) || inputClosed
  }

  /// The connection read or wrote at `now`.
  private func active(_ now: Instant) {
    lastActive = now
    quieted = false
  }

  /// The peer closed its side: nothing more can arrive; close once what is queued is written.
  func inputEnded() -> Bool {
    inputClosed = true
    return output.isEmpty
  }

  /// A deadline may have passed; true when the connection should close now.
  func deadlinePassed(context: inout ConnectionContext) -> Bool {
    let now = clock.now()
    // A reader that stopped reading (or never opens its window) is cut at the write deadline.
    if (!output.isEmpty || session.sending) && now >= writeDeadline {
      timedOut = true
      return true
    }
    // Streams that were routed but are gone (reset by the client) hold no deadline.
    routed = routed.filter { session.readsBody($0.key) }
    // A body still coming after its answer, past the body timeout, is reset (no second answer).
    dropping = dropping.filter { session.isReceiving($0.key) }
    for (stream, deadline) in dropping where now >= deadline {
      dropping[stream] = nil
      session.discardBody(stream, resetting: true)
    }
    for (stream, waiting) in routed where now >= waiting.bodyDeadline {
      routed[stream] = nil
      session.discardBody(stream, resetting: true)
      let response = dispatcher.router.errors.refusal(
        .requestTimeout, path: waiting.path, accept: waiting.accept,
        "The request body did not arrive in time.")
      answer(
        stream, response, cacheClass: .private, headOnly: waiting.method == .head, method: waiting.method,
        path: waiting.path, started: now, route: 0, context: &context)
    }
    if isIdle && !quieted && now >= lastActive.adding(Self.quietDelay) {
      // Nothing is being written: the frame buffer holds only what was sent.
      session.releaseBuffers()
      if output.isEmpty { output = OutputQueue() }
      quieted = true
    }
    if now >= headerBlockDeadline || (isIdle && now >= idleDeadline) {
      // A header block left open, or a connection with nothing to do: GOAWAY, then close.
      session.terminate(.noError)
      headerBlockDeadline = .never
      timedOut = true
    }
    flushSession()
    return output.isEmpty && (session.failed || session.finished)
  }

  /// The server is stopping, or its configuration was reloaded: GOAWAY with the last stream, let
  /// the streams in flight finish, then close.
  func drain() -> Bool {
    draining = true
    session.drain()
    flushSession()
    return output.isEmpty && drained
  }
}
