import Dispatch
import Glibc
import Synchronization
import Testing

@testable import Edge

/// The pool answers waiting requests of one batch together, in order, each with its own response.
@Suite("Worker pool batches")
struct WorkerPoolTests {
  /// One worker held by a job until `release`, so that what is submitted meanwhile waits.
  final class HeldPool: Sendable {
    let pool = WorkerPool(threads: 1, capacity: 64)
    let release = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    let log = Mutex<[String]>([])

    init() {
      _ = pool.submit { [release] in release.wait() }
    }

    func batch(_ name: String, limit: Int) -> RequestBatch {
      RequestBatch(limit: limit) { [self] requests in
        self.log.withLock { $0.append("\(name):" + requests.map(\.path).joined(separator: ",")) }
        return requests.map { Response(status: .ok, headers: [("X-Path", $0.path)]) }
      }
    }

    func submit(_ path: String, to batch: RequestBatch) {
      let accepted = pool.submit(Request(method: .get, target: path), to: batch) { [self] response in
        self.log.withLock { $0.append("answer \(path) -> \(response.headers.first?.value ?? "")") }
        self.done.signal()
      }
      precondition(accepted)
    }

    func single(_ name: String) {
      precondition(
        pool.submit { [self] in
          self.log.withLock { $0.append(name) }
          self.done.signal()
        })
    }

    /// Lets the worker go and waits for `count` completions.
    func run(expecting count: Int) -> [String] {
      release.signal()
      for _ in 0..<count { _ = done.wait(timeout: .now() + 30) }
      return log.withLock { $0 }
    }
  }

  final class Sizes: Sendable { let list = Mutex<[Int]>([]) }

  @Test("requests of one batch waiting next to each other go together; others keep their order")
  func together() {
    let held = HeldPool()
    let reads = held.batch("reads", limit: 3)
    let others = held.batch("others", limit: 8)
    for path in ["/a", "/b", "/c", "/d"] { held.submit(path, to: reads) }
    held.single("job")
    held.submit("/e", to: reads)
    held.submit("/x", to: others)
    held.submit("/f", to: reads)
    let log = held.run(expecting: 8)
    #expect(
      log.filter { !$0.hasPrefix("answer") } == [
        "reads:/a,/b,/c", "reads:/d", "job", "reads:/e", "others:/x", "reads:/f",
      ])
    #expect(
      log.filter { $0.hasPrefix("answer") }
        == ["/a", "/b", "/c", "/d", "/e", "/x", "/f"].map { "answer \($0) -> \($0)" })
  }

  @Test("a request alone is answered alone, and the queue's bound counts each request")
  func alone() {
    let pool = WorkerPool(threads: 2, capacity: 2)
    let release = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    let sizes = Sizes()
    let batch = RequestBatch(limit: 32) { requests in
      sizes.list.withLock { $0.append(requests.count) }
      return requests.map { _ in Response(status: .noContent) }
    }
    #expect(pool.submit(Request(method: .get, target: "/one"), to: batch) { _ in done.signal() })
    _ = done.wait(timeout: .now() + 30)
    #expect(sizes.list.withLock { $0 } == [1])
    // Both workers held: two requests may wait, the third is refused.
    let started = DispatchSemaphore(value: 0)
    for _ in 0..<2 {
      #expect(
        pool.submit {
          started.signal()
          release.wait()
        })
    }
    for _ in 0..<2 { _ = started.wait(timeout: .now() + 30) }
    for _ in 0..<2 {
      #expect(pool.submit(Request(method: .get, target: "/w"), to: batch) { _ in done.signal() })
    }
    #expect(!pool.submit(Request(method: .get, target: "/refused"), to: batch) { _ in done.signal() })
    release.signal()
    release.signal()
    for _ in 0..<2 { _ = done.wait(timeout: .now() + 30) }
    #expect(sizes.list.withLock { $0.reduce(0, +) } == 3)
  }

  @Test("under contention every job and every batched request is run, and a lone job after it too")
  func contention() {
    let pool = WorkerPool(threads: 4, capacity: 100_000)
    let done = DispatchSemaphore(value: 0)
    let batches = [0, 1].map { _ in
      RequestBatch(limit: 5) { requests in
        usleep(UInt32.random(in: 0...200))
        return requests.map { _ in Response(status: .noContent) }
      }
    }
    let perSubmitter = 500
    DispatchQueue.concurrentPerform(iterations: 8) { submitter in
      for k in 0..<perSubmitter {
        let accepted =
          k % 3 == 0
          ? pool.submit {
            usleep(UInt32.random(in: 0...200))
            done.signal()
          }
          : pool.submit(Request(method: .get, target: "/r"), to: batches[(submitter + k) % 2]) { _ in
            done.signal()
          }
        precondition(accepted)
      }
    }
    var arrived = 0
    while arrived < 8 * perSubmitter, done.wait(timeout: .now() + 30) == .success { arrived += 1 }
    #expect(arrived == 8 * perSubmitter)
    #expect(pool.submit { done.signal() })
    #expect(done.wait(timeout: .now() + 30) == .success, "a lone job on an idle pool runs")
    #expect(pool.waiting == 0)
  }
}
