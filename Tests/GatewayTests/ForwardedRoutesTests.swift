import Deployment
import Edge
import EdgeTesting
import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import Gateway

@Suite("Forwarded routes: the checks before anything goes upstream (in-process)")
struct ForwardedRefusalTests {
  struct Case: Sendable, CustomStringConvertible {
    let description: String
    let method: HTTPMethod
    let rest: String
    let who: GatewayFixture.Who?
    var json: String? = nil
    var key: String? = nil
    var headers: [(String, String)] = []
    let status: Int
    let code: String?
  }

  static let cases: [Case] = [
    Case(
      description: "route switched off", method: .get, rest: "/reports", who: .readOnly, status: 503,
      code: "upstream_unavailable"),
    Case(
      description: "upstream switched off", method: .get, rest: "/timetable", who: .readOnly, status: 503,
      code: "upstream_unavailable"),
    Case(
      description: "no credential", method: .get, rest: "/students", who: nil, status: 401,
      code: "unauthorized"),
    Case(
      description: "unknown token", method: .get, rest: "/students", who: nil,
      headers: [("Authorization", "Bearer nope")], status: 401, code: "invalid_token"),
    Case(
      description: "another school's member", method: .get, rest: "/students", who: .outsider, status: 404,
      code: "not_found"),
    Case(
      description: "read-only member writing", method: .post, rest: "/attendance", who: .readOnly, json: "{}",
      key: "k1",
      status: 403, code: "forbidden"),
    Case(
      description: "teacher deleting", method: .delete, rest: "/attendance", who: .teacher, key: "k1",
      status: 403,
      code: "forbidden"),
    Case(
      description: "app older than the route's since", method: .get, rest: "/attendance", who: .teacher,
      headers: [("Band-Licence-Client", "ios/2.0.5")], status: 426, code: "app_version_unsupported"),
    Case(
      description: "mutation without Idempotency-Key", method: .post, rest: "/attendance", who: .teacher,
      json: "{}",
      status: 400, code: "idempotency_key_required"),
    Case(
      description: "two Idempotency-Keys", method: .post, rest: "/attendance", who: .teacher, json: "{}",
      key: "a",
      headers: [("Idempotency-Key", "b")], status: 400, code: "idempotency_key_required"),
    Case(
      description: "body over maxBodyBytes", method: .post, rest: "/attendance", who: .teacher,
      json: "{\"x\":\"" + String(repeating: "a", count: 80) + "\"}", key: "k1", status: 413,
      code: "request_too_large"),
    Case(
      description: "media type not listed", method: .post, rest: "/attendance", who: .teacher, key: "k1",
      headers: [("Content-Type", "text/plain")], status: 415, code: "unsupported_media_type"),
  ]

  @Test("each refusal: its status, the JSON error shape, nothing sent upstream", arguments: cases)
  func refused(_ c: Case) throws {
    let f = try GatewayFixture(.sqlite)
    let response = f.send(c.method, c.rest, as: c.who, json: c.json, key: c.key, headers: c.headers)
    #expect(response.status.code == c.status)
    let body = jsonObject(response)
    #expect(body["error"] as? String == c.code)
    #expect(body["message"] is String)
    #expect(response.header("Content-Type")?.hasPrefix("application/json") == true)
    #expect(f.sent == 0)
    if c.status == 401 { #expect(response.header("WWW-Authenticate")?.hasPrefix("Bearer realm=") == true) }
    if c.status == 426 { #expect(body["minimumVersion"] as? String == "2.1") }
    if c.status == 503 {
      #expect(response.header("Retry-After") == "60")
      #expect(
        response.header("Proxy-Status") == "band-edge; error=destination_unavailable; details=\"disabled\"")
    }
  }

  @Test("every forwarded route is private (no-store) and pooled")
  func privateAndPooled() throws {
    let f = try GatewayFixture(.sqlite)
    let forwarded = f.router.routes.filter { $0.pattern.hasPrefix("/api/") }
    #expect(forwarded.count == 6)
    #expect(forwarded.allSatisfy { $0.cacheClass == .private && $0.execution == .pooled })
  }

  @Test("a method the route does not forward is 405 with Allow")
  func methodNotAllowed() throws {
    let f = try GatewayFixture(.sqlite)
    let response = f.send(.put, "/attendance", as: .administrator, json: "{}", key: "k")
    #expect(response.status.code == 405)
    #expect(response.header("Allow")?.contains("POST") == true)
    #expect(f.sent == 0)
  }

  @Test("a cookie-authenticated change without a same-origin Origin is 403")
  func cookieNeedsOrigin() throws {
    let f = try GatewayFixture(.sqlite)
    let token = try #require(f.tokens[.teacher])
    let cookie = ("Cookie", "\(WebSecurity.sessionCookie)=\(token)")
    let refused = f.send(.post, "/attendance", as: nil, json: "{}", key: "k", headers: [cookie])
    #expect(refused.status.code == 403 && jsonObject(refused)["error"] as? String == "cross_origin")
    #expect(f.sent == 0)
    let sameOrigin = f.send(
      .post, "/attendance", as: nil, json: "{}", key: "k",
      headers: [cookie, ("Origin", "http://127.0.0.1:8080")])
    #expect(sameOrigin.status.code == 200 && f.sent == 1)
    #expect(f.sentValues("Cookie").isEmpty)
  }

  @Test("over the rate limit: 429 with Retry-After, nothing sent")
  func rateLimited() throws {
    let f = try GatewayFixture(.sqlite, addressLimit: RateLimit(burst: 1, perMinute: 1))
    #expect(f.send(.get, "/students", as: .readOnly).status.code == 200)
    let second = f.send(.get, "/students", as: .readOnly)
    #expect(second.status.code == 429 && jsonObject(second)["error"] as? String == "rate_limited")
    #expect(Int(second.header("Retry-After") ?? "") ?? 0 >= 1)
    #expect(f.sent == 1)
    #expect(second.holdFor == .seconds(1), "held rate-limited-hold, as the client API holds its 429s")
  }

  @Test(
    "a read by a caller the pool has read is checked on the loop; a change in the store sends the next to the pool"
  )
  func loopPath() throws {
    let f = try GatewayFixture(.sqlite)
    let token = try #require(f.tokens[.teacher])
    let client = f.client()
    let read = client.request(.get, f.path("/students"), headers: [("Authorization", "Bearer \(token)")])
    #expect(!client.decidedOnTheLoop(read), "not read yet: the pool reads the caller")
    #expect(client.respond(to: read).status.code == 200)
    #expect(client.decidedOnTheLoop(read))
    #expect(client.respond(to: read).status.code == 200 && f.sent == 2)
    // Changes always go to the pool (each signs its own assertion).
    let write = client.request(
      .post, f.path("/attendance"), body: .json("{}"),
      headers: [("Authorization", "Bearer \(token)"), ("Idempotency-Key", "k")])
    #expect(!client.decidedOnTheLoop(write))
    // Any commit ends what the loop knew: the role lowered here is the next read's.
    let account = try #require(f.accounts[.teacher])
    _ = try f.store.setRole(schoolID: f.school.id, accountID: account, role: .readOnly, actor: "test")
    #expect(!client.decidedOnTheLoop(read))
  }
}
