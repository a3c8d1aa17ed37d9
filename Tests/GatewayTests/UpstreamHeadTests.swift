import Edge
import Testing

@testable import Gateway

/// What the API core receives: the spoofing and hop-by-hop shapes other gateways let through.
@Suite struct UpstreamHeadTests {
  static let settings = UpstreamHead.Settings(
    authority: "127.0.0.1:8081", publicScheme: "https", publicHost: "band.example.test")

  /// The head for a request with `headers` (GET unless `method` says otherwise).
  static func head(
    _ headers: [(String, String)], method: HTTPMethod = .get,
    target: String = "/api/client/v1/schools/s1/students",
    body: [UInt8] = [], settings: UpstreamHead.Settings = settings
  ) -> UpstreamHead? {
    UpstreamHead(
      Request(method: method, target: target, headers: headers, body: body), settings: settings,
      client: "203.0.113.7", via: nil, requestID: "req-1", assertion: "a.b.c")
  }

  /// The values of `name` (any case) in `head`.
  static func values(_ head: UpstreamHead, _ name: String) -> [String] {
    head.fields.filter { $0.name.lowercased() == name }.map(\.value)
  }

  /// The gateway's own fields, each exactly once, whatever the client sent.
  static let owned: [(String, String)] = [
    ("host", "127.0.0.1:8081"), ("via", "1.1 band-edge"),
    ("forwarded", "for=203.0.113.7;proto=https;host=\"band.example.test\""),
    ("x-forwarded-for", "203.0.113.7"),
    ("x-forwarded-proto", "https"), ("x-request-id", "req-1"), ("band-licence-assertion", "a.b.c"),
  ]

  @Test(
    "a client's copy of a field the gateway writes never arrives, in any spelling",
    arguments: [
      [("Band-Licence-Assertion", "forged")],
      [("band-licence-assertion", "forged"), ("BAND-LICENCE-ASSERTION", "forged2")],
      [("band_licence_assertion", "forged")],
      [("X-Forwarded-For", "10.0.0.1"), ("x-forwarded-for", "10.0.0.2")],
      [("Forwarded", "for=10.0.0.1;host=evil.test")],
      [("Via", "1.1 evil")],
      [("X-Request-Id", "chosen")],
      [("Host", "evil.test")],
      [("X-Forwarded-Host", "evil.test"), ("X-Forwarded-Proto", "http")],
      // Caddy GHSA-7r4p-vjf4-gxv4 and oauth2-proxy's X-Forwarded-Uri trust: identity and route
      // headers a client names itself.
      [
        ("X-Forwarded-User", "admin"), ("X-Forwarded-Email", "a@example.test"), ("X-Forwarded-Uri", "/admin"),
      ],
      // Envoy CVE-2023-27487: a proxy-internal header a client sends.
      [("x-envoy-original-path", "/admin"), ("X-Original-URL", "/admin"), ("X-Rewrite-URL", "/admin")],
    ])
  func spoofedCopies(headers: [(String, String)]) throws {
    let head = try #require(Self.head(headers))
    for (name, value) in Self.owned { #expect(Self.values(head, name) == [value], "\(name)") }
    let names = Set(head.fields.map { $0.name.lowercased() })
    #expect(!names.contains("band_licence_assertion") && !names.contains("x-forwarded-host"))
    #expect(
      !names.contains {
        $0.hasPrefix("x-forwarded-") && !["x-forwarded-for", "x-forwarded-proto"].contains($0)
      })
    #expect(!names.contains("x-envoy-original-path") && !names.contains("x-original-url"))
  }

  @Test(
    "Connection cannot make the gateway drop its own fields (Traefik CVE-2021-32813, CVE-2024-45410)",
    arguments: [
      "Band-Licence-Assertion, X-Forwarded-For, Via", "x-request-id", "Forwarded, Host",
      "close, X-Forwarded-Proto",
    ])
  func connectionNominations(connection: String) throws {
    let head = try #require(Self.head([("Connection", connection), ("Accept", "application/json")]))
    for (name, value) in Self.owned { #expect(Self.values(head, name) == [value], "\(name)") }
    #expect(Self.values(head, "connection").isEmpty)
  }

  @Test("a field the client nominates in Connection is not passed on, even when allowed")
  func nominatedAllowedField() throws {
    let head = try #require(
      Self.head([
        ("Connection", "Accept-Language"), ("Accept-Language", "cy"), ("Accept", "application/json"),
      ]))
    #expect(Self.values(head, "accept-language").isEmpty)
    #expect(Self.values(head, "accept") == ["application/json"])
  }

  @Test(
    "connection-specific fields never reach the core: Upgrade (h2c tunnelling), TE, Keep-Alive, Proxy-Connection",
    arguments: [
      ("Upgrade", "h2c"), ("HTTP2-Settings", "AAMAAABkAAQAAP__"), ("TE", "trailers"),
      ("Keep-Alive", "timeout=5"),
      ("Proxy-Connection", "keep-alive"), ("Transfer-Encoding", "chunked"), ("Trailer", "X-Checksum"),
      ("Proxy-Authorization", "Basic eDp5"),
    ])
  func connectionSpecific(field: (String, String)) throws {
    let head = try #require(Self.head([field, ("Connection", "Upgrade, HTTP2-Settings")]))
    #expect(Self.values(head, field.0.lowercased()).isEmpty)
  }

  @Test("the client's credentials stay at the edge: no Cookie, no Authorization")
  func noCredentials() throws {
    let head = try #require(
      Self.head([("Cookie", "band_session=secret"), ("Authorization", "Bearer secret"), ("Accept", "*/*")]))
    let text = String(decoding: head.bytes, as: UTF8.self)
    #expect(!text.contains("secret"))
    #expect(Self.values(head, "cookie").isEmpty && Self.values(head, "authorization").isEmpty)
  }

  @Test("the allow-list passes on negotiation, conditionals, the body's type, the key and the client's name")
  func allowList() throws {
    let sent: [(String, String)] = [
      ("Accept", "application/json"), ("Accept-Language", "en-GB"), ("If-None-Match", "\"v1\""),
      ("Content-Type", "application/json"), ("Idempotency-Key", "k-123"), ("User-Agent", "BandLicence/1.4"),
      ("Band-Licence-Client", "ios/1.4.0"), ("X-Custom", "dropped"),
    ]
    let head = try #require(Self.head(sent, method: .post, body: Array("{}".utf8)))
    for (name, value) in sent.dropLast() {
      #expect(Self.values(head, name.lowercased()) == [value], "\(name)")
    }
    #expect(Self.values(head, "x-custom").isEmpty)
    #expect(Self.values(head, "content-length") == ["2"])
  }

  @Test("a route may allow more client fields, never one the gateway writes")
  func routeAllowance() throws {
    let settings = UpstreamHead.Settings(
      authority: "core", publicScheme: "https", publicHost: "band.example.test",
      alsoAllowed: ["x-timezone", "band-licence-assertion", "cookie"])
    let head = try #require(
      Self.head(
        [("X-Timezone", "Europe/London"), ("Band-Licence-Assertion", "forged"), ("Cookie", "a=b")],
        settings: settings))
    #expect(Self.values(head, "x-timezone") == ["Europe/London"])
    #expect(Self.values(head, "band-licence-assertion") == ["a.b.c"])
    #expect(Self.values(head, "cookie").isEmpty)
  }

  @Test(
    "the true Content-Length: always for POST, PUT and PATCH, otherwise only with a body; the client's never",
    arguments: [
      (HTTPMethod.post, 0, "0"), (.put, 3, "3"), (.patch, 1, "1"), (.delete, 0, nil), (.get, 0, nil),
      (.delete, 2, "2"),
    ] as [(HTTPMethod, Int, String?)])
  func contentLength(method: HTTPMethod, bodyBytes: Int, expected: String?) throws {
    let head = try #require(
      Self.head([("Content-Length", "999")], method: method, body: Array(repeating: 0x61, count: bodyBytes)))
    #expect(Self.values(head, "content-length") == (expected.map { [$0] } ?? []))
  }

  @Test("the head's bytes: one request line, the fields, an empty line; nothing of the client's framing")
  func bytes() throws {
    let head = try #require(
      Self.head(
        [("Accept", "application/json")], method: .post, target: "/api/client/v1/schools/s1/attendance?day=2")
    )
    let text = String(decoding: head.bytes, as: UTF8.self)
    #expect(
      text.hasPrefix("POST /api/client/v1/schools/s1/attendance?day=2 HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n"))
    #expect(text.hasSuffix("\r\nBand-Licence-Assertion: a.b.c\r\n\r\n"))
    #expect(text.firstRange(of: "\r\n\r\n")?.upperBound == text.endIndex)
  }

  @Test(
    "what cannot be written into an HTTP/1.1 head is refused, not translated",
    arguments: [
      [("Accept", "a\r\nX-Injected: 1")], [("Accept", "a\nb")], [("User-Agent", "a\u{0}b")],
      [("Accept", "caf\u{e9}")],
    ])
  func unwritable(headers: [(String, String)]) {
    #expect(Self.head(headers) == nil)
  }

  @Test("a target with a space or a control character is refused (request-line injection)")
  func unwritableTarget() {
    #expect(Self.head([], target: "/api/client/v1/schools/s1/students HTTP/1.1\r\nX: y") == nil)
    #expect(Self.head([], target: "") == nil)
  }

  @Test("an IPv6 client is quoted in Forwarded (RFC 7239 §6)")
  func forwardedIPv6() {
    #expect(
      UpstreamHead.forwarded(client: "2001:db8::7", settings: Self.settings)
        == "for=\"[2001:db8::7]\";proto=https;host=\"band.example.test\"")
  }

  @Test("the head is written whole however many fields, and however long its parts, it carries")
  func largeHead() throws {
    let fields =
      (0..<300).map { ("Accept", "x\($0)") } + [
        ("A", ""), ("Accept-Language", String(repeating: "c", count: 4000)),
      ]
    let client = "2001:db8:0:0:0:0:0:7"
    let via = String(repeating: "1.1 proxy, ", count: 200) + "1.1 lb"
    let head = try #require(
      UpstreamHead(
        Request(
          method: .post, target: "/" + String(repeating: "p", count: 3000), headers: fields, body: [1, 2, 3]),
        settings: Self.settings, client: client, via: via, requestID: "r",
        assertion: String(repeating: "a", count: 900)))
    #expect(Self.values(head, "accept").count == 300)
    #expect(Self.values(head, "accept-language") == [String(repeating: "c", count: 4000)])
    #expect(Self.values(head, "via") == [via + ", 1.1 band-edge"])
    #expect(Self.values(head, "content-length") == ["3"])
    #expect(Self.values(head, "forwarded") == ["for=\"[\(client)]\";proto=https;host=\"band.example.test\""])
    #expect(head.bytes.suffix(4) == Array("\r\n\r\n".utf8))
  }

  @Test("a trusted proxy's Via is extended, not replaced")
  func viaChain() throws {
    let head = try #require(
      UpstreamHead(
        Request(method: .get, target: "/x"), settings: Self.settings, client: "203.0.113.7", via: "1.1 lb",
        requestID: "r", assertion: "a"))
    #expect(Self.values(head, "via") == ["1.1 lb, 1.1 band-edge"])
    let unwritable = UpstreamHead(
      Request(method: .get, target: "/x"), settings: Self.settings, client: "203.0.113.7", via: "1.1 l\u{e9}",
      requestID: "r", assertion: "a")
    #expect(unwritable == nil, "a proxy's Via with a byte the head cannot carry is refused, not passed on")
  }
}

/// The gateway's refusals of what a core could read otherwise than band-edge checked it.
@Suite struct AmbiguousRequestTests {
  @Test(
    "a path with a dot segment (also encoded), an encoded slash or backslash, or an empty segment is refused",
    arguments: [
      ("/api/client/v1/schools/s1/students", false), ("/api/client/v1/schools/s1/students/", false),
      ("/api/client/v1/schools/s1/files/a.b", false), ("/api/client/v1/schools/s1/files/..a", false),
      ("/api/client/v1/schools/s1/files/../../s2/students", true),
      ("/api/client/v1/schools/s1/./students", true),
      ("/api/client/v1/schools/s1/files/%2e%2E/s2", true), ("/api/client/v1/schools/s1/files/.%2e/s2", true),
      ("/api/client/v1/schools/s1/files/a%2Fb", true), ("/api/client/v1/schools/s1/files/a%5cb", true),
      ("/api/client/v1/schools/s1/files/a\\b", true), ("/api/client/v1/schools/s1//students", true),
      ("/api/client/v1/schools/s1/files/.", true), ("/api/client/v1/schools/s1/files/%2E", true),
      ("/api/client/v1/schools/s1/files/...", false), ("/api/client/v1/schools/s1/files/%2e%2e%2e", false),
      ("/api/client/v1/schools/s1/files/a%2", false), ("/api/client/v1/schools/s1/files/a%", false),
      ("/api/client/v1/schools/s1/files/%2x", false), ("/api/client/v1/schools/s1/files/%%2F", true),
      ("/api/client/v1/schools/s1/files/%5C", true), ("/", false),
    ])
  func path(path: String, refused: Bool) {
    #expect((ForwardedRefusal.ambiguousPath(Request(method: .get, target: path)) != nil) == refused)
  }

  @Test(
    "Connection naming a field the gateway checks is refused; naming others is hop-by-hop as usual",
    arguments: [
      ("idempotency-key", true), ("Content-Type", true), ("keep-alive, band-licence-client", true),
      ("accept, x-custom", false), ("band-licence-assertion, host, content-length", false),
    ])
  func connection(value: String, refused: Bool) {
    let request = Request(method: .post, target: "/x", headers: [("Connection", value)])
    #expect((ForwardedRefusal.connectionNamesChecked(request) != nil) == refused)
  }
}
