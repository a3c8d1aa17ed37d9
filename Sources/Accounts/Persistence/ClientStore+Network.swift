/// The coarse "where" of a session: never an address, only a keyed digest
/// of the network it came from (an IPv4 /24, an IPv6 /48), so that the account page can tell
/// "this network" from "another network" and nothing more. The digest is under the server's
/// identifier key: without the key it cannot be matched against a list of networks.
extension ClientStore {
  /// The network hint of `address` (`ClientAddress.of`), or nil when it is not an IP address.
  public func networkHint(address: String) -> String? {
    guard let prefix = NetworkPrefix.of(address) else { return nil }
    let digest = Secrets.hmac(key: identifierKey, Array("network:\(prefix)".utf8))
    return digest.prefix(8).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
  }
}

/// The network an IP address belongs to, as the account page counts it: an IPv4 address's /24,
/// an IPv6 address's /48 (an IPv4-mapped IPv6 address counts as IPv4).
enum NetworkPrefix {
  /// `192.0.2` for `192.0.2.7`, `2001:db8:1` for `2001:db8:1::5`; nil when `address` is neither.
  package static func of(_ address: String) -> String? {
    if let v4 = ipv4(address) { return v4[0..<3].map(String.init).joined(separator: ".") }
    guard let groups = ipv6(address) else { return nil }
    if groups[0..<5].allSatisfy({ $0 == 0 }) && groups[5] == 0xFFFF {
      return "\(groups[6] >> 8).\(groups[6] & 0xFF).\(groups[7] >> 8)"
    }
    return groups[0..<3].map { String($0, radix: 16) }.joined(separator: ":")
  }

  static func ipv4(_ text: Substring) -> [Int]? {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 4 else { return nil }
    let values = parts.compactMap { part -> Int? in
      guard (1...3).contains(part.count), part.allSatisfy(\.isASCII), let value = Int(part), value <= 255
      else { return nil }
      return value
    }
    return values.count == 4 ? values : nil
  }

  static func ipv4(_ text: String) -> [Int]? { ipv4(Substring(text)) }

  /// The eight 16-bit groups of an IPv6 address (RFC 4291 §2.2 text forms; no zone index).
  static func ipv6(_ text: String) -> [Int]? {
    guard text.contains(":"), text.utf8.count <= 45, !text.contains("%") else { return nil }
    let halves = text.split(separator: "::", omittingEmptySubsequences: false).map(String.init)
    guard halves.count <= 2 else { return nil }
    func groups(_ part: String) -> [Int]? {
      if part.isEmpty { return [] }
      var out: [Int] = []
      let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
      for (i, piece) in pieces.enumerated() {
        if i == pieces.count - 1, piece.contains("."), let v4 = ipv4(piece) {
          out += [v4[0] << 8 | v4[1], v4[2] << 8 | v4[3]]
          continue
        }
        guard (1...4).contains(piece.count), let value = Int(piece, radix: 16) else { return nil }
        out.append(value)
      }
      return out
    }
    guard let head = groups(halves[0]) else { return nil }
    if halves.count == 1 { return head.count == 8 ? head : nil }
    guard let tail = groups(halves[1]), head.count + tail.count < 8 else { return nil }
    return head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
  }
}
