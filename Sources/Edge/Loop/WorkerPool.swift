import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Requests of one route that a worker may answer together: `answer` gets up to `limit` of them,
/// in the order they arrived, and returns one response for each, in the same order. For a read
/// over a networked database, one statement for several requests instead of one round trip each.
public final class RequestBatch: Sendable {
  /// The most requests `answer` is given at once.
  public let limit: Int
  let answer: @Sendable ([Request]) -> [Response]

  /// A batch of at most `limit` requests answered by `answer` (one response per request, in order).
  public init(limit: Int, answer: @escaping @Sendable ([Request]) -> [Response]) {
    self.limit = max(1, limit)
    self.answer = answer
  }
}

/// A fixed set of threads with a bounded queue, for handlers that block.
///
/// `submit` never waits: when the queue is full it returns false at once, and the caller answers
/// 503 with `Retry-After` instead of letting latency grow without bound.
///
/// Requests of a `RequestBatch` that wait next to each other are taken together by one worker:
/// under load they share one database statement, and with one request waiting it runs alone, so
/// batching never delays an answer.
public final class WorkerPool: Sendable {
  private enum Job {
    case single(@Sendable () -> Void)
    case batched(RequestBatch, Request, @Sendable (Response) -> Void)
  }

  private struct Queue {
    var jobs: [Job?] = []
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
    enqueue(.single(job))
  }

  /// Queues `request` for `batch`; `completion` gets its response on the worker. False (and
  /// nothing queued) when the queue is full.
  public func submit(
    _ request: Request, to batch: RequestBatch, completion: @escaping @Sendable (Response) -> Void
  ) -> Bool {
    enqueue(.batched(batch, request, completion))
  }

  private func enqueue(_ job: Job) -> Bool {
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
      switch take() {
      case nil:
        // Its job was taken with a batch by another worker.
        continue
      case .single(let job)?:
        job()
      case .batched(let batch, let request, let completion)?:
        var requests = [request]
        var completions = [completion]
        // The requests of the same batch right behind it go with it. Their signals stay: a worker
        // woken by one finds the queue without it (`nil` above) and waits again. Taking them back
        // here could take another job's signal instead and leave that job with no worker woken.
        while requests.count < batch.limit, let (next, done) = takeNext(of: batch) {
          requests.append(next)
          completions.append(done)
        }
        let responses = batch.answer(requests)
        precondition(responses.count == requests.count, "a batch must answer every request it is given")
        for (done, response) in zip(completions, responses) { done(response) }
      }
    }
  }

  /// The job at the head of the queue, if any.
  private func take() -> Job? {
    queue.withLock { q in
      guard q.count > 0 else { return nil }
      let job = q.jobs[q.head]
      q.jobs[q.head] = nil
      q.head += 1
      if q.head > 1024 && q.head * 2 > q.jobs.count {
        q.jobs.removeFirst(q.head)
        q.head = 0
      }
      return job
    }
  }

  /// The head of the queue when it is a request of `batch`, taken; else nil and nothing taken.
  private func takeNext(of batch: RequestBatch) -> (Request, @Sendable (Response) -> Void)? {
    queue.withLock { q in
      guard q.count > 0, case .batched(let next, let request, let completion)? = q.jobs[q.head],
        next === batch
      else { return nil }
      q.jobs[q.head] = nil
      q.head += 1
      return (request, completion)
    }
  }
}
