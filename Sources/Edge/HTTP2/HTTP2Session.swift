import CNGHTTP2
import Glibc

/// The HTTP/2 side of one connection (RFC 9113), through libnghttp2: the framing, HPACK, stream
/// states and flow control are the library's; this type turns streams into `Request`s — a head as
/// soon as its header block ends, so it is decided before its body is read — and answers into
/// HEADERS and DATA. It bounds what the library does not: header blocks (bytes, field count and
/// CONTINUATION frames), bodies (per stream, as the route allows) and frames that carry no request
/// (a glitch budget). Driven from the connection's loop only: bytes in with `received`
/// (`nghttp2_session_mem_recv`), bytes out with `output` (`nghttp2_session_mem_send`); it has no
/// threads and reads no clock. Not Sendable: one loop owns it.
final class HTTP2Session {
  /// What the server announces in its first SETTINGS frame, and the bounds it keeps.
  struct Settings: Equatable {
    var maxConcurrentStreams = 100
    /// SETTINGS_MAX_HEADER_LIST_SIZE; also the bound on a header block's bytes and on a request's
    /// fields (RFC 9113 §6.5.2: names, values and 32 bytes per field).
    var maxHeaderListBytes = 16384
    var maxHeaderCount = 100
    var initialWindowSize = 65535
    var maxFrameSize = 16384
    var headerTableSize = 4096
    var maxContinuationFrames = 8
    var glitchBurst = 400
    var glitchesPerSecond = 100
    /// Body bytes a stream may send unless its route says otherwise.
    var maxBodyBytes = 1 << 20

    init() {}

    /// The settings `limits` give.
    init(_ limits: Limits) {
      maxConcurrentStreams = limits.http2MaxConcurrentStreams
      maxHeaderListBytes = limits.maxHeaderBytes
      maxHeaderCount = limits.maxHeaderCount
      initialWindowSize = limits.http2InitialWindowBytes
      maxFrameSize = limits.http2MaxFrameBytes
      headerTableSize = limits.http2HeaderTableBytes
      maxContinuationFrames = limits.http2MaxContinuationFrames
      glitchBurst = limits.http2GlitchBurst
      glitchesPerSecond = limits.http2GlitchesPerSecond
      maxBodyBytes = limits.maxBodyBytes
    }
  }

  /// What happened on the streams, in order.
  ///
  /// Each carries its stream, read when the event is handled (right after `received`): the head is
  /// decided from it, and a `Request` built only for a route that reads one.
  enum Event {
    /// A request's head; its body is still to come (`limitBody` or `discardBody` says how much
    /// of it is read).
    case head(HTTP2Stream)
    /// A request is complete (END_STREAM): its head, its body, and whether `head` came first.
    case request(HTTP2Stream, headFirst: Bool)
    /// The stream's body passed its limit: the rest is dropped; it is to be refused (413).
    case bodyTooLarge(HTTP2Stream)
    /// The stream's header fields passed the limits: the rest is dropped; it is to be refused (431).
    case fieldsTooLarge(HTTP2Stream)
    /// The process's allowance for buffered bodies is spent: the rest is dropped; it is to be
    /// refused (503).
    case overBudget(HTTP2Stream)
  }

  private var session: OpaquePointer?
  private let settings: Settings
  /// The process-wide allowance for buffered request bodies (shared with HTTP/1); each open stream
  /// holds its part (`HTTP2Stream.reserved`).
  private let budget: RequestBudget?
  /// The records of the request streams the library tracks (each also the library's stream user
  /// data, how callbacks find it); and closed streams' records, kept for new streams.
  private var open = HTTP2Stream.OpenList()
  private var spare: [HTTP2Stream] = []
  /// How many closed streams' records are kept.
  static let spareLimit = 16
  /// Open streams whose answer's body is still being sent.
  private var sendingCount = 0
  /// How many stream records were made (for tests: streams in turn reuse one).
  private(set) var recordsMade = 0
  /// How many request streams are open (for tests).
  var openStreams: Int { open.count }
  private var events: [Event] = []
  private var progressed: [Int32] = []
  /// Frames on streams the library no longer tracks (HEADERS below the last stream, DATA after a
  /// reset), and what the peer broke, if it did: the GOAWAY's code.
  /// The stream whose request header block is being decoded, and its entry.
  private var currentStream: Int32 = 0
  /// Not retained: the record is kept by `open` while its header block is decoded, and
  /// `currentStream` is cleared when it closes.
  private var currentEntry: Unmanaged<HTTP2Stream>? = nil
  private var frameGuard: HTTP2FrameGuard
  private var frameHeaders = HTTP2FrameHeaders()
  private var violation: UInt32?
  /// Where `output` is writing while the library sends (DATA frames go there without copying).
  private var sink: UnsafeMutablePointer<OutputQueue>?
  /// Set when the peer broke the protocol or the library failed: the connection is to close once
  /// what is queued (a GOAWAY) is written.
  private(set) var failed = false

  /// Frames that cost the server work but carry no request (RST_STREAM, PING, SETTINGS, PRIORITY,
  /// WINDOW_UPDATE while no body is being sent, empty DATA) and frames the library refused,
  /// counted against a token bucket: `glitchBurst` at once, refilled at `glitchesPerSecond`. Past
  /// it the connection ends with GOAWAY ENHANCE_YOUR_CALM: rapid reset (CVE-2023-44487), provoked
  /// resets (CVE-2025-8671, which Debian's 1.52 does not limit itself) and control-frame floods
  /// cost one budget.
  private var glitchTokens: Double
  private var glitchesSeen = 0
  private var lastRefill: Instant? = nil
  /// Whether the connection was ended for spending its glitch budget or flooding CONTINUATION.
  private(set) var calmedDown = false
  /// Where streams, resets and GOAWAYs are counted (nil: not at all).
  var metrics: MetricShard?
  /// The error code of the last GOAWAY sent, if any.
  private(set) var lastGoaway: UInt32?

  /// The stream whose header block is open (HEADERS without END_HEADERS seen), its CONTINUATION
  /// frames and bytes so far.
  private(set) var openHeaderBlock: Int32? = nil
  private var blockFrames = 0
  private var blockBytes = 0

  /// The library's memory for this session: its small blocks recycled on the loop (when
  /// `recycler` is given), its frame buffer known.
  let memory: HTTP2Memory.Arena

  /// A server session announcing and keeping `settings`, its bodies counted against `budget`, its
  /// small blocks recycled through `recycler` (which only the calling thread uses).
  init(settings: Settings, budget: RequestBudget? = nil, recycler: HTTP2Memory.Recycler? = nil) {
    self.settings = settings
    self.budget = budget
    memory = HTTP2Memory.Arena(recycler: recycler)
    frameGuard = HTTP2FrameGuard(kept: max(64, 2 * settings.maxConcurrentStreams))
    glitchTokens = Double(settings.glitchBurst)
    var callbacks: OpaquePointer?
    nghttp2_session_callbacks_new(&callbacks)
    defer { nghttp2_session_callbacks_del(callbacks) }
    Self.setReadingCallbacks(callbacks)
    Self.setWritingCallbacks(callbacks)
    var options: OpaquePointer?
    nghttp2_option_new(&options)
    defer { nghttp2_option_del(options) }
    nghttp2_option_set_max_deflate_dynamic_table_size(options, settings.headerTableSize)
    // No closed stream is kept for the priority tree: what is needed of them is in `frameGuard`.
    nghttp2_option_set_no_closed_streams(options, 1)
    // Its large buffers from pages mapped on demand: an idle connection holds only those written;
    // its small ones recycled on the loop.
    var allocator = HTTP2Memory.allocator(memory)
    nghttp2_session_server_new3(
      &session, callbacks, Unmanaged.passUnretained(self).toOpaque(), options, &allocator)
    memory.made()
    if session == nil || !submitSettings() { failed = true }
  }

  /// Queues the server's SETTINGS frame (RFC 9113 §3.4: the first frame it sends); false when the
  /// library refused it.
  private func submitSettings() -> Bool {
    var entries = [
      (NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, settings.maxConcurrentStreams),
      (NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, settings.maxHeaderListBytes),
      (NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, settings.initialWindowSize),
      (NGHTTP2_SETTINGS_MAX_FRAME_SIZE, settings.maxFrameSize),
      (NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, settings.headerTableSize),
      // RFC 9218 §2.1: no RFC 7540 priority tree (PRIORITY frames are checked in `frameHeaders`).
      (NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1),
    ].map { nghttp2_settings_entry(settings_id: Int32($0.0.rawValue), value: UInt32(clamping: $0.1)) }
    return nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count) == 0
  }

  /// What the library tells of what it reads: frames begun and received, header fields, DATA,
  /// and frames it refused. Each callback finds its session through `user`.
  private static func setReadingCallbacks(_ callbacks: OpaquePointer?) {
    nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks) { _, header, user in
      guard let header, let user else { return 0 }
      return HTTP2Session.with(user) { $0.beginFrame(header.pointee) }
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
      // A request's first HEADERS opens the stream; a later one (trailers) keeps what was read.
      guard let frame, let user, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
        frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
      else { return 0 }
      HTTP2Session.with(user) { me in
        me.currentEntry = Unmanaged.passUnretained(me.openStream(frame.pointee.hd.stream_id))
        me.currentStream = frame.pointee.hd.stream_id
        me.metrics?.count(.h2Streams)
      }
      return 0
    }
    nghttp2_session_callbacks_set_on_header_callback(callbacks) {
      _, frame, name, nameLength, value, valueLength, _, user in
      guard let frame, let user, let name, let value else { return 0 }
      // Trailer fields are not the request's head (and no route reads them).
      guard frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
      HTTP2Session.with(user) { $0.field(frame.pointee.hd.stream_id, name, nameLength, value, valueLength) }
      return 0
    }
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
      _, _, stream, data, length, user in
      guard let user, let data else { return 0 }
      HTTP2Session.with(user) { $0.data(stream, UnsafeRawBufferPointer(start: data, count: length)) }
      return 0
    }
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
      guard let frame, let user else { return 0 }
      HTTP2Session.with(user) { $0.frameReceived(frame.pointee) }
      return 0
    }
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, frame, _, user in
      guard let user else { return 0 }
      HTTP2Session.with(user) { me in
        me.glitchesSeen += 1
        // A stream error (REFUSED_STREAM past the concurrency limit among them): the library queues
        // its RST_STREAM now, and frames the client sent meanwhile are to be ignored, also those
        // that arrive in this same read, before the reset is sent.
        if let stream = frame?.pointee.hd.stream_id, stream > 0 { me.frameGuard.reset(stream) }
      }
      return 0
    }
  }

  /// What the library tells of what it sends and of streams ending: frames sent, DATA payloads
  /// (written from the response's own bytes), and streams closed.
  private static func setWritingCallbacks(_ callbacks: OpaquePointer?) {
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { session, frame, user in
      guard let frame, let user else { return 0 }
      HTTP2Session.with(user) { $0.frameSent(frame.pointee, session) }
      return 0
    }
    nghttp2_session_callbacks_set_send_data_callback(callbacks) { _, _, header, length, source, user in
      guard let header, let user, let record = source?.pointee.ptr else {
        return Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
      }
      return HTTP2Session.with(user) { me in
        HTTP2Session.withRecord(record) { me.sendData($0, header, length) }
      }
    }
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, _, user in
      guard let user else { return 0 }
      HTTP2Session.with(user) { $0.closeStream(stream) }
      return 0
    }
  }

  deinit {
    pairs?.deallocate()
    nghttp2_session_del(session)
    budget?.release(open.releaseAll())
  }

  // MARK: streams

  /// A request stream's first HEADERS: its record (a closed stream's, reused, when there is one),
  /// which the library keeps as the stream's user data.
  private func openStream(_ id: Int32) -> HTTP2Stream {
    let record: HTTP2Stream
    if let reused = spare.popLast() {
      reused.reuse(id: id, bodyLimit: settings.maxBodyBytes)
      record = reused
    } else {
      record = HTTP2Stream(id: id, bodyLimit: settings.maxBodyBytes)
      recordsMade += 1
    }
    nghttp2_session_set_stream_user_data(session, id, open.insert(record).toOpaque())
    return record
  }

  /// The record of `stream`, while the library tracks it as a request stream.
  private func record(_ stream: Int32) -> HTTP2Stream? {
    nghttp2_session_get_stream_user_data(session, stream).map {
      Unmanaged<HTTP2Stream>.fromOpaque($0).takeUnretainedValue()
    }
  }

  /// Calls `body` with the record at `pointer` (the library's stream user data, or a data source's
  /// pointer), without retaining it: `open` keeps it while the library refers to it.
  private static func withRecord<R>(_ pointer: UnsafeMutableRawPointer, _ body: (HTTP2Stream) -> R) -> R {
    Unmanaged<HTTP2Stream>.fromOpaque(pointer)._withUnsafeGuaranteedRef(body)
  }

  /// Calls `body` with `stream`'s record, unretained, if the library tracks it as a request stream.
  private func withRecord(_ stream: Int32, _ body: (HTTP2Stream) -> Void) {
    guard let pointer = nghttp2_session_get_stream_user_data(session, stream) else { return }
    Self.withRecord(pointer, body)
  }

  /// The library closed `stream`: what it held of the budget comes back, its record is kept for a
  /// later stream unless something still refers to it.
  private func closeStream(_ stream: Int32) {
    if currentStream == stream { currentStream = 0 }
    frameGuard.close(stream)
    // A stream reset before it was handed on is never answered (rapid reset: no handler runs).
    if !events.isEmpty { events.removeAll { $0.stream == stream } }
    guard let pointer = nghttp2_session_get_stream_user_data(session, stream) else { return }
    var record = open.remove(Unmanaged.fromOpaque(pointer))
    if record.outgoing != nil { sendingCount -= 1 }
    if record.reserved > 0 { budget?.release(record.reserved) }
    record.receiving = false
    record.outgoing = nil
    record.answerKept = nil
    record.body = []
    if spare.count < Self.spareLimit && isKnownUniquelyReferenced(&record) { spare.append(record) }
  }

  /// Calls `body` with the session `user` points at, without retaining it: the library calls back
  /// only from within the session's own calls, so the session is alive throughout.
  private static func with<R>(_ user: UnsafeMutableRawPointer, _ body: (HTTP2Session) -> R) -> R {
    Unmanaged<HTTP2Session>.fromOpaque(user)._withUnsafeGuaranteedRef(body)
  }

  // MARK: reading

  /// Every frame's header, before its payload: header blocks are bounded here (the library
  /// gathers CONTINUATION frames without limit).
  private func beginFrame(_ header: nghttp2_frame_hd) -> Int32 {
    let endHeaders = header.flags & UInt8(NGHTTP2_FLAG_END_HEADERS.rawValue) != 0
    switch Int(header.type) {
    case Int(NGHTTP2_HEADERS.rawValue):
      if let code = frameGuard.error(
        isData: false, stream: header.stream_id, lastOpened: lastOpened, state: state(of: header.stream_id))
      {
        violation = code
        return Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
      }
      blockFrames = 0
      blockBytes = header.length
      openHeaderBlock = endHeaders ? nil : header.stream_id
    case Int(NGHTTP2_CONTINUATION.rawValue):
      blockFrames += 1
      blockBytes += header.length
      if endHeaders { openHeaderBlock = nil }
    default:
      return 0
    }
    // A block's bytes never need to pass the field limit by more than HPACK's framing and padding.
    guard blockFrames <= settings.maxContinuationFrames, blockBytes <= settings.maxHeaderListBytes + 256
    else {
      calmedDown = true
      return Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
    }
    return 0
  }

  private func field(
    _ stream: Int32, _ name: UnsafePointer<UInt8>, _ nameLength: Int, _ value: UnsafePointer<UInt8>,
    _ valueLength: Int
  ) {
    // The header block being decoded is the one just begun (no lookup per field).
    if currentStream == stream, let current = currentEntry {
      current._withUnsafeGuaranteedRef { field($0, name, nameLength, value, valueLength) }
    } else {
      withRecord(stream) { field($0, name, nameLength, value, valueLength) }
    }
  }

  private func field(
    _ entry: HTTP2Stream, _ name: UnsafePointer<UInt8>, _ nameLength: Int, _ value: UnsafePointer<UInt8>,
    _ valueLength: Int
  ) {
    guard entry.receiving, !entry.fieldsTooLarge else { return }
    entry.fieldBytes += nameLength + valueLength + 32
    let pseudo = nameLength > 0 && name[0] == UInt8(ascii: ":")
    if !pseudo { entry.fieldCount += 1 }
    // Past a bound the block is still decoded (HPACK's state must stay in step) but not kept.
    if entry.fieldBytes > settings.maxHeaderListBytes || entry.fieldCount > settings.maxHeaderCount {
      entry.fieldsTooLarge = true
      entry.dropFields()
      return
    }
    guard pseudo else {
      // The library has checked names (lower case, token characters) and values.
      let v = entry.addField(name, nameLength, value, valueLength)
      if nameLength == 4 && memcmp(name, "host", 4) == 0 && entry.host == nil { entry.host = v }
      if nameLength == 6 && memcmp(name, "cookie", 6) == 0 { entry.cookies += 1 }
      return
    }
    switch (nameLength, name[1]) {
    case (7, UInt8(ascii: "m")): entry.method = Self.method(value, valueLength)
    case (5, UInt8(ascii: "p")): entry.target = entry.append(value, valueLength)
    case (10, UInt8(ascii: "a")): entry.authority = entry.append(value, valueLength)
    default: break  // :scheme (the library checked the pseudo-fields' names and presence)
    }
  }

  /// The method: the common ones without making a string.
  private static func method(_ value: UnsafePointer<UInt8>, _ length: Int) -> HTTPMethod {
    switch length {
    case 3 where memcmp(value, "GET", 3) == 0: .get
    case 4 where memcmp(value, "HEAD", 4) == 0: .head
    case 4 where memcmp(value, "POST", 4) == 0: .post
    default: HTTPMethod(String(decoding: UnsafeBufferPointer(start: value, count: length), as: UTF8.self))
    }
  }

  private func data(_ stream: Int32, _ bytes: UnsafeRawBufferPointer) {
    withRecord(stream) { data($0, stream, bytes) }
  }

  private func data(_ entry: HTTP2Stream, _ stream: Int32, _ bytes: UnsafeRawBufferPointer) {
    guard entry.receiving else { return }
    guard !entry.discarding else {
      entry.dropped += bytes.count
      // More than the window the stream was given: the client means to send a large body. Past
      // twice that with the answer still not whole (the client does not read it), the stream is
      // reset at once (CANCEL): the library's window updates would keep the body coming.
      if entry.dropped > 2 * settings.initialWindowSize && entry.answered && !entry.answerEnded {
        entry.resetAfterAnswer = false
        entry.receiving = false
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_CANCEL.rawValue)
      } else if entry.dropped > settings.initialWindowSize {
        wantReset(stream, entry)
      }
      return
    }
    if !entry.progressed {
      entry.progressed = true
      progressed.append(stream)
    }
    guard entry.body.count + bytes.count <= entry.bodyLimit else {
      entry.discarding = true
      entry.resetWanted = true
      entry.body = []
      events.append(.bodyTooLarge(entry))
      return
    }
    if let budget {
      guard budget.reserve(bytes.count) else {
        entry.discarding = true
        entry.resetWanted = true
        entry.body = []
        events.append(.overBudget(entry))
        return
      }
      entry.reserved += bytes.count
    }
    entry.body.append(contentsOf: bytes)
  }

  private func frameReceived(_ frame: nghttp2_frame) {
    let type = frame.hd.type
    let endStream = frame.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    switch Int(type) {
    case Int(NGHTTP2_RST_STREAM.rawValue):
      metrics?.count(.h2ResetsReceived)
      glitchesSeen += 1
    case Int(NGHTTP2_PING.rawValue), Int(NGHTTP2_SETTINGS.rawValue), Int(NGHTTP2_PRIORITY_UPDATE.rawValue):
      glitchesSeen += 1
    case Int(NGHTTP2_WINDOW_UPDATE.rawValue):
      // A client opens windows while it receives a body (many, for a large one): only updates
      // while nothing is being sent count.
      if sendingCount == 0 { glitchesSeen += 1 }
    case Int(NGHTTP2_DATA.rawValue) where frame.hd.length == 0 && !endStream:
      glitchesSeen += 1
    case Int(NGHTTP2_HEADERS.rawValue):
      openHeaderBlock = nil
      let stream = frame.hd.stream_id
      let decoded = currentStream == stream ? currentEntry : nil
      currentStream = 0
      guard frame.headers.cat == NGHTTP2_HCAT_REQUEST else { break }
      if let decoded {
        decoded._withUnsafeGuaranteedRef { headersEnded($0, stream, endStream: endStream) }
      } else {
        withRecord(stream) { headersEnded($0, stream, endStream: endStream) }
      }
      return
    default:
      break
    }
    guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue), endStream else {
      return
    }
    withRecord(frame.hd.stream_id) { if $0.receiving { complete($0) } }
  }

  /// A request's header block ended on `stream` (`endStream`: and its request).
  private func headersEnded(_ entry: HTTP2Stream, _ stream: Int32, endStream: Bool) {
    guard entry.receiving else { return }
    if entry.authorityDisagrees {
      // RFC 9113 §8.3.1: `host` and `:authority` must name the same; a request whose two differ
      // is malformed (§8.1.1), never answered on either, never forwarded.
      entry.receiving = false
      glitchesSeen += 1
      nghttp2_submit_rst_stream(
        session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_PROTOCOL_ERROR.rawValue)
      return
    } else if entry.fieldsTooLarge {
      entry.discarding = true
      entry.resetWanted = true
      events.append(.fieldsTooLarge(entry))
    } else if !endStream {
      entry.headFirst = true
      events.append(.head(entry))
    }
    if endStream { complete(entry) }
  }

  /// The record of `stream` while the client may still send on it.
  private func receiving(_ stream: Int32) -> HTTP2Stream? {
    guard let entry = record(stream), entry.receiving else { return nil }
    return entry
  }

  /// A stream's request is complete.
  private func complete(_ entry: HTTP2Stream) {
    entry.receiving = false
    entry.resetAfterAnswer = false  // it ended by itself: no reset needed
    guard !entry.discarding, entry.method != nil, entry.target != nil else { return }
    events.append(.request(entry, headFirst: entry.headFirst))
  }

  /// Feeds bytes from the peer that arrived at `now`; false when the connection must close (a
  /// protocol error, a flood: a GOAWAY is queued, which `output` still returns).
  func received(_ bytes: UnsafeRawBufferPointer, now: Instant) -> Bool {
    guard !failed, let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return !failed }
    // Each DATA frame is checked before the library reads it (`HTTP2FrameGuard`), and PRIORITY
    // frames, which it skips unread (`HTTP2FrameHeaders`).
    var fed = 0
    var n = 0
    frameHeaders.forEach(in: bytes) { start, found in
      if case .priority = found {
        glitchesSeen += 1
        return true
      }
      if start > fed {
        n = nghttp2_session_mem_recv(session, base + fed, start - fed)
        guard n >= 0 else { return false }
        fed = start
      }
      switch found {
      case .data(let stream):
        violation = frameGuard.error(
          isData: true, stream: stream, lastOpened: lastOpened, state: state(of: stream))
      case .malformed(let code): violation = code
      case .priority: break
      }
      return violation == nil
    }
    if n >= 0 && violation == nil && fed < bytes.count {
      n = nghttp2_session_mem_recv(session, base + fed, bytes.count - fed)
    }
    // The library's own bounds on floods (CONTINUATION frames, queued control frames).
    if n == Int(NGHTTP2_ERR_FLOODED.rawValue) || n == Int(NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue) {
      calmedDown = true
    }
    if glitchesSeen > 0 {
      let elapsed = lastRefill.map { Double(now.nanoseconds &- $0.nanoseconds) / 1e9 } ?? 0
      lastRefill = now
      glitchTokens =
        min(Double(settings.glitchBurst), glitchTokens + elapsed * Double(settings.glitchesPerSecond))
        - Double(glitchesSeen)
      glitchesSeen = 0
      if glitchTokens < 0 { calmedDown = true }
    } else if lastRefill == nil {
      lastRefill = now
    }
    if calmedDown {
      terminate(NGHTTP2_ENHANCE_YOUR_CALM)
    } else if let violation {
      terminate(nghttp2_error_code(violation))
    } else if n < 0 {
      // RFC 9113 §3.4, §5.4.1: say why before closing (the library has not always queued it:
      // not for a bad connection preface).
      terminate(NGHTTP2_PROTOCOL_ERROR)
    }
    return !failed
  }

  /// Ends the connection: GOAWAY with `code`, no stream answered from now on.
  func terminate(_ code: nghttp2_error_code) {
    guard !failed else { return }
    failed = true
    events.removeAll()
    nghttp2_session_terminate_session(session, code.rawValue)
  }

  /// What happened since the last call, in order.
  func takeEvents() -> [Event] {
    var taken: [Event] = []
    takeEvents(into: &taken)
    return taken
  }

  /// What happened since the last call, in order, in `taken` (emptied first): the two arrays trade
  /// buffers, so no array is made for a read. The caller empties `taken` once it has handled them
  /// (a record an event holds is not reused for a later stream).
  func takeEvents(into taken: inout [Event]) {
    taken.removeAll(keepingCapacity: true)
    swap(&events, &taken)
  }

  /// The streams whose body grew since the last call.
  func takeProgressed() -> [Int32] {
    guard !progressed.isEmpty else { return [] }
    for stream in progressed { record(stream)?.progressed = false }
    defer { progressed.removeAll(keepingCapacity: true) }
    return progressed
  }

  /// The head handed on for `stream` was routed: at most `bytes` of body are read.
  func limitBody(_ stream: Int32, to bytes: Int) { receiving(stream)?.bodyLimit = bytes }

  /// `stream` was answered on its head: the rest of its body is dropped unread; `resetting`, the
  /// stream is reset once answered (else only once it brings more than its window).
  func discardBody(_ stream: Int32, resetting: Bool) {
    guard let entry = receiving(stream) else { return }
    entry.discarding = true
    // Nothing reads the head or the body of a discarded stream again.
    entry.dropHead()
    if resetting { wantReset(stream, entry) }
  }

  /// Resets `stream` (NO_ERROR) as soon as its answer has ended.
  private func wantReset(_ stream: Int32, _ entry: HTTP2Stream) {
    guard !entry.resetWanted else { return }
    entry.resetWanted = true
    if entry.answerEnded {
      nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_NO_ERROR.rawValue)
    } else if entry.answered {
      entry.resetAfterAnswer = true
    }
  }

  /// The highest stream the client opened.
  private var lastOpened: Int32 { nghttp2_session_get_last_proc_stream_id(session) }

  /// What the library knows of `stream`.
  private func state(of stream: Int32) -> HTTP2FrameGuard.StreamState {
    guard let known = nghttp2_session_find_stream(session, stream) else { return .unknown }
    switch nghttp2_stream_get_state(known) {
    case NGHTTP2_STREAM_STATE_CLOSED: return .closed
    case NGHTTP2_STREAM_STATE_IDLE: return .unknown
    default: return .open
    }
  }

  /// Whether the client may still send on `stream` (its request has not ended, nor was it reset).
  func isReceiving(_ stream: Int32) -> Bool { receiving(stream) != nil }

  /// Whether a stream still reads a body (handed on as a head, not yet complete).
  func readsBody(_ stream: Int32) -> Bool { receiving(stream).map { !$0.discarding } ?? false }

  // MARK: writing

  /// Answers `stream` with `response`: `:status`, `cache-control` from the cache class, the
  /// response's own fields (lower-cased, RFC 9113 §8.2.1), `content-length`, `date`, HSTS when
  /// `hsts`; the body (none for HEAD and for statuses that forbid it) follows as DATA frames under
  /// the peer's flow control, shared bodies straight from their bytes.
  func respond(
    stream: Int32, _ response: Response, cacheClass: CacheClass, headOnly: Bool, date: String, hsts: Bool
  ) {
    // A stream the library no longer tracks (reset meanwhile) is not answered.
    guard let entry = record(stream) else { return }
    let sendsBody = begin(entry, status: response.status, body: response.body, headOnly: headOnly)
    let result: Int32
    if let prebuilt = response.prebuilt, prebuilt.cacheClass == cacheClass {
      result = submit(entry, prebuilt, date: date, hsts: hsts, body: sendsBody)
    } else {
      // Others are laid out in a reused buffer, which nghttp2 copies before `submit` returns.
      var own = HTTP2Fields()
      swap(&own, &scratchFields)
      own.removeAll()
      own.addHead(of: response, cacheClass: cacheClass, contentLength: response.body.count)
      own.add("date", date)
      if hsts {
        own.add(HTTP2PrebuiltFields.hstsName, HTTP2PrebuiltFields.hstsValue.description)
      }
      result = own.withPairs(into: pairBuffer(own.count)) { submit(entry, $0, $1, body: sendsBody) }
      scratchFields = own
    }
    ended(entry, result)
  }

  /// Answers the request on `entry` (decided on its head, in the batch of events just taken) with
  /// `prebuilt`, served by a route of its own cache class: no `Response` is made of it.
  func respond(_ entry: HTTP2Stream, prebuilt: PrebuiltResponse, headOnly: Bool, date: String, hsts: Bool) {
    // Only a stream the library still tracks is answered (the record of a stream reset meanwhile
    // is no longer its user data).
    guard
      nghttp2_session_get_stream_user_data(session, entry.id) == Unmanaged.passUnretained(entry).toOpaque()
    else { return }
    let body = Response.Body.shared(prebuilt.body)
    let sendsBody = begin(entry, status: prebuilt.status, body: body, headOnly: headOnly)
    ended(entry, submit(entry, prebuilt, date: date, hsts: hsts, body: sendsBody))
  }

  /// Marks `entry` answered; true when its answer sends `body` (not for HEAD, nor for statuses that
  /// forbid content, nor when it is empty).
  private func begin(_ entry: HTTP2Stream, status: Status, body: Response.Body, headOnly: Bool) -> Bool {
    let sendsBody = !headOnly && !status.forbidsContent && body.count > 0
    if sendsBody {
      if entry.outgoing == nil { sendingCount += 1 }
      entry.outgoing = .init(body: body)
    }
    entry.answered = true
    if entry.receiving && entry.resetWanted { entry.resetAfterAnswer = true }
    return sendsBody
  }

  /// `entry`'s answer was queued (`result` 0) or refused by the library.
  private func ended(_ entry: HTTP2Stream, _ result: Int32) {
    if result != 0 {
      finishSending(entry)
      entry.resetAfterAnswer = false
    }
  }

  /// Queues `prebuilt`'s fields (laid out already, HSTS too, taken without copying) and `date` in
  /// `entry`'s own bytes; the stream keeps the answer until it closes (after its HEADERS are written).
  private func submit(
    _ entry: HTTP2Stream, _ prebuilt: PrebuiltResponse, date: String, hsts: Bool, body: Bool
  )
    -> Int32
  {
    entry.answerKept = prebuilt
    let fields = prebuilt.h2Fields
    let count = fields.count + (hsts ? 1 : 0)
    let pairs = pairBuffer(count + 1)
    pairs.update(from: fields.pairs, count: count)
    pairs[count] = entry.dateField(date)
    return submit(entry, pairs, count + 1, body: body)
  }

  /// Queues `entry`'s HEADERS (`count` pairs at `pairs`), with its body as DATA when `body`.
  private func submit(_ entry: HTTP2Stream, _ pairs: UnsafePointer<nghttp2_nv>, _ count: Int, body: Bool)
    -> Int32
  {
    guard body else { return nghttp2_submit_response(session, entry.id, pairs, count, nil) }
    var provider = nghttp2_data_provider(
      source: nghttp2_data_source(ptr: Unmanaged.passUnretained(entry).toOpaque()),
      read_callback: { _, _, buffer, length, flags, source, user in
        guard let user, let buffer, let flags, let record = source?.pointee.ptr else {
          return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
        }
        return HTTP2Session.with(user) { me in
          HTTP2Session.withRecord(record) { me.read($0, into: buffer, length, flags) }
        }
      })
    return nghttp2_submit_response(session, entry.id, pairs, count, &provider)
  }

  /// Scratch space of `respond`, kept between answers: fields laid out for answers that are not
  /// prebuilt, and the pairs passed to the library (which copies them); made at the first answer,
  /// so a connection that never asks holds none.
  private var scratchFields = HTTP2Fields()
  private var pairs: UnsafeMutablePointer<nghttp2_nv>? = nil
  private var pairCapacity = 0

  /// `pairs`, with room for `count`.
  private func pairBuffer(_ count: Int) -> UnsafeMutablePointer<nghttp2_nv> {
    if let pairs, count <= pairCapacity { return pairs }
    pairs?.deallocate()
    pairCapacity = max(count, 2 * pairCapacity, 16)
    let made = UnsafeMutablePointer<nghttp2_nv>.allocate(capacity: pairCapacity)
    pairs = made
    return made
  }

  /// `entry`'s answer has no more body to send.
  private func finishSending(_ entry: HTTP2Stream) {
    guard entry.outgoing != nil else { return }
    entry.outgoing = nil
    sendingCount -= 1
  }

  /// The data provider: the next part of `entry`'s body. Shared bytes are not copied: the frame
  /// goes out through `sendData`; others are copied into the library's frame buffer.
  private func read(
    _ entry: HTTP2Stream, into buffer: UnsafeMutablePointer<UInt8>, _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>
  ) -> Int {
    // The answer is read and advanced in place (no copy of it, and so of its body, per frame).
    guard let total = entry.outgoing?.count, let sent = entry.outgoing?.sent else {
      return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
    let take = min(length, total - sent)
    let shared = entry.outgoing?.shared != nil
    if shared {
      flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_NO_COPY.rawValue)
      entry.outgoing?.frameStart = sent
    } else if case .bytes(let bytes)? = entry.outgoing?.body, take > 0 {
      bytes.withUnsafeBytes { source in
        if let base = source.baseAddress {
          UnsafeMutableRawPointer(buffer).copyMemory(from: base + sent, byteCount: take)
        }
      }
    }
    entry.outgoing?.sent = sent + take
    if sent + take == total {
      flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue)
      // A shared body is kept until `sendData` has queued the last frame.
      if !shared { finishSending(entry) }
    }
    return take
  }

  /// A DATA frame of a shared body: its 9-byte header, then its bytes by reference (this server
  /// never pads).
  private func sendData(_ entry: HTTP2Stream, _ header: UnsafePointer<UInt8>, _ length: Int) -> Int32 {
    guard let sink, let shared = entry.outgoing?.shared, let frameStart = entry.outgoing?.frameStart else {
      return Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
    }
    sink.pointee.append(UnsafeRawBufferPointer(start: header, count: 9))
    // The body is kept by `outgoing` until `finishSending`: read without retaining it.
    let ended = shared._withUnsafeGuaranteedRef { bytes in
      sink.pointee.append(bytes, from: frameStart, count: length)
      return frameStart + length == bytes.count
    }
    if ended { finishSending(entry) }
    return 0
  }

  private func frameSent(_ frame: nghttp2_frame, _ session: OpaquePointer?) {
    let stream = frame.hd.stream_id
    if frame.hd.type == UInt8(NGHTTP2_RST_STREAM.rawValue) { frameGuard.reset(stream) }
    if frame.hd.type == UInt8(NGHTTP2_GOAWAY.rawValue) { lastGoaway = frame.goaway.error_code }
    if let metrics {
      switch Int(frame.hd.type) {
      case Int(NGHTTP2_RST_STREAM.rawValue): metrics.count(.h2ResetsSent)
      case Int(NGHTTP2_GOAWAY.rawValue):
        // RFC 9113 §7's codes are 0 to 13, in the order `goawayReasons` lists them.
        let code = Int(frame.goaway.error_code)
        metrics.count(
          .h2GoawaysSent,
          code < MetricFamily.goawayReasons.count - 1 ? code : MetricFamily.goawayReasons.count - 1)
      default: break
      }
    }
    guard frame.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 else { return }
    withRecord(stream) { entry in
      guard entry.resetAfterAnswer else {
        entry.answerEnded = true
        return
      }
      entry.resetAfterAnswer = false
      // RFC 9113 §8.1: the answer is whole; the client may stop sending the request's body.
      nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_NO_ERROR.rawValue)
    }
  }

  /// Whether an answer's body is still to be sent (waiting for the peer's flow-control window,
  /// when nothing is queued).
  var sending: Bool { sendingCount > 0 }

  /// Appends every frame the session has ready to `out`.
  func output(into out: inout OutputQueue) {
    withUnsafeMutablePointer(to: &out) { queue in
      sink = queue
      defer { sink = nil }
      while true {
        var data: UnsafePointer<UInt8>?
        let n = nghttp2_session_mem_send(session, &data)
        if n < 0 {
          failed = true
          return
        }
        guard n > 0, let data else { return }
        queue.pointee.append(UnsafeRawBufferPointer(start: data, count: n))
      }
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

}

extension HTTP2Session.Event {
  /// The stream the event is about.
  var stream: Int32 {
    switch self {
    case .head(let s), .request(let s, _), .bodyTooLarge(let s), .fieldsTooLarge(let s), .overBudget(let s):
      s.id
    }
  }
}
