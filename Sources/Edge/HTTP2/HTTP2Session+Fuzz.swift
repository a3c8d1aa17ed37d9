/// The fuzz entry of the HTTP/2 session: `input` is what a client sends after the preface and an
/// empty SETTINGS frame. Fed whole to one session and in 7-byte pieces to another, neither
/// answering, the two must agree on whether the connection survives and on every frame they write
/// (each stream's in order); fed to a third that answers every request with a small prebuilt
/// answer, nothing may trap (answers make the outcome depend on timing: one may go out before an
/// error a later piece brings). `input` is also decoded as one HPACK block.
public func fuzzHTTP2Session(_ input: UnsafeRawBufferPointer) {
  let start: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]
  let bytes = start + Array(input)
  var settings = HTTP2Session.Settings()
  settings.maxConcurrentStreams = 8
  settings.maxHeaderListBytes = 1024
  settings.maxHeaderCount = 16
  settings.maxBodyBytes = 256
  settings.initialWindowSize = 1024
  let whole = fuzzRun(bytes, step: bytes.count, settings: settings, answering: false)
  let pieces = fuzzRun(bytes, step: 7, settings: settings, answering: false)
  precondition(
    whole.0 == pieces.0 && framesByStream(whole.1) == framesByStream(pieces.1),
    "the session's outcome depends on how bytes arrive")
  _ = fuzzRun(bytes, step: 7, settings: settings, answering: true)
  let decoder = HPACK.Decoder(limit: 256)
  try? decoder.decode(input) { _, _ in }
}

private let fuzzAnswer = PrebuiltResponse(
  Response(status: .ok, headers: [("Content-Type", "text/plain")], body: .bytes(Array("fuzz".utf8))),
  cacheClass: .immutable)

/// Feeds `bytes` `step` at a time (`answering` every request): whether the session survived, and
/// what it wrote.
private func fuzzRun(_ bytes: [UInt8], step: Int, settings: HTTP2Session.Settings, answering: Bool) -> (
  Bool, [UInt8]
) {
  let session = HTTP2Session(settings: settings)
  var out = OutputQueue()
  var alive = true
  var at = 0
  var events: [HTTP2Session.Event] = []
  while at < bytes.count && alive {
    let end = min(bytes.count, at + max(1, step))
    alive = bytes[at..<end].withUnsafeBytes { session.received($0, now: Instant(nanoseconds: 1_000_000_000)) }
    at = end
    session.takeEvents(into: &events)
    for event in events {
      if answering, case .request(let stream, _) = event {
        session.respond(
          stream, prebuilt: fuzzAnswer, headOnly: false, date: "Thu, 03 Dec 2026 00:00:00 GMT", hsts: false)
      }
    }
    events.removeAll()
    session.output(into: &out)
  }
  return (alive, out.contents)
}

/// The frames in `bytes`, by stream, each stream's in order.
private func framesByStream(_ bytes: [UInt8]) -> [UInt32: [[UInt8]]] {
  var frames: [UInt32: [[UInt8]]] = [:]
  var at = 0
  while at + 9 <= bytes.count {
    let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
    let stream =
      UInt32(bytes[at + 5]) << 24 | UInt32(bytes[at + 6]) << 16 | UInt32(bytes[at + 7]) << 8
      | UInt32(bytes[at + 8])
    let end = min(bytes.count, at + 9 + length)
    frames[stream, default: []].append(Array(bytes[at..<end]))
    at = end
  }
  return frames
}
