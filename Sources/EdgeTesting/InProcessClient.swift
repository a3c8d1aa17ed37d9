import Edge

/// A client for tests that sends requests to a route table without a socket, answered the way the
/// server answers them: `Dispatcher.decide` on the head (so 404, 405, 413 and 415 come from the
/// same code as on the wire, with each route's `BodyPolicy`), then `Dispatcher.action` (an inline
/// route or a fast path; a held answer is returned at once), else the route's handler, as a pool
/// worker runs it. Like a browser it keeps cookies, sends `Host`, and sends `Origin` on unsafe
/// methods.
///
/// What the writer adds on the wire (`Cache-Control`, `Date`, `Content-Length`) is not added; the
/// head announces the body's whole length, as `Content-Length` does; the listener's own limits
/// (`max-body-bytes`, header sizes) are the parser's and are not applied.
public struct InProcessClient: Sendable {
  /// The dispatcher every request goes through.
  public var dispatcher: Dispatcher
  /// The `Host` sent with every request.
  public var host: String
  /// The `Origin` sent with unsafe requests (RFC 9110 §9.2.1), as browsers do; nil: none.
  public var origin: String?
  /// Whether the requests count as arriving over TLS (for the dispatcher's HTTPS-only redirect).
  public var secure = false
  /// The peer address (`host:port`) a connection would give the request; empty: none.
  public var peer = ""
  /// The cookies kept from `Set-Cookie` answers, sent back with every request.
  public var cookies = CookieJar()
  /// What answers a forwarded request (`Response.forward`) in place of the upstream; nil: every
  /// upstream is switched off.
  public var upstream: (@Sendable (UpstreamCall) -> UpstreamResult)? = nil

  /// The `Host` a client sends unless told otherwise.
  public static let defaultHost = "127.0.0.1:8080"
  /// The `Origin` of a page served from `defaultHost` over plain HTTP.
  public static let defaultOrigin = "http://127.0.0.1:8080"

  /// A client of `dispatcher`, naming `host`, sending `origin` with unsafe requests.
  public init(
    _ dispatcher: Dispatcher, host: String = InProcessClient.defaultHost,
    origin: String? = InProcessClient.defaultOrigin
  ) {
    self.dispatcher = dispatcher
    self.host = host
    self.origin = origin
  }

  /// A client of a dispatcher over `router` (no HTTPS-only redirect).
  public init(
    _ router: Router, host: String = InProcessClient.defaultHost,
    origin: String? = InProcessClient.defaultOrigin
  ) {
    self.init(Dispatcher(router: router), host: host, origin: origin)
  }

  /// Sends `method` to `target` with `body` and `headers`, as `request` builds it; keeps the
  /// answer's cookies.
  public mutating func send(
    _ method: HTTPMethod, _ target: String, body: RequestBody = .empty, headers: [(String, String)] = []
  ) -> Response {
    let response = respond(to: request(method, target, body: body, headers: headers))
    cookies.receive(response)
    return response
  }

  /// Sends a URL-encoded form (`RequestBody.form`).
  public mutating func send(
    _ method: HTTPMethod, _ target: String, form: [(String, String)], headers: [(String, String)] = []
  ) -> Response {
    send(method, target, body: .form(form), headers: headers)
  }

  /// Sends a JSON body (`RequestBody.json`).
  public mutating func send(
    _ method: HTTPMethod, _ target: String, json: String, headers: [(String, String)] = []
  ) -> Response {
    send(method, target, body: .json(json), headers: headers)
  }

  /// The request `send` sends: `headers`, and before them `Host`, the jar's cookies, `Origin` on
  /// an unsafe method and the body's `Content-Type`, each unless `headers` has that field already.
  public func request(
    _ method: HTTPMethod, _ target: String, body: RequestBody = .empty, headers: [(String, String)] = []
  ) -> Request {
    func given(_ name: String) -> Bool { headers.contains { $0.0.lowercased() == name } }
    var fields: [(String, String)] = []
    if !given("host") { fields.append(("Host", host)) }
    if !given("cookie"), let cookie = cookies.header { fields.append(("Cookie", cookie)) }
    if !given("origin"), let origin, !Self.isSafe(method) { fields.append(("Origin", origin)) }
    if !given("content-type"), let type = body.contentType { fields.append(("Content-Type", type)) }
    return Request(method: method, target: target, headers: fields + headers, body: body.bytes)
  }

  /// What the server answers to exactly `request`: nothing added to it, no cookies kept.
  public func respond(to request: Request) -> Response {
    let decision = dispatcher.decide(
      method: request.method, path: request.path, target: { request.target }, secure: secure,
      bodyLength: request.body.count, fields: Fields(headers: request.headers))
    switch decision {
    case .answer(let response, _, let headOnly, _):
      return headOnly ? Self.withoutContent(response) : response
    case .prebuilt(let prebuilt, _, let headOnly, _):
      return headOnly ? Self.withoutContent(prebuilt.response) : prebuilt.response
    case .refuse(let response, _, _):
      return request.method == .head ? Self.withoutContent(response) : response
    case .route(let route, let parameters, let headOnly, _):
      var request = request
      request.parameters = parameters
      request.client = peer
      var response: Response
      switch dispatcher.action(route, request) {
      case .answer(let answer): response = answer
      case .hold(let answer, let hold):
        // Reported as the loop would hold it, so a test sees the hold either path decides.
        response = answer
        response.holdFor = hold
      case .pool: response = route.respond(to: request)
      case .forward(let call): response = Response.forward(call)
      }
      if let call = response.forward { response = call.answer(upstream?(call) ?? .fault(.disabled)) }
      return headOnly ? Self.withoutContent(response) : response
    }
  }

  /// Whether the loop decides `request` (the engine's own answer, an inline route, or a pooled
  /// route's fast path) rather than handing it to the pool. Deciding may count metrics and spend
  /// rate-limit tokens as `respond` does; nothing is sent upstream.
  public func decidedOnTheLoop(_ request: Request) -> Bool {
    let decision = dispatcher.decide(
      method: request.method, path: request.path, target: { request.target }, secure: secure,
      bodyLength: request.body.count, fields: Fields(headers: request.headers))
    guard case .route(let route, let parameters, _, _) = decision else { return true }
    var request = request
    request.parameters = parameters
    request.client = peer
    if case .pool = dispatcher.action(route, request) { return false }
    return true
  }

  /// Whether `method` is safe (RFC 9110 §9.2.1): a browser sends no `Origin` with it.
  static func isSafe(_ method: HTTPMethod) -> Bool {
    method == .get || method == .head || method == .options || method == .trace
  }

  /// `response` as a HEAD request receives it (RFC 9110 §9.3.2): its fields, no content.
  static func withoutContent(_ response: Response) -> Response {
    var response = response
    response.body = .empty
    return response
  }

  /// A request's fields as the dispatcher reads a head.
  struct Fields: HeadFields {
    let headers: HTTPFields
    func value(_ name: StaticString) -> String? { headers.combined(name.description) }
  }
}
