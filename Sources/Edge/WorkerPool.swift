import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A fixed set of threads with a bounded queue, for handlers that block.
///
/// `submit` never waits: when the queue is full it returns false at once, and the caller answers
/// 503 with `Retry-After` instead of letting latency grow without bound.
public final class WorkerPool: Sendable {
  private struct Queue {
    var jobs: [(@Sendable () -> Void)?] = []
    var head = 0
    var count: Int { jobs.count - head }
  }

  private let queue = Mutex(Queue())
  private let available = DispatchSemaphore(value: 0)
  /// How many jobs may wait (not counting the ones running).
  public let capacity: Int
  /// How many threads run jobs.
  public let threads: Int

  /// Starts `threads` workers with room for `capacity` waiting jobs; `lowPriority` workers run at
  /// nice 19, so the scheduler gives the loops nearly all of a shared core when both want it.
  public init(threads: Int, capacity: Int, lowPriority: Bool = false) {
    self.threads = threads
    self.capacity = capacity
    for _ in 0..<threads {
      startThread { [self] in
        // On Linux the nice value is per thread, and who = 0 names the calling thread.
        if lowPriority { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19) }
        work()
      }
    }
  }

  /// Queues `job`; false (and nothing queued) when the queue is full.
  public func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
    let accepted = queue.withLock { q in
      guard q.count < capacity else { return false }
      q.jobs.append(job)
      return true
    }
    if accepted { available.signal() }
    return accepted
  }

  /// Jobs waiting now.
  public var waiting: Int { queue.withLock { $0.count } }

  private func work() {
    while true {
      available.wait()
      let job = queue.withLock { q -> (@Sendable () -> Void)? in
        let job = q.jobs[q.head]
        q.jobs[q.head] = nil
        q.head += 1
        if q.head > 1024 && q.head * 2 > q.jobs.count {
          q.jobs.removeFirst(q.head)
          q.head = 0
        }
        return job
      }
      job?()
    }
  }
}
