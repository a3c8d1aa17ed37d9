import CNGHTTP2

/// The HTTP/2 side of one connection (RFC 9113), through libnghttp2: the framing, HPACK, stream
/// states and flow control are the library's; this type turns complete streams into `Request`s
/// and answers into HEADERS and DATA. Driven from the connection's loop only: bytes in with
/// `received` (`nghttp2_session_mem_recv`), bytes out with `output` (`nghttp2_session_mem_send`);
/// it has no threads and reads no clock. Not Sendable: one loop owns it.
final class HTTP2Session {
  /// What the server announces in its first SETTINGS frame; each comes from `Limits`.
  struct Settings: Equatable {
    var maxConcurrentStreams: UInt32 = 100
    var maxHeaderListBytes: UInt32 = 16384
    var initialWindowSize: UInt32 = 65535
    var maxFrameSize: UInt32 = 16384
  }

  /// A request whose stream is complete (END_STREAM seen), waiting for its answer.
  struct Arrived {
    let stream: Int32
    let request: Request
  }

  /// A stream being read: its head fields and its body so far.
  private struct Incoming {
    var method: String?
    var path: String?
    var authority: String?
    var fields: [(String, String)] = []
    var body: [UInt8] = []
  }

  /// A response body being sent on a stream, and how far.
  private struct Outgoing {
    let body: Response.Body
    var sent = 0
  }

  private var session: OpaquePointer?
  private var incoming: [Int32: Incoming] = [:]
  private var outgoing: [Int32: Outgoing] = [:]
  private var arrived: [Arrived] = []
  private let maxBodyBytes: Int
  /// Set when the peer broke the protocol or the library failed: the connection is to close once
  /// what is queued (a GOAWAY) is written.
  private(set) var failed = false

  /// Frames that cost the server work but carry no request (RST_STREAM, PING, SETTINGS, PRIORITY,
  /// WINDOW_UPDATE while no body is being sent, empty DATA) and frames the library refused,
  /// counted against a token bucket:
  /// `glitchBurst` at once, refilled at `glitchesPerSecond`. Past it the connection ends with
  /// GOAWAY ENHANCE_YOUR_CALM: rapid reset (CVE-2023-44487), provoked resets (CVE-2025-8671, which
  /// Debian's 1.52 does not limit itself) and control-frame floods cost one budget.
  static let glitchBurst = 400.0
  static let glitchesPerSecond = 100.0
  private var glitchTokens = HTTP2Session.glitchBurst
  private var glitchesSeen = 0
  private var lastRefill: Instant? = nil
  /// Whether the connection was ended for spending its glitch budget.
  private(set) var calmedDown = false

  /// A server session announcing `settings`, refusing bodies over `maxBodyBytes` (RST_STREAM).
  init(settings: Settings, maxBodyBytes: Int) {
    self.maxBodyBytes = maxBodyBytes
    var callbacks: OpaquePointer?
    nghttp2_session_callbacks_new(&callbacks)
    defer { nghttp2_session_callbacks_del(callbacks) }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
      // A request's first HEADERS opens the stream; a later one (trailers) keeps what was read.
      guard let frame, let user, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
        frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
      else { return 0 }
      HTTP2Session.from(user).incoming[frame.pointee.hd.stream_id] = Incoming()
      return 0
    }
    nghttp2_session_callbacks_set_on_header_callback(callbacks) {
      _, frame, name, nameLength, value, valueLength, _, user in
      guard let frame, let user, let name, let value else { return 0 }
      let me = HTTP2Session.from(user)
      let stream = frame.pointee.hd.stream_id
      // Trailer fields are not the request's head (and no route reads them).
      guard me.incoming[stream] != nil, frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
      let n = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
      let v = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
      switch n {
      case ":method": me.incoming[stream]?.method = v
      case ":path": me.incoming[stream]?.path = v
      case ":authority": me.incoming[stream]?.authority = v
      case ":scheme": break
      default: me.incoming[stream]?.fields.append((n, v))
      }
      return 0
    }
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
      session, _, stream, data, length, user in
      guard let user, let data else { return 0 }
      let me = HTTP2Session.from(user)
      guard var entry = me.incoming[stream] else { return 0 }
      guard entry.body.count + length <= me.maxBodyBytes else {
        me.incoming[stream] = nil
        nghttp2_submit_rst_stream(
          session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_REFUSED_STREAM.rawValue)
        return 0
      }
      entry.body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
      me.incoming[stream] = entry
      return 0
    }
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
      guard let frame, let user else { return 0 }
      let type = frame.pointee.hd.type
      switch Int(type) {
      case Int(NGHTTP2_RST_STREAM.rawValue), Int(NGHTTP2_PING.rawValue), Int(NGHTTP2_SETTINGS.rawValue),
        Int(NGHTTP2_PRIORITY.rawValue):
        HTTP2Session.from(user).glitchesSeen += 1
      case Int(NGHTTP2_WINDOW_UPDATE.rawValue):
        // A client opens windows while it receives a body (many, for a large one): only updates
        // while nothing is being sent count.
        let me = HTTP2Session.from(user)
        if me.outgoing.isEmpty { me.glitchesSeen += 1 }
      case Int(NGHTTP2_DATA.rawValue)
      where frame.pointee.hd.length == 0
        && frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) == 0:
        HTTP2Session.from(user).glitchesSeen += 1
      default: break
      }
      guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue),
        frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
      else { return 0 }
      HTTP2Session.from(user).complete(frame.pointee.hd.stream_id)
      return 0
    }
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, _, _, user in
      if let user { HTTP2Session.from(user).glitchesSeen += 1 }
      return 0
    }
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, _, user in
      guard let user else { return 0 }
      let me = HTTP2Session.from(user)
      me.incoming[stream] = nil
      me.outgoing[stream] = nil
      // A stream reset before it was handed on is never answered (rapid reset: no handler runs).
      if me.arrived.last?.stream == stream || me.arrived.contains(where: { $0.stream == stream }) {
        me.arrived.removeAll { $0.stream == stream }
      }
      return 0
    }
    nghttp2_session_server_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
    var entries = [
      nghttp2_settings_entry(
        settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
        value: settings.maxConcurrentStreams),
      nghttp2_settings_entry(
        settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: settings.maxHeaderListBytes
      ),
      nghttp2_settings_entry(
        settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.initialWindowSize),
      nghttp2_settings_entry(
        settings_id: Int32(NGHTTP2_SETTINGS_MAX_FRAME_SIZE.rawValue), value: settings.maxFrameSize),
    ]
    if session == nil
      || nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count) != 0
    {
      failed = true
    }
  }

  deinit { nghttp2_session_del(session) }

  private static func from(_ user: UnsafeMutableRawPointer) -> HTTP2Session {
    Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue()
  }

  /// A stream's request is complete: it becomes a `Request` (the HTTP/1 shape every handler
  /// knows: `Host` from `:authority`).
  private func complete(_ stream: Int32) {
    guard let entry = incoming.removeValue(forKey: stream), let method = entry.method, let path = entry.path
    else {
      return
    }
    var fields = entry.fields
    if let authority = entry.authority, !fields.contains(where: { $0.0 == "host" }) {
      fields.insert(("host", authority), at: 0)
    }
    arrived.append(
      Arrived(
        stream: stream,
        request: Request(method: HTTPMethod(method), target: path, headers: fields, body: entry.body)))
  }

  /// Feeds bytes from the peer that arrived at `now`; false when the connection must close (a
  /// protocol error, or the glitch budget spent: a GOAWAY is queued, which `output` still returns).
  func received(_ bytes: UnsafeRawBufferPointer, now: Instant) -> Bool {
    guard !failed, let base = bytes.baseAddress else { return !failed }
    let n = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
    if glitchesSeen > 0 {
      let elapsed = lastRefill.map { Double(now.nanoseconds &- $0.nanoseconds) / 1e9 } ?? 0
      lastRefill = now
      glitchTokens =
        min(Self.glitchBurst, glitchTokens + elapsed * Self.glitchesPerSecond) - Double(glitchesSeen)
      glitchesSeen = 0
      if glitchTokens < 0 {
        calmedDown = true
        failed = true
        arrived.removeAll()
        nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        return false
      }
    } else if lastRefill == nil {
      lastRefill = now
    }
    if n < 0 {
      failed = true
      // RFC 9113 §3.4, §5.4.1: say why before closing (the library has not always queued it:
      // not for a bad connection preface).
      let code = n == Int(NGHTTP2_ERR_FLOODED.rawValue) ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR
      nghttp2_session_terminate_session(session, code.rawValue)
    }
    return !failed
  }

  /// The requests completed since the last call, in the order their streams ended.
  func takeArrived() -> [Arrived] {
    defer { arrived.removeAll(keepingCapacity: true) }
    return arrived
  }

  /// Answers `stream` with `response`: `:status`, `cache-control` from the cache class, the
  /// response's own fields (lower-cased, RFC 9113 §8.2.1), `content-length`, `date`, HSTS when
  /// `hsts`; the body (none for HEAD and for statuses that forbid it) follows as DATA frames under
  /// the peer's flow control.
  func respond(
    stream: Int32, _ response: Response, cacheClass: CacheClass, headOnly: Bool, date: String, hsts: Bool
  ) {
    var fields: [(String, String)] = [
      (":status", String(response.status.code)),
      ("cache-control", cacheClass.applied(to: response.status).cacheControl),
    ]
    for (name, value) in response.headers { fields.append((name.lowercased(), value)) }
    if !response.status.forbidsContent { fields.append(("content-length", String(response.body.count))) }
    fields.append(("date", date))
    if hsts { fields.append(("strict-transport-security", "max-age=63072000; includeSubDomains")) }
    let sendsBody = !headOnly && !response.status.forbidsContent && response.body.count > 0
    if sendsBody { outgoing[stream] = Outgoing(body: response.body) }
    let result = Self.withFields(fields) { nva, count in
      guard sendsBody else { return nghttp2_submit_response(session, stream, nva, count, nil) }
      var provider = nghttp2_data_provider(
        source: nghttp2_data_source(ptr: nil),
        read_callback: { _, stream, buffer, length, flags, _, user in
          guard let user, let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
          return HTTP2Session.from(user).read(stream, into: buffer, length, flags)
        })
      return nghttp2_submit_response(session, stream, nva, count, &provider)
    }
    if result != 0 { outgoing[stream] = nil }
  }

  /// The data provider: copies the next part of `stream`'s body into nghttp2's frame buffer.
  private func read(
    _ stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>
  ) -> Int {
    guard var out = outgoing[stream] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
    let total = out.body.count
    let take = min(length, total - out.sent)
    if take > 0 {
      switch out.body {
      case .empty: break
      case .bytes(let bytes):
        bytes.withUnsafeBytes {
          UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress! + out.sent, byteCount: take)
        }
      case .shared(let shared):
        UnsafeMutableRawPointer(buffer).copyMemory(
          from: shared.buffer.baseAddress! + out.sent, byteCount: take)
      }
    }
    out.sent += take
    if out.sent == total {
      flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue)
      outgoing[stream] = nil
    } else {
      outgoing[stream] = out
    }
    return take
  }

  /// Whether an answer's body is still to be sent (waiting for the peer's flow-control window,
  /// when nothing is queued).
  var sending: Bool { !outgoing.isEmpty }

  /// Appends every frame the session has ready to `out`.
  func output(into out: inout [UInt8]) {
    while true {
      var data: UnsafePointer<UInt8>?
      let n = nghttp2_session_mem_send(session, &data)
      if n < 0 {
        failed = true
        return
      }
      guard n > 0, let data else { return }
      out.append(contentsOf: UnsafeBufferPointer(start: data, count: n))
    }
  }

  /// Whether the session has nothing more to read or write (GOAWAY exchanged, or a fatal error
  /// written): the connection may close.
  var finished: Bool { nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 }

  /// Starts a graceful stop: GOAWAY with the last stream seen; streams in flight still finish.
  func drain() {
    nghttp2_submit_goaway(
      session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
      NGHTTP2_NO_ERROR.rawValue, nil, 0)
  }

  /// Calls `body` with `fields` as nghttp2 name/value pairs, laid out in one buffer that lives
  /// for the call (nghttp2 copies them).
  private static func withFields(
    _ fields: [(String, String)], _ body: (UnsafePointer<nghttp2_nv>, Int) -> Int32
  ) -> Int32 {
    var bytes: [UInt8] = []
    var spans: [(name: Int, nameLength: Int, value: Int, valueLength: Int)] = []
    for (name, value) in fields {
      let nameStart = bytes.count
      bytes += name.utf8
      let valueStart = bytes.count
      bytes += value.utf8
      spans.append((nameStart, valueStart - nameStart, valueStart, bytes.count - valueStart))
    }
    bytes.append(0)  // never empty, so the buffer has an address
    return bytes.withUnsafeMutableBufferPointer { raw in
      guard let base = raw.baseAddress else { return Int32(NGHTTP2_ERR_NOMEM.rawValue) }
      let nva = spans.map {
        nghttp2_nv(
          name: base + $0.name, value: base + $0.value, namelen: $0.nameLength, valuelen: $0.valueLength,
          flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
      }
      return nva.withUnsafeBufferPointer { pairs in
        guard let first = pairs.baseAddress else { return Int32(NGHTTP2_ERR_NOMEM.rawValue) }
        return body(first, pairs.count)
      }
    }
  }
}
