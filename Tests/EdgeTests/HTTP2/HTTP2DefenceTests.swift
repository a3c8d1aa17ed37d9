import CNGHTTP2
import Testing

@testable import Edge

/// Frames as bytes, for the cases no well-behaved client library would send.
enum RawFrames {
  static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

  static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
    let n = payload.count
    return [
      UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff), type, flags,
      UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff),
    ] + payload
  }

  /// The frames in `bytes` as (type, flags, stream, payload).
  static func parse(_ bytes: [UInt8]) -> [(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8])] {
    var frames: [(UInt8, UInt8, UInt32, [UInt8])] = []
    var at = 0
    while at + 9 <= bytes.count {
      let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
      let stream = bytes[(at + 5)..<(at + 9)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7fff_ffff
      guard at + 9 + length <= bytes.count else { break }
      frames.append((bytes[at + 3], bytes[at + 4], stream, Array(bytes[(at + 9)..<(at + 9 + length)])))
      at += 9 + length
    }
    return frames
  }

  /// The error code of the last GOAWAY in `bytes`.
  static func goAway(_ bytes: [UInt8]) -> UInt32? {
    parse(bytes).last { $0.type == 0x07 }.map { $0.payload[4..<8].reduce(0) { $0 << 8 | UInt32($1) } }
  }

  /// The error code of a RST_STREAM on `stream` in `bytes`.
  static func reset(_ bytes: [UInt8], stream: UInt32) -> UInt32? {
    parse(bytes).last { $0.type == 0x03 && $0.stream == stream }.map {
      $0.payload.reduce(0) { $0 << 8 | UInt32($1) }
    }
  }
}

/// HTTP/2 defences and settings in the session: what it bounds beyond RFC 9113.
@Suite("HTTP/2 defences (in memory)")
struct HTTP2DefenceTests {
  static func feed(_ server: HTTP2Session, _ bytes: [UInt8], at seconds: UInt64 = 1) -> [UInt8] {
    _ = bytes.withUnsafeBytes { server.received($0, now: Instant(nanoseconds: seconds * 1_000_000_000)) }
    var out: [UInt8] = []
    server.output(into: &out)
    return out
  }

  @Test(
    "the first SETTINGS frame announces the limits",
    arguments: [(100, 16384, 65535, 16384, 4096), (7, 4096, 1 << 20, 32768, 0)])
  func settings(streams: Int, headerBytes: Int, window: Int, frame: Int, table: Int) {
    var limits = Limits()
    limits.http2MaxConcurrentStreams = streams
    limits.maxHeaderBytes = headerBytes
    limits.http2InitialWindowBytes = window
    limits.http2MaxFrameBytes = frame
    limits.http2HeaderTableBytes = table
    let server = HTTP2Session(settings: .init(limits))
    var out: [UInt8] = []
    server.output(into: &out)
    guard let first = RawFrames.parse(out).first, first.type == 0x04 else {
      Issue.record("no SETTINGS first")
      return
    }
    var announced: [Int: Int] = [:]
    for at in stride(from: 0, to: first.payload.count - 5, by: 6) {
      let id = Int(first.payload[at]) << 8 | Int(first.payload[at + 1])
      announced[id] = first.payload[(at + 2)..<(at + 6)].reduce(0) { $0 << 8 | Int($1) }
    }
    #expect(announced == [0x3: streams, 0x6: headerBytes, 0x4: window, 0x5: frame, 0x1: table, 0x9: 1])
  }

  @Test("a head is handed on before its body; answered on it, the stream is then reset with NO_ERROR")
  func headFirst() {
    let server = HTTP2Session(maxBodyBytes: 1 << 20)
    let client = H2TestClient()
    let stream = client.request("POST", "/upload", body: [UInt8](repeating: 1, count: 200_000))
    // Only the client's first flight: the head and one window's worth of body.
    _ = Self.feed(server, client.pendingBytes())
    let events = server.takeEvents()
    guard case .head(let head) = events.first, head.id == stream, events.count == 1 else {
      Issue.record("expected only the head: \(events)")
      return
    }
    // The event is read after the whole read: the body of this flight is in it, not complete.
    #expect(head.targetString == "/upload" && head.body.count < 200_000 && server.readsBody(stream))
    server.discardBody(stream, resetting: true)
    server.respond(
      stream: stream, .text(.notFound, "Not found."), cacheClass: .private, headOnly: false,
      date: HTTP2SessionTests.date, hsts: false)
    var out: [UInt8] = []
    server.output(into: &out)
    let frames = RawFrames.parse(out).filter { $0.stream == UInt32(stream) }
    #expect(frames.map(\.type) == [0x01, 0x00, 0x03], "HEADERS, DATA, then RST_STREAM")
    #expect(RawFrames.reset(out, stream: UInt32(stream)) == NGHTTP2_NO_ERROR.rawValue)
    #expect(server.takeEvents().isEmpty)
  }

  @Test(
    "header fields past the limits are refused on their stream; the next stream is served",
    arguments: [true, false])
  func fieldsTooLarge(byCount: Bool) {
    var settings = HTTP2Session.Settings()
    settings.maxHeaderListBytes = 1000
    settings.maxHeaderCount = 5
    let server = HTTP2Session(settings: settings)
    let client = H2TestClient()
    let fields =
      byCount
      ? (0..<6).map { ("x-field-\($0)", "v") } : [("x-big", String(repeating: "a", count: 1200))]
    let refused = client.request("GET", "/hello", fields: fields)
    let fine = client.request("GET", "/hello", fields: [("x-small", "b")])
    client.exchange(with: server)
    let events = server.takeEvents()
    #expect(events.count == 2)
    guard case .fieldsTooLarge(let request) = events.first, request.id == refused,
      case .request(let served, headFirst: false) = events.last, served.id == fine
    else {
      Issue.record("expected fieldsTooLarge then a request: \(events)")
      return
    }
    #expect(request.targetString == "/hello" && request.value("x-field-0") == nil && !server.failed)
  }

  @Test(
    "a header block is bounded in CONTINUATION frames: a flood ends in GOAWAY ENHANCE_YOUR_CALM",
    arguments: [(2, 8, false), (8, 8, false), (9, 8, true), (10_000, 8, true), (3, 2, true), (2, 2, false)])
  func continuations(count: Int, bound: Int, flood: Bool) {
    var settings = HTTP2Session.Settings()
    settings.maxContinuationFrames = bound
    let server = HTTP2Session(settings: settings)
    // HEADERS (stream 1, END_STREAM, no END_HEADERS) with `:method GET`, then CONTINUATION frames
    // of `:scheme http`, `:path /`, `:authority a.test` and `accept-encoding: gzip, deflate`
    // (static table entries), the last one ending the block (CVE-2024-28182's class: the bound is
    // the configured one).
    var wire = RawFrames.preface + RawFrames.frame(0x04)
    wire += RawFrames.frame(0x01, flags: 0x01, stream: 1, [0x82])
    for i in 0..<count {
      let payload: [UInt8] = i == 0 ? [0x86, 0x84, 0x41, 0x06] + Array("a.test".utf8) : [0x90]
      wire += RawFrames.frame(0x09, flags: i == count - 1 ? 0x04 : 0, stream: 1, payload)
    }
    let out = Self.feed(server, wire)
    #expect(server.calmedDown == flood)
    #expect(RawFrames.goAway(out) == (flood ? NGHTTP2_ENHANCE_YOUR_CALM.rawValue : nil))
    #expect(server.takeArrived().count == (flood ? 0 : 1))
  }

  @Test(
    "cookie crumbs (one field per cookie, RFC 9113 §8.2.3) reach handlers as one Cookie field",
    arguments: [
      ([("cookie", "a=1"), ("x-other", "y"), ("cookie", "b=2"), ("cookie", "c=3")], "a=1; b=2; c=3"),
      ([("cookie", "a=1; b=2")], "a=1; b=2"),
    ])
  func cookieCrumbs(fields: [(String, String)], expected: String) {
    let server = HTTP2Session(maxBodyBytes: 1000)
    let client = H2TestClient()
    _ = client.request("GET", "/account", fields: fields)
    client.exchange(with: server)
    let arrived = server.takeArrived()
    #expect(arrived.first?.request.headers.values("cookie") == [expected])
    #expect(arrived.first?.request.headers["x-other"] == (fields.count > 1 ? "y" : nil))
  }

  @Test(
    "a block of many references to one large table entry is cut at the header limit (431), not read on; HPACK stays in step"
  )
  func referenceBomb() {
    let server = HTTP2Session(settings: .init())
    // Stream 1 indexes `x-big` with 4,000 bytes (literal with incremental indexing, new name).
    var first: [UInt8] = [0x82, 0x86, 0x84, 0x01, 0x01, 0x61, 0x40, 0x05] + Array("x-big".utf8)
    first += [0x7F, 0xA1, 0x1E] + [UInt8](repeating: 0x61, count: 4000)  // length 127 + 0x21 + 30 << 7
    var wire = RawFrames.preface + RawFrames.frame(0x04)
    wire += RawFrames.frame(0x01, flags: 0x05, stream: 1, first)
    // Stream 3: the entry (index 62) referenced 3,000 times: 12 MB if every field were read.
    let bomb: [UInt8] = [0x82, 0x86, 0x84, 0x01, 0x01, 0x61] + [UInt8](repeating: 0xBE, count: 3000)
    wire += RawFrames.frame(0x01, flags: 0x05, stream: 3, bomb)
    wire += RawFrames.frame(0x01, flags: 0x05, stream: 5, [0x82, 0x86, 0x84, 0x01, 0x01, 0x61])
    let out = Self.feed(server, wire)
    #expect(RawFrames.goAway(out) == nil)
    let events = server.takeEvents()
    let streams = events.map { event -> String in
      switch event {
      case .fieldsTooLarge(let s): "\(s.id) too large"
      case .request(let s, _): "\(s.id) request"
      default: "\(event.stream) other"
      }
    }
    #expect(streams == ["1 request", "3 too large", "5 request"])
    // Stream 1's 5 fields; stream 3's 4 pseudo-fields and 5 references, the fifth passing 16 KiB
    // (none after it is read); stream 5's 4.
    #expect(server.fieldsRead == 5 + 9 + 4)
  }

  @Test(
    "a window made negative by a smaller SETTINGS_INITIAL_WINDOW_SIZE sends nothing until reopened (§6.9.2)")
  func negativeWindow() {
    let server = HTTP2Session(settings: .init())
    var wire = RawFrames.preface + RawFrames.frame(0x04)
    wire += RawFrames.frame(0x01, flags: 0x05, stream: 1, [0x82, 0x86, 0x84, 0x41, 0x01, 0x61])
    _ = Self.feed(server, wire)
    _ = server.takeEvents()
    server.respond(
      stream: 1, Response(status: .ok, body: .bytes([UInt8](repeating: 7, count: 100_000))),
      cacheClass: .private,
      headOnly: false,
      date: HTTP2SessionTests.date, hsts: false)
    var out: [UInt8] = []
    server.output(into: &out)
    let sent = RawFrames.parse(out).filter { $0.type == 0 }.reduce(0) { $0 + $1.payload.count }
    #expect(sent == 65535, "the default windows")
    // The client's window for streams drops to 0: stream 1's is now -65535.
    out = Self.feed(server, RawFrames.frame(0x04, [0, 4, 0, 0, 0, 0]))
    #expect(RawFrames.parse(out).filter { $0.type == 0 }.isEmpty && server.sending)
    out = Self.feed(
      server, RawFrames.frame(0x08, stream: 1, [0, 1, 0, 0]) + RawFrames.frame(0x08, [0, 1, 0, 0]))
    #expect(RawFrames.parse(out).map(\.payload.count) == [1], "65,536 opened: the window is 1")
    out = Self.feed(server, RawFrames.frame(0x08, stream: 1, [0, 0, 0x80, 0]))
    let more = RawFrames.parse(out).filter { $0.type == 0 }.reduce(0) { $0 + $1.payload.count }
    #expect(more == 32768)
  }

  @Test("a header block's bytes are bounded by the header limit, whatever its frames")
  func blockBytes() {
    var settings = HTTP2Session.Settings()
    settings.maxHeaderListBytes = 1000
    let server = HTTP2Session(settings: settings)
    var wire = RawFrames.preface + RawFrames.frame(0x04)
    wire += RawFrames.frame(0x01, flags: 0x01, stream: 1, [0x82] + [UInt8](repeating: 0x90, count: 1400))
    let out = Self.feed(server, wire)
    #expect(server.calmedDown && RawFrames.goAway(out) == NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
  }

  @Test("bodies count against the process's buffer budget; a stream past it is refused; its bytes come back")
  func budget() {
    let budget = RequestBudget(limit: 100)
    do {
      let server = HTTP2Session(maxBodyBytes: 1000, budget: budget)
      let client = H2TestClient()
      let small = client.request("POST", "/a", body: [UInt8](repeating: 1, count: 60))
      let large = client.request("POST", "/b", body: [UInt8](repeating: 2, count: 80))
      client.exchange(with: server)
      let events = server.takeEvents()
      #expect(events.contains { if case .request(let s, _) = $0 { s.id == small } else { false } })
      #expect(events.contains { if case .overBudget(let s) = $0 { s.id == large } else { false } })
      #expect(budget.inUse == 60)
      server.respond(
        stream: small, .text(.ok, "ok"), cacheClass: .private, headOnly: false, date: HTTP2SessionTests.date,
        hsts: false)
      client.exchange(with: server)
      #expect(budget.inUse == 0, "the answered stream closed and gave its bytes back")
    }
    #expect(budget.inUse == 0)
  }
}
