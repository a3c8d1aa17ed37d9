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
