#if canImport(Glibc)
  import Glibc
#endif

/// A failed system call: its name and `errno`.
public struct SystemError: Error, CustomStringConvertible, Sendable {
  /// The errno value.
  public let code: Int32
  /// The call that failed.
  public let call: String

  /// An error for `call` with `code`.
  public init(_ call: String, _ code: Int32 = errno) {
    self.call = call
    self.code = code
  }

  public var description: String {
    "\(call): \(String(decoding: UnsafeRawBufferPointer(start: strerror(code), count: strlen(strerror(code))), as: UTF8.self))"
  }
}

/// What a non-blocking call came to.
enum IOResult<T> {
  case done(T)
  case wouldBlock
}

/// Runs a system call: retries `EINTR`, maps `EAGAIN` to `.wouldBlock`, throws others.
/// `EBADF` and `EFAULT` are programming errors and stop the process.
@inline(__always)
func syscall<T: FixedWidthInteger>(_ call: StaticString, _ body: () -> T) throws(SystemError) -> IOResult<T> {
  while true {
    let result = body()
    if result >= 0 { return .done(result) }
    let code = errno
    switch code {
    case EINTR: continue
    case EAGAIN, EWOULDBLOCK: return .wouldBlock
    case EBADF, EFAULT: preconditionFailure("\(call) failed with \(code): a descriptor or buffer is wrong")
    default: throw SystemError("\(call)", code)
    }
  }
}
