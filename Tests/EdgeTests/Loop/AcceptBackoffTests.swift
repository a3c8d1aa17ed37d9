import Testing

@testable import Edge

/// Out of descriptors, a loop pauses accepting and logs once per interval.
@Suite("Accept back-off")
struct AcceptBackoffTests {
  static func at(_ ms: UInt64) -> Instant { Instant(nanoseconds: 1_000_000_000 + ms * 1_000_000) }

  @Test("the first failure logs at once; later ones are counted into one line per second")
  func logging() {
    var backoff = AcceptBackoff()
    #expect(!backoff.paused)
    #expect(backoff.failed(at: Self.at(0)) == 1)
    #expect(backoff.paused && backoff.resumeAt == Self.at(100))
    var lines: [Int] = []
    for ms in stride(from: UInt64(100), through: 2000, by: 100) {
      backoff.resumed()
      if let count = backoff.failed(at: Self.at(ms)) { lines.append(count) }
    }
    #expect(lines == [10, 10])
  }

  @Test("resuming watches the listeners again")
  func resume() {
    var backoff = AcceptBackoff()
    _ = backoff.failed(at: Self.at(0))
    backoff.resumed()
    #expect(!backoff.paused && backoff.resumeAt == .never)
  }
}
