import Testing

@testable import Edge

/// Durations as whole nanoseconds, and deadlines moved by them, at the edges of their range.
@Suite("Clock")
struct ClockTests {
  static let cases: [(Duration, UInt64)] = [
    (.zero, 0),
    (.nanoseconds(7), 7),
    (.nanoseconds(-7), 0),
    (.seconds(-1), 0),
    (.milliseconds(1500), 1_500_000_000),
    (.seconds(60), 60_000_000_000),
    (.seconds(1) + .nanoseconds(1), 1_000_000_001),
    // A part of a nanosecond is dropped.
    (.seconds(1) / 3, 333_333_333),
    // The largest whole-second duration whose nanoseconds fit, and the next one.
    (.seconds(18_446_744_073), 18_446_744_073_000_000_000),
    (.seconds(18_446_744_074), .max),
    (.seconds(Int64.max), .max),
  ]

  @Test("a duration in nanoseconds: negative as zero, past UInt64.max as UInt64.max", arguments: cases)
  func nanoseconds(_ duration: Duration, _ expected: UInt64) {
    #expect(duration.nanoseconds == expected)
  }

  @Test("an instant moved by a duration saturates at never")
  func adding() {
    let start = Instant(nanoseconds: 1_000)
    #expect(start.adding(.nanoseconds(5)) == Instant(nanoseconds: 1_005))
    #expect(start.adding(.seconds(-5)) == start)
    #expect(start.adding(.seconds(Int64.max)) == .never)
    #expect(Instant(nanoseconds: .max - 1).adding(.nanoseconds(2)) == .never)
  }
}
