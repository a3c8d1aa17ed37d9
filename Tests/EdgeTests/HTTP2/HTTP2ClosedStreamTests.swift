import CNGHTTP2
import Testing

@testable import Edge

/// Frames on streams the session no longer has open (`HTTP2FrameGuard`), and streams answered before
/// their body (kept open, so that what still arrives on them is checked): RFC 9113 §5.1, §5.1.1,
/// §6.1, §8.1, with raw frames into an `HTTP2Session`.
@Suite("HTTP/2 closed streams and early answers (in memory)")
struct HTTP2ClosedStreamTests {
  // Header blocks from HPACK's static table: :method GET or POST, :scheme http, :path /,
  // :authority "a" (a literal that is not indexed).
  static let get: [UInt8] = [0x82, 0x86, 0x84, 0x01, 0x01, 0x61]
  static let post: [UInt8] = [0x83, 0x86, 0x84, 0x01, 0x01, 0x61]
  /// POST with `content-length: <digits>` (static entry 28, a literal not indexed).
  static func post(length: String) -> [UInt8] {
    post + [0x0f, 0x0d, UInt8(length.utf8.count)] + Array(length.utf8)
  }

  static let endStream: UInt8 = 0x1
  static let endHeaders: UInt8 = 0x4
  static let padded: UInt8 = 0x8
  static let start = RawFrames.preface + RawFrames.frame(0x04)

  static func headers(_ stream: UInt32, _ block: [UInt8], end: Bool) -> [UInt8] {
    RawFrames.frame(0x01, flags: endHeaders | (end ? endStream : 0), stream: stream, block)
  }
  static func data(_ stream: UInt32, _ bytes: [UInt8], end: Bool) -> [UInt8] {
    RawFrames.frame(0x00, flags: end ? endStream : 0, stream: stream, bytes)
  }
  static func reset(_ stream: UInt32) -> [UInt8] { RawFrames.frame(0x03, stream: stream, [0, 0, 0, 8]) }
  static let ping = RawFrames.frame(0x06, [1, 2, 3, 4, 5, 6, 7, 8])

  /// `chunks` fed one after another: everything the server wrote, and whether it is still up.
  static func run(_ server: HTTP2Session, _ chunks: [[UInt8]]) -> (out: [UInt8], alive: Bool) {
    var out: [UInt8] = []
    var alive = true
    for chunk in chunks {
      alive = chunk.withUnsafeBytes { server.received($0, now: Instant(nanoseconds: 1_000_000_000)) } && alive
      server.output(into: &out)
    }
    return (out, alive)
  }

  /// Answers `stream` (a 405, as a GET-only route answers a POST on its head).
  static func answer(_ server: HTTP2Session, _ stream: Int32, resetting: Bool) -> [UInt8] {
    server.discardBody(stream, resetting: resetting)
    server.respond(
      stream: stream, .text(Status(405, "Method Not Allowed"), "No."), cacheClass: .private, headOnly: false,
      date: HTTP2SessionTests.date, hsts: false)
    var out: [UInt8] = []
    server.output(into: &out)
    return out
  }

  @Test(
    "the guard's verdict on HEADERS and DATA by stream, the last stream opened and the session's state",
    arguments: [
      // (DATA?, stream, last opened, state, reset by the server?, expected code)
      (false, Int32(7), Int32(5), HTTP2FrameGuard.StreamState.unknown, false, UInt32?.none),  // a new stream
      (false, 3, 5, .unknown, false, NGHTTP2_PROTOCOL_ERROR.rawValue),  // below the last, never used
      (false, 3, 5, .closed, false, NGHTTP2_STREAM_CLOSED.rawValue),  // a closed stream on record
      (false, 5, 5, .open, false, nil),  // trailers: the session's
      (false, 3, 5, .unknown, true, nil),  // after this server's reset: ignored
      (true, 3, 5, .unknown, false, NGHTTP2_STREAM_CLOSED.rawValue),
      (true, 3, 5, .closed, false, NGHTTP2_STREAM_CLOSED.rawValue),
      (true, 5, 5, .open, false, nil),
      (true, 3, 5, .closed, true, nil),
      (true, 9, 5, .unknown, false, nil),  // an idle stream: the session's PROTOCOL_ERROR
      (true, 0, 5, .unknown, false, nil),  // stream 0: the session's
    ])
  func verdict(
    isData: Bool, stream: Int32, lastOpened: Int32, state: HTTP2FrameGuard.StreamState, resetHere: Bool,
    expected: UInt32?
  ) {
    var guarded = HTTP2FrameGuard(kept: 4)
    if resetHere { guarded.reset(stream) }
    #expect(guarded.error(isData: isData, stream: stream, lastOpened: lastOpened, state: state) == expected)
  }

  @Test("the guard remembers the last streams this server reset, and only those")
  func resetsKept() {
    var guarded = HTTP2FrameGuard(kept: 3)
    for stream: Int32 in [1, 3, 5, 7] { guarded.reset(stream) }
    let ignored = [1, 3, 5, 7].map {
      guarded.error(isData: true, stream: $0, lastOpened: 9, state: .unknown) == nil
    }
    #expect(ignored == [false, true, true, true])
  }

  @Test("HEADERS again on a stream that closed is STREAM_CLOSED: the guard keeps the last closed streams")
  func closedKept() {
    var guarded = HTTP2FrameGuard(kept: 2)
    for stream: Int32 in [1, 3, 5] { guarded.close(stream) }
    let codes = [1, 3, 5, 7].map { guarded.error(isData: false, stream: $0, lastOpened: 9, state: .unknown) }
    #expect(
      codes == [
        NGHTTP2_PROTOCOL_ERROR.rawValue, NGHTTP2_STREAM_CLOSED.rawValue, NGHTTP2_STREAM_CLOSED.rawValue,
        NGHTTP2_PROTOCOL_ERROR.rawValue,
      ])
  }

  /// `bytes` fed `cut` bytes at a time.
  static func chunks(_ bytes: [UInt8], cut: Int) -> [[UInt8]] {
    stride(from: 0, to: bytes.count, by: cut).map { Array(bytes[$0..<min(bytes.count, $0 + cut)]) }
  }

  @Test(
    "frames are read whole however the bytes are cut: PRIORITY checked (§6.3, §5.3.1), DATA counted",
    arguments: [1, 3, 9, 11, 14, 1000])
  func framesCut(cut: Int) {
    let cases: [([UInt8], UInt32?)] = [
      (RawFrames.frame(0x02, stream: 3, [0, 0, 0, 1, 16]), nil),
      (RawFrames.frame(0x02, stream: 3, [0x80, 0, 0, 3, 16]), NGHTTP2_PROTOCOL_ERROR.rawValue),
      (RawFrames.frame(0x02, stream: 0, [0, 0, 0, 1, 16]), NGHTTP2_PROTOCOL_ERROR.rawValue),
      (RawFrames.frame(0x02, stream: 3, [0, 0, 0, 1]), NGHTTP2_FRAME_SIZE_ERROR.rawValue),
    ]
    for (frame, expected) in cases {
      let server = HTTP2Session(settings: .init())
      let bytes =
        Self.start + Self.headers(1, Self.post, end: false) + Self.ping + frame
        + Self.data(1, [1, 2], end: true)
      let (out, alive) = Self.run(server, Self.chunks(bytes, cut: cut))
      #expect(RawFrames.goAway(out) == expected, "\(frame)")
      #expect(alive == (expected == nil))
      if expected == nil {
        let events = server.takeEvents()
        #expect(events.count == 2, "the head, then the request with its 2 bytes")
        if case .request(let stream, _)? = events.last { #expect(stream.body == [1, 2]) }
      }
    }
  }

  @Test(
    "HEADERS on a stream below one already opened is GOAWAY PROTOCOL_ERROR (§5.1.1)",
    arguments: [true, false])
  func lowerStream(oneRead: Bool) {
    let server = HTTP2Session(settings: .init())
    let frames = [Self.start + Self.headers(5, Self.get, end: true), Self.headers(3, Self.get, end: true)]
    let (out, alive) = Self.run(server, oneRead ? [frames.joined().map { $0 }] : frames)
    #expect(!alive)
    #expect(RawFrames.goAway(out) == NGHTTP2_PROTOCOL_ERROR.rawValue)
  }

  @Test(
    "DATA or HEADERS after the client's own RST_STREAM is GOAWAY STREAM_CLOSED (§5.1)",
    arguments: [(true, true), (true, false), (false, true), (false, false)])
  func afterClientReset(data: Bool, oneRead: Bool) {
    let server = HTTP2Session(settings: .init())
    let late = data ? Self.data(1, Array("test".utf8), end: true) : Self.headers(1, Self.get, end: true)
    let frames = [Self.start + Self.headers(1, Self.post, end: false), Self.reset(1), late]
    let (out, alive) = Self.run(server, oneRead ? [frames.joined().map { $0 }] : frames)
    #expect(!alive)
    #expect(RawFrames.goAway(out) == NGHTTP2_STREAM_CLOSED.rawValue)
  }

  @Test(
    "a stream refused past the concurrency limit: its late frames in the same read are ignored, not an error",
    arguments: [true, false])
  func refusedInTheSameRead(trailers: Bool) {
    var settings = HTTP2Session.Settings()
    settings.maxConcurrentStreams = 1
    let server = HTTP2Session(settings: settings)
    let late =
      trailers ? Self.headers(3, [0x40, 0x01, 0x78, 0x01, 0x79], end: true) : Self.data(3, [1], end: true)
    let chunk =
      Self.start + Self.headers(1, Self.post, end: false) + Self.headers(3, Self.post, end: false)
      + Self.reset(1)
      + Self.headers(5, Self.get, end: true) + late + Self.ping
    let (out, alive) = Self.run(server, [chunk])
    #expect(alive && RawFrames.goAway(out) == nil)
    #expect(RawFrames.reset(out, stream: 3) == NGHTTP2_REFUSED_STREAM.rawValue)
  }

  @Test("a stream answered on its head stays open: a small body is read and dropped, no reset, no error")
  func answeredEarlyStaysOpen() {
    let server = HTTP2Session(settings: .init())
    _ = Self.run(server, [Self.start + Self.headers(1, Self.post(length: "4"), end: false)])
    let answered = Self.answer(server, 1, resetting: false)
    #expect(RawFrames.parse(answered).filter { $0.stream == 1 }.map(\.type) == [0x01, 0x00])
    let (out, alive) = Self.run(server, [Self.data(1, Array("test".utf8), end: true) + Self.ping])
    #expect(alive)
    #expect(RawFrames.parse(out).map(\.type) == [0x06], "the PING's ACK; no reset, no GOAWAY")
    #expect(server.takeEvents().isEmpty, "an answered request is not handed on again")
  }

  @Test(
    "what arrives on a stream answered on its head is checked as on any open stream (§6.1, §8.1)",
    arguments: ["padding", "content-length", "trailers without END_STREAM", "pseudo-field in trailers"])
  func answeredEarlyChecked(late: String) {
    let server = HTTP2Session(settings: .init())
    _ = Self.run(server, [Self.start + Self.headers(1, Self.post(length: "4"), end: false)])
    _ = Self.answer(server, 1, resetting: false)
    let frames: [UInt8]
    switch late {
    case "padding":
      // Pad length 6 in a 5-byte payload.
      frames = RawFrames.frame(0x00, flags: Self.padded, stream: 1, [6] + Array("Test".utf8))
    case "content-length":
      frames = Self.data(1, Array("test!".utf8), end: true)
    case "trailers without END_STREAM":
      frames =
        Self.data(1, Array("test".utf8), end: false)
        + Self.headers(1, [0x40, 0x01, 0x78, 0x01, 0x79], end: false)
    default:
      frames = Self.data(1, Array("test".utf8), end: false) + Self.headers(1, [0x82], end: true)
    }
    let (out, _) = Self.run(server, [frames])
    if late == "padding" {
      #expect(RawFrames.goAway(out) == NGHTTP2_PROTOCOL_ERROR.rawValue)
    } else {
      #expect(RawFrames.reset(out, stream: 1) == NGHTTP2_PROTOCOL_ERROR.rawValue)
    }
  }

  @Test("a body answered on its head that brings more than its window is reset with NO_ERROR, once")
  func answeredEarlyLargeBody() {
    let server = HTTP2Session(settings: .init())
    _ = Self.run(server, [Self.start + Self.headers(1, Self.post, end: false)])
    _ = Self.answer(server, 1, resetting: false)
    let chunk = Self.data(1, Array(repeating: 1, count: 16_384), end: false)
    let (out, alive) = Self.run(server, [chunk, chunk, chunk, chunk + chunk + Self.ping])
    #expect(alive)
    let resets = RawFrames.parse(out).filter { $0.type == 0x03 && $0.stream == 1 }
    #expect(resets.count == 1 && RawFrames.reset(out, stream: 1) == NGHTTP2_NO_ERROR.rawValue)
    // Frames the client sent before it read the reset are ignored (§5.1), not an error: DATA, then
    // trailers.
    let (after, stillAlive) = Self.run(
      server, [chunk + Self.headers(1, [0x40, 0x01, 0x78, 0x01, 0x79], end: true) + Self.ping])
    #expect(stillAlive && RawFrames.goAway(after) == nil)
  }
}
