import Testing

@testable import Edge

/// One retry, only past the idle-close race: never a written mutation (RFC 9110 §9.2.2), never
/// after a timeout, never on a fresh connection, never twice.
@Suite("Upstream retry rule")
struct UpstreamRetryTests {
  typealias Row = (
    method: HTTPMethod, written: Bool, reused: Bool, responseByte: Bool, fault: UpstreamFault, attempt: Int,
    retry: UpstreamRetry.Reason?
  )

  static let rows: [Row] = [
    // The idle-close race on a reused connection, caught before anything was written: any method.
    (.post, false, true, false, .resetBeforeResponse, 1, .nothingWritten),
    (.get, false, true, false, .closedBeforeResponse, 1, .nothingWritten),
    (.delete, false, true, false, .closedBeforeResponse, 1, .nothingWritten),
    // Written on a reused connection, closed with no response byte: GET and HEAD only.
    (.get, true, true, false, .closedBeforeResponse, 1, .safeRequestUnanswered),
    (.head, true, true, false, .resetBeforeResponse, 1, .safeRequestUnanswered),
    (.post, true, true, false, .closedBeforeResponse, 1, nil),
    (.put, true, true, false, .closedBeforeResponse, 1, nil),
    (.patch, true, true, false, .resetBeforeResponse, 1, nil),
    (.delete, true, true, false, .resetBeforeResponse, 1, nil),
    (.options, true, true, false, .resetBeforeResponse, 1, nil),
    // A response byte arrived: never.
    (.get, true, true, true, .closedMidResponse, 1, nil),
    (.get, true, true, true, .closedBeforeResponse, 1, nil),
    // A fresh connection: never (a connect failure is a 502 at once).
    (.get, false, false, false, .connectRefused, 1, nil),
    (.get, false, false, false, .connectError, 1, nil),
    (.get, false, false, false, .closedBeforeResponse, 1, nil),
    (.get, true, false, false, .resetBeforeResponse, 1, nil),
    // Timeouts: never.
    (.get, false, false, false, .connectTimeout, 1, nil),
    (.get, true, true, false, .firstByteTimeout, 1, nil),
    (.get, true, true, false, .totalTimeout, 1, nil),
    (.get, false, true, false, .totalTimeout, 1, nil),
    // Other faults: never.
    (.get, true, true, true, .badResponse("bad status line"), 1, nil),
    (.get, true, true, true, .responseHeadTooLarge, 1, nil),
    (.get, false, true, false, .outOfResources, 1, nil),
    // Never twice.
    (.get, false, true, false, .closedBeforeResponse, 2, nil),
    (.get, true, true, false, .closedBeforeResponse, 2, nil),
  ]

  @Test("the retry table", arguments: rows.indices)
  func table(index: Int) {
    let row = Self.rows[index]
    let attempt = UpstreamAttempt(
      method: row.method, number: row.attempt, reusedConnection: row.reused, requestBytesWritten: row.written,
      responseBytesReceived: row.responseByte)
    #expect(UpstreamRetry.decide(attempt, after: row.fault) == row.retry, "row \(index)")
  }

  static let faults: [UpstreamFault] = [
    .connectRefused, .connectBusy, .connectTimeout, .connectError, .tlsHandshakeFailed, .outOfResources,
    .resetBeforeResponse, .closedBeforeResponse, .closedMidResponse, .firstByteTimeout, .totalTimeout,
    .badResponse("x"), .responseHeadTooLarge, .responseBodyTooLarge, .queueFull, .queueTimeout, .circuitOpen,
    .disabled,
  ]

  @Test("over every combination: never twice, never a timeout, never fresh, never a written mutation")
  func invariants() {
    let methods: [HTTPMethod] = [.get, .head, .post, .put, .patch, .delete, .options]
    var retried = 0
    for method in methods {
      for fault in Self.faults {
        for bits in 0..<8 {
          for number in 1...2 {
            let attempt = UpstreamAttempt(
              method: method, number: number, reusedConnection: bits & 1 != 0,
              requestBytesWritten: bits & 2 != 0, responseBytesReceived: bits & 4 != 0)
            guard UpstreamRetry.decide(attempt, after: fault) != nil else { continue }
            retried += 1
            #expect(number == 1 && !fault.isTimeout && attempt.reusedConnection)
            #expect(!attempt.responseBytesReceived)
            #expect(!attempt.requestBytesWritten || method == .get || method == .head)
          }
        }
      }
    }
    #expect(retried > 0)
  }
}
