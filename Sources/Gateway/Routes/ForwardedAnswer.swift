import ClientAPI
import Edge

/// How the API core's answer (or the fault) becomes the client's: runs on the event loop, so it
/// touches neither the store nor any key. The route's cache class (`private`) makes every answer
/// `Cache-Control: no-store`, whatever the core said.
struct ForwardedAnswer: Sendable {
  /// The name this gateway gives itself in `Proxy-Status` (RFC 9209 §2).
  static let proxyName = "band-edge"

  /// The core's response fields passed to the client (matched in any case, then written as here):
  /// what the representation needs and nothing about the core or the connection. Never
  /// `Set-Cookie`, never `Server` or `X-Powered-By`, never a hop-by-hop field.
  static let passed: [(name: FieldName, written: String)] = [
    "Content-Type", "Content-Language", "Content-Encoding", "Content-Disposition", "ETag", "Last-Modified",
    "Location", "Retry-After", "Vary", "Allow",
  ].map { (FieldName($0), $0) }

  /// Values the core sends on most answers, given as these constants rather than new strings.
  static let commonValues: [(bytes: [UInt8], text: String)] = [
    "application/json", "application/json; charset=utf-8", "application/problem+json",
  ].map { (Array($0.utf8), $0) }

  /// The request's ID (`X-Request-Id` on every answer).
  let requestID: String
  /// The deployment's origin: a `Location` elsewhere is dropped.
  let origin: String
  /// The audit event of a mutation, recorded when the core accepts it (2xx); nil for a read.
  let audit: AuditQueue.Event?
  let queue: AuditQueue

  /// The client's answer to `result`.
  func answer(_ result: UpstreamResult) -> Response {
    switch result {
    case .response(let upstream):
      if let audit, (200..<300).contains(upstream.status) { queue.record(audit) }
      return Self.response(upstream, requestID: requestID, origin: origin)
    case .fault(let fault):
      return Self.fault(fault, requestID: requestID)
    }
  }

  /// The core's status and body with the fields `passed` allows (after the core's own `Connection`
  /// is applied: a field it names is hop-by-hop, RFC 9110 §7.6.1) and the request ID.
  static func response(_ upstream: UpstreamResponse, requestID: String, origin: String) -> Response {
    var response = Response(
      status: Status(upstream.status, upstream.reason.isEmpty ? "Status" : upstream.reason),
      body: upstream.body.isEmpty ? .empty : .bytes(upstream.body))
    upstream.fields.forEachEndToEnd { name, value in
      guard let passed = passed.first(where: { $0.name.matches(name) }),
        value.allSatisfy(UpstreamHead.writable)
      else { return }
      let text =
        commonValues.first { $0.bytes.count == value.count && $0.bytes.elementsEqual(value) }?.text
        ?? String(decoding: value, as: UTF8.self)
      if passed.written == "Location", !sameOrigin(text, origin: origin) { return }
      // A name of `passed`; a value of visible ASCII, space and tab (checked above).
      response.add(checked: passed.written, text)
    }
    // base64url (`GatewayServices.requestID`).
    response.add(checked: "X-Request-Id", requestID)
    return response
  }

  /// The JSON error of a fault: its status, `Retry-After` when it has one, `Proxy-Status`.
  static func fault(_ fault: UpstreamFault, requestID: String?) -> Response {
    var headers: [(name: String, value: String)] = []
    if let seconds = fault.retryAfterSeconds { headers.append(("Retry-After", String(seconds))) }
    headers.append(("Proxy-Status", fault.proxyStatus(proxyName: proxyName)))
    if let requestID { headers.append(("X-Request-Id", requestID)) }
    let (code, message) =
      switch fault.status.code {
      case 504: ("upstream_timeout", "The service did not answer in time. Please try again.")
      case 503: ("upstream_unavailable", "This service is not available just now. Please try again later.")
      default: ("bad_gateway", "The service gave no usable answer. Please try again.")
      }
    return APIError.response(fault.status, code, message, headers: headers)
  }

  /// Whether `location` stays on `origin`: a path (`/x`, not `//host`), or an absolute URL on the
  /// origin itself. Anything else would let the core send clients elsewhere through band-edge.
  static func sameOrigin(_ location: String, origin: String) -> Bool {
    if location.hasPrefix("/") { return !location.hasPrefix("//") && !location.hasPrefix("/\\") }
    return location == origin || location.hasPrefix(origin + "/") || location.hasPrefix(origin + "?")
  }
}
