/// An email address in its one normalised form: the only way a typed address reaches the store,
/// so that lookup, the lockout counter, memberships and every later use see the same bytes.
///
/// Normalising trims white space at both ends and lower-cases ASCII; what remains must be a
/// plausible mailbox: `local@domain`, at most 254 bytes, printable ASCII only. The local part is
/// dot-atoms (RFC 5322 §3.2.3, no quoted strings) of at most 64 bytes; the domain is at least two
/// LDH labels (RFC 1035 §2.3.1, an internationalised domain in its `xn--` form) with a
/// non-numeric top label. Anything else (a control character such as NUL, a confusable
/// non-ASCII letter, white space inside, a second `@`) is not an address.
public struct EmailAddress: Hashable, Sendable, CustomStringConvertible {
  /// The normalised text, as stored.
  public let normalised: String

  /// Longest address (RFC 5321 §4.5.3.1.3: a 256-octet path less its angle brackets).
  public static let maxBytes = 254

  /// The normalised form of `typed`, or nil when it is not a plausible address. Spaces at the ends
  /// (U+0020, no-break and other Unicode space separators) are trimmed; control characters (tab,
  /// CR, LF, NEL included) are refused wherever they are.
  public init?(_ typed: String) {
    func space(_ c: Character) -> Bool {
      c.unicodeScalars.count == 1
        && c.unicodeScalars.first.map { $0.properties.generalCategory == .spaceSeparator } == true
    }
    let trimmed = typed.drop(while: space).reversed().drop(while: space).reversed()
    var bytes: [UInt8] = []
    for byte in String(trimmed).utf8 {
      guard byte > 0x20 && byte < 0x7F else { return nil }
      bytes.append(byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte)
    }
    guard bytes.count <= Self.maxBytes, let at = bytes.firstIndex(of: UInt8(ascii: "@")) else { return nil }
    let local = bytes[..<at]
    let domain = bytes[(at + 1)...]
    guard Self.plausibleLocal(local), Self.plausibleDomain(domain) else { return nil }
    normalised = String(decoding: bytes, as: UTF8.self)
  }

  public var description: String { normalised }

  /// Dot-atoms of atext (RFC 5322 §3.2.3), 1 to 64 bytes.
  private static func plausibleLocal(_ local: ArraySlice<UInt8>) -> Bool {
    guard (1...64).contains(local.count) else { return false }
    let atoms = local.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    return atoms.allSatisfy { atom in !atom.isEmpty && atom.allSatisfy(isAtext) }
  }

  /// Two or more labels of letters, digits and inner hyphens, 1 to 63 bytes each; the last not
  /// all digits.
  private static func plausibleDomain(_ domain: ArraySlice<UInt8>) -> Bool {
    let labels = domain.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    guard labels.count >= 2, let top = labels.last, !top.allSatisfy(isDigit) else { return false }
    return labels.allSatisfy { label in
      (1...63).contains(label.count) && label.first != UInt8(ascii: "-") && label.last != UInt8(ascii: "-")
        && label.allSatisfy { isDigit($0) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == UInt8(ascii: "-") }
    }
  }

  private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

  /// RFC 5322 §3.2.3 atext, after lower-casing.
  private static func isAtext(_ byte: UInt8) -> Bool {
    isDigit(byte) || (byte >= 0x61 && byte <= 0x7A) || "!#$%&'*+-/=?^_`{|}~".utf8.contains(byte)
  }
}
