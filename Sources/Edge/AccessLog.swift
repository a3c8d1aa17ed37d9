#if canImport(Glibc)
  import Glibc
#endif
import Synchronization

/// One loop's buffer of access-log lines: one JSON object per request.
///
/// Lines carry the method, the path without its query (queries can carry codes and tokens),
/// the status, the bytes written, the duration and the client. Nothing else from the request
/// is ever logged. The loop flushes the buffer once per wake-up, so logging costs no syscall
/// per request.
public struct AccessLog: Sendable {
  /// Whether lines are recorded at all.
  public let enabled: Bool
  private(set) var buffer: [UInt8] = []
  private var timeLine: [UInt8] = []
  private var timeSecond = -1

  /// A log that records when `enabled`.
  public init(enabled: Bool) {
    self.enabled = enabled
    if enabled { buffer.reserveCapacity(16384) }
  }

  mutating func record(
    method: HTTPMethod?, path: String?, status: Int, bytes: Int, durationNanoseconds: UInt64, client: String
  ) {
    guard enabled else { return }
    refreshTime()
    buffer += #"{"time":""#.utf8
    buffer += timeLine
    buffer += #"","method":""#.utf8
    buffer += (method?.rawValue ?? "-").utf8
    buffer += #"","path":""#.utf8
    for b in (path ?? "-").utf8 {
      if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { buffer.append(UInt8(ascii: "\\")) }
      buffer.append(b)
    }
    buffer += #"","status":"#.utf8
    OutputQueue.appendDecimal(status, to: &buffer)
    buffer += #","bytes":"#.utf8
    OutputQueue.appendDecimal(bytes, to: &buffer)
    buffer += #","duration_us":"#.utf8
    OutputQueue.appendDecimal(Int(durationNanoseconds / 1000), to: &buffer)
    buffer += #","client":""#.utf8
    buffer += client.utf8
    buffer += "\"}\n".utf8
  }

  private mutating func refreshTime() {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME_COARSE, &now)
    guard now.tv_sec != timeSecond else { return }
    timeSecond = now.tv_sec
    var t = time_t(now.tv_sec)
    var parts = tm()
    gmtime_r(&t, &parts)
    func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
    timeLine = Array(
      "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
        .utf8)
  }

  /// The recorded lines as text (tests).
  public var text: String { String(decoding: buffer, as: UTF8.self) }

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
    var line = "{\"level\":\"\(level)\",\"event\":\"\(escape(event))\""
    for (key, value) in fields { line += ",\"\(escape(key))\":\"\(escape(value))\"" }
    line += "}\n"
    let bytes = Array(line.utf8)
    bytes.withUnsafeBytes { raw in _ = write(2, raw.baseAddress!, raw.count) }
  }

  /// JSON string escaping (RFC 8259 §7).
  public static func escape(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      case _ where scalar.value < 0x20:
        let hex = String(scalar.value, radix: 16)
        out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out
  }
}
