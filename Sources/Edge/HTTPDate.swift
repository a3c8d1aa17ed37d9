#if canImport(Glibc)
  import Glibc
#endif

/// The `Date` header line, formatted once per second (RFC 9110 §5.6.7 IMF-fixdate).
public struct HTTPDate: Sendable {
  private(set) var line: [UInt8] = []
  /// The date alone (the field's value, for HTTP/2).
  private(set) var value = ""
  /// The wall-clock second the line shows.
  private(set) var second: Int = -1

  /// Brings the line up to date with the wall clock; cheap when the second has not changed.
  mutating func refresh() {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME_COARSE, &now)
    update(epochSeconds: now.tv_sec)
  }

  /// Sets the line for `epochSeconds` (tests use fixed values).
  mutating func update(epochSeconds: Int) {
    guard epochSeconds != second else { return }
    second = epochSeconds
    value = Self.format(epochSeconds)
    line = Array("Date: \(value)\r\n".utf8)
  }

  /// `Tue, 01 Dec 2026 10:20:00 GMT` (IMF-fixdate) for `epochSeconds`.
  public static func format(_ epochSeconds: Int) -> String {
    var t = time_t(epochSeconds)
    var parts = tm()
    gmtime_r(&t, &parts)
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
    return
      "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
      + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
  }
}
