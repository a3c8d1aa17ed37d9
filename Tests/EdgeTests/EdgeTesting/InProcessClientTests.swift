import Edge
import EdgeTesting
import Synchronization
import Testing

/// The in-process client: requests go through the dispatcher as on the wire, cookies come back.
@Suite("In-process client")
struct InProcessClientTests {
  /// How many times a handler ran.
  final class Calls: Sendable {
    let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
  }

  static let json = BodyPolicy.json(
    maxBytes: 16, tooLarge: .text(.contentTooLarge, "items are short"),
    unsupported: .text(.unsupportedMediaType, "items are json"))

  /// A route table with a cookie set and cleared, an echo of the head, a JSON route counting its
  /// calls, and a pooled route whose fast path answers `?fast` and holds `?hold`.
  static func client(_ calls: Calls) throws -> InProcessClient {
    InProcessClient(
      try Router(
        [
          Route(.post, "/sign-in", cacheClass: .private) { _ in
            var response = Response(status: .seeOther, headers: [("Location", "/")])
            response.add("Set-Cookie", "session=s1; Path=/; Secure; HttpOnly; Max-Age=600")
            response.add("Set-Cookie", "theme=dark")
            return response
          },
          Route(.post, "/sign-out", cacheClass: .private) { _ in
            Response(status: .seeOther, headers: [("Set-Cookie", "session=; Path=/; Max-Age=0")])
          },
          Route(.get, "/echo/:name", cacheClass: .private) { request in
            let fields = request.headers.pairs.map { "\($0.name): \($0.value)\n" }.joined()
            return .text(.ok, "name=\(request.parameters["name"] ?? "")\n" + fields)
          },
          Route(.delete, "/echo/:name", cacheClass: .private) { request in
            .text(.ok, request.headers["origin"] ?? "no origin")
          },
          Route(.post, "/api/items", cacheClass: .private, execution: .pooled, body: json) { request in
            calls.add()
            return .text(.created, String(decoding: request.body, as: UTF8.self))
          },
          Route(
            .get, "/pooled", cacheClass: .private, execution: .pooled,
            fastPath: { request in
              switch request.query {
              case "fast": return .text(.ok, "fast")
              case "hold":
                var held = Response.text(.tooManyRequests, "wait")
                held.holdFor = .seconds(60)
                return held
              default: return nil
              }
            }
          ) { _ in
            calls.add()
            return .text(.ok, "pool")
          },
        ], errors: .apiAndPages()))
  }

  @Test("cookies: Set-Cookie fills the jar, the jar is sent back, Max-Age=0 removes")
  func cookieRoundTrip() throws {
    var client = try Self.client(Calls())
    #expect(client.cookies.isEmpty)
    #expect(!text(client.send(.get, "/echo/a")).contains("Cookie:"))
    #expect(client.send(.post, "/sign-in").status == .seeOther)
    #expect(client.cookies["session"] == "s1" && client.cookies["theme"] == "dark")
    #expect(text(client.send(.get, "/echo/a")).contains("Cookie: session=s1; theme=dark\n"))
    _ = client.send(.post, "/sign-out")
    #expect(client.cookies["session"] == nil && client.cookies.names == ["theme"])
    #expect(text(client.send(.get, "/echo/a")).contains("Cookie: theme=dark\n"))
    client.cookies["theme"] = nil
    #expect(client.cookies.isEmpty && !text(client.send(.get, "/echo/a")).contains("Cookie:"))
  }

  @Test("a body the route's policy refuses is answered on the head; the handler never runs")
  func bodyPolicy() throws {
    let calls = Calls()
    var client = try Self.client(calls)
    let form = client.send(.post, "/api/items", form: [("a", "1")])
    #expect(form.status == .unsupportedMediaType && text(form) == "items are json")
    let bare = client.send(.post, "/api/items")
    #expect(bare.status == .unsupportedMediaType, "no Content-Type is not JSON")
    let long = client.send(.post, "/api/items", json: #"{"name": "far too long"}"#)
    #expect(long.status == .contentTooLarge && text(long) == "items are short")
    #expect(calls.value == 0)
    let made = client.send(.post, "/api/items", json: #"{"n": 1}"#)
    #expect(made.status == .created && text(made) == #"{"n": 1}"#)
    #expect(calls.value == 1)
  }

  @Test("404 and 405 are the engine's own answers, shaped by the router's renderer (JSON under /api/)")
  func engineRefusals() throws {
    var client = try Self.client(Calls())
    let missing = client.send(.get, "/api/nowhere")
    #expect(missing.status == .notFound && text(missing).contains(#""error":"not_found""#))
    let method = client.send(.put, "/api/items", json: "{}")
    #expect(method.status == .methodNotAllowed && method.header("Allow") == "POST")
    #expect(client.send(.get, "/nowhere").header("Content-Type") == "text/plain; charset=utf-8")
  }

  @Test("a pooled route: its fast path answers first, a held answer at once, else its handler")
  func pooled() throws {
    let calls = Calls()
    var client = try Self.client(calls)
    #expect(text(client.send(.get, "/pooled?fast")) == "fast")
    #expect(client.send(.get, "/pooled?hold").status == .tooManyRequests)
    #expect(calls.value == 0)
    #expect(text(client.send(.get, "/pooled")) == "pool")
    #expect(calls.value == 1)
  }

  @Test("Host always, Origin on unsafe methods only, the caller's fields first; parameters bound")
  func fields() throws {
    var client = try Self.client(Calls())
    let get = text(client.send(.get, "/echo/ada"))
    #expect(get.hasPrefix("name=ada\nHost: 127.0.0.1:8080\n") && !get.contains("Origin"))
    #expect(text(client.send(.delete, "/echo/ada")) == "http://127.0.0.1:8080")
    #expect(
      text(client.send(.delete, "/echo/ada", headers: [("Origin", "https://evil.test")]))
        == "https://evil.test")
    client.origin = nil
    #expect(text(client.send(.delete, "/echo/ada")) == "no origin")
    let own = client.request(
      .post, "/x", body: .json("{}"), headers: [("host", "a"), ("content-type", "text/plain")])
    #expect(own.headers.values("host") == ["a"] && own.headers.values("content-type") == ["text/plain"])
    let built = client.request(.patch, "/x", body: .form([("a", "b c")]))
    #expect(built.headers["content-type"] == "application/x-www-form-urlencoded")
    #expect(built.body == Array("a=b+c".utf8) && built.headers["origin"] == nil)
  }

  @Test("HEAD gets the GET route's fields without its content; a plain request may be redirected")
  func headAndRedirect() throws {
    var client = try Self.client(Calls())
    let head = client.send(.head, "/echo/a")
    #expect(head.status == .ok && head.body.contents.isEmpty)
    client.dispatcher.httpsRedirect = "https://app.example.test"
    let redirected = client.send(.get, "/echo/a?x=1")
    #expect(redirected.status == .permanentRedirect)
    #expect(redirected.header("Location") == "https://app.example.test/echo/a?x=1")
    client.secure = true
    #expect(client.send(.get, "/echo/a").status == .ok)
  }

  func text(_ response: Response) -> String { String(decoding: response.body.contents, as: UTF8.self) }
}
