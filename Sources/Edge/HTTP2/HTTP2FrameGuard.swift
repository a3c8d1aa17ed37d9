import CNGHTTP2

/// The frames RFC 9113 forbids on streams that libnghttp2 no longer tracks, which it would
/// otherwise drop in silence:
/// - HEADERS on a stream number at or below one the client already opened, unless the stream is
///   still open: a connection error, `PROTOCOL_ERROR` for a number never used (§5.1.1),
///   `STREAM_CLOSED` for a stream that has closed (§5.1);
/// - DATA on such a stream: `STREAM_CLOSED` (§5.1, §6.1; §5.4.1 lets a stream error end the
///   connection), after the client's own RST_STREAM too.
///
/// What is left to the library: new streams, streams it still has open (trailers, DATA past
/// `content-length`, bad padding, windows), and frames on a stream this server reset, which
/// §5.1 says to ignore (they may have been sent before the reset arrived).
///
/// The library reads a DATA frame on a stream it no longer has without calling back, so the
/// session passes it the bytes up to each DATA frame's header (`HTTP2FrameHeaders`) and asks this
/// type first. HEADERS are asked about from the library's begin-frame callback, which comes before
/// it reads any HEADERS frame.
struct HTTP2FrameGuard {
  /// What the library knows of a stream.
  enum StreamState: Equatable {
    /// Open or half-closed: the library checks what arrives on it.
    case open
    /// Closed, and still on record.
    case closed
    /// Never opened, or closed and forgotten.
    case unknown
  }

  /// The streams this server reset most recently, and those that closed most recently (the library
  /// keeps no closed stream: `nghttp2_option_set_no_closed_streams`).
  private var resets: StreamRing
  private var closed: StreamRing

  /// A guard that remembers the last `kept` streams this server reset, and the last `kept` closed.
  init(kept: Int) {
    resets = StreamRing(capacity: kept)
    closed = StreamRing(capacity: kept)
  }

  /// This server sent RST_STREAM on `stream`: frames the client sent before it learnt of it are
  /// ignored.
  mutating func reset(_ stream: Int32) { resets.add(stream) }

  /// `stream` closed: HEADERS on it again is STREAM_CLOSED, not a stream number never used.
  mutating func close(_ stream: Int32) { closed.add(stream) }

  /// The connection error that a HEADERS (`isData` false) or DATA frame on `stream` calls for, or nil
  /// when the library decides: `lastOpened` is the highest stream the client opened, `state` what
  /// the library knows of `stream`.
  func error(isData: Bool, stream: Int32, lastOpened: Int32, state: StreamState) -> UInt32? {
    guard stream > 0, stream <= lastOpened, state != .open, !resets.contains(stream) else { return nil }
    if isData || state == .closed || closed.contains(stream) { return NGHTTP2_STREAM_CLOSED.rawValue }
    return NGHTTP2_PROTOCOL_ERROR.rawValue
  }
}

/// Where frame headers lie in the bytes a connection receives (RFC 9113 §4.1), across reads, and
/// what the session must check itself: DATA frames (`HTTP2FrameGuard`), and PRIORITY frames, which
/// libnghttp2 skips unread once the server announces SETTINGS_NO_RFC7540_PRIORITIES (RFC 9218) and
/// which RFC 9113 still bounds (§6.3: never on stream 0, 5 bytes; §5.3.1: never on itself).
struct HTTP2FrameHeaders {
  /// What a frame needs of the session.
  enum Found: Equatable {
    /// A DATA frame on the stream: checked before the library reads it.
    case data(Int32)
    /// A well-formed PRIORITY frame on the stream (counted: it carries no request).
    case priority(Int32)
    /// A frame that ends the connection with this error code.
    case malformed(UInt32)
  }

  /// Bytes still to pass before the next frame header: the connection preface's 24 at first, then
  /// each frame's payload.
  private var skip = 24
  /// The first bytes of a frame header that a read cut short.
  private var partialHeader: [UInt8] = []
  /// A PRIORITY frame whose stream dependency is being read: its stream, the dependency's bytes so
  /// far and how many.
  private var priority: (stream: Int32, dependency: UInt32, read: Int)?

  /// Calls `each` with the offset in `bytes` of every frame the session must see whose header or
  /// (PRIORITY) dependency ends in them (0 for one begun in an earlier read), in order, until
  /// `each` returns false.
  mutating func forEach(in bytes: UnsafeRawBufferPointer, _ each: (_ offset: Int, _ found: Found) -> Bool) {
    var at = 0
    var frameStart = 0
    while at < bytes.count {
      if skip > 0 {
        let n = min(skip, bytes.count - at)
        if let pending = priority, !dependencyRead(bytes, at, n, pending) {
          let found: Found =
            (priority?.dependency ?? 0) & 0x7FFF_FFFF == UInt32(pending.stream)
            ? .malformed(NGHTTP2_PROTOCOL_ERROR.rawValue) : .priority(pending.stream)
          priority = nil
          skip -= n
          at += n
          if !each(frameStart, found) { return }
          continue
        }
        skip -= n
        at += n
        continue
      }
      frameStart = at
      let need = 9 - partialHeader.count
      guard bytes.count - at >= need else {
        partialHeader.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[at...]))
        return
      }
      let header: (length: Int, type: UInt8, stream: Int32)
      if partialHeader.isEmpty {
        header = Self.frameHeader(UnsafeRawBufferPointer(rebasing: bytes[at..<(at + 9)]))
      } else {
        partialHeader.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[at..<(at + need)]))
        header = partialHeader.withUnsafeBytes { Self.frameHeader($0) }
        partialHeader.removeAll()
      }
      at += need
      skip = header.length
      switch header.type {
      case UInt8(NGHTTP2_DATA.rawValue):
        if !each(frameStart, .data(header.stream)) { return }
      case UInt8(NGHTTP2_PRIORITY.rawValue):
        if header.stream == 0 {
          if !each(frameStart, .malformed(NGHTTP2_PROTOCOL_ERROR.rawValue)) { return }
        } else if header.length != 5 {
          if !each(frameStart, .malformed(NGHTTP2_FRAME_SIZE_ERROR.rawValue)) { return }
        } else {
          priority = (header.stream, 0, 0)
        }
      default:
        break
      }
    }
  }

  /// Reads up to `n` bytes at `at` into the pending PRIORITY frame's dependency; true while it
  /// still needs more (all 4 bytes are needed), false once it has them.
  private mutating func dependencyRead(
    _ bytes: UnsafeRawBufferPointer, _ at: Int, _ n: Int,
    _ pending: (stream: Int32, dependency: UInt32, read: Int)
  ) -> Bool {
    var (dependency, read) = (pending.dependency, pending.read)
    for i in 0..<min(n, 4 - read) {
      dependency = dependency << 8 | UInt32(bytes[at + i])
      read += 1
    }
    priority = (pending.stream, dependency, read)
    return read < 4
  }

  /// A frame header's length, type and stream (RFC 9113 §4.1; the reserved bit dropped).
  static func frameHeader(_ b: UnsafeRawBufferPointer) -> (length: Int, type: UInt8, stream: Int32) {
    let length = Int(b[0]) << 16 | Int(b[1]) << 8 | Int(b[2])
    let stream = (UInt32(b[5]) << 24 | UInt32(b[6]) << 16 | UInt32(b[7]) << 8 | UInt32(b[8])) & 0x7FFF_FFFF
    return (length, b[3], Int32(stream))
  }
}

/// The last stream numbers added, up to a capacity (the oldest give way).
struct StreamRing {
  private var streams: [Int32] = []
  private var next = 0
  private let capacity: Int

  init(capacity: Int) { self.capacity = max(1, capacity) }

  mutating func add(_ stream: Int32) {
    if streams.count < capacity {
      streams.append(stream)
    } else {
      streams[next] = stream
      next = (next + 1) % capacity
    }
  }

  func contains(_ stream: Int32) -> Bool { streams.contains(stream) }
}
