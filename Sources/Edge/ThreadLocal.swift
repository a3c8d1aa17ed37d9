#if canImport(Glibc)
  import Glibc
#endif

/// One value per OS thread, made on first use in that thread: how each pool worker gets its own
/// database connection without any locking.
// Safe to share unchecked: the only shared state is the pthread key and the factory; each value is
// created, read and destroyed by its own thread alone (pthread_getspecific/setspecific are
// per-thread by definition), and the factory is itself @Sendable.
public final class ThreadLocal<Value: AnyObject>: @unchecked Sendable {
  private var key = pthread_key_t()
  private let make: @Sendable () throws -> Value

  /// A thread-local slot whose value `make` creates in each thread that asks for one.
  public init(_ make: @escaping @Sendable () throws -> Value) {
    self.make = make
    pthread_key_create(&key) { raw in
      guard let raw else { return }
      Unmanaged<AnyObject>.fromOpaque(raw).release()
    }
  }

  deinit { pthread_key_delete(key) }

  /// This thread's value, made now if it has none (errors from `make` are passed on; nothing is kept).
  public func value() throws -> Value {
    if let raw = pthread_getspecific(key) {
      return Unmanaged<Value>.fromOpaque(raw).takeUnretainedValue()
    }
    let made = try make()
    pthread_setspecific(key, Unmanaged.passRetained(made).toOpaque())
    return made
  }
}
