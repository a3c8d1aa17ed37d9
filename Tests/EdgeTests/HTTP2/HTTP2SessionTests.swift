import CNGHTTP2
import Testing

@testable import Edge

/// An HTTP/2 client for the tests, on libnghttp2's client session: it speaks to an `HTTP2Session`
/// through memory, no socket.
final class H2TestClient {
  struct Answer {
    var fields: [(String, String)] = []
    var body: [UInt8] = []
    var closedWith: UInt32? = nil
    func field(_ name: String) -> String? { fields.first { $0.0 == name }?.1 }
  }

  var session: OpaquePointer?
  var answers: [Int32: Answer] = [:]
  var uploads: [Int32: ([UInt8], Int)] = [:]

  init() {
    var callbacks: OpaquePointer?
    nghttp2_session_callbacks_new(&callbacks)
    defer { nghttp2_session_callbacks_del(callbacks) }
    nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nl, value, vl, _, user in
      let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
      let n = String(decoding: UnsafeBufferPointer(start: name, count: nl), as: UTF8.self)
      let v = String(decoding: UnsafeBufferPointer(start: value, count: vl), as: UTF8.self)
      me.answers[frame!.pointee.hd.stream_id, default: Answer()].fields.append((n, v))
      return 0
    }
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, user in
      let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
      me.answers[stream, default: Answer()].body += UnsafeBufferPointer(start: data, count: length)
      return 0
    }
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, code, user in
      let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
      me.answers[stream, default: Answer()].closedWith = code
      return 0
    }
    nghttp2_session_client_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
    nghttp2_submit_settings(session, 0, nil, 0)
  }

  deinit { nghttp2_session_del(session) }

  /// Opens a stream: `method path` with `fields`, and `body` as DATA when given.
  func request(_ method: String, _ path: String, fields: [(String, String)] = [], body: [UInt8]? = nil)
    -> Int32
  {
    let all =
      [(":method", method), (":path", path), (":scheme", "https"), (":authority", "app.example.test")]
      + fields
    var bytes: [UInt8] = []
    var spans: [(Int, Int, Int, Int)] = []
    for (n, v) in all {
      let ns = bytes.count
      bytes += n.utf8
      let vs = bytes.count
      bytes += v.utf8
      spans.append((ns, vs - ns, vs, bytes.count - vs))
    }
    return bytes.withUnsafeMutableBufferPointer { raw in
      let nva = spans.map {
        nghttp2_nv(
          name: raw.baseAddress! + $0.0, value: raw.baseAddress! + $0.2, namelen: $0.1, valuelen: $0.3,
          flags: 0)
      }
      guard let body else { return nghttp2_submit_request(session, nil, nva, nva.count, nil, nil) }
      var provider = nghttp2_data_provider(
        source: nghttp2_data_source(ptr: nil),
        read_callback: { _, stream, buffer, length, flags, _, user in
          let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
          let (bytes, sent) = me.uploads[stream]!
          let take = min(length, bytes.count - sent)
          bytes.withUnsafeBufferPointer { buffer!.update(from: $0.baseAddress! + sent, count: take) }
          me.uploads[stream] = (bytes, sent + take)
          if sent + take == bytes.count { flags!.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
          return take
        })
      let stream = nghttp2_submit_request(session, nil, nva, nva.count, &provider, nil)
      uploads[stream] = (body, 0)
      return stream
    }
  }

  /// Moves bytes both ways until neither side has anything to say.
  func exchange(with server: HTTP2Session) {
    for _ in 0..<1000 {
      var toServer: [UInt8] = []
      while true {
        var data: UnsafePointer<UInt8>?
        let n = nghttp2_session_mem_send(session, &data)
        guard n > 0, let data else { break }
        toServer += UnsafeBufferPointer(start: data, count: n)
      }
      if !toServer.isEmpty {
        _ = toServer.withUnsafeBytes { server.received($0, now: Instant(nanoseconds: 1)) }
      }
      var toClient: [UInt8] = []
      server.output(into: &toClient)
      if !toClient.isEmpty {
        _ = toClient.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress!, $0.count) }
      }
      if toServer.isEmpty && toClient.isEmpty { return }
    }
  }
}

@Suite("HTTP/2 session (with libnghttp2 as the client, in memory)")
struct HTTP2SessionTests {
  static let date = "Thu, 01 Jan 1970 00:00:00 GMT"

  static func server(maxBodyBytes: Int = 1000) -> HTTP2Session {
    HTTP2Session(maxBodyBytes: maxBodyBytes)
  }

  @Test("a GET arrives as a Request with Host from :authority; its answer carries the writer's fields")
  func get() {
    let server = Self.server()
    let client = H2TestClient()
    let stream = client.request("GET", "/hello?x=1", fields: [("accept", "text/plain")])
    client.exchange(with: server)
    let arrived = server.takeArrived()
    #expect(arrived.count == 1)
    let request = arrived[0].request
    #expect(arrived[0].stream == stream)
    #expect(request.method == .get && request.path == "/hello" && request.query == "x=1")
    #expect(request.headers["host"] == "app.example.test" && request.headers["accept"] == "text/plain")
    server.respond(
      stream: stream, .text(.ok, "hello"), cacheClass: .revalidate, headOnly: false, date: Self.date,
      hsts: true)
    client.exchange(with: server)
    let answer = client.answers[stream]
    #expect(answer?.field(":status") == "200" && answer?.field("cache-control") == "no-cache")
    #expect(
      answer?.field("content-type") == "text/plain; charset=utf-8" && answer?.field("content-length") == "5")
    #expect(answer?.field("date") == Self.date)
    #expect(answer?.field("strict-transport-security") == "max-age=63072000; includeSubDomains")
    #expect(answer?.body == Array("hello".utf8) && answer?.closedWith == 0)
  }

  @Test(
    "a prebuilt answer (fields taken without copying) says what the same answer built per request says",
    arguments: [true, false])
  func prebuiltLikeBuilt(hsts: Bool) {
    let response = Response.text(.ok, "hello", headers: [("ETag", "\"abc\""), ("Vary", "Accept-Encoding")])
    let prebuilt = PrebuiltResponse(response, cacheClass: .revalidate)
    let server = Self.server()
    let client = H2TestClient()
    var answers: [[(String, String)]] = []
    for (i, answer) in [response, prebuilt.response, prebuilt.response].enumerated() {
      let stream = client.request("GET", "/hello")
      client.exchange(with: server)
      _ = server.takeArrived()
      // The date changes between answers: each stream keeps its own.
      let date = i == 2 ? "Tue, 01 Dec 2026 08:00:01 GMT" : Self.date
      server.respond(stream: stream, answer, cacheClass: .revalidate, headOnly: false, date: date, hsts: hsts)
      client.exchange(with: server)
      #expect(client.answers[stream]?.field("date") == date)
      #expect(client.answers[stream]?.body == Array("hello".utf8))
      answers.append((client.answers[stream]?.fields ?? []).filter { $0.0 != "date" })
    }
    let sorted = answers.map { $0.sorted { $0.0 < $1.0 }.map { "\($0.0): \($0.1)" } }
    #expect(sorted[0] == sorted[1] && sorted[1] == sorted[2])
    #expect(sorted[0].contains("etag: \"abc\"") && sorted[0].contains("vary: Accept-Encoding"))
    #expect(sorted[0].contains { $0.hasPrefix("strict-transport-security: max-age=63072000") } == hsts)
  }

  @Test(
    "host must name what :authority names (ASCII case aside): else the stream is reset, never handed on",
    arguments: [("app.example.test", true), ("APP.example.TEST", true), ("evil.example.test", false)])
  func hostAgainstAuthority(host: String, agrees: Bool) {
    let server = Self.server()
    let client = H2TestClient()
    let stream = client.request("GET", "/hello", fields: [("host", host)])
    client.exchange(with: server)
    #expect(server.takeArrived().count == (agrees ? 1 : 0))
    #expect(client.answers[stream]?.closedWith == (agrees ? nil : NGHTTP2_PROTOCOL_ERROR.rawValue))
  }

  @Test("bodies arrive whole; answers go out of order on their own streams; HEAD gets no DATA")
  func bodiesAndOrder() {
    let server = Self.server()
    let client = H2TestClient()
    let post = client.request(
      "POST", "/echo", fields: [("content-type", "application/json")], body: Array("{\"a\":1}".utf8))
    let head = client.request("HEAD", "/file")
    client.exchange(with: server)
    let arrived = server.takeArrived()
    #expect(arrived.map(\.stream).sorted() == [post, head])
    #expect(arrived.first { $0.stream == post }?.request.body == Array("{\"a\":1}".utf8))
    server.respond(
      stream: head, .text(.ok, "twelve bytes"), cacheClass: .immutable, headOnly: true, date: Self.date,
      hsts: false)
    server.respond(
      stream: post, .text(.created, "made"), cacheClass: .private, headOnly: false, date: Self.date,
      hsts: false)
    client.exchange(with: server)
    #expect(client.answers[head]?.field("content-length") == "12" && client.answers[head]?.body == [])
    #expect(
      client.answers[post]?.field(":status") == "201" && client.answers[post]?.body == Array("made".utf8))
    #expect(client.answers[post]?.field("cache-control") == "no-store")
  }

  @Test(
    "a closed stream's record serves the next: 300 streams, 16 at a time, make 16 records; bodies reserved come back"
  )
  func recordsReused() {
    let budget = RequestBudget(limit: 1 << 20)
    let server = HTTP2Session(maxBodyBytes: 1000, budget: budget)
    let client = H2TestClient()
    for round in 0..<20 {
      let streams = (0..<(round == 19 ? 4 : 16)).map { i in
        i % 2 == 0 ? client.request("GET", "/file?\(i)") : client.request("POST", "/echo", body: [1, 2, 3])
      }
      client.exchange(with: server)
      let arrived = server.takeArrived()
      #expect(arrived.map(\.stream).sorted() == streams.sorted())
      #expect(arrived.allSatisfy { $0.request.path == ($0.request.method == .get ? "/file" : "/echo") })
      #expect(budget.inUse == 3 * streams.count / 2)
      for stream in streams {
        server.respond(
          stream: stream, .text(.ok, "answer \(stream)"), cacheClass: .private, headOnly: false,
          date: Self.date,
          hsts: false)
      }
      client.exchange(with: server)
      #expect(streams.allSatisfy { client.answers[$0]?.body == Array("answer \($0)".utf8) })
      #expect(server.openStreams == 0 && budget.inUse == 0 && !server.sending)
    }
    #expect(server.recordsMade == 16)
  }

  @Test(
    "a session that ends with streams open gives back what they held of the budget, and their records (with or without a budget)",
    arguments: [true, false])
  func endsWithStreamsOpen(withBudget: Bool) {
    let budget = withBudget ? RequestBudget(limit: 1 << 20) : nil
    weak var kept: HTTP2Stream?
    do {
      let server = HTTP2Session(maxBodyBytes: 1000, budget: budget)
      let client = H2TestClient()
      for _ in 0..<3 { _ = client.request("POST", "/echo", body: [1, 2, 3, 4]) }
      client.exchange(with: server)
      let events = server.takeEvents()
      for event in events { if case .request(let stream, _) = event { kept = stream } }
      #expect(server.openStreams == 3 && (budget?.inUse ?? 12) == 12 && kept != nil)
    }
    #expect((budget?.inUse ?? 0) == 0 && kept == nil)
  }

  @Test(
    "a head past the record's first buffers grows them; the stream that reuses the record reads its own head")
  func largeHeadThenSmall() {
    let server = Self.server()
    let client = H2TestClient()
    let large = (0..<40).map {
      ("x-field-\($0)", String(repeating: Character(UnicodeScalar(97 + $0 % 26)!), count: 200))
    }
    for (fields, query) in [(large, "big"), ([("x-small", "s")], "small"), (large, "again")] {
      let stream = client.request("GET", "/file?\(query)", fields: fields)
      client.exchange(with: server)
      let arrived = server.takeArrived()
      #expect(arrived.count == 1 && arrived.first?.request.query == query)
      let headers = arrived.first?.request.headers
      #expect(headers?["host"] == "app.example.test")
      #expect(fields.allSatisfy { headers?[$0.0] == $0.1 } && headers?.count == fields.count + 1)
      server.respond(
        stream: stream, .text(.ok, "ok"), cacheClass: .private, headOnly: false, date: Self.date, hsts: false)
      client.exchange(with: server)
    }
    #expect(server.recordsMade == 1)
  }

  @Test("a body larger than the connection window is sent whole under flow control, from shared bytes")
  func flowControl() {
    let server = Self.server()
    let client = H2TestClient()
    let stream = client.request("GET", "/big")
    client.exchange(with: server)
    _ = server.takeArrived()
    let big = [UInt8]((0..<200_000).map { UInt8(truncatingIfNeeded: $0) })
    server.respond(
      stream: stream, Response(status: .ok, body: .shared(SharedBytes(big))), cacheClass: .immutable,
      headOnly: false,
      date: Self.date, hsts: false)
    client.exchange(with: server)
    #expect(client.answers[stream]?.body.count == big.count && client.answers[stream]?.body == big)
  }

  @Test(
    "a body past the limit is dropped and reported, never handed on; bytes that are not HTTP/2 end the connection"
  )
  func refusals() {
    let server = Self.server(maxBodyBytes: 10)
    let client = H2TestClient()
    let stream = client.request("POST", "/echo", body: [UInt8](repeating: 1, count: 50))
    client.exchange(with: server)
    let events = server.takeEvents()
    #expect(events.count == 2)
    guard case .head(let head) = events.first, head.id == stream,
      case .bodyTooLarge(let request) = events.last,
      request.id == stream
    else {
      Issue.record("expected the head, then bodyTooLarge: \(events)")
      return
    }
    #expect(request.targetString == "/echo" && request.body.isEmpty)

    let other = Self.server()
    let garbage = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
    #expect(!garbage.withUnsafeBytes { other.received($0, now: Instant(nanoseconds: 1)) })
    var out: [UInt8] = []
    other.output(into: &out)
    // Frame types in order (the 4th byte of each 9-byte header): whatever was queued, never a response.
    var types: [UInt8] = []
    var at = 0
    while at + 9 <= out.count {
      types.append(out[at + 3])
      at += 9 + (Int(out[at]) << 16 | Int(out[at + 1]) << 8 | Int(out[at + 2]))
    }
    #expect(types.last == 0x07 && !types.contains(0x01), "a GOAWAY last, never HEADERS: \(types)")
    #expect(out.count >= 17 && out[out.count - 1] == 0x01, "its error code is PROTOCOL_ERROR")
    #expect(other.failed)
  }
}

extension H2TestClient {
  /// What the client has queued, as bytes for the server.
  func pendingBytes() -> [UInt8] {
    var out: [UInt8] = []
    while true {
      var data: UnsafePointer<UInt8>?
      let n = nghttp2_session_mem_send(session, &data)
      guard n > 0, let data else { return out }
      out += UnsafeBufferPointer(start: data, count: n)
    }
  }
}

@Suite("HTTP/2 floods (in memory)")
struct HTTP2FloodTests {
  /// The GOAWAY error code in `bytes` (frames the server wrote), if there is one.
  static func goAwayCode(_ bytes: [UInt8]) -> UInt32? {
    var at = 0
    var code: UInt32? = nil
    while at + 9 <= bytes.count {
      let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
      if bytes[at + 3] == 0x07, length >= 8, at + 9 + 8 <= bytes.count {
        code = bytes[(at + 13)..<(at + 17)].reduce(0) { $0 << 8 | UInt32($1) }
      }
      at += 9 + length
    }
    return code
  }

  @Test("rapid reset: 20,000 HEADERS+RST_STREAM pairs: none answered, then GOAWAY ENHANCE_YOUR_CALM")
  func rapidReset() {
    let server = HTTP2Session(maxBodyBytes: 1000)
    let client = H2TestClient()
    var wire = client.pendingBytes()
    for _ in 0..<20_000 {
      let stream = client.request("GET", "/hello")
      wire += client.pendingBytes()
      nghttp2_submit_rst_stream(client.session, 0, stream, NGHTTP2_CANCEL.rawValue)
      wire += client.pendingBytes()
    }
    var answered = 0
    var offset = 0
    var out: [UInt8] = []
    while offset < wire.count && !server.failed {
      let end = min(wire.count, offset + 16384)
      _ = wire[offset..<end].withUnsafeBytes { server.received($0, now: Instant(nanoseconds: 1_000_000)) }
      answered += server.takeArrived().count
      server.output(into: &out)
      offset = end
    }
    #expect(server.calmedDown && server.failed)
    #expect(answered == 0)
    #expect(offset < wire.count / 4, "stopped long before the end")
    #expect(Self.goAwayCode(out) == NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
  }

  @Test(
    "a PING flood ends in GOAWAY ENHANCE_YOUR_CALM; a few PINGs a second do not", arguments: [true, false])
  func pings(flood: Bool) {
    let server = HTTP2Session(maxBodyBytes: 1000)
    let client = H2TestClient()
    var out: [UInt8] = []
    for second in 0..<(flood ? 1 : 30) {
      for _ in 0..<(flood ? 5000 : 20) { nghttp2_submit_ping(client.session, 0, nil) }
      let wire = client.pendingBytes()
      _ = wire.withUnsafeBytes {
        server.received($0, now: Instant(nanoseconds: UInt64(second + 1) * 1_000_000_000))
      }
      server.output(into: &out)
    }
    #expect(server.calmedDown == flood)
    #expect(Self.goAwayCode(out) == (flood ? NGHTTP2_ENHANCE_YOUR_CALM.rawValue : nil))
  }
}

extension HTTP2FloodTests {
  @Test("a 20 MB answer (thousands of WINDOW_UPDATEs from the client) is not taken for a flood")
  func largeDownload() {
    let server = HTTP2Session(maxBodyBytes: 1000)
    let client = H2TestClient()
    let stream = client.request("GET", "/big")
    client.exchange(with: server)
    _ = server.takeArrived()
    let big = SharedBytes([UInt8](repeating: 7, count: 20 << 20))
    server.respond(
      stream: stream, Response(status: .ok, body: .shared(big)), cacheClass: .immutable, headOnly: false,
      date: HTTP2SessionTests.date, hsts: false)
    client.exchange(with: server)
    #expect(!server.calmedDown && client.answers[stream]?.body.count == big.count)
  }
}

extension HTTP2Session {
  /// A session with the default settings and `maxBodyBytes`.
  convenience init(maxBodyBytes: Int, budget: RequestBudget? = nil) {
    var settings = Settings()
    settings.maxBodyBytes = maxBodyBytes
    self.init(settings: settings, budget: budget)
  }

  /// What the session has ready, as bytes.
  func output(into out: inout [UInt8]) {
    var queue = OutputQueue()
    output(into: &queue)
    out += queue.contents
  }

  /// The complete requests among the events since the last call.
  func takeArrived() -> [(stream: Int32, request: Request)] {
    takeEvents().compactMap {
      guard case .request(let stream, _) = $0 else { return nil }
      return (stream.id, stream.request())
    }
  }
}
