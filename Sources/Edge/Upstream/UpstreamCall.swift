/// The answer an upstream gave a forwarded request, or why there is none.
public enum UpstreamResult: Sendable {
  /// A whole, well-formed response (its status may be anything, 5xx included).
  case response(UpstreamResponse)
  /// No usable response.
  case fault(UpstreamFault)
}

/// A request a route forwards: the upstream it goes to, the bytes that upstream receives, and how
/// its answer (or the fault) becomes the client's. A handler or a fast path returns it inside a
/// `Response` (`Response.forward`); the connection's loop sends it on its own connections to the
/// upstream, so no thread waits on an upstream socket.
///
/// A class: it rides in a `Response` from the handler to the loop, and each copy of a struct this
/// size retained and released every one of its references.
public final class UpstreamCall: Sendable {
  /// The upstream's configured name: the loop sends the request through its pool for that name.
  public let upstream: String
  /// The request's method: a HEAD's answer has no body, and only GET and HEAD may be sent again
  /// once written (RFC 9110 §9.2.2).
  public let method: HTTPMethod
  /// The request head as the upstream receives it (request line, fields, empty line).
  public let head: [UInt8]
  /// The request body, whole.
  public let body: [UInt8]
  /// The client's answer from the upstream's: runs on the loop, so it must be quick (no store, no
  /// cryptography, no waiting).
  public let answer: @Sendable (UpstreamResult) -> Response

  /// A call to `upstream` with `head` and `body`; `answer` turns the result into the client's answer.
  public init(
    upstream: String, method: HTTPMethod, head: [UInt8], body: [UInt8],
    answer: @escaping @Sendable (UpstreamResult) -> Response
  ) {
    self.upstream = upstream
    self.method = method
    self.head = head
    self.body = body
    self.answer = answer
  }
}
