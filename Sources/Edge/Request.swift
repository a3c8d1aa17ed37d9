/// A complete, validated HTTP/1.1 request: its head, its decoded body and its trailers.
public struct Request: Sendable {
  /// The method token.
  public let method: HTTPMethod
  /// The protocol version.
  public let version: HTTPVersion
  /// The request-target exactly as received.
  public let target: String
  /// The path part of the target (no query), as received (still percent-encoded).
  public let path: String
  /// The query part of the target without its `?`, or nil when there is none.
  public let query: String?
  /// The header fields.
  public let headers: HTTPFields
  /// The body after transfer decoding (empty when there is none).
  public let body: [UInt8]
  /// Trailer fields of a chunked body.
  public let trailers: HTTPFields
  /// Whether the connection stays open after the response (RFC 9112 §9.3).
  public let keepAlive: Bool
  /// Whether the client waits for `100 Continue` before sending the body (RFC 9110 §10.1.1).
  public let expectsContinue: Bool
  /// Parameters bound by the route pattern (`:name` segments and a trailing `*`).
  public var parameters: [String: String] = [:]
  /// The peer address, `host:port`; filled in by the connection.
  public var client: String = ""

  /// A request built directly, for in-process tests of handlers.
  public init(
    method: HTTPMethod, target: String, version: HTTPVersion = .http11,
    headers: [(String, String)] = [], body: [UInt8] = []
  ) {
    var bytes: [UInt8] = []
    var fields: [HTTPFields.Field] = []
    for (name, value) in headers {
      let nameStart = Int32(bytes.count)
      bytes += name.utf8
      let nameEnd = Int32(bytes.count)
      bytes += value.utf8
      fields.append(
        .init(nameStart: nameStart, nameEnd: nameEnd, valueStart: nameEnd, valueEnd: Int32(bytes.count)))
    }
    let split = Request.splitTarget(Array(target.utf8))
    self.init(
      method: method, version: version, target: target, path: split.path, query: split.query,
      headers: HTTPFields(bytes: bytes, fields: fields), body: body, trailers: .empty,
      keepAlive: true, expectsContinue: false)
  }

  init(
    method: HTTPMethod, version: HTTPVersion, target: String, path: String, query: String?,
    headers: HTTPFields, body: [UInt8], trailers: HTTPFields, keepAlive: Bool, expectsContinue: Bool
  ) {
    self.method = method
    self.version = version
    self.target = target
    self.path = path
    self.query = query
    self.headers = headers
    self.body = body
    self.trailers = trailers
    self.keepAlive = keepAlive
    self.expectsContinue = expectsContinue
  }

  /// The value of query parameter `name` (first occurrence, not percent-decoded), or nil.
  public func queryItem(_ name: String) -> String? {
    guard let query else { return nil }
    for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      if parts[0] == name { return parts.count > 1 ? String(parts[1]) : "" }
    }
    return nil
  }

  /// Path and query of an origin-form or absolute-form target (RFC 9112 §3.2).
  static func splitTarget<C: Collection<UInt8>>(_ target: C) -> (path: String, query: String?)
  where C.Index == Int {
    var start = target.startIndex
    let end = target.endIndex
    // absolute-form: skip "scheme://authority"
    if target.first != UInt8(ascii: "/") && target.first != UInt8(ascii: "*") {
      var i = start
      while i + 2 < end
        && !(target[i] == UInt8(ascii: ":") && target[i + 1] == UInt8(ascii: "/")
          && target[i + 2] == UInt8(ascii: "/"))
      {
        i += 1
      }
      i += 3
      while i < end && target[i] != UInt8(ascii: "/") && target[i] != UInt8(ascii: "?") { i += 1 }
      start = min(i, end)
    }
    var q = start
    while q < end && target[q] != UInt8(ascii: "?") { q += 1 }
    var path = String(decoding: target[start..<q], as: UTF8.self)
    if path.isEmpty { path = "/" }
    let query = q < end ? String(decoding: target[(q + 1)..<end], as: UTF8.self) : nil
    return (path, query)
  }
}
