/// One HTTP/2 connection as its loop drives it: the session's frames in and out, every complete
/// stream through the same `Dispatcher` as HTTP/1 (one decision on the head, then inline, a fast
/// path or the pool), answers written on their own streams in any order, the access log, and the
/// connection's deadlines. Owned by its loop's thread (a class, so the loop mutates it in place).
final class HTTP2Connection {
  /// What the loop must do after an event.
  struct Step {
    /// Requests for the worker pool, each with its stream; answers come back through `finished`.
    var dispatches: [(stream: Int32, dispatch: ConnectionMachine<MonotonicClock>.Dispatch)] = []
    /// Close the connection now (what is queued was written, or the peer is gone).
    var close = false
  }

  private struct InFlight {
    let method: HTTPMethod
    let path: String
    let cacheClass: CacheClass
    let headOnly: Bool
    let started: Instant
  }

  let session: HTTP2Session
  var output = OutputQueue()
  private let clock: MonotonicClock
  private let limits: Limits
  private let client: String
  private let secure: Bool
  private var inFlight: [Int32: InFlight] = [:]
  private var readDeadline: Instant
  private var writeDeadline = Instant.never
  private var draining = false
  private var inputClosed = false
  /// Most bytes queued for the socket before reading stops (back-pressure on a slow reader).
  static let maxQueuedBytes = 1 << 20

  /// A connection whose peer sent the HTTP/2 connection preface (h2c) or chose `h2` by ALPN.
  init(clock: MonotonicClock, limits: Limits, client: String, secure: Bool) {
    self.clock = clock
    self.limits = limits
    self.client = client
    self.secure = secure
    session = HTTP2Session(
      settings: .init(maxHeaderListBytes: UInt32(clamping: limits.maxHeaderBytes)),
      maxBodyBytes: limits.maxBodyBytes)
    readDeadline = clock.now().adding(limits.idleTimeout)
    session.output(into: &staging)
    flushStaging()
  }

  /// Frames the session produced, before they join `output`.
  private var staging: [UInt8] = []

  private func flushStaging() {
    guard !staging.isEmpty else { return }
    if output.isEmpty { writeDeadline = clock.now().adding(limits.writeTimeout) }
    output.append(staging)
    staging.removeAll(keepingCapacity: true)
  }

  /// When the loop must call `deadlinePassed` next: the write deadline while bytes are queued or a
  /// body waits for the peer's window (a reader that never opens it is cut there), else the idle one.
  var deadline: Instant { output.isEmpty && !session.sending ? readDeadline : writeDeadline }

  /// Whether the loop should read from the socket now.
  var wantsInput: Bool { !inputClosed && output.pending < Self.maxQueuedBytes && !session.failed }

  /// Bytes arrived from the peer.
  func received(_ bytes: UnsafeRawBufferPointer, context: inout ConnectionContext) -> Step {
    var step = Step()
    let now = clock.now()
    _ = session.received(bytes, now: now)
    for arrived in session.takeArrived() {
      if let dispatch = dispatch(arrived, now: now, context: &context) {
        step.dispatches.append((arrived.stream, dispatch))
      }
    }
    readDeadline = now.adding(limits.idleTimeout)
    session.output(into: &staging)
    flushStaging()
    step.close = output.isEmpty && (session.failed || session.finished)
    return step
  }

  /// One complete stream: decided and answered as HTTP/1 requests are, or handed to the pool.
  private func dispatch(_ arrived: HTTP2Session.Arrived, now: Instant, context: inout ConnectionContext)
    -> ConnectionMachine<MonotonicClock>.Dispatch?
  {
    var request = arrived.request
    let method = request.method
    let path = request.path
    let decision = context.dispatcher.decide(
      method: method, path: path, target: { path + (request.query.map { "?" + $0 } ?? "") }, secure: secure,
      bodyLength: request.body.count, fields: RequestHeadFields(fields: request.headers))
    switch decision {
    case .answer(let response, let cacheClass, let headOnly):
      answer(
        arrived.stream, response, cacheClass: cacheClass, headOnly: headOnly, method: method, path: path,
        started: now, context: &context)
    case .refuse(let response, _):
      answer(
        arrived.stream, response, cacheClass: .private, headOnly: method == .head, method: method, path: path,
        started: now, context: &context)
    case .route(let route, let parameters, let headOnly, _):
      request.parameters = parameters
      request.client = client
      switch context.dispatcher.action(route, request) {
      case .answer(let response), .hold(let response, _):
        // A held refusal is answered at once on HTTP/2: the stream, not the connection, waits.
        answer(
          arrived.stream, response, cacheClass: route.cacheClass, headOnly: headOnly, method: method,
          path: path, started: now, context: &context)
      case .pool:
        inFlight[arrived.stream] = InFlight(
          method: method, path: path, cacheClass: route.cacheClass, headOnly: headOnly, started: now)
        return ConnectionMachine<MonotonicClock>.Dispatch(request: request, route: route)
      }
    }
    return nil
  }

  private func answer(
    _ stream: Int32, _ response: Response, cacheClass: CacheClass, headOnly: Bool, method: HTTPMethod,
    path: String,
    started: Instant, context: inout ConnectionContext
  ) {
    session.respond(
      stream: stream, response, cacheClass: cacheClass, headOnly: headOnly, date: context.date.value,
      hsts: secure)
    let elapsed = clock.now().nanoseconds &- started.nanoseconds
    context.log.record(
      method: method, path: path, status: response.status.code, bytes: response.body.count,
      durationNanoseconds: elapsed, client: client)
  }

  /// A pooled handler answered `stream` (which may have been reset meanwhile: then nothing is sent).
  func finished(stream: Int32, _ response: Response, context: inout ConnectionContext) -> Step {
    guard let flight = inFlight.removeValue(forKey: stream) else { return Step() }
    answer(
      stream, response, cacheClass: flight.cacheClass, headOnly: flight.headOnly, method: flight.method,
      path: flight.path, started: flight.started, context: &context)
    session.output(into: &staging)
    flushStaging()
    return Step()
  }

  /// The loop wrote `count` bytes of `output`; true when the connection should close now.
  func wrote(_ count: Int) -> Bool {
    output.consume(count)
    writeDeadline = clock.now().adding(limits.writeTimeout)
    session.output(into: &staging)
    flushStaging()
    guard output.isEmpty else { return false }
    // A body still waiting for the peer's window keeps the write deadline from this write on.
    if !session.sending { writeDeadline = .never }
    return session.failed || session.finished || (draining && inFlight.isEmpty) || inputClosed
  }

  /// The peer closed its side: nothing more can arrive; close once what is queued is written.
  func inputEnded() -> Bool {
    inputClosed = true
    return output.isEmpty
  }

  /// A deadline may have passed; true when the connection should close.
  func deadlinePassed() -> Bool {
    let now = clock.now()
    guard now >= deadline else { return false }
    // A reader that stopped reading (or never opens its window) is cut at the write deadline; an
    // idle connection at the idle one.
    if !output.isEmpty || session.sending { return true }
    return inFlight.isEmpty
  }

  /// The server is stopping: GOAWAY with the last stream, let the streams in flight finish.
  func drain() -> Bool {
    draining = true
    session.drain()
    session.output(into: &staging)
    flushStaging()
    return output.isEmpty && inFlight.isEmpty
  }
}

/// A complete request's fields, for the dispatcher.
struct RequestHeadFields: HeadFields {
  let fields: HTTPFields

  func value(_ name: StaticString) -> String? { fields.combined(name.description) }
}
