import Accounts
import Edge

/// A POSIX TZ rule (`GMT0BST,M3.5.0/1,M10.5.0`; POSIX.1-2017 §8.3, as RFC 8536 §3.3 extends it):
/// standard time and, optionally, daylight time with the yearly dates it starts and ends.
struct PosixRule: Sendable, Equatable {
  /// A yearly date: `Mm.w.d` (day d of week w of month m, w 5 = last), `Jn` (1-365, no Feb 29)
  /// or `n` (0-365, counting Feb 29).
  enum YearDay: Sendable, Equatable {
    case monthWeekDay(month: Int, week: Int, weekday: Int)
    case julian(Int)
    case zeroBased(Int)
  }

  let standard: String
  /// Seconds east of UTC (POSIX writes them west: `EST5` is -18000 here).
  let standardOffset: Int
  let daylight: String?
  let daylightOffset: Int
  /// When daylight time starts (local standard time) and ends (local daylight time).
  let start: (day: YearDay, time: Int)
  let end: (day: YearDay, time: Int)

  static func == (a: PosixRule, b: PosixRule) -> Bool {
    a.standard == b.standard && a.standardOffset == b.standardOffset && a.daylight == b.daylight
      && a.daylightOffset == b.daylightOffset && a.start.day == b.start.day && a.start.time == b.start.time
      && a.end.day == b.end.day && a.end.time == b.end.time
  }

  /// The rule in `text`, or nil when it is not one.
  init?(_ text: String) {
    var s = Scanner(Array(text.utf8))
    guard let std = s.name(), let stdWest = s.offset() else { return nil }
    standard = std
    standardOffset = -stdWest
    guard !s.atEnd else {
      daylight = nil
      daylightOffset = standardOffset
      start = (.julian(1), 0)
      end = (.julian(1), 0)
      return
    }
    guard let dst = s.name() else { return nil }
    daylight = dst
    if !s.atEnd && s.peek != UInt8(ascii: ",") {
      guard let west = s.offset() else { return nil }
      daylightOffset = -west
    } else {
      daylightOffset = standardOffset + 3600
    }
    if s.atEnd {
      // No rule: the POSIX default (United States since 2007).
      start = (.monthWeekDay(month: 3, week: 2, weekday: 0), 7200)
      end = (.monthWeekDay(month: 11, week: 1, weekday: 0), 7200)
      return
    }
    guard s.eat(","), let startDay = s.yearDay() else { return nil }
    let startTime = s.eat("/") ? s.offset() : 7200
    guard let startTime, s.eat(","), let endDay = s.yearDay() else { return nil }
    let endTime = s.eat("/") ? s.offset() : 7200
    guard let endTime, s.atEnd else { return nil }
    start = (startDay, startTime)
    end = (endDay, endTime)
  }

  /// The local time type at `instant`.
  func type(at instant: Int) -> ZoneRules.LocalType {
    let standardType = ZoneRules.LocalType(offset: standardOffset, abbreviation: standard)
    guard let daylight else { return standardType }
    let year = Civil.date(days: Civil.floorDiv(instant + standardOffset, 86400)).year
    let begins = Self.days(start.day, year) * 86400 + start.time - standardOffset
    let ends = Self.days(end.day, year) * 86400 + end.time - daylightOffset
    let inDaylight =
      begins < ends ? (begins <= instant && instant < ends) : !(ends <= instant && instant < begins)
    return inDaylight ? ZoneRules.LocalType(offset: daylightOffset, abbreviation: daylight) : standardType
  }

  /// Days since 1970-01-01 of `day` in `year`.
  static func days(_ day: YearDay, _ year: Int) -> Int {
    switch day {
    case .julian(let n):
      let leap = Civil.isLeap(year) && n >= 60 ? 1 : 0
      return Civil.days(year: year, month: 1, day: 1) + n - 1 + leap
    case .zeroBased(let n):
      return Civil.days(year: year, month: 1, day: 1) + n
    case .monthWeekDay(let month, let week, let weekday):
      let first = Civil.days(year: year, month: month, day: 1)
      let next =
        month == 12
        ? Civil.days(year: year + 1, month: 1, day: 1) : Civil.days(year: year, month: month + 1, day: 1)
      var day = first + Civil.floorMod(weekday - Civil.weekday(first), 7) + (week - 1) * 7
      while day >= next { day -= 7 }
      return day
    }
  }

  /// Reads a TZ string.
  private struct Scanner {
    let bytes: [UInt8]
    var at = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var atEnd: Bool { at >= bytes.count }
    var peek: UInt8? { atEnd ? nil : bytes[at] }

    mutating func eat(_ c: Unicode.Scalar) -> Bool {
      guard peek == UInt8(ascii: c) else { return false }
      at += 1
      return true
    }

    /// `EST` (three or more letters) or `<+0330>` (quoted).
    mutating func name() -> String? {
      let from = at
      if eat("<") {
        while let c = peek, c != UInt8(ascii: ">") { at += 1 }
        guard eat(">"), at - from >= 5 else { return nil }
        return String(decoding: bytes[(from + 1)..<(at - 1)], as: UTF8.self)
      }
      while let c = peek, (c | 0x20) >= UInt8(ascii: "a"), (c | 0x20) <= UInt8(ascii: "z") { at += 1 }
      return at - from >= 3 ? String(decoding: bytes[from..<at], as: UTF8.self) : nil
    }

    /// `[+-]hh[:mm[:ss]]` in seconds (hours up to 167, RFC 8536 §3.3.1).
    mutating func offset() -> Int? {
      let sign = eat("-") ? -1 : (eat("+") ? 1 : 1)
      guard let hours = number(), hours <= 167 else { return nil }
      var seconds = hours * 3600
      if eat(":") {
        guard let minutes = number(), minutes < 60 else { return nil }
        seconds += minutes * 60
        if eat(":") {
          guard let s = number(), s < 60 else { return nil }
          seconds += s
        }
      }
      return sign * seconds
    }

    mutating func yearDay() -> YearDay? {
      if eat("M") {
        guard let m = number(), (1...12).contains(m), eat("."), let w = number(), (1...5).contains(w),
          eat("."),
          let d = number(), (0...6).contains(d)
        else { return nil }
        return .monthWeekDay(month: m, week: w, weekday: d)
      }
      if eat("J") {
        guard let n = number(), (1...365).contains(n) else { return nil }
        return .julian(n)
      }
      guard let n = number(), (0...365).contains(n) else { return nil }
      return .zeroBased(n)
    }

    mutating func number() -> Int? {
      let from = at
      var value = 0
      while let c = peek, c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9"), at - from < 4 {
        value = value * 10 + Int(c - UInt8(ascii: "0"))
        at += 1
      }
      return at > from ? value : nil
    }
  }
}

/// Proleptic Gregorian calendar arithmetic on days since 1970-01-01 (H. Hinnant's algorithms).
