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
    value = Civil.imfFixdate(epochSeconds)
    line = Array("Date: \(value)\r\n".utf8)
  }
}
