/// A connection of one pool, numbered from 1 in the order the pool opened them; a number is
/// never given twice in a pool's life, so a late event for a closed connection cannot hit a new
/// one.
struct UpstreamConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
  let rawValue: Int

  static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

  var description: String { "c\(rawValue)" }
}

/// A request waiting in one pool's queue, numbered like connections (never given twice).
struct UpstreamWaiterID: Hashable, Sendable, CustomStringConvertible {
  let rawValue: Int

  var description: String { "w\(rawValue)" }
}
