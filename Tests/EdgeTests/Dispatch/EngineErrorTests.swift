import Testing

@testable import Edge

/// The shape of the engine's own errors, 501 for unknown methods,
/// `OPTIONS *`.
@Suite("Engine errors")
struct EngineErrorTests {
  static let json = "Content-Type: application/json; charset=utf-8\r\n"
  static let plain = "Content-Type: text/plain; charset=utf-8\r\n"

  @Test(
    "under /api/ every engine error is JSON with a code; elsewhere plain text or a browser's page",
    arguments: [
      // 413: Content-Length over the engine's limit, once the head is known.
      (
        "POST /api/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", "413",
        #"{"error":"payload_too_large","message":"Content Too Large: the request body is too large."}"#
      ),
      (
        "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", "413",
        "the request body is too large.\n"
      ),
      (
        "POST /x HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\nContent-Length: 99999999\r\n\r\n", "413",
        "page 413"
      ),
      // 400 parse errors once the target is known.
      ("GET /api/x HTTP/1.1\r\nHost:\r\n\r\n", "400", #"{"error":"bad_request","message":"Bad Request: "#),
      ("GET /api/x HTTP/1.1\r\nHost: a\r\nX : y\r\n\r\n", "400", #""error":"bad_request""#),
      ("GET /api/a#b HTTP/1.1\r\nHost: a\r\n\r\n", "400", #""error":"bad_request""#),
      // 414 and 431 where the target is known.
      ("GET /api/" + String(repeating: "a", count: 9000), "414", #""error":"uri_too_long""#),
      (
        "GET /api/x HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 17000), "431",
        #""error":"request_header_fields_too_large""#
      ),
      ("GET /x HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 17000), "431", "too large.\n"),
      // A browser's 414 and 431 get its page: Accept is read from what arrived.
      (
        "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n",
        "414", "page 414"
      ),
      (
        "GET /x HTTP/1.1\r\nAccept: text/html,*/*;q=0.8\r\nHost: a\r\nX: "
          + String(repeating: "b", count: 17000),
        "431", "page 431"
      ),
      (
        "GET /api/" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nAccept: text/html\r\n\r\n", "414",
        #""error":"uri_too_long""#
      ),
      (
        "GET /api/x HTTP/1.1\r\nAccept: text/html\r\nX: " + String(repeating: "b", count: 17000), "431",
        #""error":"request_header_fields_too_large""#
      ),
      (
        "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\n\r\n",
        "414", "too long.\n"
      ),
      (
        "GET /.well-known/" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nAccept: text/html\r\n\r\n",
        "414", "too long.\n"
      ),
      (
        "GET /x HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 17000)
          + "\r\nAccept: text/html\r\n",
        "431", "too large.\n"
      ),
      // Before the target is known: plain text.
      (
        "GET /api/x HTTP/1.1\nHost: a\r\n\r\n", "400",
        #"{"error":"bad_request","message":"Bad Request: a line ended"#
      ),
      ("G(T /api/x HTTP/1.1\r\nHost: a\r\n\r\n", "400", "Bad Request: the method is not a valid token.\n"),
      ("\u{16}\u{03}\u{01}\u{00}", "400", "the request line is not"),
      // 501 for a method no route serves (RFC 9110 §9.1); an over-long method too (RFC 9112 §3).
      ("BREW /api/x HTTP/1.1\r\nHost: a\r\n\r\n", "501", #"{"error":"not_implemented","message":"#),
      ("BREW /x HTTP/1.1\r\nHost: a\r\n\r\n", "501", "This method is not implemented here.\n"),
      (String(repeating: "M", count: 40), "501", "longer than any this server implements"),
      // 404 and 405 keep their shape.
      ("GET /api/nope HTTP/1.1\r\nHost: a\r\n\r\n", "404", #"{"error":"not_found","message":"Not found."}"#),
      ("DELETE /api/echo HTTP/1.1\r\nHost: a\r\n\r\n", "405", #""error":"method_not_allowed""#),
    ])
  func shape(request: String, status: String, expected: String) throws {
    var h = Harness()
    h.context.router = try Router(
      h.context.router.routes, errors: .apiAndPages { status, _ in .text(status, "page \(status.code)") })
    h.send(request)
    let out = h.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 \(status) "), "\(out)")
    #expect(out.contains("Cache-Control: no-store\r\n"))
    #expect(out.contains(expected), "\(out)")
    let isJSON = expected.hasPrefix("{") || expected.hasPrefix("\"")
    #expect(out.contains(isJSON ? Self.json : Self.plain), "\(out)")
  }

  @Test("a parse error under /api/ still closes the connection")
  func parseErrorCloses() {
    var h = Harness()
    h.send("GET /api/x HTTP/1.1\r\nHost:\r\n\r\n")
    let (out, step) = h.drainOutput()
    #expect(out.contains("Connection: close\r\n"))
    #expect(step.close == .shutdownWrite)
  }

  @Test("a body timeout under /api/ is JSON")
  func timeout() {
    var h = Harness()
    h.send("POST /api/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab")
    _ = h.timeout(after: .seconds(5))
    let out = h.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
    #expect(out.hasSuffix(#"{"error":"request_timeout","message":"The request did not arrive in time."}"#))
  }

  @Test("OPTIONS * is answered 204 with every method the server serves (RFC 9110 §9.3.7)")
  func optionsAsterisk() {
    var h = Harness()
    h.send("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")
    let out = h.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 204 No Content\r\n"))
    #expect(out.contains("Allow: DELETE, GET, HEAD, OPTIONS, POST\r\n"))
    #expect(!out.contains("Content-Length"))
    #expect(!out.contains("Connection: close"))
  }

  @Test(
    "the router recognizes registered methods and those its routes serve; OPTIONS * lists what is served")
  func recognizes() throws {
    let router = try Router([
      Route(.get, "/", cacheClass: .private) { _ in .text(.ok, "") },
      Route(HTTPMethod("X-SERVED"), "/dav", cacheClass: .private) { _ in .text(.ok, "") },
    ])
    #expect(
      router.recognizes(.get) && router.recognizes(.trace) && router.recognizes(HTTPMethod("QUERY"))
        && router.recognizes(HTTPMethod("PROPFIND")) && router.recognizes(HTTPMethod("X-SERVED")))
    #expect(!router.recognizes(HTTPMethod("BREW")) && !router.recognizes(HTTPMethod("get")))
    #expect(router.allowAll == "GET, HEAD, OPTIONS, X-SERVED")
  }

  @Test("a registered method a path does not serve is 405 with Allow, not 501")
  func standardMethodIs405() {
    var h = Harness()
    h.send("TRACE /echo HTTP/1.1\r\nHost: a\r\n\r\n")
    let out = h.drainOutput().text
    #expect(
      out.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n") && out.contains("Allow: GET, HEAD, POST\r\n"))
  }

  @Test("JSON strings are escaped")
  func escaping() {
    #expect(JSONString.escaped("a\"b\\c\n\u{1}") == #"a\"b\\c\n\u0001"#)
    var out: [UInt8] = []
    JSONString.append("é\r\t\u{1f}/x", to: &out)
    #expect(String(decoding: out, as: UTF8.self) == #""é\r\t\u001f/x""#)
    #expect(Log.escape("q\"") == #"q\""#)
  }

  @Test("the engine's errors take the shape the composition supplies; its own is plain text, under /api/ too")
  func renderer() throws {
    var plain = Harness()
    plain.context.router = try Router(plain.context.router.routes)
    plain.send("GET /api/nope HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n")
    let text = plain.drainOutput().text
    #expect(text.hasPrefix("HTTP/1.1 404 Not Found\r\n") && text.contains(Self.plain), "\(text)")
    #expect(text.hasSuffix("\r\n\r\nNot found.\n"), "\(text)")
    var shaped = Harness()
    shaped.context.router = try Router(
      shaped.context.router.routes,
      errors: ErrorRenderer { error in
        .text(
          error.status, "\(error.code) \(error.path ?? "-") \(error.accept ?? "-") \(error.message)",
          headers: error.headers + [("X-Shaped", "1")])
      })
    shaped.send("DELETE /echo HTTP/1.1\r\nHost: a\r\nAccept: x/y\r\n\r\n")
    let out = shaped.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"), "\(out)")
    #expect(out.contains("Allow: GET, HEAD, POST\r\n") && out.contains("X-Shaped: 1\r\n"), "\(out)")
    #expect(out.hasSuffix("\r\n\r\nmethod_not_allowed /echo x/y This method is not allowed here."), "\(out)")
  }
}

/// Bodies are counted in one process-wide budget.
@Suite("Request budget")
struct RequestBudgetTests {
  @Test("a body that would pass the process-wide budget gets 503 at once; finished bodies give it back")
  func sharedBudget() {
    let budget = RequestBudget(limit: 4096)
    var first = Harness(budget: budget)
    var second = Harness(budget: budget)
    first.send(
      "POST /api/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3500\r\n\r\n"
        + String(repeating: "a", count: 3000))
    #expect(first.machine.output.isEmpty)
    #expect(budget.inUse >= 3000)
    second.send(
      "POST /api/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2000\r\n\r\n"
        + String(repeating: "b", count: 1500))
    let (refused, step) = second.drainOutput()
    #expect(refused.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"), "\(refused)")
    #expect(refused.contains("Retry-After: 1\r\n") && refused.contains(EngineErrorTests.json))
    #expect(
      refused.hasSuffix(
        #"{"error":"service_unavailable","message":"The server is busy; try again shortly."}"#))
    #expect(refused.contains("Connection: close\r\n"))
    #expect(step.close == .shutdownWrite)
    #expect(second.machine.reservedBytes == 0)
    first.send(String(repeating: "a", count: 500))
    #expect(first.drainOutput().text.hasPrefix("HTTP/1.1 200 OK\r\n"))
    #expect(budget.inUse == 0)
  }

  @Test("a complete body handed to the pool stays counted until its answer; over budget it is refused")
  func pooled() {
    let budget = RequestBudget(limit: 1000)
    var h = Harness(budget: budget)
    let step = h.send(
      "POST /api/slow HTTP/1.1\r\nHost: a\r\nContent-Length: 600\r\n\r\n" + String(repeating: "a", count: 600)
    )
    #expect(step.dispatch != nil)
    #expect(budget.inUse >= 600)
    var other = Harness(budget: budget)
    let refused = other.send(
      "POST /api/slow HTTP/1.1\r\nHost: a\r\nContent-Length: 600\r\n\r\n" + String(repeating: "b", count: 600)
    )
    #expect(refused.dispatch == nil)
    #expect(other.drainOutput().text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
    _ = h.machine.handlerFinished(.text(.ok, "slow"), context: &h.context)
    #expect(budget.inUse == 0)
  }

  @Test("a connection that closes mid-body gives its reservation back")
  func release() {
    let budget = RequestBudget(limit: 1 << 20)
    var h = Harness(budget: budget)
    h.send(
      "POST /api/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n"
        + String(repeating: "a", count: 4000))
    #expect(budget.inUse >= 4000)
    h.machine.releaseBudget()
    #expect(budget.inUse == 0)
  }

  @Test("the per-request bound is the head plus the body limit")
  func messageBound() {
    let limits = Limits()
    #expect(
      limits.maxMessageBytes == 2 * (limits.maxTargetBytes + 64) + limits.maxHeaderBytes + limits.maxBodyBytes
    )
  }
}
