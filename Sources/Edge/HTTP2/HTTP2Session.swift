import Glibc

/// The HTTP/2 side of one connection (RFC 9113): framing, HPACK (`HPACK`), stream states and flow
/// control, written for this server's one use — a server answering requests — so that a request
/// costs no more than the work it needs: header fields are checked and kept as they are decoded,
/// straight into the stream's record; prebuilt answers go out as HPACK blocks laid out once.
/// libnghttp2 was the implementation until its own cost per request kept this server above h2o's;
/// it stays the reference the tests speak to.
///
/// This type turns streams into events — a head as soon as its header block ends, so it is
/// decided before its body is read — and answers into HEADERS and DATA. It bounds header blocks
/// (bytes, field count and CONTINUATION frames), bodies (per stream, as the route allows) and
/// frames that carry no request (a glitch budget). Driven from the connection's loop only: bytes in
/// with `received`, bytes out with `output`; it has no threads and reads no clock. Not Sendable:
/// one loop owns it.
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
    /// What the connection around the session keeps to: HTTP/1's deadlines per stream, and how
    /// much output may wait before frames stop being read.
    var headTimeout: Duration = .seconds(10)
    var bodyTimeout: Duration = .seconds(10)
    var idleTimeout: Duration = .seconds(60)
    var writeTimeout: Duration = .seconds(30)
    var maxQueuedBytes = 1 << 20

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
      headTimeout = limits.headTimeout
      bodyTimeout = limits.bodyTimeout
      idleTimeout = limits.idleTimeout
      writeTimeout = limits.writeTimeout
      maxQueuedBytes = limits.http2MaxQueuedBytes
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

  /// Frame types (RFC 9113 §6) and flags.
  private enum Frame {
    static let data: UInt8 = 0x0
    static let headers: UInt8 = 0x1
    static let priority: UInt8 = 0x2
    static let rstStream: UInt8 = 0x3
    static let settings: UInt8 = 0x4
    static let pushPromise: UInt8 = 0x5
    static let ping: UInt8 = 0x6
    static let goaway: UInt8 = 0x7
    static let windowUpdate: UInt8 = 0x8
    static let continuation: UInt8 = 0x9
    static let endStream: UInt8 = 0x1
    static let ack: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4
    static let padded: UInt8 = 0x8
    static let priorityFlag: UInt8 = 0x20
  }

  private static let preface: StaticString = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
  private static let maxWindow = Int(Int32.max)

  /// What it announced and keeps (the connection reads its deadlines here too).
  let settings: Settings
  /// The process-wide allowance for buffered request bodies (shared with HTTP/1); each open stream
  /// holds its part (`HTTP2Stream.reserved`).
  private let budget: RequestBudget?
  /// The records of the open request streams, and how each is found by its number; closed
  /// streams' records, kept for new streams.
  private var open = HTTP2Stream.OpenList()
  private var table = StreamTable()
  private var spare: [HTTP2Stream] = []
  /// How many closed streams' records are kept.
  static let spareLimit = 16
  /// Open streams whose answer's body is still being sent, in the order they take turns.
  private var sendingList: [Unmanaged<HTTP2Stream>] = []
  /// How many records were made (for tests: streams in turn reuse one).
  private(set) var recordsMade = 0
  /// How many request streams are open (for tests).
  var openStreams: Int { open.count }
  private var events: [Event] = []
  private var progressed: [Int32] = []
  /// Streams whose both sides have ended: closed at the next `output` (after the connection has
  /// handled the events that refer to them, so that their records can serve new streams).
  private var ending: [Int32] = []
  private var frameGuard: HTTP2FrameGuard
  /// The connection error the peer caused, if it did: the GOAWAY's code.
  private var violation: UInt32?
  /// Set when the peer broke the protocol: the connection is to close once what is queued (a
  /// GOAWAY) is written.
  private(set) var failed = false

  /// Frames that cost the server work but carry no request (RST_STREAM, PING, SETTINGS, PRIORITY,
  /// WINDOW_UPDATE while no body is being sent, empty DATA) and refused streams, counted against a
  /// token bucket: `glitchBurst` at once, refilled at `glitchesPerSecond`. Past it the connection
  /// ends with GOAWAY ENHANCE_YOUR_CALM: rapid reset (CVE-2023-44487), provoked resets
  /// (CVE-2025-8671) and control-frame floods cost one budget.
  private var glitchTokens: Double
  private var glitchesSeen = 0
  private var lastRefill: Instant? = nil
  /// Whether the connection was ended for spending its glitch budget or flooding CONTINUATION.
  private(set) var calmedDown = false
  /// Where streams, resets and GOAWAYs are counted (nil: not at all).
  var metrics: MetricShard?
  /// The error code of the last GOAWAY sent, if any.
  private(set) var lastGoaway: UInt32?

  // MARK: reading state

  /// Bytes of the connection preface still to match.
  private var prefaceLeft = 24
  /// Whether the client's first frame (SETTINGS, §3.4) has come.
  private var settingsSeen = false
  /// A frame a read cut short, kept until it is whole.
  private var partial: [UInt8] = []
  /// The stream whose header block is open (HEADERS without END_HEADERS), its CONTINUATION frames
  /// and its fragments so far.
  private(set) var openHeaderBlock: Int32? = nil
  private var blockFrames = 0
  private var block: [UInt8] = []
  private var blockEndStream = false
  /// Made at the first header block: a connection that never asks holds none.
  private var decoderMade: HPACK.Decoder? = nil
  private var decoder: HPACK.Decoder {
    if let decoderMade { return decoderMade }
    let made = HPACK.Decoder(limit: settings.headerTableSize)
    decoderMade = made
    return made
  }
  /// The highest stream the client opened.
  private var lastOpened: Int32 = 0
  /// The last stream a GOAWAY of this server let finish; a GOAWAY came from the client.
  private var goawayLastStream: Int32? = nil
  private var goawayReceived = false

  // MARK: flow control

  /// What the client may still send on the connection, and what it sent since the last update.
  private var receiveWindow = 65535
  private var receiveConsumed = 0
  /// What this server may still send on the connection; the client's window for new streams and
  /// its largest frame.
  private var sendWindow = 65535
  private var peerInitialWindow = 65535
  private var peerMaxFrame = 16384
  /// The client changed its table size: the next header block starts with a size update to 0
  /// (this server's blocks never index).
  private var tableSizeUpdate = false

  // MARK: writing state

  /// Frames ready to be taken by `output`, in order.
  private var queued: [UInt8] = []
  /// The date field of the current second, encoded, and the string it was made from.
  private var dateString = ""
  private var dateBlock: [UInt8] = []
  /// Answers that are not prebuilt are encoded here.
  private var scratch: [UInt8] = []

  /// A server session announcing and keeping `settings`, its bodies counted against `budget`.
  init(settings: Settings, budget: RequestBudget? = nil) {
    self.settings = settings
    self.budget = budget
    frameGuard = HTTP2FrameGuard(kept: max(64, 2 * settings.maxConcurrentStreams))
    glitchTokens = Double(settings.glitchBurst)
    table = StreamTable(capacity: settings.maxConcurrentStreams)
    submitSettings()
  }

  deinit {
    // Released whether or not there is a budget (an optional call would skip its argument).
    let held = open.releaseAll()
    budget?.release(held)
  }

  /// Queues the server's SETTINGS frame (RFC 9113 §3.4: the first frame it sends).
  private func submitSettings() {
    let entries: [(UInt16, Int)] = [
      (0x3, settings.maxConcurrentStreams),  // MAX_CONCURRENT_STREAMS
      (0x6, settings.maxHeaderListBytes),  // MAX_HEADER_LIST_SIZE
      (0x4, settings.initialWindowSize),  // INITIAL_WINDOW_SIZE
      (0x5, settings.maxFrameSize),  // MAX_FRAME_SIZE
      (0x1, settings.headerTableSize),  // HEADER_TABLE_SIZE
      // RFC 9218 §2.1: no RFC 7540 priority tree.
      (0x9, 1),  // SETTINGS_NO_RFC7540_PRIORITIES
    ]
    frameHeader(length: 6 * entries.count, type: Frame.settings, flags: 0, stream: 0)
    for (id, value) in entries {
      queued.append(UInt8(id >> 8))
      queued.append(UInt8(id & 0xFF))
      appendUInt32(UInt32(clamping: value))
    }
  }

  // MARK: streams

  /// A request stream's first HEADERS: its record (a closed stream's, reused, when there is one).
  private func openStream(_ id: Int32) -> HTTP2Stream {
    let record: HTTP2Stream
    if let reused = spare.popLast() {
      reused.reuse(id: id, bodyLimit: settings.maxBodyBytes)
      record = reused
    } else {
      record = HTTP2Stream(id: id, bodyLimit: settings.maxBodyBytes)
      recordsMade += 1
    }
    record.sendWindow = peerInitialWindow
    record.receiveWindow = settings.initialWindowSize
    table.insert(id, open.insert(record))
    metrics?.count(.h2Streams)
    return record
  }

  /// The record of `stream`, while it is open.
  private func record(_ stream: Int32) -> HTTP2Stream? {
    table.find(stream)?.takeUnretainedValue()
  }

  /// Calls `body` with `stream`'s record, unretained, if it is open.
  private func withRecord<R>(_ stream: Int32, _ body: (HTTP2Stream) -> R) -> R? {
    guard let found = table.find(stream) else { return nil }
    return found._withUnsafeGuaranteedRef(body)
  }

  /// `stream` closed: what it held of the budget comes back, its record is kept for a later stream
  /// unless something still refers to it.
  private func closeStream(_ stream: Int32) {
    frameGuard.close(stream)
    // A stream reset before it was handed on is never answered (rapid reset: no handler runs).
    if !events.isEmpty { events.removeAll { $0.stream == stream } }
    guard let reference = table.remove(stream) else { return }
    var record = open.remove(reference)
    if record.queuedToSend {
      sendingList.removeAll { $0.toOpaque() == reference.toOpaque() }
      record.queuedToSend = false
    }
    if record.outgoing != nil { record.outgoing = nil }
    if record.reserved > 0 { budget?.release(record.reserved) }
    record.receiving = false
    record.body = []
    guard isKnownUniquelyReferenced(&record) else { return }
    if spare.count < Self.spareLimit {
      spare.append(record)
    } else {
      // Freed once the call that closed it returns: callers may still hold it unretained.
      retiring.append(record)
    }
  }

  /// Closed streams' records past `spare`, freed at the end of the public call that closed them.
  private var retiring: [HTTP2Stream] = []

  /// `entry`'s two sides have ended: it closes at the next `output`.
  private func bothEnded(_ entry: HTTP2Stream) {
    ending.append(entry.id)
  }

  // MARK: reading

  /// Feeds bytes from the peer that arrived at `now`; false when the connection must close (a
  /// protocol error, a flood: a GOAWAY is queued, which `output` still returns).
  func received(_ bytes: UnsafeRawBufferPointer, now: Instant) -> Bool {
    guard !failed else { return false }
    var input = bytes
    if prefaceLeft > 0 {
      let n = min(prefaceLeft, input.count)
      let expected = UnsafeRawBufferPointer(
        start: Self.preface.utf8Start + (24 - prefaceLeft), count: n)
      guard UnsafeRawBufferPointer(rebasing: input[..<n]).elementsEqual(expected) else {
        terminate(.protocolError)
        return false
      }
      prefaceLeft -= n
      input = UnsafeRawBufferPointer(rebasing: input[n...])
    }
    readFrames(input)
    retiring.removeAll()
    countGlitches(now: now)
    if calmedDown {
      terminate(.enhanceYourCalm)
    } else if let violation {
      terminate(HTTP2Error(rawValue: violation) ?? .protocolError)
    }
    return !failed
  }

  /// Reads every whole frame in `input` (after any kept from the last read), keeping the rest.
  private func readFrames(_ input: UnsafeRawBufferPointer) {
    var at = 0
    if !partial.isEmpty {
      // Complete the kept frame first: its header, then its payload.
      let need = partial.count < 9 ? 9 - partial.count : 0
      let headerPart = min(need, input.count)
      partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[..<headerPart]))
      at = headerPart
      guard partial.count >= 9 else { return }
      let length = Int(partial[0]) << 16 | Int(partial[1]) << 8 | Int(partial[2])
      guard length <= settings.maxFrameSize else {
        violation = HTTP2Error.frameSizeError.rawValue
        return
      }
      let take = min(9 + length - partial.count, input.count - at)
      partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[at..<(at + take)]))
      at += take
      guard partial.count == 9 + length else { return }
      let whole = partial
      partial.removeAll(keepingCapacity: false)
      guard whole.withUnsafeBytes({ frame($0) }) else { return }
    }
    while violation == nil && !calmedDown {
      let left = input.count - at
      guard left >= 9 else { break }
      let length = Int(input[at]) << 16 | Int(input[at + 1]) << 8 | Int(input[at + 2])
      guard length <= settings.maxFrameSize else {
        violation = HTTP2Error.frameSizeError.rawValue
        return
      }
      guard left >= 9 + length else { break }
      guard frame(UnsafeRawBufferPointer(rebasing: input[at..<(at + 9 + length)])) else { return }
      at += 9 + length
    }
    if violation == nil && !calmedDown && at < input.count {
      partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[at...]))
    }
  }

  /// One whole frame (header and payload); false when it broke the connection.
  private func frame(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let type = bytes[3]
    let flags = bytes[4]
    let stream =
      Int32(
        bitPattern: (UInt32(bytes[5]) << 24 | UInt32(bytes[6]) << 16 | UInt32(bytes[7]) << 8
          | UInt32(bytes[8])))
      & 0x7FFF_FFFF
    let payload = UnsafeRawBufferPointer(rebasing: bytes[9...])
    // §6.10: while a header block is open, only its CONTINUATION frames may come.
    if let blockStream = openHeaderBlock, type != Frame.continuation || stream != blockStream {
      return connectionError(.protocolError)
    }
    if !settingsSeen {
      guard type == Frame.settings, flags & Frame.ack == 0 else {
        return connectionError(.protocolError)
      }
      settingsSeen = true
    }
    switch type {
    case Frame.data: return data(flags, stream, payload)
    case Frame.headers: return headers(flags, stream, payload)
    case Frame.priority: return priority(stream, payload)
    case Frame.rstStream: return resetReceived(stream, payload)
    case Frame.settings: return settingsReceived(flags, stream, payload)
    case Frame.pushPromise: return connectionError(.protocolError)
    case Frame.ping: return ping(flags, stream, payload)
    case Frame.goaway: return goawayReceived(stream, payload)
    case Frame.windowUpdate: return windowUpdate(stream, payload)
    case Frame.continuation: return continuation(flags, stream, payload)
    default: return true  // §5.5: unknown frame types are ignored
    }
  }

  private func connectionError(_ code: HTTP2Error) -> Bool {
    violation = code.rawValue
    return false
  }

  /// The payload without its padding (§6.1, §6.2); nil when the padding is longer than the frame.
  private func unpadded(_ flags: UInt8, _ payload: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
    guard flags & Frame.padded != 0 else { return payload }
    guard payload.count >= 1 else { return nil }
    let pad = Int(payload[0])
    guard pad < payload.count else { return nil }
    return UnsafeRawBufferPointer(rebasing: payload[1..<(payload.count - pad)])
  }

  // MARK: DATA

  private func data(_ flags: UInt8, _ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard stream != 0 else { return connectionError(.protocolError) }
    guard stream <= lastOpened else { return connectionError(.protocolError) }  // idle (§5.1)
    // The connection's window counts every DATA frame, padding too (§6.9.1).
    guard payload.count <= receiveWindow else { return connectionError(.flowControlError) }
    receiveWindow -= payload.count
    receiveConsumed += payload.count
    let endStream = flags & Frame.endStream != 0
    if payload.isEmpty && !endStream { glitchesSeen += 1 }
    guard let body = unpadded(flags, payload) else { return connectionError(.protocolError) }
    guard let found = table.find(stream) else {
      updateConnectionWindow()
      if let code = frameGuard.error(isData: true, stream: stream, lastOpened: lastOpened, state: .unknown) {
        violation = code
        return false
      }
      return true
    }
    let ok = found._withUnsafeGuaranteedRef { entry -> Bool in
      guard !entry.remoteEnded else {
        // Half-closed (remote): a stream error (§5.1), unless this server reset it.
        if !frameGuard.isReset(stream) { streamError(entry, .streamClosed) }
        return true
      }
      guard payload.count <= entry.receiveWindow else {
        streamError(entry, .flowControlError)
        return true
      }
      entry.receiveWindow -= payload.count
      entry.receiveConsumed += payload.count
      entry.dataReceived += body.count
      if let length = entry.contentLength,
        entry.dataReceived > length || (endStream && entry.dataReceived != length)
      {
        // §8.1.1: a body that disagrees with its content-length is malformed.
        streamError(entry, .protocolError)
        return true
      }
      if !body.isEmpty { received(entry, body) }
      if endStream {
        entry.remoteEnded = true
        if entry.receiving { complete(entry) }
        if entry.answerEnded { bothEnded(entry) }
      } else if entry.receiving && entry.receiveConsumed >= settings.initialWindowSize / 2 {
        windowUpdateFrame(stream: stream, increment: entry.receiveConsumed)
        entry.receiveWindow += entry.receiveConsumed
        entry.receiveConsumed = 0
      }
      return true
    }
    updateConnectionWindow()
    return ok
  }

  /// Opens the connection's window again once half of it is spent.
  private func updateConnectionWindow() {
    guard receiveConsumed >= 32768 else { return }
    windowUpdateFrame(stream: 0, increment: receiveConsumed)
    receiveWindow += receiveConsumed
    receiveConsumed = 0
  }

  /// A request body's bytes on `entry`.
  private func received(_ entry: HTTP2Stream, _ bytes: UnsafeRawBufferPointer) {
    guard entry.receiving else { return }
    guard !entry.discarding else {
      entry.dropped += bytes.count
      // More than the window the stream was given: the client means to send a large body. Past
      // twice that with the answer still not whole (the client does not read it), the stream is
      // reset at once (CANCEL): window updates would keep the body coming.
      if entry.dropped > 2 * settings.initialWindowSize && entry.answered && !entry.answerEnded {
        entry.resetAfterAnswer = false
        entry.receiving = false
        resetStream(entry.id, .cancel)
      } else if entry.dropped > settings.initialWindowSize {
        wantReset(entry)
      }
      return
    }
    if !entry.progressed {
      entry.progressed = true
      progressed.append(entry.id)
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

  // MARK: HEADERS and CONTINUATION

  private func headers(_ flags: UInt8, _ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard stream != 0, stream & 1 == 1 else { return connectionError(.protocolError) }
    guard var fragment = unpadded(flags, payload) else { return connectionError(.protocolError) }
    var dependsOnItself = false
    if flags & Frame.priorityFlag != 0 {
      guard fragment.count >= 5 else { return connectionError(.frameSizeError) }
      let dependency =
        (UInt32(fragment[0]) << 24 | UInt32(fragment[1]) << 16 | UInt32(fragment[2]) << 8
          | UInt32(fragment[3]))
        & 0x7FFF_FFFF
      dependsOnItself = dependency == UInt32(stream)
      fragment = UnsafeRawBufferPointer(rebasing: fragment[5...])
    }
    // HEADERS on a number at or below one already opened: trailers of an open stream, or §5.1.1.
    if stream <= lastOpened && table.find(stream) == nil {
      if let code = frameGuard.error(isData: false, stream: stream, lastOpened: lastOpened, state: .unknown) {
        violation = code
        return false
      }
    }
    blockEndStream = flags & Frame.endStream != 0
    blockFrames = 0
    if dependsOnItself {
      pendingSelfDependency = stream
    }
    guard flags & Frame.endHeaders != 0 else {
      guard fragment.count <= settings.maxHeaderListBytes + 256 else {
        calmedDown = true
        return false
      }
      openHeaderBlock = stream
      block.removeAll(keepingCapacity: true)
      block.append(contentsOf: fragment)
      return true
    }
    return headerBlock(stream, fragment)
  }

  /// A stream whose HEADERS named itself as its dependency (§5.3.1): a stream error once its block
  /// is decoded.
  private var pendingSelfDependency: Int32 = 0

  private func continuation(_ flags: UInt8, _ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard openHeaderBlock == stream else { return connectionError(.protocolError) }
    blockFrames += 1
    // A block's bytes never need to pass the field limit by more than HPACK's framing and padding.
    guard blockFrames <= settings.maxContinuationFrames,
      block.count + payload.count <= settings.maxHeaderListBytes + 256
    else {
      calmedDown = true
      return false
    }
    block.append(contentsOf: payload)
    guard flags & Frame.endHeaders != 0 else { return true }
    openHeaderBlock = nil
    let whole = block
    defer { block.removeAll(keepingCapacity: false) }
    return whole.withUnsafeBytes { headerBlock(stream, $0) }
  }

  /// A whole header block on `stream`: a new request, trailers, or a block to decode and drop (a
  /// stream this server reset or refused): HPACK's state must stay in step either way.
  private func headerBlock(_ stream: Int32, _ fragment: UnsafeRawBufferPointer) -> Bool {
    let endStream = blockEndStream
    let selfDependent = pendingSelfDependency == stream
    pendingSelfDependency = 0
    if let found = table.find(stream) {
      return found._withUnsafeGuaranteedRef { trailers($0, endStream, fragment) }
    }
    guard stream > lastOpened else { return decodeDropped(fragment) }  // a stream reset or closed
    lastOpened = stream
    if goawayLastStream != nil || goawayReceived || selfDependent
      || open.count >= settings.maxConcurrentStreams
    {
      guard decodeDropped(fragment) else { return false }
      if selfDependent {
        glitchesSeen += 1
        resetStream(stream, .protocolError)
      } else if goawayLastStream == nil && !goawayReceived {
        // Past the concurrency limit (§5.1.2).
        glitchesSeen += 1
        resetStream(stream, .refusedStream)
      }
      return true
    }
    let entry = openStream(stream)
    do {
      try decoder.decode(fragment) { name, value in field(entry, name, value) }
    } catch {
      return connectionError(.compressionError)
    }
    headersEnded(entry, endStream: endStream)
    return true
  }

  private func decodeDropped(_ fragment: UnsafeRawBufferPointer) -> Bool {
    do {
      try decoder.decode(fragment) { _, _ in }
      return true
    } catch {
      return connectionError(.compressionError)
    }
  }

  /// A second header block on an open stream: trailers (§8.1), which end the request; no route reads
  /// them, but they must be well formed.
  private func trailers(_ entry: HTTP2Stream, _ endStream: Bool, _ fragment: UnsafeRawBufferPointer) -> Bool {
    var broken = false
    do {
      try decoder.decode(fragment) { name, value in
        if name.first == UInt8(ascii: ":") || !Self.validName(name) || !Self.validValue(value) {
          broken = true
        }
      }
    } catch {
      return connectionError(.compressionError)
    }
    guard !entry.remoteEnded else {
      if !frameGuard.isReset(entry.id) { streamError(entry, .streamClosed) }
      return true
    }
    guard endStream, !broken else {
      streamError(entry, .protocolError)
      return true
    }
    if let length = entry.contentLength, length != entry.dataReceived {
      streamError(entry, .protocolError)
      return true
    }
    entry.remoteEnded = true
    if entry.receiving { complete(entry) }
    if entry.answerEnded { bothEnded(entry) }
    return true
  }

  /// How many request fields were read (for tests: those past a bound are not).
  private(set) var fieldsRead = 0

  /// Pseudo-fields, one bit each.
  private static let methodBit: UInt8 = 1
  private static let schemeBit: UInt8 = 2
  private static let pathBit: UInt8 = 4
  private static let authorityBit: UInt8 = 8

  /// One field of a request's header block, checked (§8.2, §8.3) and kept in `entry`.
  private func field(
    _ entry: HTTP2Stream, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>
  ) {
    // Past a bound the block is still decoded (HPACK's state must stay in step) but its fields are
    // neither read nor checked: a block of small references to a large table entry costs no more
    // than the bound.
    guard !entry.malformed, !entry.fieldsTooLarge else { return }
    fieldsRead += 1
    entry.fieldBytes += name.count + value.count + 32
    guard let first = name.first else {
      entry.malformed = true
      return
    }
    let pseudo = first == UInt8(ascii: ":")
    if !pseudo { entry.fieldCount += 1 }
    if entry.fieldBytes > settings.maxHeaderListBytes || entry.fieldCount > settings.maxHeaderCount {
      tooLarge(entry)
      return
    }
    guard Self.validValue(value) else {
      entry.malformed = true
      return
    }
    if pseudo {
      pseudoField(entry, name, value)
    } else {
      regularField(entry, name, value)
    }
  }

  private func pseudoField(
    _ entry: HTTP2Stream, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>
  ) {
    let bit: UInt8
    switch name.count {
    case 7 where memcmp(name.baseAddress!, ":method", 7) == 0: bit = Self.methodBit
    case 7 where memcmp(name.baseAddress!, ":scheme", 7) == 0: bit = Self.schemeBit
    case 5 where memcmp(name.baseAddress!, ":path", 5) == 0: bit = Self.pathBit
    case 10 where memcmp(name.baseAddress!, ":authority", 10) == 0: bit = Self.authorityBit
    default: bit = 0
    }
    // Unknown, repeated, or after a regular field: malformed (§8.3).
    guard bit != 0, entry.pseudoSeen & bit == 0, !entry.regularSeen,
      !value.isEmpty || bit == Self.authorityBit
    else {
      entry.malformed = true
      return
    }
    entry.pseudoSeen |= bit
    let base = value.baseAddress!
    switch bit {
    case Self.methodBit:
      guard value.allSatisfy(Self.isToken) else {
        entry.malformed = true
        return
      }
      entry.method = Self.method(base, value.count)
    case Self.pathBit:
      guard value.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
        entry.malformed = true
        return
      }
      entry.target = entry.append(base, value.count)
    case Self.authorityBit:
      guard value.allSatisfy(Self.isAuthority) else {
        entry.malformed = true
        return
      }
      entry.authority = entry.append(base, value.count)
    default:
      break
    }
  }

  private func regularField(
    _ entry: HTTP2Stream, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>
  ) {
    entry.regularSeen = true
    guard Self.validName(name), !Self.connectionSpecific(name, value) else {
      entry.malformed = true
      return
    }
    if name.count == 14 && memcmp(name.baseAddress!, "content-length", 14) == 0 {
      guard let length = Self.decimal(value), entry.contentLength == nil || entry.contentLength == length
      else {
        entry.malformed = true
        return
      }
      entry.contentLength = length
    }
    let v = entry.addField(name.baseAddress!, name.count, value.baseAddress ?? name.baseAddress!, value.count)
    if name.count == 4 && memcmp(name.baseAddress!, "host", 4) == 0 && entry.host == nil { entry.host = v }
    if name.count == 6 && memcmp(name.baseAddress!, "cookie", 6) == 0 { entry.cookies += 1 }
  }

  private func tooLarge(_ entry: HTTP2Stream) {
    entry.fieldsTooLarge = true
    entry.dropFields()
  }

  /// A request's header block ended on `entry` (`endStream`: and its request).
  private func headersEnded(_ entry: HTTP2Stream, endStream: Bool) {
    let required = Self.methodBit | Self.schemeBit | Self.pathBit
    let isConnect = entry.method == .connect
    // A head cut at the bounds is refused (431) for its size, whatever it lacks after the cut.
    let whole = !entry.malformed && !entry.fieldsTooLarge
    if whole && !isConnect && entry.pseudoSeen & required != required { entry.malformed = true }
    if whole, isConnect,
      entry.pseudoSeen & Self.authorityBit == 0 || entry.pseudoSeen & (Self.schemeBit | Self.pathBit) != 0
    {
      entry.malformed = true
    }
    if !entry.malformed, let target = entry.target, !entry.fieldsTooLarge {
      // §8.3.1: a path begins with "/", or is "*" for OPTIONS.
      let startsWithSlash = entry.targetFirstByte == UInt8(ascii: "/")
      let asterisk =
        target.count == 1 && entry.targetFirstByte == UInt8(ascii: "*") && entry.method == .options
      if !startsWithSlash && !asterisk { entry.malformed = true }
    }
    if !entry.malformed, endStream, let length = entry.contentLength, length != 0 { entry.malformed = true }
    if entry.malformed || entry.authorityDisagrees {
      // RFC 9113 §8.1.1: a malformed request is a stream error; §8.3.1: `host` and `:authority`
      // must name the same; never answered on either, never forwarded.
      glitchesSeen += 1
      streamError(entry, .protocolError)
      return
    }
    if entry.fieldsTooLarge {
      entry.discarding = true
      entry.resetWanted = true
      events.append(.fieldsTooLarge(entry))
    } else if !endStream {
      entry.headFirst = true
      events.append(.head(entry))
    }
    if endStream {
      entry.remoteEnded = true
      complete(entry)
    }
  }

  /// A stream's request is complete.
  private func complete(_ entry: HTTP2Stream) {
    entry.receiving = false
    entry.resetAfterAnswer = false  // it ended by itself: no reset needed
    guard !entry.discarding, entry.method != nil, entry.target != nil else { return }
    events.append(.request(entry, headFirst: entry.headFirst))
  }

  // MARK: the other frames

  private func priority(_ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard stream != 0 else { return connectionError(.protocolError) }
    guard payload.count == 5 else { return connectionError(.frameSizeError) }
    let dependency =
      (UInt32(payload[0]) << 24 | UInt32(payload[1]) << 16 | UInt32(payload[2]) << 8 | UInt32(payload[3]))
      & 0x7FFF_FFFF
    guard dependency != UInt32(stream) else { return connectionError(.protocolError) }
    glitchesSeen += 1
    return true
  }

  private func resetReceived(_ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard stream != 0 else { return connectionError(.protocolError) }
    guard payload.count == 4 else { return connectionError(.frameSizeError) }
    guard stream <= lastOpened else { return connectionError(.protocolError) }  // idle
    metrics?.count(.h2ResetsReceived)
    glitchesSeen += 1
    // The client's own reset: frames it sent before are not answered; a stream this server
    // forgets, so later DATA on it is STREAM_CLOSED (§5.1).
    if table.find(stream) != nil { closeStream(stream) }
    return true
  }

  private func settingsReceived(_ flags: UInt8, _ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard stream == 0 else { return connectionError(.protocolError) }
    glitchesSeen += 1
    if flags & Frame.ack != 0 {
      guard payload.isEmpty else { return connectionError(.frameSizeError) }
      return true
    }
    guard payload.count % 6 == 0 else { return connectionError(.frameSizeError) }
    var at = 0
    while at < payload.count {
      let id = UInt16(payload[at]) << 8 | UInt16(payload[at + 1])
      let value = Int(
        UInt32(payload[at + 2]) << 24 | UInt32(payload[at + 3]) << 16 | UInt32(payload[at + 4]) << 8
          | UInt32(payload[at + 5]))
      at += 6
      switch id {
      case 0x1: tableSizeUpdate = true  // HEADER_TABLE_SIZE
      case 0x2: guard value <= 1 else { return connectionError(.protocolError) }  // ENABLE_PUSH
      case 0x4:  // INITIAL_WINDOW_SIZE: every stream's window moves by the change (§6.9.2)
        guard value <= Self.maxWindow else { return connectionError(.flowControlError) }
        let delta = value - peerInitialWindow
        peerInitialWindow = value
        var overflow = false
        open.forEach { entry in
          entry.sendWindow += delta
          if entry.sendWindow > Self.maxWindow { overflow = true }
        }
        if overflow { return connectionError(.flowControlError) }
      case 0x5:  // MAX_FRAME_SIZE
        guard value >= 16384 && value <= 16_777_215 else { return connectionError(.protocolError) }
        peerMaxFrame = value
      case 0x9:  // NO_RFC7540_PRIORITIES (RFC 9218 §2.1)
        guard value <= 1 else { return connectionError(.protocolError) }
      default: break
      }
    }
    frameHeader(length: 0, type: Frame.settings, flags: Frame.ack, stream: 0)
    return true
  }

  private func ping(_ flags: UInt8, _ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard stream == 0 else { return connectionError(.protocolError) }
    guard payload.count == 8 else { return connectionError(.frameSizeError) }
    glitchesSeen += 1
    guard flags & Frame.ack == 0 else { return true }
    frameHeader(length: 8, type: Frame.ping, flags: Frame.ack, stream: 0)
    queued.append(contentsOf: payload)
    return true
  }

  private func goawayReceived(_ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard stream == 0 else { return connectionError(.protocolError) }
    guard payload.count >= 8 else { return connectionError(.frameSizeError) }
    goawayReceived = true
    return true
  }

  private func windowUpdate(_ stream: Int32, _ payload: UnsafeRawBufferPointer) -> Bool {
    guard payload.count == 4 else { return connectionError(.frameSizeError) }
    let increment = Int(
      (UInt32(payload[0]) << 24 | UInt32(payload[1]) << 16 | UInt32(payload[2]) << 8 | UInt32(payload[3]))
        & 0x7FFF_FFFF)
    // A client opens windows while it receives a body (many, for a large one): only updates while
    // nothing is being sent count.
    if sendingList.isEmpty { glitchesSeen += 1 }
    guard stream != 0 else {
      guard increment > 0 else { return connectionError(.protocolError) }
      sendWindow += increment
      guard sendWindow <= Self.maxWindow else { return connectionError(.flowControlError) }
      return true
    }
    guard stream <= lastOpened else { return connectionError(.protocolError) }  // idle
    withRecord(stream) { entry in
      guard increment > 0 else {
        streamError(entry, .protocolError)
        return
      }
      entry.sendWindow += increment
      if entry.sendWindow > Self.maxWindow { streamError(entry, .flowControlError) }
    }
    return true
  }

  /// Counts this read's glitches against the budget.
  private func countGlitches(now: Instant) {
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
  }

  // MARK: errors and resets

  /// A stream error (§5.4.2): RST_STREAM with `code`; the stream is closed.
  private func streamError(_ entry: HTTP2Stream, _ code: HTTP2Error) {
    entry.receiving = false
    entry.resetAfterAnswer = false
    glitchesSeen += 1
    resetStream(entry.id, code)
  }

  /// Sends RST_STREAM on `stream` and closes it (frames the client sent before it learns of it are
  /// ignored).
  private func resetStream(_ stream: Int32, _ code: HTTP2Error) {
    frameHeader(length: 4, type: Frame.rstStream, flags: 0, stream: stream)
    appendUInt32(code.rawValue)
    frameGuard.reset(stream)
    metrics?.count(.h2ResetsSent)
    if table.find(stream) != nil { closeStream(stream) }
  }

  /// Ends the connection: GOAWAY with `code`, no stream answered from now on.
  func terminate(_ code: HTTP2Error) {
    guard !failed else { return }
    failed = true
    events.removeAll()
    goaway(code.rawValue)
  }

  private func goaway(_ code: UInt32) {
    frameHeader(length: 8, type: Frame.goaway, flags: 0, stream: 0)
    appendUInt32(UInt32(lastOpened))
    appendUInt32(code)
    lastGoaway = code
    if goawayLastStream == nil { goawayLastStream = lastOpened }
    if let metrics {
      // RFC 9113 §7's codes are 0 to 13, in the order `goawayReasons` lists them.
      let last = MetricFamily.goawayReasons.count - 1
      metrics.count(.h2GoawaysSent, Int(code) < last ? Int(code) : last)
    }
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

  /// The record of `stream` while the client may still send on it.
  private func receiving(_ stream: Int32) -> HTTP2Stream? {
    guard let entry = record(stream), entry.receiving else { return nil }
    return entry
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
    if resetting { wantReset(entry) }
  }

  /// Resets `entry` (NO_ERROR) as soon as its answer has ended.
  private func wantReset(_ entry: HTTP2Stream) {
    guard !entry.resetWanted else { return }
    entry.resetWanted = true
    if entry.answerEnded {
      resetStream(entry.id, .noError)
    } else if entry.answered {
      entry.resetAfterAnswer = true
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
    // A stream no longer open (reset meanwhile) is not answered.
    guard !failed, let entry = record(stream), !entry.answered else { return }
    if let prebuilt = response.prebuilt, prebuilt.cacheClass == cacheClass {
      respond(entry, prebuilt: prebuilt, headOnly: headOnly, date: date, hsts: hsts)
      return
    }
    var fields = HTTP2Fields()
    fields.addHead(of: response, cacheClass: cacheClass, contentLength: response.body.count)
    if hsts {
      fields.add(HTTP2PrebuiltBlock.hstsName, HTTP2PrebuiltBlock.hstsValue.description)
    }
    scratch.removeAll(keepingCapacity: true)
    fields.encode(into: &scratch)
    let sendsBody = begin(entry, status: response.status, body: response.body, headOnly: headOnly)
    let block = scratch
    block.withUnsafeBufferPointer { headersFrame(entry, $0, date: date, endStream: !sendsBody) }
  }

  /// Answers the request on `entry` (decided on its head, in the batch of events just taken) with
  /// `prebuilt`, served by a route of its own cache class: no `Response` is made of it.
  func respond(_ entry: HTTP2Stream, prebuilt: PrebuiltResponse, headOnly: Bool, date: String, hsts: Bool) {
    // Only a stream still open is answered (the record of a stream reset meanwhile is no longer in
    // the table, or serves another stream).
    guard !failed, !entry.answered, let found = table.find(entry.id),
      found.toOpaque() == Unmanaged.passUnretained(entry).toOpaque()
    else { return }
    let body = Response.Body.shared(prebuilt.body)
    let sendsBody = begin(entry, status: prebuilt.status, body: body, headOnly: headOnly)
    let block = hsts ? prebuilt.h2Block.withHSTS : prebuilt.h2Block.plain
    block.withUnsafeBufferPointer { headersFrame(entry, $0, date: date, endStream: !sendsBody) }
  }

  /// Marks `entry` answered; true when its answer sends `body` (not for HEAD, nor for statuses that
  /// forbid content, nor when it is empty).
  private func begin(_ entry: HTTP2Stream, status: Status, body: Response.Body, headOnly: Bool) -> Bool {
    let sendsBody = !headOnly && !status.forbidsContent && body.count > 0
    if sendsBody {
      entry.outgoing = .init(body: body)
      entry.queuedToSend = true
      sendingList.append(Unmanaged.passUnretained(entry))
    }
    entry.answered = true
    if entry.receiving && entry.resetWanted { entry.resetAfterAnswer = true }
    return sendsBody
  }

  /// Queues `entry`'s HEADERS: `block`, then `date`; CONTINUATION frames when it passes the client's
  /// frame size.
  private func headersFrame(
    _ entry: HTTP2Stream, _ block: UnsafeBufferPointer<UInt8>, date: String, endStream: Bool
  ) {
    if date != dateString {
      dateString = date
      dateBlock.removeAll(keepingCapacity: true)
      // A literal without indexing, its name the static table's `date` (33: 15 + 18).
      dateBlock.append(0x0F)
      dateBlock.append(0x12)
      HPACK.appendInteger(date.utf8.count, prefix: 7, flags: 0, to: &dateBlock)
      dateBlock.append(contentsOf: date.utf8)
    }
    let update = tableSizeUpdate ? 1 : 0
    tableSizeUpdate = false
    let length = update + block.count + dateBlock.count
    let flags = endStream ? Frame.endStream : 0
    if length <= peerMaxFrame {
      frameHeader(length: length, type: Frame.headers, flags: flags | Frame.endHeaders, stream: entry.id)
      if update == 1 { queued.append(0x20) }
      queued.append(contentsOf: block)
      queued.append(contentsOf: dateBlock)
    } else {
      var whole: [UInt8] = update == 1 ? [0x20] : []
      whole.append(contentsOf: block)
      whole.append(contentsOf: dateBlock)
      var at = 0
      var type = Frame.headers
      while at < whole.count {
        let n = min(peerMaxFrame, whole.count - at)
        let last = at + n == whole.count
        frameHeader(
          length: n, type: type, flags: (type == Frame.headers ? flags : 0) | (last ? Frame.endHeaders : 0),
          stream: entry.id)
        queued.append(contentsOf: whole[at..<(at + n)])
        at += n
        type = Frame.continuation
      }
    }
    if endStream { answerEnded(entry) }
  }

  /// `entry`'s END_STREAM is queued: a reset asked for follows; a stream whose request has ended
  /// closes.
  private func answerEnded(_ entry: HTTP2Stream) {
    entry.answerEnded = true
    if entry.resetAfterAnswer {
      entry.resetAfterAnswer = false
      // RFC 9113 §8.1: the answer is whole; the client may stop sending the request's body.
      resetStream(entry.id, .noError)
    } else if entry.remoteEnded {
      bothEnded(entry)
    }
  }

  /// Whether an answer's body is still to be sent (waiting for the peer's flow-control window,
  /// when nothing is queued).
  var sending: Bool { !sendingList.isEmpty }

  /// Appends every frame the session has ready to `out`: what is queued, then the bodies' DATA as
  /// far as the windows allow, each sending stream a frame in turn.
  func output(into out: inout OutputQueue) {
    if !ending.isEmpty {
      for stream in ending { closeStream(stream) }
      ending.removeAll(keepingCapacity: true)
    }
    flushQueued(into: &out)
    guard !failed else { return }
    while sendWindow > 0 && !sendingList.isEmpty {
      var progress = false
      var i = 0
      while i < sendingList.count && sendWindow > 0 {
        let reference = sendingList[i]
        let (sent, done) = reference._withUnsafeGuaranteedRef { dataFrame($0, into: &out) }
        if sent { progress = true }
        if done {
          sendingList.remove(at: i)
          reference._withUnsafeGuaranteedRef { entry in
            entry.queuedToSend = false
            entry.outgoing = nil
            answerEnded(entry)
          }
        } else {
          i += 1
        }
      }
      if !progress { break }
    }
    if !ending.isEmpty {
      for stream in ending { closeStream(stream) }
      ending.removeAll(keepingCapacity: true)
    }
    flushQueued(into: &out)
    retiring.removeAll()
  }

  private func flushQueued(into out: inout OutputQueue) {
    guard !queued.isEmpty else { return }
    queued.withUnsafeBytes { out.append($0) }
    queued.removeAll(keepingCapacity: true)
  }

  /// One DATA frame of `entry`'s body, if its window allows: whether one was sent, and whether the
  /// body has ended.
  private func dataFrame(_ entry: HTTP2Stream, into out: inout OutputQueue) -> (sent: Bool, done: Bool) {
    guard let total = entry.outgoing?.count, let sent = entry.outgoing?.sent else { return (false, true) }
    // A window may be negative (a smaller SETTINGS_INITIAL_WINDOW_SIZE, §6.9.2): nothing is sent.
    let take = max(0, min(peerMaxFrame, entry.sendWindow, sendWindow, total - sent))
    guard take > 0 else { return (false, sent == total) }
    flushQueued(into: &out)
    let last = sent + take == total
    var header = (
      UInt8(take >> 16), UInt8(take >> 8 & 0xFF), UInt8(take & 0xFF), Frame.data,
      last ? Frame.endStream : 0, UInt8(entry.id >> 24 & 0x7F), UInt8(entry.id >> 16 & 0xFF),
      UInt8(entry.id >> 8 & 0xFF), UInt8(entry.id & 0xFF)
    )
    withUnsafeBytes(of: &header) { out.append($0) }
    if let shared = entry.outgoing?.shared {
      // The body is kept by `outgoing` until the stream's last frame: read without retaining it.
      shared._withUnsafeGuaranteedRef { out.append($0, from: sent, count: take) }
    } else if case .bytes(let bytes)? = entry.outgoing?.body {
      bytes.withUnsafeBytes { out.append(UnsafeRawBufferPointer(rebasing: $0[sent..<(sent + take)])) }
    }
    entry.outgoing?.sent = sent + take
    entry.sendWindow -= take
    sendWindow -= take
    return (true, last)
  }

  /// Whether the session has nothing more to read or write (GOAWAY exchanged, or a fatal error
  /// written): the connection may close.
  var finished: Bool {
    queued.isEmpty && (failed || ((goawayLastStream != nil || goawayReceived) && open.count == 0))
  }

  /// Starts a graceful stop: GOAWAY with the last stream seen; streams in flight still finish.
  func drain() {
    guard goawayLastStream == nil, !failed else { return }
    goaway(HTTP2Error.noError.rawValue)
  }

  /// Gives back what an idle connection does not need: its read and write buffers, the date it
  /// last wrote, and the stream table when no stream is open.
  func releaseBuffers() {
    if partial.isEmpty && partial.capacity > 0 { partial = [] }
    if queued.isEmpty && queued.capacity > 0 { queued = [] }
    if block.isEmpty && block.capacity > 0 { block = [] }
    if scratch.capacity > 0 { scratch = [] }
    table.release()
    if dateBlock.capacity > 0 {
      dateBlock = []
      dateString = ""
    }
  }

  /// The bytes the session's buffers hold room for (for tests).
  var bufferBytes: Int {
    partial.capacity + queued.capacity + block.capacity + scratch.capacity + table.bytes + dateBlock.capacity
  }

  // MARK: frame bytes

  private func frameHeader(length: Int, type: UInt8, flags: UInt8, stream: Int32) {
    queued.append(UInt8(length >> 16 & 0xFF))
    queued.append(UInt8(length >> 8 & 0xFF))
    queued.append(UInt8(length & 0xFF))
    queued.append(type)
    queued.append(flags)
    appendUInt32(UInt32(bitPattern: stream) & 0x7FFF_FFFF)
  }

  private func appendUInt32(_ value: UInt32) {
    queued.append(UInt8(value >> 24))
    queued.append(UInt8(value >> 16 & 0xFF))
    queued.append(UInt8(value >> 8 & 0xFF))
    queued.append(UInt8(value & 0xFF))
  }

  private func windowUpdateFrame(stream: Int32, increment: Int) {
    frameHeader(length: 4, type: Frame.windowUpdate, flags: 0, stream: stream)
    appendUInt32(UInt32(increment))
  }
}

// MARK: checks of fields (RFC 9113 §8.2, RFC 9110 §5.1, §5.5)

extension HTTP2Session {
  /// A field name: token characters, lower case (§8.2.1), not empty.
  static func validName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
    !name.isEmpty && name.allSatisfy { isToken($0) && !($0 >= 0x41 && $0 <= 0x5A) }
  }

  /// A field value: no NUL, CR or LF; no leading or trailing space or tab (§8.2.1).
  static func validValue(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
    if let first = value.first, first == 0x20 || first == 0x09 { return false }
    if let last = value.last, last == 0x20 || last == 0x09 { return false }
    return !value.contains { $0 == 0 || $0 == 0x0A || $0 == 0x0D }
  }

  /// RFC 9110 §5.6.2's tchar.
  static func isToken(_ c: UInt8) -> Bool {
    switch c {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
      UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
      UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
      true
    default: false
    }
  }

  /// What an authority may hold (RFC 3986 §3.2: userinfo, host, IP literal, port).
  static func isAuthority(_ c: UInt8) -> Bool {
    switch c {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
    case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"),
      UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
      UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
      UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "["), UInt8(ascii: "]"):
      true
    default: false
    }
  }

  /// Connection-specific fields (§8.2.2), and `te` other than "trailers".
  static func connectionSpecific(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>)
    -> Bool
  {
    func named(_ s: StaticString) -> Bool {
      name.count == s.utf8CodeUnitCount && memcmp(name.baseAddress!, s.utf8Start, name.count) == 0
    }
    switch name.count {
    case 2 where named("te"):
      return !(value.count == 8 && memcmp(value.baseAddress!, "trailers", 8) == 0)
    case 7: return named("upgrade")
    case 10: return named("connection") || named("keep-alive")
    case 16: return named("proxy-connection")
    case 17: return named("transfer-encoding")
    default: return false
    }
  }

  /// A decimal of at most 15 digits.
  static func decimal(_ value: UnsafeBufferPointer<UInt8>) -> Int? {
    guard !value.isEmpty, value.count <= 15 else { return nil }
    var n = 0
    for c in value {
      guard c >= 0x30 && c <= 0x39 else { return nil }
      n = n * 10 + Int(c - 0x30)
    }
    return n
  }

  /// The method: the common ones without making a string.
  static func method(_ value: UnsafePointer<UInt8>, _ length: Int) -> HTTPMethod {
    switch length {
    case 3 where memcmp(value, "GET", 3) == 0: .get
    case 4 where memcmp(value, "HEAD", 4) == 0: .head
    case 4 where memcmp(value, "POST", 4) == 0: .post
    default: HTTPMethod(String(decoding: UnsafeBufferPointer(start: value, count: length), as: UTF8.self))
    }
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

/// Open streams by number: open addressing over the number's odd half, with linear probing and
/// deletion by shifting back (no tombstones), sized for twice the concurrency limit. Client streams
/// are odd and rising, so neighbours rarely collide. Its arrays are made at the first stream and
/// given back when no stream is open (`release`), so an idle connection holds none.
struct StreamTable {
  private var keys: [Int32] = []
  private var values: [Unmanaged<HTTP2Stream>?] = []
  private var mask = 0
  private let size: Int
  private var count = 0

  init(capacity: Int = 8) {
    var size = 16
    while size < 2 * capacity { size <<= 1 }
    self.size = size
  }

  private func slot(_ id: Int32) -> Int { Int(id >> 1) & mask }

  func find(_ id: Int32) -> Unmanaged<HTTP2Stream>? {
    guard count > 0 else { return nil }
    var i = slot(id)
    while keys[i] != 0 {
      if keys[i] == id { return values[i] }
      i = (i + 1) & mask
    }
    return nil
  }

  mutating func insert(_ id: Int32, _ value: Unmanaged<HTTP2Stream>) {
    if keys.isEmpty {
      keys = Array(repeating: 0, count: size)
      values = Array(repeating: nil, count: size)
      mask = size - 1
    }
    var i = slot(id)
    while keys[i] != 0 && keys[i] != id { i = (i + 1) & mask }
    if keys[i] == 0 { count += 1 }
    keys[i] = id
    values[i] = value
  }

  mutating func remove(_ id: Int32) -> Unmanaged<HTTP2Stream>? {
    guard count > 0 else { return nil }
    var i = slot(id)
    while keys[i] != id {
      guard keys[i] != 0 else { return nil }
      i = (i + 1) & mask
    }
    let removed = values[i]
    keys[i] = 0
    values[i] = nil
    count -= 1
    // Shift back the entries after it that probed past `i`.
    var j = (i + 1) & mask
    while keys[j] != 0 {
      let home = slot(keys[j])
      if (i - home) & mask < (j - home) & mask {
        keys[i] = keys[j]
        values[i] = values[j]
        keys[j] = 0
        values[j] = nil
        i = j
      }
      j = (j + 1) & mask
    }
    return removed
  }

  /// Gives the arrays back when no stream is in the table.
  mutating func release() {
    guard count == 0, !keys.isEmpty else { return }
    keys = []
    values = []
  }

  /// The bytes the arrays hold (for tests).
  var bytes: Int { keys.capacity * 4 + values.capacity * 8 }
}
