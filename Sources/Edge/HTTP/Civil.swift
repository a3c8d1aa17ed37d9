/// Proleptic Gregorian calendar arithmetic on days since 1970-01-01 (H. Hinnant's algorithms),
/// for HTTP dates and for times shown in a time zone. Works for dates before 1970 too.
public enum Civil {
  /// Division rounding towards negative infinity.
  public static func floorDiv(_ a: Int, _ b: Int) -> Int { a >= 0 ? a / b : -((-a + b - 1) / b) }
  /// The remainder of `floorDiv`, never negative for a positive `b`.
  public static func floorMod(_ a: Int, _ b: Int) -> Int { a - floorDiv(a, b) * b }
  /// Whether `y` is a leap year.
  public static func isLeap(_ y: Int) -> Bool { y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) }
  /// The weekday of day `days`: 0 is Sunday.
  public static func weekday(_ days: Int) -> Int { floorMod(days + 4, 7) }

  /// Days since 1970-01-01 of `year`-`month`-`day`.
  public static func days(year: Int, month: Int, day: Int) -> Int {
    let y = month <= 2 ? year - 1 : year
    let era = floorDiv(y, 400)
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146097 + doe - 719468
  }

  /// The date of day `days` since 1970-01-01.
  public static func date(days: Int) -> (year: Int, month: Int, day: Int) {
    let z = days + 719468
    let era = floorDiv(z, 146097)
    let doe = z - era * 146097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
  }
}

extension Civil {
  /// The date and time in UTC of `epochSeconds` since 1970-01-01 (before it too); weekday 0 is
  /// Sunday.
  public static func time(epochSeconds: Int) -> (
    year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, weekday: Int
  ) {
    let days = floorDiv(epochSeconds, 86400)
    let rest = floorMod(epochSeconds, 86400)
    let (year, month, day) = date(days: days)
    return (year, month, day, rest / 3600, rest % 3600 / 60, rest % 60, weekday(days))
  }

  /// `2026-11-30T10:20:00Z`: RFC 3339 in UTC, to the second.
  public static func rfc3339(_ epochSeconds: Int) -> String {
    let t = time(epochSeconds: epochSeconds)
    return "\(t.year)-\(two(t.month))-\(two(t.day))T\(two(t.hour)):\(two(t.minute)):\(two(t.second))Z"
  }

  /// `Tue, 01 Dec 2026 10:20:00 GMT`: IMF-fixdate (RFC 9110 §5.6.7).
  public static func imfFixdate(_ epochSeconds: Int) -> String {
    let t = time(epochSeconds: epochSeconds)
    return "\(dayNames[t.weekday]), \(two(t.day)) \(monthNames[t.month - 1]) \(t.year) "
      + "\(two(t.hour)):\(two(t.minute)):\(two(t.second)) GMT"
  }

  /// The months' English abbreviations, January first.
  public static let monthNames = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
  ]
  /// The weekdays' English abbreviations, Sunday first.
  public static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

  /// `v` in two digits at least.
  public static func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
}
