/// A whole response read from an upstream server over HTTP/1.1.
///
/// Trailer fields of a chunked body are checked like header fields, then dropped: nothing here
/// forwards them, and no field of the head is changed by them (RFC 9110 §6.5.1).
public struct UpstreamResponse: Sendable {
  /// The status code, 200...599 (interim responses are reported apart).
  public let status: Int
  /// The reason phrase, empty when the status line has none.
  public let reason: String
  /// The version of the status line: 1.0, or 1.1 for any 1.x with x >= 1.
  public let version: HTTPVersion
  /// The header fields, as received.
  public let fields: HTTPFields
  /// The body, its transfer coding removed: empty for a response that has none.
  public let body: [UInt8]
  /// Whether the connection may carry another request: false for HTTP/1.0, for
  /// `Connection: close` and for a body delimited by the connection's close.
  public let keepAlive: Bool
}
