import Accounts
import Edge
import Store
import Synchronization

/// The audit events of forwarded mutations the API core accepted (2xx), between the event loop
/// that read the core's answer and the store. The loop may not touch the store, so the answer
/// only appends here (a lock held for an append); the next forwarded request on the pool writes
/// what is waiting, and so does the composition's writer every second and once more after a drain.
///
/// Bounded: past `capacity` events waiting (a store that refuses every write), the newest are
/// dropped and counted in the log; an accepted mutation is never refused for its audit.
final class AuditQueue: Sendable {
  /// One event: `audit_events` (actor, action, subject, detail).
  struct Event: Sendable, Equatable {
    let actor: String
    let action: String
    let subject: String
    let detail: String
  }

  static let capacity = 10_000
  private let waiting = Mutex<[Event]>([])
  private let dropped = Atomic<Int>(0)

  /// Keeps `event` for the next write (from the loop: no store, no waiting beyond the lock).
  func record(_ event: Event) {
    let kept = waiting.withLock { events in
      guard events.count < Self.capacity else { return false }
      events.append(event)
      return true
    }
    if !kept { dropped.add(1, ordering: .relaxed) }
  }

  /// How many events wait.
  var count: Int { waiting.withLock { $0.count } }

  /// Writes the waiting events to `store` (on a pool worker); those the store refuses wait for
  /// the next write.
  func write(to store: ClientStore) {
    let events = waiting.withLock { events in
      defer { events.removeAll() }
      return events
    }
    let lost = dropped.exchange(0, ordering: .relaxed)
    if lost > 0 { Log.event("error", "gateway_audit_dropped", [("events", String(lost))]) }
    for (index, event) in events.enumerated() {
      do {
        try store.audit(
          actor: event.actor, action: event.action, subject: event.subject, detail: event.detail)
      } catch {
        Log.event("error", "gateway_audit_failed", [("error", "\(error)")])
        waiting.withLock { $0.insert(contentsOf: events[index...], at: 0) }
        return
      }
    }
  }
}
