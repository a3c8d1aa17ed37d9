#if canImport(Glibc)
  import Glibc
#endif

private final class ThreadBody: Sendable {
  let run: @Sendable () -> Void
  init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// Starts an OS thread running `body` (threads of our own, off Swift's cooperative pool:
/// event loops and pool workers block in epoll, SQLite and Argon2).
@discardableResult
public func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
  let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
  var thread = pthread_t()
  let result = pthread_create(
    &thread, nil,
    { raw in
      Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().run()
      return nil
    }, context)
  precondition(result == 0, "pthread_create failed: \(result)")
  return thread
}
