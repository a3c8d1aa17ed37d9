import Foundation
import Synchronization
import Testing

@testable import Edge

/// Counts how many values are alive.
private final class Tracked: Sendable {
  static let alive = Atomic(0)
  init() { Self.alive.add(1, ordering: .relaxed) }
  deinit { Self.alive.subtract(1, ordering: .relaxed) }
}

@Suite("Thread-local values", .serialized)
struct ThreadLocalTests {
  /// Makes values in this thread and four others; returns this thread's value (still held).
  private func fill(_ slot: ThreadLocal<Tracked>) throws -> Tracked {
    let first = try slot.value()
    #expect(try slot.value() === first, "the same thread gets the same value")
    let threads = (0..<4).map { _ in
      Thread {
        _ = try? slot.value()
        _ = try? slot.value()
      }
    }
    for thread in threads { thread.start() }
    for thread in threads { while !thread.isFinished { usleep(1000) } }
    #expect(slot.count == 5)
    return first
  }

  @Test("one value per thread, kept while the slot lives, and every one released when it goes")
  func releasedWithTheSlot() throws {
    let start = Tracked.alive.load(ordering: .relaxed)
    var held: Tracked? = try fill(ThreadLocal { Tracked() })
    #expect(Tracked.alive.load(ordering: .relaxed) - start == 1, "only the value a caller still holds lives")
    held = nil
    #expect(held == nil && Tracked.alive.load(ordering: .relaxed) == start)
  }
}
