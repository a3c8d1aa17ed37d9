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
}
