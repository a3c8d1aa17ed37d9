import Testing

@testable import Edge

/// An exchange's deadlines: connect (1 s), first byte after the request is written (15 s), total
/// from the acquire (30 s); the earliest fires, at exactly its instant, with its own fault.
@Suite("Upstream exchange deadlines")
struct UpstreamDeadlinesTests {
  enum Event: Sendable {
    case connectStarted(ms: Int64)
    case writing(ms: Int64)
    case written(ms: Int64)
    case responseStarted(ms: Int64)

    var ms: Int64 {
      switch self {
      case .connectStarted(let ms), .writing(let ms), .written(let ms), .responseStarted(let ms): ms
      }
    }
  }

  @Test(
    "the next deadline and its fault, after each sequence of events",
    arguments: [
      ([], 30_000, UpstreamFault.totalTimeout),
      ([.connectStarted(ms: 0)], 1000, .connectTimeout),
      ([.connectStarted(ms: 200)], 1200, .connectTimeout),
      ([.connectStarted(ms: 29_500)], 30_000, .totalTimeout),
      ([.connectStarted(ms: 29_000)], 30_000, .connectTimeout),
      ([.connectStarted(ms: 0), .writing(ms: 100)], 30_000, .totalTimeout),
      ([.writing(ms: 0), .written(ms: 500)], 15_500, .firstByteTimeout),
      ([.connectStarted(ms: 0), .writing(ms: 300), .written(ms: 400)], 15_400, .firstByteTimeout),
      ([.writing(ms: 0), .written(ms: 20_000)], 30_000, .totalTimeout),
      ([.writing(ms: 0), .written(ms: 15_000)], 30_000, .firstByteTimeout),
      ([.writing(ms: 0), .written(ms: 500), .responseStarted(ms: 900)], 30_000, .totalTimeout),
      (
        [.writing(ms: 0), .written(ms: 100), .connectStarted(ms: 5000)], 6000, .connectTimeout
      ),
    ] as [([Event], Int64, UpstreamFault)])
  func next(events: [Event], deadlineMs: Int64, fault: UpstreamFault) {
    let clock = ManualClock()
    let start = clock.now()
    var deadlines = UpstreamDeadlines(timeouts: UpstreamTimeouts(), started: start)
    var elapsed: Int64 = 0
    for event in events {
      clock.advance(by: .milliseconds(event.ms - elapsed))
      elapsed = event.ms
      switch event {
      case .connectStarted: deadlines.connectStarted(at: clock.now())
      case .writing: deadlines.writing()
      case .written: deadlines.requestWritten(at: clock.now())
      case .responseStarted: deadlines.responseStarted()
      }
    }
    let expected = start.adding(.milliseconds(deadlineMs))
    #expect(deadlines.next.deadline == expected)
    #expect(deadlines.next.fault == fault)
    #expect(deadlines.expired(at: Instant(nanoseconds: expected.nanoseconds - 1)) == nil)
    #expect(deadlines.expired(at: expected) == fault)
    #expect(deadlines.expired(at: expected.adding(.seconds(100))) == fault)
  }

  @Test("the phase's own timeouts come from the configuration")
  func configured() {
    var timeouts = UpstreamTimeouts()
    timeouts.connect = .milliseconds(50)
    timeouts.firstByte = .seconds(2)
    timeouts.total = .seconds(3)
    let start = Instant(nanoseconds: 1_000_000_000)
    var deadlines = UpstreamDeadlines(timeouts: timeouts, started: start)
    deadlines.connectStarted(at: start)
    #expect(deadlines.next.deadline == start.adding(.milliseconds(50)))
    deadlines.writing()
    deadlines.requestWritten(at: start.adding(.milliseconds(60)))
    #expect(deadlines.next.deadline == start.adding(.milliseconds(2060)))
    #expect(deadlines.next.fault == .firstByteTimeout)
  }
}
