import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// One value per OS thread, made on first use in that thread: how each pool worker gets its own
/// database connection without any locking on the way to it.
///
/// Values go when the slot goes: `deinit` drops every value it made (pthread_key_delete runs no
/// destructors, so the slot keeps its own list), and a thread that exits drops its own. A value a
/// caller still holds lives until the caller lets go of it.
// Safe to share unchecked: the pthread key is written only in init and deinit; each thread reads
// and writes only its own slot (pthread_getspecific/setspecific are per-thread by definition); the
// list of boxes is behind a Mutex; a box's value is touched by its thread, and by deinit only once
// no thread can be inside `value()` (every caller holds a reference to this object while in it).
public final class ThreadLocal<Value: AnyObject>: @unchecked Sendable {
  // Safe to share unchecked: a box's value is read and written by the thread that made it, and by
  // deinit only once no thread can be inside `value()` (see the type's note).
  private final class Box: @unchecked Sendable {
    var value: Value?
    init(_ value: Value) { self.value = value }
  }

  private var key = pthread_key_t()
  private let make: @Sendable () throws -> Value
  private let boxes = Mutex<[ObjectIdentifier: Box]>([:])

  /// A thread-local slot whose value `make` creates in each thread that asks for one.
  public init(_ make: @escaping @Sendable () throws -> Value) {
    self.make = make
    // At thread exit: the thread's own reference to its box goes (the list keeps the value until
    // this slot goes, which for a process-long slot is the same moment).
    pthread_key_create(&key) { raw in
      guard let raw else { return }
      Unmanaged<AnyObject>.fromOpaque(raw).release()
    }
  }

  deinit {
    pthread_key_delete(key)
    for box in boxes.withLock({ Array($0.values) }) { box.value = nil }
  }

  /// How many values this slot has made and still keeps (one per thread that asked).
  public var count: Int { boxes.withLock { $0.count } }

  /// This thread's value, made now if it has none (errors from `make` are passed on; nothing is kept).
  public func value() throws -> Value {
    if let raw = pthread_getspecific(key),
      let value = Unmanaged<Box>.fromOpaque(raw).takeUnretainedValue().value
    {
      return value
    }
    let made = try make()
    let box = Box(made)
    boxes.withLock { $0[ObjectIdentifier(box)] = box }
    pthread_setspecific(key, Unmanaged.passRetained(box).toOpaque())
    return made
  }
}
