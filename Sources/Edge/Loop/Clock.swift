import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A point on a monotonic clock, in nanoseconds from an arbitrary origin.
public struct Instant: Comparable, Hashable, Sendable {
  /// Nanoseconds from the clock's origin.
  public var nanoseconds: UInt64

  /// An instant `nanoseconds` after the origin.
  public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

  /// Later than every real instant: "no deadline".
  public static let never = Instant(nanoseconds: .max)

  /// `self` plus `duration`, saturating at `never`.
  public func adding(_ duration: Duration) -> Instant {
    let (sum, overflow) = nanoseconds.addingReportingOverflow(duration.nanoseconds)
    return overflow ? .never : Instant(nanoseconds: sum)
  }

  public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }
}

extension Duration {
  /// The duration in whole nanoseconds (negative durations count as zero, ones past `UInt64.max`
  /// nanoseconds — 584 years — as `UInt64.max`). One 128-by-64-bit division: `components` costs two
  /// 128-bit ones, and every request moves a few deadlines by a duration.
  var nanoseconds: UInt64 {
    let attoseconds = self.attoseconds
    guard attoseconds > 0 else { return 0 }
    let high = UInt64(truncatingIfNeeded: attoseconds >> 64)
    let low = UInt64(truncatingIfNeeded: attoseconds)
    // The quotient fits in 64 bits exactly when the high half is below the divisor.
    guard high < 1_000_000_000 else { return .max }
    return UInt64(1_000_000_000).dividingFullWidth((high: high, low: low)).quotient
  }
}

/// A source of monotonic time, injected so that deadline logic can be tested without sleeping.
public protocol EdgeClock: Sendable {
  /// The current instant.
  func now() -> Instant
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`).
public struct MonotonicClock: EdgeClock {
  /// The system clock.
  public init() {}

  public func now() -> Instant {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Instant(nanoseconds: UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec))
  }
}

/// A clock that moves only when told to; for tests.
public final class ManualClock: EdgeClock {
  private let current: Mutex<UInt64>

  /// A clock standing at `start` nanoseconds.
  public init(start: UInt64 = 1_000_000_000) { current = Mutex(start) }

  public func now() -> Instant { Instant(nanoseconds: current.withLock { $0 }) }

  /// Moves the clock forward by `duration`.
  public func advance(by duration: Duration) {
    current.withLock { $0 += duration.nanoseconds }
  }
}
