import Synchronization

/// The process-wide allowance of request bytes held while bodies are read and handled
/// (`Limits.maxBufferedRequestBytes`), shared by every loop.
///
/// Each connection reserves what it holds as it grows and gives it back as it shrinks or closes;
/// a reservation that would pass the limit fails, and the body is refused with 503. One atomic
/// counter, touched only when a connection's holding changes.
public final class RequestBudget: Sendable {
  /// The most bytes that may be reserved at once.
  public let limit: Int
  private let reserved = Atomic<Int>(0)

  /// A budget of `limit` bytes.
  public init(limit: Int) {
    self.limit = limit
  }

  /// Bytes reserved now, across the process.
  public var inUse: Int { reserved.load(ordering: .relaxed) }

  /// Reserves `count` more bytes; false (and nothing reserved) when that would pass the limit.
  func reserve(_ count: Int) -> Bool {
    var current = reserved.load(ordering: .relaxed)
    while true {
      guard current + count <= limit else { return false }
      let (exchanged, original) = reserved.compareExchange(
        expected: current, desired: current + count, ordering: .relaxed)
      if exchanged { return true }
      current = original
    }
  }

  /// Gives back `count` reserved bytes.
  func release(_ count: Int) {
    reserved.subtract(count, ordering: .relaxed)
  }
}
