/// How a route takes a request body, judged on the head before any of it is read: at most
/// `maxBytes` (nil: the listener's `max-body-bytes`), and, when `accepts` is set, only bodies
/// whose `Content-Type` it accepts. The refusals are the composition's own answers (the same a
/// handler would give), so the engine decides when, never what they say.
public struct BodyPolicy: Sendable {
  /// The most bytes of body the route reads; nil: the listener's limit.
  public let maxBytes: Int?
  /// Whether a body of this media type (nil: no `Content-Type`) is taken; nil: any.
  public let accepts: (@Sendable (MediaType?) -> Bool)?
  /// The answer to a body larger than `maxBytes` (413).
  public let tooLarge: Response?
  /// The answer to a media type `accepts` refuses (415).
  public let unsupported: Response?

  /// A body of at most `maxBytes` (nil: the listener's limit), of a type `accepts` takes (nil:
  /// any), refused with `tooLarge` and `unsupported`.
  public init(
    maxBytes: Int?, accepts: (@Sendable (MediaType?) -> Bool)? = nil, tooLarge: Response? = nil,
    unsupported: Response? = nil
  ) {
    self.maxBytes = maxBytes
    self.accepts = accepts
    self.tooLarge = tooLarge
    self.unsupported = unsupported
  }

  /// Whatever the listener's limit allows (routes that read no body, and forms that judge their
  /// own).
  public static let listenerLimit = BodyPolicy(maxBytes: nil)

  /// JSON in UTF-8 (RFC 8259 §8.1: a charset parameter may say so and nothing else), at most
  /// `maxBytes`.
  public static func json(maxBytes: Int, tooLarge: Response, unsupported: Response) -> BodyPolicy {
    BodyPolicy(
      maxBytes: maxBytes,
      accepts: { type in type.map { $0.is("application", "json") && $0.isUTF8 } ?? false },
      tooLarge: tooLarge, unsupported: unsupported)
  }
}

/// The fields of a request head, however the protocol carries them.
public protocol HeadFields {
  /// The value of the field `name` (lower case), repeated values joined with ", "; nil if absent.
  func value(_ name: StaticString) -> String?
}

/// A complete request's fields, as a head's.
struct RequestFields: HeadFields {
  let fields: HTTPFields

  func value(_ name: StaticString) -> String? { fields.combined(name.description) }
}

/// The one dispatcher, for every protocol: it takes a request head to what answers it, and a
/// routed request to how it runs. It applies the listener's policy (the HTTPS-only redirect and
/// the paths still answered in the clear), the route table (501, `OPTIONS *`, 404, 405) and the
/// route's body policy (413, 415) on the head alone, so those answers come before any body is
/// read and before `100 Continue`. `decide` is pure (no clock, no I/O); `action` runs an inline
/// route's handler or a pooled route's fast path on the calling thread.
public struct Dispatcher: Sendable {
  /// The route table.
  public var router: Router
  /// Where plain-HTTP requests are sent (`308` to this origin plus the same path and query), when
  /// set.
  public var httpsRedirect: String? = nil
  /// Paths answered in the clear even when `httpsRedirect` is set: the composition's health
  /// checks, for load balancers.
  public var clearPaths: Set<String> = []

  /// A dispatcher over `router`.
  public init(router: Router) {
    self.router = router
  }

  /// What the head alone decides.
  public enum Decision {
    /// Answer with `response` now (a route's prebuilt answer or what its head handler chose,
    /// `OPTIONS *`, a redirect); a body, if
    /// any, is not used.
    case answer(Response, CacheClass, headOnly: Bool, route: RouteIndex = 0)
    /// Answer with a response built at load (a fixed route's, or the one a head route chose), as a
    /// route of `CacheClass` serves it: one reference on the way to the writer, which has its bytes
    /// laid out already.
    case prebuilt(PrebuiltResponse, CacheClass, headOnly: Bool, route: RouteIndex)
    /// Refuse with `response` (always `private`); `closing`: close the connection after it
    /// rather than read past a body (413).
    case refuse(Response, closing: Bool, route: RouteIndex = 0)
    /// Read the body, at most `bodyLimit` bytes (nil: the listener's limit), then `action`.
    case route(Route, parameters: RouteParameters, headOnly: Bool, bodyLimit: Int?)
  }

  /// Decides a request from its head: `method` and `path` (still percent-encoded, no query),
  /// whether it came over TLS, the body length the head announces (0: none, nil: of unknown
  /// length) and its fields. `target` gives the path with its query, for a redirect.
  public func decide(
    method: HTTPMethod, path: String, target: () -> String, secure: Bool, bodyLength: Int?,
    fields: some HeadFields
  ) -> Decision {
    // RFC 9110 §9.1: a method this server does not know is not implemented, whatever the path.
    guard router.recognizes(method) else {
      return .refuse(
        router.errors.refusal(
          .notImplemented, path: path, accept: fields.value("accept"), "This method is not implemented here."),
        closing: false)
    }
    let headOnly = method == .head
    // RFC 9110 §9.3.7: OPTIONS * asks what the server as a whole supports.
    if method == .options && path == "*" {
      return .answer(
        Response(status: .noContent, headers: [("Allow", router.allowAll)]), .private, headOnly: false)
    }
    if !secure, let origin = httpsRedirect, !clearPaths.contains(path) {
      // HTTPS only: the same path and query on the configured origin, method and body kept (308).
      return .answer(
        Response(status: .permanentRedirect, headers: [("Location", origin + target())]), .private,
        headOnly: headOnly)
    }
    switch router.match(method, path) {
    case .found(let route, let parameters, let getForHead):
      switch route.handler {
      case .fixed(let prebuilt):
        return .prebuilt(
          prebuilt, route.cacheClass, headOnly: headOnly || getForHead, route: route.metricIndex)
      case .head(let answer):
        switch answer(fields) {
        case .prebuilt(let prebuilt):
          return .prebuilt(
            prebuilt, route.cacheClass, headOnly: headOnly || getForHead, route: route.metricIndex)
        case .made(let response):
          return .answer(
            response, route.cacheClass, headOnly: headOnly || getForHead, route: route.metricIndex)
        }
      case .dynamic:
        break
      }
      let policy = route.body
      if let accepts = policy.accepts, !accepts(fields.value("content-type").flatMap(MediaType.init)) {
        return .refuse(
          policy.unsupported
            ?? router.errors.refusal(
              .unsupportedMediaType, path: path, accept: fields.value("accept"),
              "This media type is not accepted here."), closing: false,
          route: route.metricIndex)
      }
      if let limit = policy.maxBytes, let length = bodyLength, length > limit {
        return .refuse(
          policy.tooLarge
            ?? router.errors.refusal(
              .contentTooLarge, path: path, accept: fields.value("accept"), "The request body is too large."),
          closing: true, route: route.metricIndex)
      }
      return .route(
        route, parameters: parameters, headOnly: headOnly || getForHead, bodyLimit: policy.maxBytes)
    case .methodNotAllowed(let allow):
      return .refuse(
        router.errors.refusal(
          .methodNotAllowed, path: path, accept: fields.value("accept"), code: "method_not_allowed",
          "This method is not allowed here.", headers: [("Allow", allow)]),
        closing: false)
    case .notFound:
      return .refuse(
        router.errors.refusal(
          .notFound, path: path, accept: fields.value("accept"), code: "not_found", "Not found."),
        closing: false)
    }
  }

  /// How a routed request runs once its body is read.
  public enum Action {
    /// Its answer, computed now on the calling thread (an inline route, or a fast path's answer).
    case answer(Response)
    /// A fast path's answer, to be sent only after `Duration` (a tarpit for refused floods).
    case hold(Response, Duration)
    /// Hand it to the route's pool; the answer comes back on the loop.
    case pool
    /// Send the call to its upstream from the loop; the call makes the answer.
    case forward(UpstreamCall)
  }

  /// Runs an inline route, or a pooled route's fast path; `.pool` when the pool must answer,
  /// `.forward` when the answer is an upstream's.
  public func action(_ route: Route, _ request: Request) -> Action {
    guard route.execution != .inline else {
      let response = route.respond(to: request)
      return response.forward.map { .forward($0) } ?? .answer(response)
    }
    guard var fast = route.fastPath?(request) else { return .pool }
    if let call = fast.forward { return .forward(call) }
    if let hold = fast.holdFor, hold > .zero {
      fast.holdFor = nil
      return .hold(fast, hold)
    }
    return .answer(fast)
  }
}
