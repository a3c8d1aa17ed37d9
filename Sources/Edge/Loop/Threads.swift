import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

private final class ThreadBody: Sendable {
  let run: @Sendable () -> Void
  init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// Starts an OS thread running `body` (threads of our own, off Swift's cooperative pool:
/// event loops block in epoll, pool workers in whatever blocking calls their handlers make).
///
/// The thread blocks SIGTERM, SIGINT and SIGHUP before it runs: the server takes them on one
/// thread (`Server.run`), and a thread started before that mask was set — a background thread of
/// the composition's — would otherwise receive a SIGHUP with its default action, which ends the
/// process.
@discardableResult
public func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
  let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
  var thread = pthread_t()
  let result = pthread_create(
    &thread, nil,
    { raw in
      var signals = sigset_t()
      sigemptyset(&signals)
      for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&signals, s) }
      pthread_sigmask(SIG_BLOCK, &signals, nil)
      Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().run()
      return nil
    }, context)
  precondition(result == 0, "pthread_create failed: \(result)")
  return thread
}

/// Threads that run beside the loops for as long as the process serves (store loops, the change
/// listener, readiness checks): `Background.process`. Before the process exits, `end(within:)`
/// tells every one to stop and waits for them: a thread still inside libpq or OpenSSL while `exit`
/// runs their clean-up handlers crashes the process (a SIGSEGV after `stopped`).
public final class Background: Sendable {
  /// The process's own background threads.
  public static let process = Background()

  private let ending = Atomic<Bool>(false)
  private let running = Atomic<Int>(0)

  /// A group of its own (for tests); the process's threads are in `process`.
  public init() {}

  /// Starts `body` on a detached thread of its own, counted until it returns. `body` checks
  /// `isEnding` (and its owner's own stop) between steps and sleeps through `pause`.
  public func start(_ body: @escaping @Sendable () -> Void) {
    running.add(1, ordering: .sequentiallyConsistent)
    pthread_detach(
      startThread { [self] in
        body()
        running.subtract(1, ordering: .sequentiallyConsistent)
      })
  }

  /// Whether the group is ending: every thread in it returns at its next check.
  public var isEnding: Bool { ending.load(ordering: .sequentiallyConsistent) }

  /// Sleeps `interval`, in slices of at most 20 ms, returning early once `stopped()` or the group
  /// is ending; so an ending process waits for a thread's current step, never its whole interval.
  public func pause(_ interval: Duration, unless stopped: () -> Bool = { false }) {
    let end = ContinuousClock.now + interval
    while !isEnding, !stopped() {
      let left = ContinuousClock.now.duration(to: end)
      guard left > .zero else { return }
      let slice = min(left, .milliseconds(20))
      var pause = timespec(
        tv_sec: Int(slice.components.seconds), tv_nsec: Int(slice.components.attoseconds / 1_000_000_000))
      nanosleep(&pause, nil)
    }
  }

  /// Tells every thread in the group to stop and waits up to `limit` for all of them; false when
  /// one was still in a step (a store or relay that does not answer) at the limit.
  @discardableResult
  public func end(within limit: Duration) -> Bool {
    ending.store(true, ordering: .sequentiallyConsistent)
    let deadline = ContinuousClock.now + limit
    while running.load(ordering: .sequentiallyConsistent) > 0 {
      guard ContinuousClock.now < deadline else { return false }
      var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
      nanosleep(&pause, nil)
    }
    return true
  }
}
