import Edge

/// The head of the request the API core receives: one HTTP/1.1 head written from the parsed
/// request, never the client's bytes. Of the client's fields only an allow-list goes on, after
/// the connection-specific ones are removed (RFC 9110 §7.6.1, the client's `Connection` applied
/// first); the gateway then adds its own, which no client field can remove or replace.
public struct UpstreamHead: Sendable {
  /// Client fields passed on: content negotiation, conditionals, the body's type, the idempotency
  /// key and who the client is. Identity never: no `Cookie`, no `Authorization`.
  public static let allowed: [FieldName] = [
    "accept", "accept-encoding", "accept-language", "content-type", "if-match", "if-none-match",
    "if-modified-since", "if-unmodified-since", "if-range", "idempotency-key", "user-agent",
    "band-licence-client",
  ]

  /// Fields only the gateway writes; a route cannot allow one of these through.
  public static let gatewayOwned: [FieldName] = [
    "host", "content-length", "via", "forwarded", "x-forwarded-for", "x-forwarded-proto",
    "x-forwarded-host", "x-request-id", "band-licence-assertion", "cookie", "authorization",
  ]

  /// What every request to one upstream shares.
  public struct Settings: Sendable {
    /// `Host` for the upstream: its `host:port`, or a name for a Unix-domain socket.
    public let authority: String
    /// The scheme and host clients used (for `Forwarded` and `X-Forwarded-Proto`).
    public let publicScheme: String
    public let publicHost: String
    /// Further client fields this route passes on, beyond `allowed`.
    public let alsoAllowed: [FieldName]
    /// `Host: <authority>`, its line's bytes; nil when the authority cannot be written into a head.
    let hostLine: [UInt8]?
    /// What follows the client in `Forwarded`: `;proto=…;host="…"`.
    let forwardedTail: [UInt8]

    /// Settings for an upstream reached at `authority`, serving clients of `publicScheme://publicHost`.
    public init(authority: String, publicScheme: String, publicHost: String, alsoAllowed: [FieldName] = []) {
      self.authority = authority
      self.publicScheme = publicScheme
      self.publicHost = publicHost
      self.alsoAllowed = alsoAllowed.filter { !UpstreamHead.gatewayOwned.contains($0) }
      hostLine = UpstreamHead.writable(authority) ? Array("Host: \(authority)\r\n".utf8) : nil
      forwardedTail = Array(";proto=\(publicScheme);host=\"\(publicHost)\"".utf8)
    }
  }

  /// The head's bytes: request line, fields, the empty line.
  public let bytes: [UInt8]
  /// The request line's method and target.
  public let method: HTTPMethod
  public let target: String

  /// The head for `request` (its target in origin form: path and query as received), or nil when something in
  /// it cannot be written into an HTTP/1.1 head (a control character or a space in the target or a
  /// value): such a request is refused, never translated. Written straight from the received bytes:
  /// this runs for every forwarded request.
  /// - Parameters:
  ///   - client: the client's address as the trusted-proxy settings resolve it.
  ///   - via: the `Via` received from a trusted proxy, to be extended; nil otherwise.
  ///   - requestID: this request's ID, also in the access log and the answer (base64url: written as it is).
  ///   - assertion: the signed identity assertion (a compact JWS: written as it is).
  public init?(
    _ request: Request, settings: Settings, client: String, via: String?, requestID: String,
    assertion: String
  ) {
    var target = request.originForm
    guard request.targetByteCount > 0, target.withUTF8({ $0.allSatisfy { $0 > 0x20 && $0 < 0x7F } }),
      let hostLine = settings.hostLine, Self.writable(client), via.map(Self.writable) ?? true
    else { return nil }
    assert(Self.writable(requestID) && Self.writable(assertion), "the gateway's own values are base64url")
    // One buffer, sized once to a bound of everything below (fixed text under 256 bytes; each
    // passed field is its name and value and 4 bytes), each piece copied once.
    let bound =
      256 + request.method.rawValue.utf8.count + target.utf8.count + hostLine.count
      + request.headers.byteCount
      + 4 * request.headers.count + (via?.utf8.count ?? 0) + 2 * client.utf8.count
      + settings.forwardedTail.count
      + settings.publicScheme.utf8.count + requestID.utf8.count + assertion.utf8.count
    var writable = true
    let written = [UInt8](unsafeUninitializedCapacity: bound) { buffer, initialized in
      var out = BoundedWriter(buffer)
      out.put(utf8: request.method.rawValue)
      out.put(static: " ")
      out.put(utf8: target)
      out.put(static: " HTTP/1.1\r\n")
      out.put(hostLine[...])
      request.headers.forEachEndToEnd { name, value in
        guard Self.allowed.contains(matching: name) || settings.alsoAllowed.contains(matching: name) else {
          return
        }
        guard value.allSatisfy(Self.writable) else { return writable = false }
        out.put(name)
        out.put(static: ": ")
        out.put(value)
        out.put(static: "\r\n")
      }
      let verb = request.method
      if verb == .post || verb == .put || verb == .patch || !request.body.isEmpty {
        out.put(static: "Content-Length: ")
        out.put(decimal: request.body.count)
        out.put(static: "\r\n")
      }
      out.put(static: "Via: ")
      if let via {
        out.put(utf8: via)
        out.put(static: ", ")
      }
      out.put(static: "1.1 band-edge\r\nForwarded: ")
      Self.forwarded(client: client, settings: settings, to: &out)
      out.put(static: "\r\nX-Forwarded-For: ")
      out.put(utf8: client)
      out.put(static: "\r\nX-Forwarded-Proto: ")
      out.put(utf8: settings.publicScheme)
      out.put(static: "\r\nX-Request-Id: ")
      out.put(utf8: requestID)
      out.put(static: "\r\nBand-Licence-Assertion: ")
      out.put(utf8: assertion)
      out.put(static: "\r\n\r\n")
      initialized = out.count
    }
    guard writable else { return nil }
    bytes = written
    method = request.method
    self.target = target
  }

  /// The fields, in the order written (read back from `bytes`).
  public var fields: [(name: String, value: String)] {
    String(decoding: bytes, as: UTF8.self).split(separator: "\r\n").dropFirst().compactMap { line in
      let parts = line.split(separator: ":", maxSplits: 1)
      guard parts.count == 2 else { return nil }
      return (String(parts[0]), String(parts[1].drop { $0 == " " }))
    }
  }

  /// RFC 7239 §4: `for` (an IPv6 address quoted in brackets), `proto` and `host`.
  static func forwarded(client: String, settings: Settings) -> String {
    let bound = 16 + client.utf8.count + settings.forwardedTail.count
    let bytes = [UInt8](unsafeUninitializedCapacity: bound) { buffer, initialized in
      var out = BoundedWriter(buffer)
      forwarded(client: client, settings: settings, to: &out)
      initialized = out.count
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  private static func forwarded(client: String, settings: Settings, to out: inout BoundedWriter) {
    out.put(static: "for=")
    let quoted = client.utf8.contains(UInt8(ascii: ":"))
    if quoted { out.put(static: "\"[") }
    out.put(utf8: client)
    if quoted { out.put(static: "]\"") }
    out.put(settings.forwardedTail[...])
  }

  /// A field value HTTP/1.1 can carry as is: visible ASCII, space and tab, nothing else (RFC 9110
  /// §5.5 allows obs-text too, but nothing the gateway forwards needs it).
  static func writable(_ value: String) -> Bool {
    var value = value
    return value.withUTF8 { $0.allSatisfy(writable) }
  }

  @inline(__always) static func writable(_ byte: UInt8) -> Bool {
    (byte >= 0x20 && byte < 0x7F) || byte == 0x09
  }
}
