import Testing

@testable import Edge

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Civil calendar arithmetic")
struct CivilTests {
  @Test(
    "known dates and weekdays (0 = Sunday)",
    arguments: [
      (0, 1970, 1, 1, 4), (-1, 1969, 12, 31, 3), (11016, 2000, 2, 29, 2), (20788, 2026, 12, 1, 2),
      (-719468, 0, 3, 1, 3), (2_932_896, 9999, 12, 31, 5),
    ])
  func known(days: Int, year: Int, month: Int, day: Int, weekday: Int) {
    #expect(Civil.days(year: year, month: month, day: day) == days)
    #expect(Civil.date(days: days) == (year, month, day))
    #expect(Civil.weekday(days) == weekday)
  }

  @Test("every day from 1900 to 2100 goes there and back")
  func roundTrip() {
    let start = Civil.days(year: 1900, month: 1, day: 1)
    let end = Civil.days(year: 2100, month: 12, day: 31)
    for days in start...end {
      let (y, m, d) = Civil.date(days: days)
      #expect(Civil.days(year: y, month: m, day: d) == days)
    }
    #expect(
      end - start + 1 == 201 * 365 + 49, "49 leap days from 1904 to 2096; 1900 and 2100 are not leap years")
  }

  @Test(
    "dates and times as RFC 3339 and IMF-fixdate",
    arguments: [
      (0, "1970-01-01T00:00:00Z", "Thu, 01 Jan 1970 00:00:00 GMT"),
      (-1, "1969-12-31T23:59:59Z", "Wed, 31 Dec 1969 23:59:59 GMT"),
      (784_111_777, "1994-11-06T08:49:37Z", "Sun, 06 Nov 1994 08:49:37 GMT"),
      (1_796_025_600, "2026-11-30T08:00:00Z", "Mon, 30 Nov 2026 08:00:00 GMT"),
      (951_782_400, "2000-02-29T00:00:00Z", "Tue, 29 Feb 2000 00:00:00 GMT"),
    ])
  func formats(seconds: Int, rfc3339: String, imf: String) {
    #expect(Civil.rfc3339(seconds) == rfc3339)
    #expect(Civil.imfFixdate(seconds) == imf)
  }

  @Test("the formatters agree with gmtime_r, second by second across a day and day by day over centuries")
  func asGmtime() {
    let instants =
      Array(1_796_000_000..<1_796_000_000 + 86400)
      + stride(from: -2_208_988_800, to: 4_102_444_800, by: 86_413)
    for seconds in instants {
      var t = time_t(seconds)
      var parts = tm()
      gmtime_r(&t, &parts)
      let c = Civil.time(epochSeconds: seconds)
      let expected = [
        Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour),
        Int(parts.tm_min),
        Int(parts.tm_sec), Int(parts.tm_wday),
      ]
      guard [c.year, c.month, c.day, c.hour, c.minute, c.second, c.weekday] == expected else {
        Issue.record("\(seconds): \(c) is not \(expected)")
        return
      }
    }
  }
}
