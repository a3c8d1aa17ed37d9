import Deployment
import Edge
import EdgeTesting
import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import Gateway

@Suite("Forwarded routes: what the API core receives and what the client gets back (in-process)")
struct ForwardedCallTests {
  /// The payload of the one assertion the last head carries, verified with the JWKS's key.
  static func claims(_ f: GatewayFixture) throws -> [String: Any] {
    let assertions = f.sentValues(Assertion.field)
    try #require(assertions.count == 1)
    let jwks = try #require(
      try JSONSerialization.jsonObject(with: Data(f.gateway.keys.jwks(at: 0))) as? [String: Any])
    let key = try #require((jwks["keys"] as? [[String: Any]])?.first)
    let text = try #require(key["x"] as? String)
    let x = try #require(base64url(decoding: text))
    let opened = try openJWS(assertions[0], publicKey: x)
    #expect(opened.verified)
    let kid = try #require(key["kid"] as? String)
    #expect(opened.header.contains("\"kid\":\"\(kid)\""))
    return try #require(try JSONSerialization.jsonObject(with: Data(opened.payload.utf8)) as? [String: Any])
  }

  @Test("the head: no credentials, the allow-list, spoofed gateway fields replaced, one assertion")
  func head() throws {
    let f = try GatewayFixture(.sqlite)
    let response = f.send(
      .get, "/students?page=2", as: .readOnly,
      headers: [
        ("Cookie", "\(WebSecurity.sessionCookie)=stolen"), ("Band-Licence-Assertion", "forged"),
        ("band_licence_assertion", "forged"), ("X-Forwarded-For", "198.51.100.1"),
        ("Connection", "band-licence-assertion, x-request-id"), ("X-Request-Id", "mine"),
        ("Accept", "application/json"), ("X-Custom", "dropped"), ("Upgrade", "websocket"),
      ])
    #expect(response.status.code == 200)
    let head = try #require(f.lastHead)
    #expect(head.line == "GET /api/client/v1/schools/\(f.school.id)/students?page=2 HTTP/1.1")
    for absent in ["Cookie", "Authorization", "X-Custom", "Upgrade", "Connection", "band_licence_assertion"] {
      #expect(f.sentValues(absent).isEmpty, "\(absent) must not reach the core")
    }
    #expect(f.sentValues("Accept") == ["application/json"])
    #expect(f.sentValues("X-Forwarded-For") == ["203.0.113.9"], "the peer, not the client's claim")
    let requestID = try #require(f.sentValues("X-Request-Id").first)
    #expect(f.sentValues("X-Request-Id").count == 1 && requestID != "mine" && requestID.hasPrefix("req_"))
    #expect(response.header("X-Request-Id") == requestID)
    let claims = try Self.claims(f)
    #expect(claims["scp"] as? String == "read" && claims["aud"] as? String == "core")
    #expect(claims["school"] as? String == f.school.id && claims["role"] as? String == "read_only")
    #expect(
      claims["sub"] as? String == f.accounts[.readOnly] && claims["iss"] as? String == "http://127.0.0.1:8080"
    )
    #expect(claims["htm"] == nil && claims["jti"] == nil)
  }

  @Test("a write's assertion is bound to its method, target, body, key and request ID")
  func writeBinding() throws {
    let f = try GatewayFixture(.sqlite)
    let body = #"{"present":["p1"]}"#
    let response = f.send(.post, "/attendance?date=2026-12-02", as: .teacher, json: body, key: "key-1")
    #expect(response.status.code == 200)
    let claims = try Self.claims(f)
    #expect(claims["scp"] as? String == "write" && claims["htm"] as? String == "POST")
    #expect(claims["htp"] as? String == "/api/client/v1/schools/\(f.school.id)/attendance?date=2026-12-02")
    #expect(claims["bh"] as? String == WriteRequest.bodyHash(Array(body.utf8)))
    #expect(claims["idk"] as? String == "key-1")
    #expect(claims["jti"] as? String == response.header("X-Request-Id"))
    #expect(f.sentValues("Idempotency-Key") == ["key-1"])
    #expect(f.sentValues("Content-Length") == [String(body.utf8.count)])
    let call = try #require(f.standIn.calls.withLock { $0.last })
    #expect(call.body == Array(body.utf8) && call.upstream == "core" && call.method == .post)
  }

  @Test("a read assertion is reused for the same caller, a new one for another")
  func readReused() throws {
    let f = try GatewayFixture(.sqlite)
    _ = f.send(.get, "/students", as: .readOnly)
    let first = f.sentValues(Assertion.field)
    f.clock.advance(5)
    _ = f.send(.get, "/attendance", as: .readOnly)
    #expect(f.sentValues(Assertion.field) == first)
    _ = f.send(.get, "/students", as: .teacher)
    #expect(f.sentValues(Assertion.field) != first)
    f.clock.advance(50)
    _ = f.send(.get, "/students", as: .readOnly)
    #expect(f.sentValues(Assertion.field) != first, "not handed out within 10 s of its expiry")
  }

  @Test("the core's answer: its status and body, allow-listed fields, same-origin Location, the request ID")
  func answer() throws {
    let f = try GatewayFixture(.sqlite)
    f.standIn.reply.withLock {
      $0 =
        "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\nSet-Cookie: a=b\r\nServer: core/1\r\n"
        + "X-Powered-By: x\r\nETAG: \"v1\"\r\nConnection: keep-alive, Vary\r\nVary: Accept\r\n"
        + "Location: /api/client/v1/x\r\nKeep-Alive: timeout=5\r\nContent-Length: 4\r\n\r\n[1,2]".dropLast()
    }
    let response = f.send(.post, "/attendance", as: .teacher, json: "{}", key: "k")
    #expect(response.status.code == 201 && response.body.contents == Array("[1,2".utf8))
    #expect(response.header("Content-Type") == "application/json" && response.header("ETag") == "\"v1\"")
    #expect(response.header("Location") == "/api/client/v1/x")
    #expect(
      response.headers.map(\.name).prefix(3) == ["Content-Type", "ETag", "Location"], "written as named")
    for absent in ["Set-Cookie", "Server", "X-Powered-By", "Vary", "Keep-Alive", "Connection"] {
      #expect(response.header(absent) == nil, "\(absent)")
    }
    #expect(response.header("X-Request-Id")?.hasPrefix("req_") == true)
  }

  @Test(
    "Location survives only on the origin",
    arguments: [
      ("/a", true), ("//evil.test/a", false), ("/\\evil.test", false), ("http://127.0.0.1:8080/a", true),
      ("http://127.0.0.1:8080.evil.test/a", false), ("https://evil.test/", false), ("a/b", false),
    ])
  func location(_ value: String, _ kept: Bool) {
    #expect(ForwardedAnswer.sameOrigin(value, origin: "http://127.0.0.1:8080") == kept)
  }

  @Test(
    "a fault: its status, Retry-After when it has one, Proxy-Status, the JSON shape",
    arguments: [
      (UpstreamFault.connectRefused, 502, nil, "connection_refused"),
      (.firstByteTimeout, 504, nil, "connection_read_timeout"),
      (.queueFull, 503, "1", "connection_limit_reached"), (.circuitOpen, 503, "5", "destination_unavailable"),
      (.badResponse("bad chunk size"), 502, nil, "http_protocol_error"),
    ] as [(UpstreamFault, Int, String?, String)])
  func fault(_ fault: UpstreamFault, _ status: Int, _ retry: String?, _ error: String) throws {
    let f = try GatewayFixture(.sqlite)
    var client = f.client()
    client.upstream = { _ in .fault(fault) }
    let response = client.respond(
      to: client.request(
        .get, f.path("/students"), headers: [("Authorization", "Bearer \(f.tokens[.readOnly] ?? "")")]))
    #expect(response.status.code == status && response.header("Retry-After") == retry)
    #expect(response.header("Proxy-Status") == fault.proxyStatus(proxyName: "band-edge"))
    #expect(response.header("Proxy-Status")?.contains("error=\(error)") == true)
    #expect(jsonObject(response)["message"] is String && jsonObject(response)["error"] is String)
    #expect(response.header("X-Request-Id")?.hasPrefix("req_") == true)
  }

  @Test("an accepted mutation is audited; a refused one and a read are not", arguments: Engine.available)
  func audit(engine: Engine) throws {
    let f = try GatewayFixture(engine)
    _ = f.send(.post, "/attendance", as: .teacher, json: "{}", key: "k-ok")
    f.standIn.reply.withLock { $0 = "HTTP/1.1 409 Conflict\r\nContent-Length: 0\r\n\r\n" }
    _ = f.send(.post, "/attendance", as: .teacher, json: "{}", key: "k-409")
    _ = f.send(.get, "/students", as: .teacher)
    let events = try f.store.auditEvents().filter { $0.action == "attendance.recorded" }
    #expect(events.count == 1)
    #expect(events.first?.actor == f.accounts[.teacher] && events.first?.subject == f.school.id)
    #expect(events.first?.detail?.contains("idempotency key k-ok") == true)
  }

  @Test("the JWKS: the published keys, cacheable five minutes")
  func jwks() throws {
    let f = try GatewayFixture(.sqlite)
    var client = f.client()
    let response = client.send(.get, JWKSRoute.path)
    #expect(response.status.code == 200)
    #expect(response.body.contents == f.gateway.keys.jwks(at: f.clock.read()))
    #expect(String(decoding: response.body.contents, as: UTF8.self).contains(f.key.kid))
    guard case .found(let route, _, _) = f.router.match(.get, JWKSRoute.path) else {
      Issue.record("no JWKS route")
      return
    }
    #expect(route.cacheClass.cacheControl == "public, max-age=300")
  }
}
