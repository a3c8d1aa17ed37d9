/// What becomes of frames on streams the session no longer has open (RFC 9113 §5.1):
/// - HEADERS on a stream number at or below one the client already opened: a connection error,
///   `PROTOCOL_ERROR` for a number never used (§5.1.1), `STREAM_CLOSED` for a stream that has
///   closed (§5.1);
/// - DATA on such a stream: `STREAM_CLOSED` (§5.1, §6.1; §5.4.1 lets a stream error end the
///   connection), after the client's own RST_STREAM too;
/// - either on a stream this server reset lately: ignored, as §5.1 says (the client may have sent
///   them before the reset arrived).
///
/// The session keeps no closed stream; this type remembers the last ones closed and reset.
struct HTTP2FrameGuard {
  /// What the session knows of a stream.
  enum StreamState: Equatable {
    /// Open or half-closed: the session checks what arrives on it.
    case open
    /// Closed, and still on record.
    case closed
    /// Never opened, or closed and forgotten.
    case unknown
  }

  /// The streams this server reset most recently, and those that closed most recently.
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

  /// Whether this server reset `stream` lately.
  func isReset(_ stream: Int32) -> Bool { resets.contains(stream) }

  /// `stream` closed: HEADERS on it again is STREAM_CLOSED, not a stream number never used.
  mutating func close(_ stream: Int32) { closed.add(stream) }

  /// The connection error that a HEADERS (`isData` false) or DATA frame on `stream` calls for, or nil
  /// when it is to be read (or ignored): `lastOpened` is the highest stream the client opened,
  /// `state` what the session knows of `stream`.
  func error(isData: Bool, stream: Int32, lastOpened: Int32, state: StreamState) -> UInt32? {
    guard stream > 0, stream <= lastOpened, state != .open, !resets.contains(stream) else { return nil }
    if isData || state == .closed || closed.contains(stream) { return HTTP2Error.streamClosed.rawValue }
    return HTTP2Error.protocolError.rawValue
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
