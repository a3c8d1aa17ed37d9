import Edge
import Synchronization

/// The sessions whose cached views the gateway's loops went on answering past their refresh time
/// (`ClientServices.viewTimes`), read again on a thread of their own, many in one statement: so a
/// busy session does not send a forwarded read to the pool once a minute for its last-seen write,
/// and sessions that came due together (signed in together, or first read together after a start)
/// do not all miss the cache at once.
///
/// What the loop answers meanwhile is what the store said under the same change epoch: a revoked
/// session, a changed membership or a disabled account still ends the epoch, and the entry still
/// ends at the session's expiry, its idle end and two last-seen resolutions past its last-seen time,
/// whichever comes first (the refresh has had a minute by then). The thread starts with the first
/// session due and runs as long as the process, with a store connection of its own; idle, it looks
/// for work every 20 ms (`Background.pause`).
package final class SessionRefresher: Sendable {
  /// A session due: its token, and the client address of the request that found it due (the
  /// session's network hint is made from it). Never the request itself, whose bytes it would keep.
  package typealias Due = (token: String, address: String)

  /// The most sessions one statement reads.
  package static let batchLimit = 64
  /// The most sessions waiting: past it a due session is not queued (logged once while full), and
  /// its entry ends at its `validUntil` like any other (the next read then goes to the pool).
  package static let queueLimit = 4096

  private struct Queue {
    var items: [Due] = []
    var started = false
    var full = false
  }

  private let queue = Mutex(Queue())
  private let group: Background
  /// Batches read so far (tests wait on it).
  private let batches = Atomic<Int>(0)

  /// A refresher whose thread joins `group` (the process's own, but for tests).
  package init(group: Background = .process) { self.group = group }

  /// Queues `due`. The first queued starts the thread that reads them through `read`, up to
  /// `batchLimit` at a time, for as long as the process runs.
  package func enqueue(_ due: Due, read: @escaping @Sendable ([Due]) -> Void) {
    let (start, filled) = queue.withLock { queue -> (Bool, Bool) in
      var filled = false
      if queue.items.count < Self.queueLimit {
        queue.items.append(due)
      } else if !queue.full {
        queue.full = true
        filled = true
      }
      guard !queue.started else { return (false, filled) }
      queue.started = true
      return (true, filled)
    }
    if filled { Log.event("warning", "session_refresh_queue_full", [("limit", String(Self.queueLimit))]) }
    if start { group.start { [self] in run(read) } }
  }

  /// Batches read so far (tests).
  package var batchesRead: Int { batches.load(ordering: .sequentiallyConsistent) }

  private func run(_ read: @Sendable ([Due]) -> Void) {
    while !group.isEnding {
      let batch = queue.withLock { queue -> [Due] in
        let taken = Array(queue.items.prefix(Self.batchLimit))
        queue.items.removeFirst(taken.count)
        if queue.items.isEmpty { queue.full = false }
        return taken
      }
      if batch.isEmpty {
        group.pause(.seconds(3600)) { queue.withLock { !$0.items.isEmpty } }
      } else {
        read(batch)
        batches.add(1, ordering: .sequentiallyConsistent)
      }
    }
  }
}
