#if canImport(Glibc)
  import Glibc
#endif

/// A numeric IPv4 or IPv6 socket address: `127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:0`.
public enum SocketAddress: Sendable, Equatable, CustomStringConvertible {
  case v4(host: String, port: UInt16)
  case v6(host: String, port: UInt16)

  /// Parses `host:port` with a numeric host; nil when it is not one.
  public init?(_ text: String) {
    if text.hasPrefix("[") {
      guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
        return nil
      }
      let host = String(text[text.index(after: text.startIndex)..<close])
      guard let port = UInt16(text[text.index(close, offsetBy: 2)...]) else { return nil }
      var probe = in6_addr()
      guard inet_pton(AF_INET6, host, &probe) == 1 else { return nil }
      self = .v6(host: host, port: port)
    } else {
      guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
        return nil
      }
      let host = String(text[..<colon])
      var probe = in_addr()
      guard inet_pton(AF_INET, host, &probe) == 1 else { return nil }
      self = .v4(host: host, port: port)
    }
  }

  /// The port.
  public var port: UInt16 {
    switch self {
    case .v4(_, let p), .v6(_, let p): p
    }
  }

  /// The same host with another port.
  public func with(port: UInt16) -> SocketAddress {
    switch self {
    case .v4(let h, _): .v4(host: h, port: port)
    case .v6(let h, _): .v6(host: h, port: port)
    }
  }

  /// Whether the host is in 127.0.0.0/8 or is ::1.
  public var isLoopback: Bool {
    switch self {
    case .v4(let h, _): h.hasPrefix("127.")
    case .v6(let h, _): h == "::1"
    }
  }

  public var description: String {
    switch self {
    case .v4(let h, let p): "\(h):\(p)"
    case .v6(let h, let p): "[\(h)]:\(p)"
    }
  }

  /// Calls `body` with this address as a `sockaddr`.
  func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    switch self {
    case .v4(let host, let port):
      Self.withAddress(sockaddr_in(), AF_INET, host, port, \.sin_family, \.sin_port, \.sin_addr, body)
    case .v6(let host, let port):
      Self.withAddress(sockaddr_in6(), AF_INET6, host, port, \.sin6_family, \.sin6_port, \.sin6_addr, body)
    }
  }

  /// Calls `body` with `empty` given the family, the port and the numeric host (in the fields the
  /// key paths name), seen as the generic `sockaddr` the socket calls take.
  private static func withAddress<Address, Host, R>(
    _ empty: Address, _ family: Int32, _ host: String, _ port: UInt16,
    _ familyField: WritableKeyPath<Address, sa_family_t>, _ portField: WritableKeyPath<Address, in_port_t>,
    _ hostField: WritableKeyPath<Address, Host>, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R
  ) -> R {
    var address = empty
    address[keyPath: familyField] = sa_family_t(family)
    address[keyPath: portField] = port.bigEndian
    _ = withUnsafeMutablePointer(to: &address[keyPath: hostField]) { inet_pton(family, host, $0) }
    return withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<Address>.size)) }
    }
  }

  /// `host:port` text of a peer address from accept.
  static func describe(_ storage: UnsafePointer<sockaddr_storage>) -> String {
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    switch Int32(storage.pointee.ss_family) {
    case AF_INET:
      return storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { a in
        var addr = a.pointee.sin_addr
        inet_ntop(AF_INET, &addr, &text, socklen_t(text.count))
        return "\(cString(text)):\(UInt16(bigEndian: a.pointee.sin_port))"
      }
    case AF_INET6:
      return storage.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { a in
        var addr = a.pointee.sin6_addr
        inet_ntop(AF_INET6, &addr, &text, socklen_t(text.count))
        return "[\(cString(text))]:\(UInt16(bigEndian: a.pointee.sin6_port))"
      }
    default:
      return "-"
    }
  }
}

private func cString(_ chars: [CChar]) -> String {
  String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Listening sockets (package-wide: the example core listens through them too).
package enum Listener {
  /// A non-blocking listening socket on `address` with `SO_REUSEPORT`, so that each loop has its own.
  package static func open(_ address: SocketAddress, backlog: Int32 = 4096) throws(SystemError) -> Int32 {
    let family = if case .v6 = address { AF_INET6 } else { AF_INET }
    let fd = socket(
      family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SystemError("socket") }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
    if family == AF_INET6 {
      setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
    }
    let bound = address.withSockAddr { bind(fd, $0, $1) }
    guard bound == 0 else {
      let error = SystemError("bind \(address)")
      close(fd)
      throw error
    }
    guard listen(fd, backlog) == 0 else {
      let error = SystemError("listen \(address)")
      close(fd)
      throw error
    }
    return fd
  }

  /// Fails with EADDRINUSE when anything listens on `address` already (another instance of this
  /// server included, which SO_REUSEPORT would otherwise let us share silently); returns the address
  /// with its port resolved when it was 0.
  package static func claim(_ address: SocketAddress) throws(SystemError) -> SocketAddress {
    let family = if case .v6 = address { AF_INET6 } else { AF_INET }
    let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SystemError("socket") }
    defer { close(fd) }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    if family == AF_INET6 {
      setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
    }
    guard address.withSockAddr({ bind(fd, $0, $1) }) == 0 else { throw SystemError("bind \(address)") }
    return address.with(port: boundPort(fd))
  }

  /// The port a socket is bound to.
  static func boundPort(_ fd: Int32) -> UInt16 {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = withUnsafeMutablePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return withUnsafePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
    }
  }
}
