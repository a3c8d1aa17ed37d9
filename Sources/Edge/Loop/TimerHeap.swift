/// A binary min-heap of connection deadlines with lazy deletion: the loop's timer structure.
///
/// A connection is pushed only when its deadline moves earlier than what is scheduled; a later
/// deadline is noticed when the earlier entry fires and finds nothing due. So a request that
/// merely extends a timeout costs nothing here.
struct TimerHeap {
  struct Entry {
    let deadline: Instant
    let fd: Int32
    let generation: UInt64
  }

  private var entries: [Entry] = []

  var isEmpty: Bool { entries.isEmpty }
  var earliest: Instant? { entries.first?.deadline }

  mutating func push(_ entry: Entry) {
    entries.append(entry)
    var child = entries.count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard entries[child].deadline < entries[parent].deadline else { break }
      entries.swapAt(child, parent)
      child = parent
    }
  }

  /// Removes and returns the earliest entry if it is due at `now`.
  mutating func popDue(_ now: Instant) -> Entry? {
    guard let first = entries.first, first.deadline <= now else { return nil }
    let last = entries.removeLast()
    guard !entries.isEmpty else { return first }
    entries[0] = last
    var parent = 0
    while true {
      let left = 2 * parent + 1
      let right = left + 1
      var smallest = parent
      if left < entries.count && entries[left].deadline < entries[smallest].deadline { smallest = left }
      if right < entries.count && entries[right].deadline < entries[smallest].deadline { smallest = right }
      if smallest == parent { break }
      entries.swapAt(parent, smallest)
      parent = smallest
    }
    return first
  }
}
