import Edge

/// The head of the request the API core receives: one HTTP/1.1 head written from the parsed
/// request, never the client's bytes. Of the client's fields only an allow-list goes on, after
/// the connection-specific ones are removed (RFC 9110 §7.6.1, the client's `Connection` applied
/// first); the gateway then adds its own, which no client field can remove or replace.
public struct UpstreamHead: Sendable {
  /// Client fields passed on (lower case): content negotiation, conditionals, the body's type, the
  /// idempotency key and who the client is. Identity never: no `Cookie`, no `Authorization`.
  public static let allowed: Set<String> = [
    "accept", "accept-encoding", "accept-language", "content-type", "if-match", "if-none-match",
    "if-modified-since", "if-unmodified-since", "if-range", "idempotency-key", "user-agent",
    "band-licence-client",
  ]

  /// Fields only the gateway writes (lower case); a route cannot allow one of these through.
  public static let gatewayOwned: Set<String> = [
    "host", "content-length", "via", "forwarded", "x-forwarded-for", "x-forwarded-proto",
    "x-forwarded-host", "x-request-id", "band-licence-assertion", "cookie", "authorization",
  ]

  /// What every request to one upstream shares.
  public struct Settings: Sendable {
    /// `Host` for the upstream: its `host:port`, or a name for a Unix-domain socket.
    public var authority: String
    /// The scheme and host clients used (for `Forwarded` and `X-Forwarded-Proto`).
    public var publicScheme: String
    public var publicHost: String
    /// Further client fields this route passes on (lower case), beyond `allowed`.
    public var alsoAllowed: Set<String>

    /// Settings for an upstream reached at `authority`, serving clients of `publicScheme://publicHost`.
    public init(authority: String, publicScheme: String, publicHost: String, alsoAllowed: Set<String> = []) {
      self.authority = authority
      self.publicScheme = publicScheme
      self.publicHost = publicHost
      self.alsoAllowed = alsoAllowed.subtracting(UpstreamHead.gatewayOwned)
    }
  }

  /// The fields, in the order written.
  public let fields: [(name: String, value: String)]
  /// The request line's method and target.
  public let method: HTTPMethod
  public let target: String

  /// The head for `request` (its target in origin form: path and query as received), or nil when something in
  /// it cannot be written into an HTTP/1.1 head (a control character or a space in the target or a
  /// value): such a request is refused, never translated.
  /// - Parameters:
  ///   - client: the client's address as the trusted-proxy settings resolve it.
  ///   - via: the `Via` received from a trusted proxy, to be extended; nil otherwise.
  ///   - requestID: this request's ID, also in the access log and the answer.
  ///   - assertion: the signed identity assertion.
  public init?(
    _ request: Request, settings: Settings, client: String, via: String?, requestID: String,
    assertion: String
  ) {
    let target = request.originForm
    guard !request.target.isEmpty, target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
    var fields: [(name: String, value: String)] = [("Host", settings.authority)]
    for field in HopByHop.removed(from: request.headers.pairs) {
      let name = field.name.lowercased()
      guard Self.allowed.contains(name) || settings.alsoAllowed.contains(name) else { continue }
      guard Self.writable(field.value) else { return nil }
      fields.append(field)
    }
    if [HTTPMethod.post, .put, .patch].contains(request.method) || !request.body.isEmpty {
      fields.append(("Content-Length", String(request.body.count)))
    }
    let hop = "1.1 band-edge"
    fields.append(("Via", via.map { $0 + ", " + hop } ?? hop))
    fields.append(("Forwarded", Self.forwarded(client: client, settings: settings)))
    fields.append(("X-Forwarded-For", client))
    fields.append(("X-Forwarded-Proto", settings.publicScheme))
    fields.append(("X-Request-Id", requestID))
    fields.append(("Band-Licence-Assertion", assertion))
    guard [client, requestID, assertion, settings.authority].allSatisfy(Self.writable) else { return nil }
    self.fields = fields
    self.method = request.method
    self.target = target
  }

  /// The head's bytes: request line, fields, the empty line.
  public var bytes: [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(256 + fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
    out += method.rawValue.utf8
    out.append(0x20)
    out += target.utf8
    out += " HTTP/1.1\r\n".utf8
    for field in fields {
      out += field.name.utf8
      out += ": ".utf8
      out += field.value.utf8
      out += "\r\n".utf8
    }
    out += "\r\n".utf8
    return out
  }

  /// RFC 7239 §4: `for` (an IPv6 address quoted in brackets), `proto` and `host`.
  static func forwarded(client: String, settings: Settings) -> String {
    let node = client.contains(":") ? "\"[\(client)]\"" : client
    return "for=\(node);proto=\(settings.publicScheme);host=\"\(settings.publicHost)\""
  }

  /// A field value HTTP/1.1 can carry as is: visible ASCII, space and tab, nothing else (RFC 9110
  /// §5.5 allows obs-text too, but nothing the gateway forwards needs it).
  static func writable(_ value: String) -> Bool {
    value.utf8.allSatisfy { ($0 >= 0x20 && $0 < 0x7F) || $0 == 0x09 }
  }
}
