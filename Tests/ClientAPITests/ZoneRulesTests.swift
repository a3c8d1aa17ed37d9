import Deployment
import Edge
import TestSupport
import Testing

@testable import ClientAPI

@Suite("Times on server pages in the deployment's zone, across daylight saving (in-process)")
struct ZoneRulesTests {
  /// Epoch seconds of a UTC date and time.
  static func utc(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int, _ s: Int = 0) -> Int {
    Civil.days(year: y, month: mo, day: d) * 86400 + h * 3600 + mi * 60 + s
  }

  static let london: [(Int, String)] = [
    (utc(2026, 1, 15, 12, 0), "15 Jan 2026, 12:00 GMT"),
    (utc(2026, 3, 29, 0, 59, 59), "29 Mar 2026, 00:59 GMT"),  // the last second of GMT
    (utc(2026, 3, 29, 1, 0), "29 Mar 2026, 02:00 BST"),  // clocks go forward at 01:00 UTC
    (utc(2026, 7, 1, 23, 30), "2 Jul 2026, 00:30 BST"),  // the local date is the next day
    (utc(2026, 10, 25, 0, 59, 59), "25 Oct 2026, 01:59 BST"),
    (utc(2026, 10, 25, 1, 0), "25 Oct 2026, 01:00 GMT"),  // clocks go back
    (utc(2026, 12, 31, 23, 59), "31 Dec 2026, 23:59 GMT"),
    (utc(2040, 6, 1, 12, 0), "1 Jun 2040, 13:00 BST"),  // past any table: the footer rule
    (utc(2028, 2, 29, 8, 5), "29 Feb 2028, 08:05 GMT"),
    (utc(2027, 3, 28, 1, 0), "28 Mar 2027, 02:00 BST"),
    (utc(2027, 10, 31, 0, 30), "31 Oct 2027, 01:30 BST"),
  ]

  @Test("Europe/London from the machine's TZif file", arguments: london)
  func londonFile(instant: Int, expected: String) throws {
    let bytes = try #require(ZoneRules.readFile("/usr/share/zoneinfo/Europe/London"))
    let rules = try #require(ZoneRules.parse(tzif: bytes, name: "Europe/London"))
    #expect(rules.readable(instant) == expected)
  }

  @Test("Europe/London from the built-in rule (no tzdata installed)", arguments: london)
  func londonBuiltIn(instant: Int, expected: String) throws {
    let rules = ZoneRules(
      name: "Europe/London", rule: PosixRule(try #require(ZoneRules.builtIn["Europe/London"])))
    #expect(rules.readable(instant) == expected)
  }

  @Test(
    "other zones and rules: west of UTC, the southern hemisphere, quoted names, none",
    arguments: [
      ("EST5EDT,M3.2.0,M11.1.0", utc(2026, 3, 8, 6, 59), "8 Mar 2026, 01:59 EST"),
      ("EST5EDT,M3.2.0,M11.1.0", utc(2026, 3, 8, 7, 0), "8 Mar 2026, 03:00 EDT"),
      ("AEST-10AEDT,M10.1.0,M4.1.0/3", utc(2026, 1, 10, 0, 0), "10 Jan 2026, 11:00 AEDT"),
      ("AEST-10AEDT,M10.1.0,M4.1.0/3", utc(2026, 6, 10, 0, 0), "10 Jun 2026, 10:00 AEST"),
      ("AEST-10AEDT,M10.1.0,M4.1.0/3", utc(2026, 4, 4, 15, 59), "5 Apr 2026, 02:59 AEDT"),
      ("AEST-10AEDT,M10.1.0,M4.1.0/3", utc(2026, 4, 4, 16, 0), "5 Apr 2026, 02:00 AEST"),
      ("<+0530>-5:30", utc(2026, 5, 1, 0, 0), "1 May 2026, 05:30 +0530"),
      ("UTC0", utc(1969, 12, 31, 23, 0), "31 Dec 1969, 23:00 UTC"),
    ] as [(String, Int, String)])
  func rules(rule: String, instant: Int, expected: String) throws {
    let parsed = try #require(PosixRule(rule))
    #expect(ZoneRules(name: "x", rule: parsed).readable(instant) == expected)
  }

  @Test(
    "malformed rules are refused",
    arguments: ["", "G", "GMT", "GMT0BST,M13.1.0,M10.5.0", "GMT0BST,M3.5.0", "GMT0x"])
  func malformed(rule: String) { #expect(PosixRule(rule) == nil) }

  @Test("New York and Sydney from the machine's files agree with their rules")
  func files() throws {
    for (name, instant, expected) in [
      ("America/New_York", Self.utc(2026, 7, 4, 16, 0), "4 Jul 2026, 12:00 EDT"),
      ("America/New_York", Self.utc(2026, 12, 25, 17, 0), "25 Dec 2026, 12:00 EST"),
      ("Australia/Sydney", Self.utc(2026, 12, 25, 1, 0), "25 Dec 2026, 12:00 AEDT"),
      ("Europe/London", Self.utc(1990, 7, 1, 12, 0), "1 Jul 1990, 13:00 BST"),  // from the table
    ] {
      #expect(ZoneRules.load(name).readable(instant) == expected, "\(name)")
    }
  }
}
