/// A complete, validated HTTP/1.1 request: its head, its decoded body and its trailers.
public struct Request: Sendable {
  /// The method token.
  public let method: HTTPMethod
  /// The protocol version.
  public let version: HTTPVersion
  /// The request-target exactly as received.
  public var target: String {
    String(decoding: headers.bytes[Int(targetStart)..<Int(targetEnd)], as: UTF8.self)
  }
  /// How many bytes the request-target has (no string made).
  public var targetByteCount: Int { Int(targetEnd - targetStart) }
  /// The path part of the target (no query), as received (still percent-encoded).
  public let path: String
  /// The target in origin form (RFC 9112 §3.2.1): the path and query, without the scheme and
  /// authority an absolute-form target carries (which is never passed on to another server).
  public var originForm: String {
    guard let query else { return path }
    return path + "?" + query
  }
  /// The query part of the target without its `?`, or nil when there is none.
  public var query: String? {
    queryStart < 0 ? nil : String(decoding: headers.bytes[Int(queryStart)..<Int(targetEnd)], as: UTF8.self)
  }
  /// Where the target (and its query, -1 for none) lie in the head bytes; built into strings only
  /// when a handler asks.
  private let targetStart: Int32
  private let targetEnd: Int32
  private let queryStart: Int32
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
  public var parameters = RouteParameters()
  /// The peer address, `host:port`; filled in by the connection.
  public var client: String = ""

  /// A request built directly, for in-process tests of handlers.
  public init(
    method: HTTPMethod, target: String, version: HTTPVersion = .http11,
    headers: [(String, String)] = [], body: [UInt8] = []
  ) {
    var bytes = Array(target.utf8)
    var fields: [HTTPFields.Field] = []
    for (name, value) in headers {
      let nameStart = Int32(bytes.count)
      bytes += name.utf8
      let nameEnd = Int32(bytes.count)
      bytes += value.utf8
      fields.append(
        .init(nameStart: nameStart, nameEnd: nameEnd, valueStart: nameEnd, valueEnd: Int32(bytes.count)))
    }
    let targetLength = target.utf8.count
    let question = target.utf8.firstIndex(of: UInt8(ascii: "?")).map {
      target.utf8.distance(from: target.utf8.startIndex, to: $0)
    }
    self.init(
      method: method, version: version, targetRange: 0..<targetLength, queryStart: question.map { $0 + 1 },
      path: Request.splitTarget(Array(target.utf8)).path, headers: HTTPFields(bytes: bytes, fields: fields),
      body: body, trailers: .empty, keepAlive: true, expectsContinue: false)
  }

  init(
    method: HTTPMethod, version: HTTPVersion, targetRange: Range<Int>, queryStart: Int?, path: String,
    headers: HTTPFields, body: [UInt8], trailers: HTTPFields, keepAlive: Bool, expectsContinue: Bool
  ) {
    self.method = method
    self.version = version
    self.targetStart = Int32(targetRange.lowerBound)
    self.targetEnd = Int32(targetRange.upperBound)
    self.queryStart = Int32(queryStart ?? -1)
    self.path = path
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

  /// Path and query (offset of its first byte in `target`) of an origin-form or absolute-form
  /// target (RFC 9112 §3.2).
  static func splitTarget<C: Collection<UInt8>>(_ target: C) -> (path: String, queryStart: Int?)
  where C.Index == Int {
    let parts = targetParts(target)
    let path = String(decoding: target[parts.path], as: UTF8.self)
    return (path.isEmpty ? "/" : path, parts.queryStart)
  }

  /// Where `splitTarget`'s path lies in `target` (empty for "/"), and where its query starts
  /// (after the `?`, from the target's start), without making a string.
  static func targetParts<C: Collection<UInt8>>(_ target: C) -> (path: Range<Int>, queryStart: Int?)
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
    return (start..<q, q < end ? q + 1 - target.startIndex : nil)
  }
}
