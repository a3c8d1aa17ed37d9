import Edge
import EdgeTesting
import Testing

@testable import Accounts
@testable import ClientAPI

/// The JSON endpoints' bodies are judged by their routes' `BodyPolicy`, which the dispatcher
/// applies before the handler runs; the handlers do not judge them again.
@Suite("Body policies of the JSON endpoints (in-process)")
struct BodyPolicyTests {
  @Test("not JSON: 415; past 4096 bytes: 413; each the route's own answer, before its handler")
  func refused() throws {
    let s = try SchoolsFixture(.sqlite)
    let context = s.f.pages.context
    let client = InProcessClient(
      try Router(AccountAPI(context).routes + NativeSignIn(context).routes + SchoolsAPI(context).routes),
      origin: nil)
    let bearer = [("Authorization", "Bearer \(s.tokens[.administrator] ?? "")")]
    let member = s.path(s.northfield, "/members/\(s.ids["cy@example.test"] ?? "")")
    let exchange = #"{"code":"c","codeVerifier":"v","state":"s","platform":"ios","appVersion":"1.4.0"}"#
    let cases: [(HTTPMethod, String, String, [(String, String)], String?)] = [
      (.patch, "/api/client/v1/account", #"{"displayName":"Ada Lovelace"}"#, bearer, nil),
      (.patch, member, #"{"role":"read_only"}"#, bearer, nil),
      (
        .post, s.path(s.northfield, "/invitations"), #"{"email":"lee@example.test","role":"teacher"}"#,
        bearer + [("Idempotency-Key", "k")], nil
      ),
      (.post, "/api/client/v1/native/exchange", exchange, [("Idempotency-Key", "k")], "no-cache"),
    ]
    let before = try s.f.store.auditEvents().count
    for (method, path, json, headers, pragma) in cases {
      let plain = RequestBody(Array(json.utf8), contentType: "text/plain")
      let refused = client.respond(to: client.request(method, path, body: plain, headers: headers))
      #expect(refused.status == .unsupportedMediaType, "\(path)")
      #expect(try body(refused)["error"] as? String == "unsupported_media_type", "\(path)")
      #expect(refused.header("Pragma") == pragma, "\(path)")
      let padded = json + String(repeating: " ", count: 4097 - json.utf8.count)
      let large = client.respond(to: client.request(method, path, body: .json(padded), headers: headers))
      #expect(large.status == .contentTooLarge, "\(path)")
      #expect(try body(large)["error"] as? String == "request_too_large", "\(path)")
      #expect(large.header("Pragma") == pragma, "\(path)")
    }
    #expect(try s.f.store.auditEvents().count == before, "no handler ran")
    // At the limit the same body is taken.
    let json = #"{"role":"read_only"}"#
    let atLimit = json + String(repeating: " ", count: 4096 - json.utf8.count)
    let taken = client.respond(to: client.request(.patch, member, body: .json(atLimit), headers: bearer))
    #expect(taken.status == .ok)
  }

  @Test("a body past the limit that reaches the handler (HTTP/2, unknown length, with its head) is 413")
  func heldByTheHandler() throws {
    let s = try SchoolsFixture(.sqlite)
    let context = s.f.pages.context
    let router = try Router(
      AccountAPI(context).routes + NativeSignIn(context).routes + SchoolsAPI(context).routes)
    let headers = [
      ("Authorization", "Bearer \(s.tokens[.administrator] ?? "")"), ("Content-Type", "application/json"),
      ("Idempotency-Key", "k"),
    ]
    let paths: [(HTTPMethod, String)] = [
      (.patch, "/api/client/v1/account"), (.post, "/api/client/v1/native/exchange"),
      (.patch, s.path(s.northfield, "/members/\(s.ids["cy@example.test"] ?? "")")),
      (.post, s.path(s.northfield, "/invitations")),
    ]
    for (method, path) in paths {
      guard case .found(let route, let parameters, _) = router.match(method, path) else {
        Issue.record("no route for \(path)")
        continue
      }
      // The engine's route decision without a length, then the whole body: as the pool runs it.
      var request = Request(
        method: method, target: path, headers: headers,
        body: Array(("{}" + String(repeating: " ", count: 4095)).utf8))
      request.parameters = parameters
      let response = route.respond(to: request)
      #expect(response.status == .contentTooLarge, "\(path)")
      #expect(try body(response)["error"] as? String == "request_too_large", "\(path)")
    }
  }
}
