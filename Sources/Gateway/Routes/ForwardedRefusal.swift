import Accounts
import ClientAPI
import Deployment
import Edge

/// The gateway's own refusals, before anything goes upstream: each the client API's JSON error
/// (`{"error","message"}`), `no-store` by the route's cache class. Authentication's are the client
/// API's own (`AuthFailure.response`), and a store failure its `storeFailure`.
enum ForwardedRefusal: Error {
  /// Not a live member of the path's school (or no such school): 404, as for the school endpoints.
  case notMember
  /// A member below `least`, the route's role for the method: 403.
  case forbidden(Role)

  var response: Response {
    switch self {
    case .notMember:
      APIError.response(.notFound, "not_found", "You are not a member of a school with that ID.")
    case .forbidden(let least):
      APIError.response(
        .forbidden, "forbidden", "This needs the \(least.rawValue) role or above in this school.",
        extra: ["minimumRole": .string(least.rawValue)])
    }
  }

  /// How a route takes a body, judged on the head before any of it is read: POST, PUT and PATCH
  /// a body of at most `maxBodyBytes` of one of `mediaTypes` (413, 415); the others any the
  /// listener allows (they forward none but an empty one's length).
  static func bodyPolicy(_ route: ForwardRoute, method: HTTPMethod) -> BodyPolicy {
    guard ForwardRoute.bodyMethods.contains(method) else { return .listenerLimit }
    let types = route.mediaTypes
    return BodyPolicy(
      maxBytes: route.maxBodyBytes,
      accepts: { type in type.map { type in types.contains { accepted(type, $0) } } ?? false },
      tooLarge: tooLarge,
      unsupported: APIError.response(
        .unsupportedMediaType, "unsupported_media_type",
        "Send the body as " + types.joined(separator: " or ") + "."))
  }

  /// Whether `type` is `essence` (`type/subtype`, lower case); a JSON body must also be UTF-8.
  static func accepted(_ type: MediaType, _ essence: String) -> Bool {
    let parts = essence.split(separator: "/", maxSplits: 1).map(String.init)
    guard parts.count == 2, type.is(parts[0], parts[1]) else { return false }
    return !(parts[1] == "json" || parts[1].hasSuffix("+json")) || type.isUTF8
  }

  static let tooLarge = APIError.response(
    .contentTooLarge, "request_too_large", "The request body is too large.")

  /// The 413 the dispatcher gives on the head, held again here for a body the engine could not
  /// judge there (an HTTP/2 body of unknown length arriving with its head).
  static func pastLimit(_ request: Request, _ route: ForwardRoute) -> Response? {
    guard ForwardRoute.bodyMethods.contains(request.method), request.body.count > route.maxBodyBytes else {
      return nil
    }
    return tooLarge
  }

  /// 426 naming the route's `since` for a native app older than it (a web session has no app
  /// version: the web app is always current).
  static func since(_ route: ForwardRoute, _ caller: Caller) -> Response? {
    guard let since = route.since, caller.channel == .native else { return nil }
    let version = caller.appVersion.flatMap { $0.split(separator: "/", maxSplits: 1).last.map(String.init) }
    if let version, ClientStore.compareVersions(version, since) >= 0 { return nil }
    return AuthFailure.appVersionUnsupported(minimum: since).response
  }

  /// 429 with `Retry-After`, held `hold` before it is sent (`rate-limited-hold`, as the client
  /// API holds its own): a flood that does not wait gets one answer per connection per hold.
  static func rateLimited(_ wait: Int, hold: Duration) -> Response {
    var response = APIError.response(
      .tooManyRequests, "rate_limited", "Too many requests. Wait a moment, then try again.",
      headers: [("Retry-After", String(wait))])
    if hold > .zero { response.holdFor = hold }
    return response
  }

  /// 400 for a path an API core could read as another path than the one band-edge checked: a dot
  /// segment (RFC 3986 §5.2.4), also percent-encoded (`%2e`); an encoded slash or backslash
  /// (`%2f`, `%5c`) or a backslash; an empty segment (`//`) before the last. band-edge matches the
  /// path as received and binds the school in it; a core that normalised `…/sch_a/files/../../sch_b`
  /// would serve another school under that check.
  static func ambiguousPath(_ request: Request) -> Response? {
    // Byte by byte (this runs on the loop for every forwarded request): no segment may be `.` or
    // `..` (each dot also as `%2e`, any case), hold `%2f`, `%5c` or `\\`, or be empty before the
    // last.
    var text = request.path
    return text.withUTF8 { whole in
      ambiguous(UnsafeBufferPointer(rebasing: whole.dropFirst())) ? invalidPath : nil
    }
  }

  /// Whether `path` (without its first slash) holds what `ambiguousPath` refuses.
  private static func ambiguous(_ path: UnsafeBufferPointer<UInt8>) -> Bool {
    var start = 0
    while start <= path.count {
      let end = path[start...].firstIndex(of: UInt8(ascii: "/")) ?? path.count
      if end == start && end < path.count { return true }
      var dots = 0
      var onlyDots = true
      var i = start
      while i < end {
        let byte = path[i]
        if byte == UInt8(ascii: "\\") { return true }
        if byte == UInt8(ascii: "%"), i + 2 < end {
          let (high, low) = (path[i + 1], path[i + 2] | 0x20)
          if high == UInt8(ascii: "2"), low == UInt8(ascii: "f") || low == UInt8(ascii: "e") {
            if low == UInt8(ascii: "f") { return true }
            dots += 1
            i += 3
            continue
          }
          if high == UInt8(ascii: "5"), low == UInt8(ascii: "c") { return true }
        }
        if byte == UInt8(ascii: ".") { dots += 1 } else { onlyDots = false }
        i += 1
      }
      if onlyDots && (dots == 1 || dots == 2) { return true }
      start = end + 1
    }
    return false
  }

  private static let invalidPath = APIError.response(
    .badRequest, "invalid_path",
    "The path has a dot segment, an encoded slash or an empty segment; send it as the API names it.")

  /// The client's fields band-edge checks and then forwards as they are: a client's `Connection`
  /// naming one (to have it dropped as hop-by-hop after the check) is refused, never obeyed after the
  /// fact. (`Host` and `Content-Length` the gateway writes itself; naming them changes nothing.)
  static let checkedFields: [FieldName] = ["content-type", "idempotency-key", "band-licence-client"]

  /// 400 when `Connection` names a field band-edge checks (`checkedFields`).
  static func connectionNamesChecked(_ request: Request) -> Response? {
    guard request.headers.connectionNominates(anyOf: checkedFields) else { return nil }
    return APIError.response(
      .badRequest, "invalid_request", "The Connection field names a field this request needs end to end.")
  }

  /// 400: a mutation without exactly one well-formed `Idempotency-Key`.
  static let idempotencyKey = APIError.response(
    .badRequest, "idempotency_key_required",
    "Send one Idempotency-Key header (1 to 255 visible ASCII characters) with every change.")

  /// 400: a request whose target or fields cannot be written into an HTTP/1.1 head as they are.
  static let unwritable = APIError.response(
    .badRequest, "invalid_request", "The request holds characters that cannot be forwarded.")
}
