import Testing

@testable import Edge

/// The dispatcher: the head alone decides 501, `OPTIONS *`, the redirect, 404, 405, 413
/// and 415, before any body is read; everything else is routed with its body limit.
@Suite("Dispatcher")
struct DispatcherTests {
  struct Fields: HeadFields {
    var values: [String: String] = [:]
    func value(_ name: StaticString) -> String? { values[name.description] }
  }

  static let json = BodyPolicy.json(
    maxBytes: 100, tooLarge: .text(.contentTooLarge, "json too large"),
    unsupported: .text(.unsupportedMediaType, "send json"))

  static func dispatcher(redirect: String? = nil) throws -> Dispatcher {
    var d = Dispatcher(
      router: try Router(
        [
          Route(.get, "/hello", cacheClass: .revalidate, fixed: .text(.ok, "hello")),
          Route(.get, "/api/items/:id", cacheClass: .private) { _ in .text(.ok, "item") },
          Route(.post, "/api/items", cacheClass: .private, body: json) { _ in .text(.ok, "made") },
          Route(.post, "/form", cacheClass: .private) { _ in .text(.ok, "posted") },
          Route(.get, "/healthz", cacheClass: .private) { _ in .text(.ok, "alive") },
          Route.head(.get, "/chosen", cacheClass: .immutable) { fields in
            fields.value("content-type") == "text/x-built"
              ? .prebuilt(Self.built)
              : .made(.text(.ok, "chose \(fields.value("content-type") ?? "nothing")"))
          },
        ], errors: .apiAndPages()))
    d.httpsRedirect = redirect
    d.clearPaths = ["/healthz"]
    return d
  }

  static let built = PrebuiltResponse(.text(.ok, "built at load"), cacheClass: .immutable)

  /// A short reading of a decision, for the table.
  static func summary(_ decision: Dispatcher.Decision) -> String {
    switch decision {
    case .answer(let response, let cacheClass, let headOnly, _):
      "answer \(response.status.code) \(cacheClass)\(headOnly ? " head" : "")"
        + (response.header("Location").map { " -> \($0)" } ?? "")
    case .prebuilt(let prebuilt, let cacheClass, let headOnly, _):
      "prebuilt \(prebuilt.status.code) \(cacheClass)\(headOnly ? " head" : "")"
    case .refuse(let response, let closing, _):
      "refuse \(response.status.code)\(closing ? " closing" : "")"
        + (response.header("Allow").map { " allow \($0)" } ?? "")
        + ((response.header("Content-Type") ?? "").contains("json") ? " json" : "")
        + (String(decoding: response.body.contents, as: UTF8.self).contains("json") ? " policy" : "")
    case .route(let route, let parameters, let headOnly, let limit):
      "route \(route.method.rawValue) \(route.pattern)\(headOnly ? " head" : "")"
        + parameters.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        + (limit.map { " limit \($0)" } ?? "")
    }
  }

  static let cases:
    [(method: HTTPMethod, path: String, length: Int?, type: String?, secure: Bool, expected: String)] = [
      (.get, "/hello", 0, nil, false, "prebuilt 200 revalidate"),
      (.head, "/hello", 0, nil, false, "prebuilt 200 revalidate head"),
      (.get, "/api/items/42", 0, nil, false, "route GET /api/items/:id id=42"),
      (.head, "/api/items/7", 0, nil, false, "route GET /api/items/:id head id=7"),
      (HTTPMethod("BREW"), "/hello", 0, nil, false, "refuse 501"),
      (.options, "*", 0, nil, false, "answer 204 private"),
      (.get, "/missing", 0, nil, false, "refuse 404"),
      (.get, "/api/missing", 0, nil, false, "refuse 404 json"),
      (.post, "/missing", 50, "text/plain", false, "refuse 404"),
      (.delete, "/hello", 0, nil, false, "refuse 405 allow GET, HEAD"),
      (.post, "/api/items", 10, "application/json", false, "route POST /api/items limit 100"),
      (.post, "/api/items", 10, "application/json; charset=utf-8", false, "route POST /api/items limit 100"),
      (.post, "/api/items", nil, "application/json", false, "route POST /api/items limit 100"),
      (.post, "/api/items", 101, "application/json", false, "refuse 413 closing policy"),
      (.post, "/api/items", 10, "text/plain", false, "refuse 415 policy"),
      (.post, "/api/items", 10, "application/json; charset=latin1", false, "refuse 415 policy"),
      (.post, "/api/items", 0, nil, false, "refuse 415 policy"),
      (.post, "/api/items", 5000, "text/plain", false, "refuse 415 policy"),
      (.post, "/form", 5000, "text/plain", false, "route POST /form"),
      (.get, "/chosen", 0, "text/plain", false, "answer 200 immutable"),
      (.get, "/chosen", 0, "text/x-built", false, "prebuilt 200 immutable"),
      (.head, "/chosen", 0, "text/x-built", false, "prebuilt 200 immutable head"),
      (.head, "/chosen", 0, nil, false, "answer 200 immutable head"),
      (.post, "/chosen", 10, "text/plain", false, "refuse 405 allow GET, HEAD"),
    ]

  @Test("a head route's answer is chosen from the head's fields, the same as from a whole request")
  func headRoute() throws {
    let d = try Self.dispatcher()
    let decision = d.decide(
      method: .get, path: "/chosen", target: { "/chosen" }, secure: false, bodyLength: 0,
      fields: Fields(values: ["content-type": "text/x-probe"]))
    guard case .answer(let response, _, _, _) = decision else {
      Issue.record("expected an answer on the head: \(Self.summary(decision))")
      return
    }
    #expect(response.body.contents == Array("chose text/x-probe".utf8))
    guard case .found(let route, _, _) = d.router.match(.get, "/chosen") else {
      Issue.record("no route")
      return
    }
    let whole = route.respond(
      to: Request(method: .get, target: "/chosen", headers: [("Content-Type", "text/x-probe")]))
    #expect(whole.body.contents == response.body.contents)
  }

  @Test("each head's decision")
  func table() throws {
    let d = try Self.dispatcher()
    for c in Self.cases {
      let decision = d.decide(
        method: c.method, path: c.path, target: { c.path }, secure: c.secure, bodyLength: c.length,
        fields: Fields(values: c.type.map { ["content-type": $0] } ?? [:]))
      #expect(Self.summary(decision) == c.expected, "\(c.method.rawValue) \(c.path)")
    }
  }

  @Test("HTTPS only: plain requests are sent to the origin with their query, but for the clear paths")
  func redirect() throws {
    let d = try Self.dispatcher(redirect: "https://app.example.test")
    let plain = d.decide(
      method: .post, path: "/api/items", target: { "/api/items?x=1" }, secure: false, bodyLength: 10,
      fields: Fields())
    #expect(Self.summary(plain) == "answer 308 private -> https://app.example.test/api/items?x=1")
    let health = d.decide(
      method: .get, path: "/healthz", target: { "/healthz" }, secure: false, bodyLength: 0, fields: Fields())
    #expect(Self.summary(health) == "route GET /healthz")
    let secure = d.decide(
      method: .get, path: "/api/items/1", target: { "/api/items/1" }, secure: true, bodyLength: 0,
      fields: Fields())
    #expect(Self.summary(secure) == "route GET /api/items/:id id=1")
    // The clear paths are the composition's: the engine alone has none.
    var bare = d
    bare.clearPaths = []
    let redirected = bare.decide(
      method: .get, path: "/healthz", target: { "/healthz" }, secure: false, bodyLength: 0, fields: Fields())
    #expect(Self.summary(redirected) == "answer 308 private -> https://app.example.test/healthz")
  }
}
