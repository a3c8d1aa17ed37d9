import Synchronization

/// One process's schedule for reaching its database again: after a failed connection attempt,
/// every connection's next attempt waits until the backoff has passed (0.1 s doubling to 2 s by
/// default) and fails at once meanwhile as an `outage`, so a pool never queues behind connect
/// timeouts and a database coming back is not met by every worker at once. The first success
/// anywhere clears it: every connection tries again at its next statement.
public final class ReconnectSchedule: Sendable {
  private struct State {
    var retryAt: ContinuousClock.Instant? = nil
    var backoff: Duration
    /// A connection failed and none has come back since.
    var failing = false
  }
  private let state: Mutex<State>
  private let settings: DatabaseSettings

  /// A schedule with `settings`' backoff.
  public init(_ settings: DatabaseSettings) {
    self.settings = settings
    state = Mutex(State(backoff: settings.firstBackoff))
  }

  /// `connect()`, unless a recent failure says to wait; its `outage` sets the next wait.
  public func attempt<T>(_ connect: () throws(StoreError) -> T) throws(StoreError) -> T {
    let now = ContinuousClock.now
    // While failing, one attempt at a time: the others fail at once rather than each waiting out
    // a connect timeout against a server that does not answer.
    let wait = state.withLock { state -> Bool in
      if let retryAt = state.retryAt, now < retryAt { return true }
      if state.failing { state.retryAt = now + settings.connectTimeout }
      return false
    }
    if wait { throw StoreError.outage("the database is out of reach; trying again shortly") }
    do {
      let made = try connect()
      state.withLock { $0 = State(backoff: settings.firstBackoff) }
      return made
    } catch {
      if error.isOutage {
        state.withLock { state in
          state.retryAt = ContinuousClock.now + state.backoff
          state.backoff = min(state.backoff * 2, settings.longestBackoff)
          state.failing = true
        }
      }
      throw error
    }
  }
}
