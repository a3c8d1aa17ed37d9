import Testing

@testable import Edge

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
}
