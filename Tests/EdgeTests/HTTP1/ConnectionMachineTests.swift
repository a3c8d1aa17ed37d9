import Foundation
import Testing

@testable import Edge

/// A machine over a manual clock and a small router, with helpers to feed it.
struct Harness {
  let clock = ManualClock()
  var machine: ConnectionMachine<ManualClock>
  var context: ConnectionContext

  init(limits: Limits = Harness.limits, secure: Bool = false, budget: RequestBudget? = nil) {
    let router = try! Router(
      [
        Route(.get, "/hello", cacheClass: .revalidate, fixed: .text(.ok, "hello\n")),
        Route(.get, "/echo", cacheClass: .private) { r in .text(.ok, "echo \(r.query ?? "")") },
        Route(.post, "/echo", cacheClass: .private) { r in .text(.ok, String(decoding: r.body, as: UTF8.self))
        },
        Route(.get, "/slow", cacheClass: .private, execution: .pooled) { _ in .text(.ok, "slow") },
        Route(
          .get, "/cached", cacheClass: .private, execution: .pooled,
          fastPath: { r in r.headers["x-hit"] == nil ? nil : .text(.ok, "from the loop") }
        ) { _ in .text(.ok, "from the pool") },
        Route(
          .post, "/limited", cacheClass: .private, execution: .background,
          fastPath: { _ in
            var refusal = Response.text(.tooManyRequests, "wait")
            refusal.holdFor = .seconds(1)
            return refusal
          }
        ) { _ in .text(.ok, "never") },
        Route(.delete, "/gone", cacheClass: .private) { _ in .text(.ok, "gone") },
        Route(.post, "/api/echo", cacheClass: .private) { r in
          .text(.ok, String(decoding: r.body, as: UTF8.self))
        },
        Route(.post, "/api/slow", cacheClass: .private, execution: .pooled) { _ in .text(.ok, "slow") },
        Route(
          .post, "/api/json", cacheClass: .private,
          body: .json(
            maxBytes: 8, tooLarge: .text(.contentTooLarge, "at most 8 bytes"),
            unsupported: .text(.unsupportedMediaType, "json only"))
        ) { r in .text(.ok, "got " + String(decoding: r.body, as: UTF8.self)) },
      ], errors: .apiAndPages())
    machine = ConnectionMachine(
      clock: clock, limits: limits, client: "127.0.0.1:5000", secure: secure, budget: budget)
    context = ConnectionContext(router: router, log: AccessLog(enabled: true))
    context.date.update(epochSeconds: 0)
  }

  static var limits: Limits {
    var l = Limits()
    l.headTimeout = .seconds(10)
    l.bodyTimeout = .seconds(5)
    l.idleTimeout = .seconds(60)
    l.writeTimeout = .seconds(30)
    l.lingerTimeout = .seconds(2)
    return l
  }

  @discardableResult
  mutating func send(_ text: String) -> ConnectionMachine<ManualClock>.Step {
    let bytes = Array(text.utf8)
    return bytes.withUnsafeBytes { machine.received($0, context: &context) }
  }

  /// Everything queued, as text; then marks it written.
  mutating func drainOutput() -> (text: String, step: ConnectionMachine<ManualClock>.Step) {
    let text = String(decoding: machine.output.contents, as: UTF8.self)
    let step = machine.wrote(machine.output.pending)
    return (text, step)
  }

  mutating func timeout(after duration: Duration) -> ConnectionMachine<ManualClock>.Step {
    clock.advance(by: duration)
    return machine.deadlinePassed(context: &context)
  }
}

extension ErrorRenderer {
  /// The shape a composition with an API and pages gives the engine's errors (band-edge's): a
  /// JSON error under `/api/`, `page` for a browser outside `/.well-known/`, else plain text.
  static func apiAndPages(page: (@Sendable (Status, String) -> Response)? = nil) -> ErrorRenderer {
    ErrorRenderer { error in
      guard let path = error.path else { return error.plainText }
      if path.hasPrefix("/api/") {
        var body: [UInt8] = Array(#"{"error":"#.utf8)
        JSONString.append(error.code, to: &body)
        body += #","message":"#.utf8
        JSONString.append(error.message, to: &body)
        body += "}".utf8
        return Response(
          status: error.status,
          headers: [("Content-Type", "application/json; charset=utf-8")] + error.headers,
          body: .bytes(body))
      }
      if let page, !path.hasPrefix("/.well-known/"), ErrorRenderer.acceptsHTML(error.accept) {
        var response = page(error.status, error.message)
        for (name, value) in error.headers { response.add(name, value) }
        return response
      }
      return error.plainText
    }
  }
}

@Suite("Connection state machine")
struct ConnectionMachineTests {
  @Test("a GET gets its response with the route's cache class and the writer's fields")
  func simpleGet() {
    var h = Harness()
    h.send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    let out = h.drainOutput().text
    #expect(
      out == "HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\nContent-Type: text/plain; charset=utf-8\r\n"
        + "Content-Length: 6\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n\r\nhello\n")
  }

  @Test("three pipelined requests in one read are answered in order")
  func pipelined() {
    var h = Harness()
    h.send(
      "GET /echo?1 HTTP/1.1\r\nHost: a\r\n\r\nGET /echo?2 HTTP/1.1\r\nHost: a\r\n\r\nGET /echo?3 HTTP/1.1\r\nHost: a\r\n\r\n"
    )
    let out = h.drainOutput().text
    let bodies = out.components(separatedBy: "\r\n\r\n").dropFirst().map { $0.prefix(6) }
    #expect(bodies == ["echo 1", "echo 2", "echo 3"])
  }

  @Test("a pooled request holds later pipelined requests until its answer is written first")
  func pooledKeepsOrder() {
    var h = Harness()
    let step = h.send("GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET /echo?after HTTP/1.1\r\nHost: a\r\n\r\n")
    #expect(step.dispatch?.request.path == "/slow")
    #expect(h.machine.state == .handling)
    #expect(h.machine.output.isEmpty)
    #expect(!h.machine.wantsInput)
    #expect(h.machine.deadline == .never)
    let next = h.machine.handlerFinished(.text(.ok, "slow"), context: &h.context)
    #expect(next.dispatch == nil)
    let out = h.drainOutput().text
    let slow = out.range(of: "\r\n\r\nslow")!.lowerBound
    let after = out.range(of: "echo after")!.lowerBound
    #expect(slow < after)
  }

  @Test("a pooled route's fast path answers on the loop when it can, else the pool does")
  func fastPath() {
    var h = Harness()
    let hit = h.send("GET /cached HTTP/1.1\r\nHost: a\r\nX-Hit: 1\r\n\r\n")
    #expect(hit.dispatch == nil)
    let out = h.drainOutput().text
    #expect(out.hasSuffix("\r\n\r\nfrom the loop") && out.contains("Cache-Control: no-store\r\n"))
    let miss = h.send("GET /cached HTTP/1.1\r\nHost: a\r\n\r\n")
    #expect(miss.dispatch?.request.path == "/cached")
    #expect(h.machine.state == .handling)
  }

  @Test("a held fast-path answer is sent when its hold has passed, and nothing is read meanwhile")
  func held() {
    var h = Harness()
    let step = h.send("POST /limited HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
    #expect(step.dispatch == nil)
    #expect(h.machine.output.isEmpty && h.machine.state == .handling && !h.machine.wantsInput)
    #expect(h.timeout(after: .milliseconds(999)).dispatch == nil)
    #expect(h.machine.output.isEmpty)
    _ = h.timeout(after: .milliseconds(1))
    let out = h.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 429 Too Many Requests\r\n") && out.hasSuffix("wait"))
    #expect(h.machine.state == .awaitingRequest)
  }

  @Test("a pooled answer that asks to be held (a busy 503) is sent after its hold")
  func heldAfterPool() {
    var h = Harness()
    #expect(h.send("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n").dispatch != nil)
    var busy = Response.text(.serviceUnavailable, "busy")
    busy.holdFor = .seconds(1)
    _ = h.machine.handlerFinished(busy, context: &h.context)
    #expect(h.machine.output.isEmpty && h.machine.state == .handling)
    _ = h.timeout(after: .seconds(1))
    #expect(h.drainOutput().text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
  }

  @Test("TLS connections carry HSTS; plain ones are redirected to the HTTPS origin, but for /healthz")
  func httpsOnly() {
    var plain = Harness()
    plain.context.httpsRedirect = "https://app.example.test"
    plain.context.clearPaths = ["/healthz"]
    plain.send("GET /echo?a=1 HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
    let out = plain.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 308 Permanent Redirect\r\n"))
    #expect(out.contains("Location: https://app.example.test/echo?a=1\r\n"))
    #expect(!out.contains("Strict-Transport-Security"))
    #expect(out.contains("HTTP/1.1 404 Not Found\r\n"), "/healthz is routed (this router has none)")
    var secure = Harness(secure: true)
    secure.context.httpsRedirect = "https://app.example.test"
    secure.send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    let tls = secure.drainOutput().text
    #expect(tls.hasPrefix("HTTP/1.1 200 OK\r\n"))
    #expect(tls.contains("Strict-Transport-Security: max-age=63072000; includeSubDomains\r\n"))
  }

  @Test("HEAD is answered by GET without content but with its Content-Length")
  func head() {
    var h = Harness()
    h.send("HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    let out = h.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 200 OK\r\n"))
    #expect(out.contains("Content-Length: 6\r\n"))
    #expect(out.hasSuffix("\r\n\r\n"))
  }

  @Test("unknown path is 404 no-store; wrong method is 405 with Allow")
  func notFoundAndNotAllowed() {
    var h = Harness()
    h.send("GET /nope HTTP/1.1\r\nHost: a\r\n\r\nDELETE /echo HTTP/1.1\r\nHost: a\r\n\r\n")
    let out = h.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 404 Not Found\r\nCache-Control: no-store\r\n"))
    #expect(out.contains("HTTP/1.1 405 Method Not Allowed\r\nCache-Control: no-store\r\n"))
    #expect(out.contains("Allow: GET, HEAD, POST\r\n"))
  }

  @Test(
    "a browser's 404 and 405 use the composition's page; /api/, /.well-known/ and other clients do not",
    arguments: [
      ("GET /nope HTTP/1.1\r\nHost: a\r\nAccept: text/html,*/*;q=0.8\r\n\r\n", "page 404"),
      ("DELETE /echo HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n", "page 405"),
      ("GET /nope HTTP/1.1\r\nHost: a\r\nAccept: TEXT/HTML ; q=0.5\r\n\r\n", "page 404"),
      ("GET /nope HTTP/1.1\r\nHost: a\r\nAccept: text/html;q=0\r\n\r\n", "Not found."),
      ("GET /nope HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n", "Not found."),
      ("GET /nope HTTP/1.1\r\nHost: a\r\n\r\n", "Not found."),
      ("GET /.well-known/nope HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n", "Not found."),
      ("GET /api/nope HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n", "\"error\":\"not_found\""),
    ])
  func errorPages(request: String, expected: String) throws {
    var h = Harness()
    h.context.router = try Router(
      h.context.router.routes, errors: .apiAndPages { status, _ in .text(status, "page \(status.code)") })
    h.send(request)
    let out = h.drainOutput().text
    #expect(out.contains("Cache-Control: no-store\r\n"))
    #expect(out.contains(expected), "\(out)")
    #expect(!expected.hasPrefix("page 405") || out.contains("Allow: GET, HEAD, POST\r\n"))
  }

  @Test("Connection: close answers with close, shuts the write side, then closes on EOF")
  func connectionClose() {
    var h = Harness()
    h.send(
      "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    let (out, step) = h.drainOutput()
    #expect(out.contains("Connection: close\r\n"))
    #expect(out.components(separatedBy: "HTTP/1.1 200").count == 2, "the second request is not answered")
    #expect(step.close == .shutdownWrite)
    #expect(h.machine.state == .lingering)
    #expect(h.machine.inputEnded().close == .now)
  }

  @Test("a lingering connection is closed at the linger deadline")
  func lingerDeadline() {
    var h = Harness()
    h.send("GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    _ = h.drainOutput()
    #expect(h.timeout(after: .seconds(1)).close == .none)
    #expect(h.timeout(after: .seconds(1)).close == .now)
  }

  @Test("a connection another protocol ended lingers: its bytes are dropped, EOF or the deadline closes it")
  func lingerAfterHTTP2() {
    for endsBy in ["eof", "deadline"] {
      var h = Harness()
      h.clock.advance(by: .seconds(5))
      let step = h.machine.linger(reason: .drain)
      #expect(step.close == .shutdownWrite)
      #expect(h.machine.state == .lingering && h.machine.wantsInput)
      #expect(h.send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n").close == .none)
      #expect(h.machine.output.isEmpty, "what arrives while lingering is never answered")
      if endsBy == "eof" {
        #expect(h.machine.inputEnded().close == .now)
      } else {
        #expect(h.timeout(after: .seconds(1)).close == .none)
        #expect(h.timeout(after: .seconds(1)).close == .now, "the linger timeout counts from linger()")
      }
      #expect(h.machine.closeReason == .drain, "the reason the other protocol ended it is kept")
    }
  }

  @Test("HTTP/1.0 keep-alive is confirmed; plain 1.0 closes")
  func http10() {
    var h = Harness()
    h.send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    let (out, step) = h.drainOutput()
    #expect(out.contains("Connection: keep-alive\r\n"))
    #expect(step.close == .none)
    h.send("GET /hello HTTP/1.0\r\n\r\n")
    let (out2, step2) = h.drainOutput()
    #expect(out2.contains("Connection: close\r\n"))
    #expect(step2.close == .shutdownWrite)
  }

  @Test("Expect: 100-continue gets an interim response before the body is read")
  func hundredContinue() {
    var h = Harness()
    h.send("POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
    #expect(h.drainOutput().text == "HTTP/1.1 100 Continue\r\n\r\n")
    #expect(h.machine.state == .readingBody)
    h.send("ping")
    let out = h.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 200 OK\r\n"))
    #expect(out.hasSuffix("ping"))
  }

  @Test("a request split across many reads is answered once complete")
  func splitRequest() {
    var h = Harness()
    for c in "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc" { h.send(String(c)) }
    #expect(h.drainOutput().text.hasSuffix("\r\n\r\nabc"))
  }

  @Test("a parse error gets its status, a plain message and Connection: close")
  func parseError() {
    var h = Harness()
    h.send("GET / HTTP/1.1\nHost: a\r\n\r\n")
    let (out, step) = h.drainOutput()
    #expect(out.hasPrefix("HTTP/1.1 400 Bad Request\r\nCache-Control: no-store\r\n"))
    #expect(out.contains("Connection: close\r\n"))
    #expect(out.hasSuffix("Bad Request: a line ended in a bare LF; HTTP/1.1 lines end in CRLF.\n"))
    #expect(step.close == .shutdownWrite)
  }

  @Test("a silent new connection is closed at the head deadline")
  func silentConnection() {
    var h = Harness()
    #expect(h.timeout(after: .seconds(9)).close == .none)
    #expect(h.timeout(after: .seconds(1)).close == .now)
  }

  @Test("a new connection's first head is due a head timeout after accept, not after its first byte")
  func firstHeadFromAccept() {
    var h = Harness()
    #expect(h.timeout(after: .seconds(9)).close == .none)
    h.send("G")  // a late first byte must not restart the clock
    _ = h.timeout(after: .seconds(1))
    #expect(h.drainOutput().text.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
  }

  @Test("a later request's head is due a head timeout after its own first byte")
  func laterHeadFromFirstByte() {
    var h = Harness()
    h.send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    _ = h.drainOutput()
    #expect(h.timeout(after: .seconds(30)).close == .none)  // idle, within the idle timeout
    h.send("G")
    #expect(h.timeout(after: .seconds(9)).close == .none)
    _ = h.timeout(after: .seconds(1))
    #expect(h.drainOutput().text.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
  }

  @Test("a slow head is cut at its deadline however it trickles (slowloris)")
  func slowHead() {
    var h = Harness()
    h.send("GET / HTTP/1.1\r\n")
    for _ in 0..<9 {
      #expect(h.timeout(after: .seconds(1)).close == .none)
      h.send("X-a: b\r\n")  // progress does not extend the head deadline
    }
    _ = h.timeout(after: .seconds(1))
    let (out, step) = h.drainOutput()
    #expect(out.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
    #expect(step.close == .shutdownWrite)
  }

  @Test("a body is allowed its progress timeout between reads, then cut")
  func slowBody() {
    var h = Harness()
    h.send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
    for _ in 0..<5 {
      #expect(h.timeout(after: .seconds(4)).close == .none)
      h.send("x")
    }
    _ = h.timeout(after: .seconds(5))
    #expect(h.drainOutput().text.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
  }

  @Test("a kept-alive connection is closed after the idle timeout")
  func idle() {
    var h = Harness()
    h.send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    _ = h.drainOutput()
    #expect(h.timeout(after: .seconds(59)).close == .none)
    #expect(h.timeout(after: .seconds(1)).close == .now)
  }

  @Test("a client that does not read is closed at the write deadline; progress extends it")
  func writeDeadline() {
    var h = Harness()
    h.send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    #expect(h.timeout(after: .seconds(29)).close == .none)
    _ = h.machine.wrote(1)  // some progress
    #expect(h.timeout(after: .seconds(29)).close == .none)
    #expect(h.timeout(after: .seconds(1)).close == .now)
  }

  @Test("draining closes an idle connection at once and ends an active one after its answer")
  func drain() {
    var idle = Harness()
    #expect(idle.machine.drain().close == .now)

    var busy = Harness()
    busy.send("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
    #expect(busy.machine.drain().close == .none)
    _ = busy.machine.handlerFinished(.text(.ok, "slow"), context: &busy.context)
    let (out, step) = busy.drainOutput()
    #expect(out.contains("Connection: close\r\n"))
    #expect(step.close == .shutdownWrite)
  }

  @Test("end of input after complete requests: answer them, then close")
  func halfClose() {
    var h = Harness()
    h.send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    #expect(h.machine.inputEnded().close == .none)
    let (out, step) = h.drainOutput()
    #expect(out.hasPrefix("HTTP/1.1 200 OK"))
    #expect(step.close == .now)
  }

  @Test("end of input inside a request closes at once")
  func truncated() {
    var h = Harness()
    h.send("GET /hello HTTP/1.1\r\nHo")
    #expect(h.machine.inputEnded().close == .now)
  }

  @Test("the access log has the path without its query, and nothing from headers")
  func accessLog() {
    var h = Harness()
    h.send("GET /echo?code=secret HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer secret\r\n\r\n")
    let line = h.context.log.text
    #expect(line.contains(#""method":"GET","path":"/echo","protocol":"HTTP/1.1","status":200"#))
    #expect(line.contains(#""client":"127.0.0.1:5000""#))
    #expect(!line.contains("secret"))
  }
}

@Suite("Router")
struct RouterTests {
  let ok: @Sendable (Request) -> Response = { _ in .text(.ok, "") }

  @Test("bound parameters: set, replaced, removed; equal to the same bindings in any order")
  func parameters() {
    var bound = RouteParameters()
    #expect(bound.isEmpty && bound["id"] == nil)
    bound["id"] = "sch_1"
    bound["member"] = "acc_2"
    bound["id"] = "sch_3"
    #expect(bound["id"] == "sch_3" && bound["member"] == "acc_2" && bound["other"] == nil)
    #expect(bound.map { "\($0.key)=\($0.value)" } == ["id=sch_3", "member=acc_2"])
    #expect(bound == ["member": "acc_2", "id": "sch_3"])
    #expect(bound != ["id": "sch_3"] && bound != ["id": "sch_3", "member": "acc_9"])
    bound["id"] = nil
    #expect(bound == ["member": "acc_2"])
  }

  @Test("patterns are tried in declaration order, whatever their length; a longer path reaches a wildcard")
  func declarationOrder() throws {
    let ok: @Sendable (Request) -> Response = { _ in .text(.ok, "") }
    let router = try Router([
      Route(.get, "/files/*", cacheClass: .private, handler: ok),
      Route(.get, "/files/:name", cacheClass: .private, handler: ok),
      Route(.get, "/docs/:name", cacheClass: .private, handler: ok),
      Route(.get, "/docs/*", cacheClass: .private, handler: ok),
      Route(.get, "/a/:b/:c/:d/:e", cacheClass: .private, handler: ok),
    ])
    let table: [(String, String?)] = [
      ("/files/x", "/files/*"),  // the wildcard was declared first
      ("/docs/x", "/docs/:name"),  // the parameter was
      ("/docs/x/y", "/docs/*"),
      ("/docs/" + Array(repeating: "s", count: 40).joined(separator: "/"), "/docs/*"),
      ("/a/1/2/3/4", "/a/:b/:c/:d/:e"),
      ("/a/1/2/3", nil),
      ("/a/1/2/3/4/5", nil),
    ]
    for (path, expected) in table {
      switch router.match(.get, path) {
      case .found(let route, _, _): #expect(route.pattern == expected, "\(path)")
      default: #expect(expected == nil, "\(path)")
      }
    }
  }

  @Test("exact, parameter and wildcard routes bind what they should")
  func matching() throws {
    let router = try Router([
      Route(.get, "/a", cacheClass: .revalidate, handler: ok),
      Route(.get, "/schools/:id/members/:member", cacheClass: .private, handler: ok),
      Route(.get, "/qr/*", cacheClass: .private, handler: ok),
    ])
    let table: [(String, RouteParameters?)] = [
      ("/a", [:]),
      ("/a/", nil),
      ("/schools/sch_1/members/acc_2", ["id": "sch_1", "member": "acc_2"]),
      ("/schools//members/x", nil),
      ("/schools/1/members", nil),
      ("/qr/abc/def", ["*": "abc/def"]),
      ("/qr/", ["*": ""]),
      ("/qr", nil),
      ("/b", nil),
    ]
    for (path, expected) in table {
      switch router.match(.get, path) {
      case .found(_, let parameters, _): #expect(parameters == expected, "\(path)")
      default: #expect(expected == nil, "\(path)")
      }
    }
  }

  @Test(
    "exact paths are found by their bytes among many, and nothing else is: a prefix, an extension, one byte off"
  )
  func exactPaths() throws {
    let paths = (0..<300).map { "/assets/file-\($0).js" } + ["/", "/a", "/healthz", "/caf\u{E9}"]
    let router = try Router(
      paths.map { Route(.get, $0, cacheClass: .revalidate, name: "exact", handler: ok) })
    for path in paths {
      guard case .found(let route, _, _) = router.match(.get, path) else {
        Issue.record("\(path) not found")
        continue
      }
      #expect(route.pattern == path)
    }
    // A path built from other storage (not a native string's bytes) is found the same.
    let bridged = String(decoding: Array("/assets/file-7.js".utf8), as: UTF8.self)
    #expect(router.match(.get, bridged).pattern == "/assets/file-7.js")
    // A request's path as a string: the route's own for an exact path, else a copy; "/" for none.
    for (bytes, expected) in [
      ("/assets/file-9.js", "/assets/file-9.js"), ("/nowhere/x", "/nowhere/x"), ("", "/"),
    ] {
      #expect(Array(bytes.utf8).withUnsafeBufferPointer { router.path($0) } == expected)
    }
    for missing in [
      "", "/assets/file-300.js", "/assets/file-1.j", "/assets/file-1.jss", "/b", "//", "/Healthz", "/caf",
    ] {
      #expect(router.match(.get, missing).pattern == nil, "\(missing)")
    }
  }

  @Test("HEAD falls back to GET; other methods get 405 with Allow")
  func methods() throws {
    let router = try Router([
      Route(.get, "/x", cacheClass: .private, handler: ok),
      Route(.post, "/x", cacheClass: .private, handler: ok),
    ])
    guard case .found(let route, _, let headOnly) = router.match(.head, "/x") else {
      Issue.record("HEAD not routed")
      return
    }
    #expect(route.method == .get && headOnly)
    guard case .methodNotAllowed(let allow) = router.match(.put, "/x") else {
      Issue.record("PUT not refused")
      return
    }
    #expect(allow == "GET, HEAD, POST")
  }

  @Test("a route under a private prefix must be private; duplicates and bad patterns are refused")
  func validation() throws {
    #expect(throws: RouterError.notPrivate("/api/x", prefix: "/api/")) {
      try Router(
        [Route(.get, "/api/x", cacheClass: .revalidate, handler: ok)],
        privatePrefixes: ["/account/", "/api/"])
    }
    #expect(
      RouterError.notPrivate("/api/x", prefix: "/api/").description
        == "route /api/x is under /api/ and must use cache class private")
    // The prefixes are the composition's: the engine alone has none.
    _ = try Router([Route(.get, "/api/x", cacheClass: .revalidate, handler: ok)])
    _ = try Router(
      [
        Route(.get, "/api/x", cacheClass: .private, handler: ok),
        Route(.get, "/x", cacheClass: .immutable, handler: ok),
      ],
      privatePrefixes: ["/api/"])
    #expect(throws: RouterError.duplicateRoute("/x")) {
      try Router([
        Route(.get, "/x", cacheClass: .private, handler: ok),
        Route(.get, "/x", cacheClass: .private, handler: ok),
      ])
    }
    #expect(throws: RouterError.invalidPattern("x")) {
      try Router([Route(.get, "x", cacheClass: .private, handler: ok)])
    }
    #expect(throws: RouterError.invalidPattern("/a*/b")) {
      try Router([Route(.get, "/a*/b", cacheClass: .private, handler: ok)])
    }
  }

  @Test("errors are no-store whatever the route's class")
  func errorsAreNoStore() {
    #expect(CacheClass.immutable.applied(to: .notFound) == .private)
    #expect(CacheClass.immutable.applied(to: .ok) == .immutable)
    #expect(CacheClass.linkFile(maxAge: 3600).cacheControl == "public, max-age=3600")
  }
}

@Suite("Output queue")
struct OutputQueueTests {
  @Test("partial writes resume exactly where they stopped, across inline and shared segments")
  func partialWrites() {
    var q = OutputQueue()
    let big = SharedBytes(Array(repeating: UInt8(ascii: "b"), count: 5000))
    q.append("head".utf8)
    q.append(big)
    q.append("tail".utf8)
    let expected = Array("head".utf8) + big.array + Array("tail".utf8)
    var written: [UInt8] = []
    while !q.isEmpty {
      let chunk = Array(q.contents.prefix(777))
      written += chunk
      q.consume(chunk.count)
    }
    #expect(written == expected)
  }

  @Test(
    "iovecs after skipping bytes handed on start exactly there, across inline and shared segments",
    arguments: [0, 1, 3, 4, 5, 100, 4999, 5003, 5004, 5005, 5007])
  func skipping(skip: Int) {
    var q = OutputQueue()
    let big = SharedBytes(Array(repeating: UInt8(ascii: "b"), count: 5000))
    q.append("head".utf8)
    q.append(big)
    q.append("tail".utf8)
    q.consume(1)  // the queue's own start moves too
    let expected = Array(("head".utf8).dropFirst()) + big.array + Array("tail".utf8)
    let gathered = q.withIOVecs(skipping: skip) { vectors in
      vectors.flatMap { Array(UnsafeRawBufferPointer(start: $0.iov_base, count: $0.iov_len)) }
    }
    #expect(gathered == Array(expected.dropFirst(skip)))
  }

  @Test("the Date line is IMF-fixdate")
  func date() {
    #expect(Civil.imfFixdate(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
  }

  // MARK: answers on the head

  @Test("a body for a path that does not exist is answered on its head, without 100 Continue, and closed")
  func notFoundBeforeContinue() {
    var h = Harness()
    h.send("POST /nowhere HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
    let (out, step) = h.drainOutput()
    #expect(out.hasPrefix("HTTP/1.1 404 Not Found\r\n") && out.contains("Connection: close\r\n"))
    #expect(!out.contains("100 Continue"))
    #expect(step.close == .shutdownWrite)
  }

  @Test("without Expect, the refused request's body is read past and dropped; the next request is answered")
  func refusedBodyDropped() {
    var h = Harness()
    h.send("DELETE /hello HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n")
    let early = h.drainOutput().text
    #expect(early.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n") && !early.contains("Connection: close"))
    h.send("abcdeGET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    let next = h.drainOutput().text
    #expect(next.hasPrefix("HTTP/1.1 200 OK\r\n") && next.hasSuffix("hello\n"))
  }

  @Test("a route's body policy: 415 and 413 on the head, before 100 Continue; a body it takes gets 100")
  func bodyPolicy() {
    var wrongType = Harness()
    wrongType.send(
      "POST /api/json HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n"
    )
    let refused = wrongType.drainOutput().text
    #expect(refused.hasPrefix("HTTP/1.1 415 Unsupported Media Type\r\n") && refused.hasSuffix("json only"))
    #expect(!refused.contains("100 Continue") && refused.contains("Connection: close"))

    var tooLarge = Harness()
    tooLarge.send(
      "POST /api/json HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{}")
    let (large, step) = tooLarge.drainOutput()
    #expect(large.hasPrefix("HTTP/1.1 413 Content Too Large\r\n") && large.contains("Connection: close"))
    #expect(step.close == .shutdownWrite, "413 closes: the body is never read")

    var taken = Harness()
    taken.send(
      "POST /api/json HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"
    )
    #expect(taken.drainOutput().text == "HTTP/1.1 100 Continue\r\n\r\n")
    taken.send("{}")
    #expect(taken.drainOutput().text.hasSuffix("got {}"))
  }

  @Test("a chunked body past the route's limit is refused as it arrives, not at the listener's limit")
  func chunkedPastRouteLimit() {
    var h = Harness()
    h.send(
      "POST /api/json HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    #expect(h.machine.output.isEmpty)
    h.send("5\r\n[1,2]\r\n9\r\n")
    let out = h.drainOutput().text
    #expect(out.hasPrefix("HTTP/1.1 413 Content Too Large\r\n") && out.contains("Connection: close"))
    #expect(out.hasSuffix("at most 8 bytes"), "the route's own refusal, not the engine's")
  }

  @Test("a dropped body that looks like a request is never parsed as one (Content-Length and chunked)")
  func droppedBodyIsNotARequest() {
    let inner = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"
    var fixed = Harness()
    fixed.send("POST /nowhere HTTP/1.1\r\nHost: a\r\nContent-Length: \(inner.utf8.count)\r\n\r\n")
    #expect(fixed.drainOutput().text.hasPrefix("HTTP/1.1 404 "))
    fixed.send(inner)
    #expect(fixed.machine.output.isEmpty, "the body was dropped, not answered")

    var chunked = Harness()
    chunked.send("POST /nowhere HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
    #expect(chunked.drainOutput().text.hasPrefix("HTTP/1.1 404 "))
    chunked.send(
      String(inner.utf8.count, radix: 16) + "\r\n" + inner + "\r\n0\r\n\r\n"
        + "GET /echo?n=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    let after = chunked.drainOutput().text
    #expect(after.hasPrefix("HTTP/1.1 200 OK\r\n") && after.hasSuffix("echo n=1"))
    #expect(after.components(separatedBy: "HTTP/1.1 ").count == 2, "exactly one answer: the real request's")
  }

  @Test("no second answer while a body is dropped: a framing error or the body timeout just closes")
  func noSecondAnswer() {
    var broken = Harness()
    broken.send("POST /nowhere HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
    #expect(broken.drainOutput().text.hasPrefix("HTTP/1.1 404 "))
    let step = broken.send("3\r\nabcX")
    #expect(broken.machine.output.isEmpty && step.close == .now)

    var slow = Harness()
    slow.send("POST /nowhere HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
    #expect(slow.drainOutput().text.hasPrefix("HTTP/1.1 404 "))
    #expect(slow.timeout(after: .seconds(6)).close == .now)
    #expect(slow.machine.output.isEmpty, "no 408 after the 404")
  }

  @Test("draining while a refused body is dropped: closed once it has been read past")
  func drainWhileDropping() {
    var h = Harness()
    h.send("DELETE /hello HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n")
    #expect(h.drainOutput().text.hasPrefix("HTTP/1.1 405 "))
    #expect(h.machine.drain().close == .none)
    #expect(h.send("abcde").close == .now)
  }
}

extension RouteMatch {
  /// The pattern of the route found, if any (for tables).
  fileprivate var pattern: String? {
    if case .found(let route, _, _) = self { return route.pattern }
    return nil
  }
}
