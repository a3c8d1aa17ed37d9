import CNGHTTP2
import Testing

@testable import Edge

/// An HTTP/2 connection decides each stream on its head (404, 413 before the body) and
/// keeps HTTP/1's deadlines per stream and per connection, on a clock the test moves.
@Suite("HTTP/2 connection (deadlines and routing on the head)")
struct HTTP2ConnectionTests {
  static let small = BodyPolicy(maxBytes: 10)

  final class Harness {
    let clock = ManualClock()
    var limits = Limits()
    var context: ConnectionContext
    let connection: HTTP2Connection<ManualClock>
    let client = H2TestClient()
    /// Everything the server wrote so far.
    var written: [UInt8] = []

    init(metrics: MetricShard? = nil) throws {
      limits.headTimeout = .seconds(10)
      limits.bodyTimeout = .seconds(5)
      limits.idleTimeout = .seconds(60)
      let router = try Router([
        Route(.get, "/hello", cacheClass: .revalidate, fixed: .text(.ok, "hello")),
        Route.head(.get, "/file", cacheClass: .immutable) { fields in
          fields.value("accept-encoding") == "gzip"
            ? .prebuilt(HTTP2ConnectionTests.gzipFile)
            : .made(.text(.ok, fields.value("accept-encoding") ?? "identity"))
        },
        Route(.post, "/form", cacheClass: .private) { request in .text(.ok, "got \(request.body.count)") },
        Route(.post, "/small", cacheClass: .private, body: HTTP2ConnectionTests.small) { _ in .text(.ok, "ok")
        },
      ])
      context = ConnectionContext(router: router, log: AccessLog(enabled: false))
      connection = HTTP2Connection(
        clock: clock, limits: limits, client: "127.0.0.1", secure: false, dispatcher: context.dispatcher,
        metrics: metrics)
      context.metrics = metrics
      send(client.pendingBytes())
    }

    /// Bytes to the server; then what it queued is written (and given to the client).
    @discardableResult
    func send(_ bytes: [UInt8]) -> HTTP2Connection<ManualClock>.Step {
      let step = bytes.withUnsafeBytes { connection.received($0, context: &context) }
      drain()
      return step
    }

    /// Writes what the server has queued; true when it asked to close.
    @discardableResult
    func drain() -> Bool {
      var close = false
      while !connection.output.isEmpty {
        let bytes = connection.output.contents
        written += bytes
        _ = bytes.withUnsafeBufferPointer {
          nghttp2_session_mem_recv(client.session, $0.baseAddress!, $0.count)
        }
        close = connection.wrote(bytes.count) || close
      }
      return close
    }

    /// The client's queued frames, one by one.
    func clientFrames() -> [[UInt8]] {
      let bytes = client.pendingBytes()
      var frames: [[UInt8]] = []
      var at = 0
      while at + 9 <= bytes.count {
        let end = at + 9 + (Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]))
        frames.append(Array(bytes[at..<end]))
        at = end
      }
      return frames
    }

    /// Moves the clock and lets the connection see its deadline; true when it closes.
    func advance(_ duration: Duration) -> Bool {
      clock.advance(by: duration)
      guard clock.now() >= connection.deadline else { return false }
      let closeNow = connection.deadlinePassed(context: &context)
      return drain() || closeNow
    }
  }

  @Test(
    "an idle connection ends with GOAWAY at the head timeout before its first request; PINGs do not keep it")
  func idleBeforeFirstRequest() throws {
    let h = try Harness()
    #expect(!h.advance(.seconds(6)))
    nghttp2_submit_ping(h.client.session, 0, nil)
    h.send(h.client.pendingBytes())
    #expect(h.advance(.seconds(5)), "cut at 10 s from the start, not from the PING")
    #expect(RawFrames.goAway(h.written) == NGHTTP2_NO_ERROR.rawValue)
  }

  @Test(
    "a fixed answer, a head route's, a 404 and a 405 are decided on the stream's head: no Request is built for them"
  )
  func decidedWithoutRequest() throws {
    let h = try Harness()
    let fixed = h.client.request("GET", "/hello")
    let missing = h.client.request("GET", "/nowhere", fields: [("accept", "application/json")])
    let wrongMethod = h.client.request("DELETE", "/hello")
    let file = h.client.request("GET", "/file", fields: [("accept-encoding", "br")])
    h.send(h.client.pendingBytes())
    #expect(h.client.answers[fixed]?.body == Array("hello".utf8))
    #expect(h.client.answers[file]?.body == Array("br".utf8))
    #expect(h.client.answers[missing]?.field(":status") == "404")
    #expect(h.client.answers[wrongMethod]?.field(":status") == "405")
    #expect(h.connection.requestsBuilt == 0)
    // The head route's prebuilt answer (its fields passed without copying), whole, to HEAD, and on a
    // head whose body follows (dropped).
    let chosen = h.client.request("GET", "/file", fields: [("accept-encoding", "gzip")])
    let chosenHead = h.client.request("HEAD", "/file", fields: [("accept-encoding", "gzip")])
    let chosenEarly = h.client.request("GET", "/file", fields: [("accept-encoding", "gzip")], body: [1, 2])
    h.send(h.client.pendingBytes())
    for stream in [chosen, chosenHead, chosenEarly] {
      #expect(h.client.answers[stream]?.field(":status") == "200")
      #expect(h.client.answers[stream]?.field("content-encoding") == "gzip")
      #expect(h.client.answers[stream]?.field("cache-control") == "public, max-age=31536000, immutable")
      #expect(h.client.answers[stream]?.field("content-length") == "4")
      #expect(h.client.answers[stream]?.field("date") == h.context.date.value)
    }
    #expect(h.client.answers[chosen]?.body == Array("gzip".utf8))
    #expect(h.client.answers[chosenEarly]?.body == Array("gzip".utf8))
    #expect(h.client.answers[chosenHead]?.body == [])
    #expect(h.connection.requestsBuilt == 0)
    let posted = h.client.request("POST", "/form", body: Array("abc".utf8))
    h.send(h.client.pendingBytes())
    #expect(h.client.answers[posted]?.body == Array("got 3".utf8))
    #expect(h.connection.requestsBuilt == 1)
  }

  static let gzipFile = PrebuiltResponse(
    Response(status: .ok, headers: [("Content-Encoding", "gzip")], body: .bytes(Array("gzip".utf8))),
    cacheClass: .immutable)

  @Test("an idle connection gives its buffers back after the quiet delay, and writes again as before")
  func quietReleasesBuffers() throws {
    let h = try Harness()
    let session = h.connection.session
    #expect(session.bufferBytes > 0, "the SETTINGS frame was queued in one")
    #expect(!h.advance(HTTP2Connection<ManualClock>.quietDelay - .milliseconds(1)))
    #expect(session.bufferBytes > 0)
    #expect(!h.advance(.milliseconds(2)))
    #expect(session.bufferBytes == 0)
    let stream = h.client.request("GET", "/hello")
    h.send(h.client.pendingBytes())
    #expect(h.client.answers[stream]?.body == Array("hello".utf8))
    #expect(session.bufferBytes > 0)
    #expect(!h.advance(HTTP2Connection<ManualClock>.quietDelay + .milliseconds(1)))
    #expect(session.bufferBytes == 0)
  }

  @Test("after an answer the idle timeout runs from its end")
  func idleAfterAnswer() throws {
    let h = try Harness()
    let stream = h.client.request("GET", "/hello")
    h.send(h.client.pendingBytes())
    #expect(h.client.answers[stream]?.body == Array("hello".utf8))
    #expect(!h.advance(.seconds(59)))
    #expect(h.advance(.seconds(2)))
  }

  @Test("a header block left open is cut at the head timeout")
  func openHeaderBlock() throws {
    let h = try Harness()
    h.send(RawFrames.frame(0x01, flags: 0x01, stream: 1, [0x82, 0x86]))
    #expect(!h.advance(.seconds(9)))
    #expect(h.advance(.seconds(2)))
    #expect(RawFrames.goAway(h.written) == NGHTTP2_NO_ERROR.rawValue)
  }

  @Test("a body that stops arriving gets 408 on its stream at the body timeout; the connection stays")
  func stalledBody() throws {
    let h = try Harness()
    let posted = h.client.request("POST", "/form", body: [UInt8](repeating: 1, count: 50_000))
    // The head and the first two DATA frames arrive; the rest never does.
    let frames = h.clientFrames()
    let data = frames.indices.filter { frames[$0][3] == 0x00 }
    guard data.count >= 2 else {
      Issue.record("expected DATA frames")
      return
    }
    h.send(frames[0..<data[0]].flatMap { $0 } + frames[data[0]])
    #expect(!h.advance(.seconds(4)))
    h.send(frames[data[1]])  // progress: the body timeout starts again
    #expect(!h.advance(.seconds(4)))
    #expect(!h.advance(.seconds(2)), "408 sent, the connection kept")
    #expect(h.client.answers[posted]?.field(":status") == "408")
    let stream = h.client.request("GET", "/hello")
    h.send(h.client.pendingBytes())
    #expect(h.client.answers[stream]?.field(":status") == "200")
  }

  @Test(
    "refusals come on the head, before the body: 404, and 413 for an announced length past the route's; a refused body is reset (NO_ERROR), a small one is read and dropped",
    arguments: [
      ("/missing", nil, "404"), ("/missing", "100000", "404"), ("/small", "50", "413"), ("/form", nil, nil),
    ])
  func answeredOnTheHead(path: String, length: String?, status: String?) throws {
    let h = try Harness()
    let fields = length.map { [("content-length", $0)] } ?? []
    let body = [UInt8](repeating: 7, count: Int(length ?? "50") ?? 50)
    // The head alone, then nothing: a refusal cannot have waited for the body.
    let stream = h.client.request("POST", path, fields: fields, body: body)
    let frames = h.clientFrames()
    guard let headers = frames.firstIndex(where: { $0[3] == 0x01 }) else {
      Issue.record("no HEADERS")
      return
    }
    let step = h.send(frames[0...headers].flatMap { $0 })
    #expect(step.dispatches.isEmpty)
    #expect(h.client.answers[stream]?.field(":status") == status)
    // Refused for its size (413), or announcing more than the stream's window: reset once answered.
    if status == "413" || Int(length ?? "0") ?? 0 > h.limits.http2InitialWindowBytes {
      #expect(RawFrames.reset(h.written, stream: UInt32(stream)) == NGHTTP2_NO_ERROR.rawValue)
    } else {
      #expect(RawFrames.reset(h.written, stream: UInt32(stream)) == nil, "the stream stays open for its body")
    }
  }

  @Test("a body of unknown length past the route's limit gets 413, also when it comes with its head")
  func unknownLengthPastTheRouteLimit() throws {
    let split = try Harness()
    let first = split.client.request("POST", "/small", body: [UInt8](repeating: 7, count: 50))
    let frames = split.clientFrames()
    guard let headers = frames.firstIndex(where: { $0[3] == 0x01 }) else {
      Issue.record("no HEADERS")
      return
    }
    split.send(frames[0...headers].flatMap { $0 })
    split.send(frames[(headers + 1)...].flatMap { $0 })
    #expect(split.client.answers[first]?.field(":status") == "413", "DATA after the head's read")
    // HEADERS and all its DATA in one read: the session takes the whole read before the head is
    // decided, so the route's limit comes after the body is in, and the handler gets all 50 bytes.
    // ClientAPI's handlers hold their limit themselves meanwhile (JSONBody.pastLimit).
    let together = try Harness()
    let second = together.client.request("POST", "/small", body: [UInt8](repeating: 7, count: 50))
    together.send(together.client.pendingBytes())
    withKnownIssue("the route's body limit applies only to DATA read after its head's read") {
      #expect(together.client.answers[second]?.field(":status") == "413", "DATA in the head's read")
    }
  }

  /// Sends `stream`'s head alone (its body held back); returns the rest of its frames.
  static func headOnly(_ h: Harness) -> [UInt8] {
    let frames = h.clientFrames()
    let headers = frames.firstIndex { $0[3] == 0x01 } ?? 0
    h.send(frames[0...headers].flatMap { $0 })
    return frames[(headers + 1)...].flatMap { $0 }
  }

  @Test(
    "a stream answered on its head whose body never ends is reset at the body timeout, never answered again")
  func droppedBodyDeadline() throws {
    let h = try Harness()
    let stream = h.client.request("POST", "/missing", body: [UInt8](repeating: 7, count: 50))
    _ = Self.headOnly(h)
    #expect(h.client.answers[stream]?.field(":status") == "404")
    #expect(RawFrames.reset(h.written, stream: UInt32(stream)) == nil, "open for its body")
    #expect(!h.advance(.seconds(6)))
    #expect(RawFrames.reset(h.written, stream: UInt32(stream)) == NGHTTP2_NO_ERROR.rawValue)
    #expect(RawFrames.parse(h.written).filter { $0.type == 0x01 && $0.stream == UInt32(stream) }.count == 1)
  }

  @Test("a drain's GOAWAY lets a stream still receiving its body finish: answered, then closed")
  func drainWaitsForBodies() throws {
    let h = try Harness()
    let stream = h.client.request("POST", "/form", body: [UInt8](repeating: 7, count: 10))
    let body = Self.headOnly(h)
    #expect(!h.connection.drain())
    #expect(!h.drain(), "the GOAWAY is written; the stream still waits for its body")
    let step = h.send(body)
    for (id, dispatch) in step.dispatches {
      _ = h.connection.finished(stream: id, dispatch.route.respond(to: dispatch.request), context: &h.context)
    }
    #expect(h.client.answers[stream]?.field(":status") == "200")
    #expect(h.drain() || h.connection.lingers, "closed once the answer is written")
  }

  @Test(
    "after a graceful GOAWAY the connection lingers; after a protocol error it closes at once, metrics or not"
  )
  func lingersOnlyWhenGraceful() throws {
    let graceful = try Harness()
    _ = graceful.connection.drain()
    #expect(graceful.drain(), "nothing in flight: closed once the GOAWAY is written")
    #expect(graceful.connection.lingers)
    let broken = try Harness()  // no metrics
    broken.send(RawFrames.frame(0x01, flags: 0x05, stream: 2, [0x82, 0x86, 0x84, 0x01, 0x01, 0x61]))
    #expect(RawFrames.goAway(broken.written) == NGHTTP2_PROTOCOL_ERROR.rawValue)
    #expect(!broken.connection.lingers)
  }

  @Test("streams answered on their head that end at once do not pile up in the table of bodies still coming")
  func droppedBodiesBounded() throws {
    let h = try Harness()
    for _ in 0..<(3 * h.limits.http2MaxConcurrentStreams) {
      let stream = h.client.request("POST", "/missing", body: [1, 2, 3])
      h.send(h.client.pendingBytes())
      #expect(h.client.answers[stream]?.field(":status") == "404")
    }
    #expect(h.connection.droppingCount <= 2 * h.limits.http2MaxConcurrentStreams)
  }
}
