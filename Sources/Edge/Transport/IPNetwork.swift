#if canImport(Glibc)
  import Glibc
#endif

/// An IPv4 or IPv6 network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`; a bare address is a
/// network of one): which clients the admin listener serves when it listens beyond loopback.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
  /// The network's address bytes (4 or 16), host bits cleared.
  let bytes: [UInt8]
  /// The prefix length in bits.
  let prefix: Int

  /// Parses `address[/prefix]`; nil when it is not a numeric address with a prefix in range.
  public init?(_ text: String) {
    let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    let host = String(parts[0])
    var bytes: [UInt8]
    if host.contains(":") {
      var a = in6_addr()
      guard inet_pton(AF_INET6, host, &a) == 1 else { return nil }
      bytes = withUnsafeBytes(of: &a) { Array($0) }
    } else {
      var a = in_addr()
      guard inet_pton(AF_INET, host, &a) == 1 else { return nil }
      bytes = withUnsafeBytes(of: &a) { Array($0) }
    }
    let bits = bytes.count * 8
    var prefix = bits
    if parts.count == 2 {
      guard let n = Int(parts[1]), n >= 0, n <= bits, parts[1].allSatisfy(\.isASCII) else { return nil }
      prefix = n
    }
    // An IPv4-mapped network (::ffff:10.0.0.0/104) is the IPv4 one, as peers are compared.
    if bytes.count == 16 && bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF
      && prefix >= 96
    {
      bytes = Array(bytes[12...])
      prefix -= 96
    }
    for i in 0..<bytes.count { bytes[i] &= Self.mask(byte: i, prefix: prefix) }
    self.bytes = bytes
    self.prefix = prefix
  }

  private static func mask(byte i: Int, prefix: Int) -> UInt8 {
    let bits = min(8, max(0, prefix - i * 8))
    return bits == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
  }

  /// Whether the address `other` (4 or 16 bytes; an IPv4-mapped IPv6 address counts as IPv4) is in
  /// this network.
  public func contains(_ other: [UInt8]) -> Bool {
    var address = other
    if address.count == 16 && address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF
      && address[11] == 0xFF
    {
      address = Array(address[12...])
    }
    guard address.count == bytes.count else { return false }
    for i in 0..<bytes.count where address[i] & Self.mask(byte: i, prefix: prefix) != bytes[i] {
      return false
    }
    return true
  }

  /// The address bytes of a peer as `accept` filled them in; nil for other families.
  static func address(of storage: UnsafePointer<sockaddr_storage>) -> [UInt8]? {
    switch Int32(storage.pointee.ss_family) {
    case AF_INET:
      return storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { a in
        withUnsafeBytes(of: a.pointee.sin_addr) { Array($0) }
      }
    case AF_INET6:
      return storage.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { a in
        withUnsafeBytes(of: a.pointee.sin6_addr) { Array($0) }
      }
    default:
      return nil
    }
  }

  /// Loopback: 127.0.0.0/8 and ::1.
  public static let loopback = [IPNetwork("127.0.0.0/8"), IPNetwork("::1")].compactMap { $0 }

  public var description: String {
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
    var copy = bytes
    _ = inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, &copy, &text, socklen_t(text.count))
    return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      + "/\(prefix)"
  }
}
