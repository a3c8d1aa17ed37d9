import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// One loop's buffer of access-log lines: one JSON object per request.
///
/// Lines carry the method, the path without its query (queries can carry codes and tokens),
/// the protocol, the status, the bytes written, the duration and the client, and for a forwarded
/// request its upstream's name, status (or `Proxy-Status` error) and time. Nothing else from the
/// request is ever logged. The loop flushes the buffer once per wake-up, so logging costs no syscall
/// per request.
public struct AccessLog: Sendable {
  /// Whether lines are recorded at all.
  public let enabled: Bool
  private(set) var buffer: [UInt8] = []
  private var timeLine: [UInt8] = []
  private var timeSecond = -1
  /// The second in which the oldest buffered line was recorded.
  private var oldestSecond = -1

  /// A log that records when `enabled`.
  public init(enabled: Bool) {
    self.enabled = enabled
    if enabled { buffer.reserveCapacity(16384) }
  }

  mutating func record(
    method: HTTPMethod?, path: String?, protocol: MetricProtocol = .http1, status: Int, bytes: Int,
    durationNanoseconds: UInt64, client: String, upstream: UpstreamNote? = nil
  ) {
    guard enabled else { return }
    refreshTime()
    if buffer.isEmpty { oldestSecond = timeSecond }
    // One bound for the whole line (the fixed text is under 256 bytes), then each piece in place.
    var bound = 256 + timeLine.count + 3 * BoundedWriter.maxDecimalBytes + client.utf8.count
    bound += (method?.rawValue.utf8.count ?? 1) + (path.map(JSONString.escapedBound) ?? 1)
    if let upstream {
      bound += 2 * BoundedWriter.maxDecimalBytes + JSONString.escapedBound(upstream.upstream)
      bound += upstream.error?.utf8.count ?? 0
    }
    let timeLine = self.timeLine
    buffer.append(bound: bound) { out in
      out.put(static: #"{"time":""#)
      out.put(timeLine)
      out.put(static: #"","method":""#)
      if let method { out.put(utf8: method.rawValue) } else { out.put(static: "-") }
      out.put(static: #"","path":""#)
      // The parser admits only visible ASCII in a target: quote and backslash are escaped.
      if let path { JSONString.put(escaped: path, to: &out) } else { out.put(static: "-") }
      out.put(static: #"","protocol":""#)
      out.put(static: `protocol` == .h2 ? "HTTP/2" : "HTTP/1.1")
      out.put(static: #"","status":"#)
      out.put(decimal: status)
      out.put(static: #","bytes":"#)
      out.put(decimal: bytes)
      out.put(static: #","duration_us":"#)
      out.put(decimal: Int(durationNanoseconds / 1000))
      out.put(static: #","client":""#)
      out.put(utf8: client)
      out.put(static: "\"")
      if let upstream { Self.note(upstream, to: &out) }
      out.put(static: "}\n")
    }
  }

  /// `,"upstream":…,"upstream_status":…` (or `"upstream_error"`) `,"upstream_us":…`.
  private static func note(_ upstream: UpstreamNote, to out: inout BoundedWriter) {
    out.put(static: #","upstream":""#)
    JSONString.put(escaped: upstream.upstream, to: &out)
    if let status = upstream.status {
      out.put(static: #"","upstream_status":"#)
      out.put(decimal: status)
    } else {
      out.put(static: #"","upstream_error":""#)
      out.put(utf8: upstream.error ?? "")
      out.put(static: "\"")
    }
    out.put(static: #","upstream_us":"#)
    out.put(decimal: Int(upstream.durationNanoseconds / 1000))
  }

  private mutating func refreshTime() {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME_COARSE, &now)
    guard now.tv_sec != timeSecond else { return }
    timeSecond = now.tv_sec
    timeLine = Array(Civil.rfc3339(now.tv_sec).utf8)
  }

  /// Whether nothing is buffered.
  var isEmpty: Bool { buffer.isEmpty }

  /// The recorded lines as text (tests).
  public var text: String { String(decoding: buffer, as: UTF8.self) }

  /// Bytes buffered before a write is forced.
  static let flushBytes = 65536

  /// Writes the lines if 64 KiB are buffered or the oldest is a second old (like nginx's
  /// `buffer=… flush=1s`), so that a busy loop writes the log in large pieces.
  mutating func flushIfDue(nowSecond: Int) {
    guard !buffer.isEmpty else { return }
    if buffer.count >= Self.flushBytes || nowSecond != oldestSecond { flush() }
  }

  /// Writes the buffered lines to standard output and empties the buffer.
  mutating func flush() {
    guard !buffer.isEmpty else { return }
    Log.writeStdout(buffer)
    buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
  }
}

/// Structured operational log lines (JSON) on standard error, and the stdout lock.
public enum Log {
  private static let stdoutLock = Mutex(())

  /// Writes `bytes` to standard output whole, under one lock so that loops never interleave lines.
  static func writeStdout(_ bytes: [UInt8]) {
    stdoutLock.withLock { _ in
      bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
          let n = write(1, raw.baseAddress! + offset, raw.count - offset)
          if n < 0 && errno == EINTR { continue }
          if n <= 0 { return }
          offset += n
        }
      }
    }
  }

  /// One JSON line on standard error: `{"level":..., "event":..., fields...}`. Values are escaped.
  public static func event(_ level: String = "info", _ event: String, _ fields: [(String, String)] = []) {
    var line: [UInt8] = []
    line.append(static: #"{"level":"#)
    JSONString.append(level, to: &line)
    line.append(static: #","event":"#)
    JSONString.append(event, to: &line)
    for (key, value) in fields {
      line.append(UInt8(ascii: ","))
      JSONString.append(key, to: &line)
      line.append(UInt8(ascii: ":"))
      JSONString.append(value, to: &line)
    }
    line.append(static: "}\n")
    line.withUnsafeBytes { raw in _ = write(2, raw.baseAddress!, raw.count) }
  }

  /// `text` escaped to stand inside a JSON string (`JSONString`).
  public static func escape(_ text: String) -> String { JSONString.escaped(text) }
}
