import Testing

@testable import Edge
@testable import EdgeTesting

/// A forwarded answer (`Response.forward`) is handed to the loop by every path a route can answer
/// on — inline, a fast path, a pooled handler — over both codecs, and never written as it stands.
@Suite struct ForwardHandOverTests {
  /// A call to "core" whose answer says what the upstream answered.
  static func call(_ request: Request) -> UpstreamCall {
    UpstreamCall(
      upstream: "core", method: request.method, head: Array("GET / HTTP/1.1\r\n\r\n".utf8), body: []
    ) {
      result in
      switch result {
      case .response(let upstream): .text(.ok, "core said \(upstream.status)")
      case .fault(let fault): .text(fault.status, "no answer: \(fault.proxyStatusError)")
      }
    }
  }

  static let router = try! Router(
    [
      Route(.get, "/inline", cacheClass: .private) { .forward(call($0)) },
      Route(
        .get, "/fast", cacheClass: .private, execution: .pooled, fastPath: { .forward(call($0)) }
      ) { _ in .text(.ok, "pool") },
      Route(.get, "/pooled", cacheClass: .private, execution: .pooled) { .forward(call($0)) },
    ], errors: .plainText)

  @Test("the dispatcher turns a forwarded answer from an inline route or a fast path into .forward")
  func action() throws {
    let dispatcher = Dispatcher(router: Self.router)
    for path in ["/inline", "/fast"] {
      guard case .found(let route, _, _) = Self.router.match(.get, path) else {
        Issue.record("no route for \(path)")
        continue
      }
      guard case .forward(let call) = dispatcher.action(route, Request(method: .get, target: path)) else {
        Issue.record("\(path) is not forwarded")
        continue
      }
      #expect(call.upstream == "core")
    }
    guard case .found(let pooled, _, _) = Self.router.match(.get, "/pooled") else { return }
    guard case .pool = dispatcher.action(pooled, Request(method: .get, target: "/pooled")) else {
      Issue.record("a pooled route without a fast path goes to the pool")
      return
    }
  }

  @Test("HTTP/1: a forwarded request is dispatched with its call, and its answer is the call's")
  func http1() throws {
    let clock = ManualClock()
    var machine = ConnectionMachine(clock: clock, limits: Limits(), client: "127.0.0.1:5000", secure: false)
    var context = ConnectionContext(router: Self.router, log: AccessLog(enabled: false))
    let step = "GET /inline HTTP/1.1\r\nHost: a\r\n\r\n".utf8.withContiguousStorageIfAvailable {
      machine.received(UnsafeRawBufferPointer($0), context: &context)
    }
    let dispatch = try #require(step?.dispatch)
    let call = try #require(dispatch.call)
    #expect(machine.output.isEmpty, "nothing is written before the upstream answers")
    _ = machine.handlerFinished(call.answer(.fault(.connectRefused)), context: &context)
    var out: [UInt8] = []
    machine.output.withIOVecs(skipping: 0) { vectors in
      for v in vectors { out += UnsafeRawBufferPointer(start: v.iov_base, count: v.iov_len) }
    }
    let text = String(decoding: out, as: UTF8.self)
    #expect(text.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n") && text.hasSuffix("no answer: connection_refused"))
  }

  @Test(
    "in process: each path's forwarded answer comes from the upstream given, or says it is switched off",
    arguments: ["/inline", "/fast", "/pooled"])
  func inProcess(path: String) {
    var client = InProcessClient(Self.router)
    let off = client.send(.get, path)
    #expect(off.status.code == 503)
    #expect(String(decoding: off.body.contents, as: UTF8.self) == "no answer: destination_unavailable")
    client.upstream = { _ in .fault(.firstByteTimeout) }
    #expect(client.send(.get, path).status.code == 504)
  }

  @Test("a forwarded answer written where nothing forwards is a bare 502, never a success")
  func unforwarded() {
    let response = Response.forward(Self.call(Request(method: .get, target: "/")))
    #expect(response.status.code == 502 && response.body.contents.isEmpty)
  }
}
