/// A content coding the shell can serve a file in.
public enum ContentCoding: String, Sendable, CaseIterable, Comparable, Codable {
  case br
  case gzip
  case identity

  /// Preference when the client weighs codings equally: smaller first.
  var rank: Int {
    switch self {
    case .br: 0
    case .gzip: 1
    case .identity: 2
    }
  }

  public static func < (a: ContentCoding, b: ContentCoding) -> Bool { a.rank < b.rank }
}

/// The outcome of content negotiation.
public enum EncodingChoice: Equatable, Sendable {
  case coding(ContentCoding)
  /// Nothing acceptable, not even identity: 406 (RFC 9110 §12.5.3).
  case notAcceptable
}

/// Chooses the coding to send, per RFC 9110 §12.5.3.
///
/// - Parameters:
///   - header: the combined `Accept-Encoding` field value, or nil when the request has none.
///   - available: the codings this file exists in (identity always among them).
/// - No field: identity (any coding would be allowed; the plain one is the safe choice).
/// - Empty field: identity only. `q=0` means "not acceptable". `*` covers codings not named.
/// - identity stays acceptable unless `identity;q=0`, or `*;q=0` without identity named.
/// - The highest q wins; equal q prefers br, then gzip, then identity.
public func selectEncoding(_ header: String?, available: [ContentCoding]) -> EncodingChoice {
  guard var header else { return .coding(.identity) }
  // Weights in thousandths; -1 where the coding is not named. One pass over the bytes, no allocation.
  var weights = AcceptEncodingWeights()
  header.withUTF8 { weights.parse($0) }
  func weight(_ coding: ContentCoding) -> Int {
    let explicit: Int =
      switch coding {
      case .br: weights.br
      case .gzip: weights.gzip >= 0 ? weights.gzip : weights.xgzip
      case .identity: weights.identity
      }
    if explicit >= 0 { return explicit }
    if weights.star >= 0 { return weights.star }
    return coding == .identity ? 1 : 0
  }
  var best: (coding: ContentCoding, q: Int)? = nil
  for coding in available {
    let q = weight(coding)
    guard q > 0 else { continue }
    if let current = best, current.q > q || (current.q == q && current.coding < coding) { continue }
    best = (coding, q)
  }
  if let best { return .coding(best.coding) }
  // Nothing the client weighs above zero. identity is still fine unless it was refused itself.
  return weight(.identity) == 0 && (weights.identity >= 0 || weights.star >= 0)
    ? .notAcceptable : .coding(.identity)
}

/// The weights an Accept-Encoding value gives the codings we serve (RFC 9110 §12.5.3), parsed from
/// its bytes: `#( codings [ weight ] )`, names case-insensitive, malformed elements ignored.
struct AcceptEncodingWeights {
  var br = -1
  var gzip = -1
  var xgzip = -1
  var identity = -1
  var star = -1

  mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) {
    var i = 0
    let n = bytes.count
    func skipSpace() { while i < n && (bytes[i] == 0x20 || bytes[i] == 0x09) { i += 1 } }
    while i < n {
      skipSpace()
      let nameStart = i
      while i < n && bytes[i] != UInt8(ascii: ",") && bytes[i] != UInt8(ascii: ";") && bytes[i] != 0x20
        && bytes[i] != 0x09
      {
        i += 1
      }
      let name = UnsafeBufferPointer(rebasing: bytes[nameStart..<i])
      var q = 1000
      var malformed = false
      skipSpace()
      while i < n && bytes[i] == UInt8(ascii: ";") {
        i += 1
        skipSpace()
        let keyStart = i
        while i < n && bytes[i] != UInt8(ascii: "=") && bytes[i] != UInt8(ascii: ",")
          && bytes[i] != UInt8(ascii: ";")
        {
          i += 1
        }
        let key = UnsafeBufferPointer(rebasing: bytes[keyStart..<i])
        guard i < n, bytes[i] == UInt8(ascii: "=") else { continue }
        i += 1
        let valueStart = i
        while i < n && bytes[i] != UInt8(ascii: ",") && bytes[i] != UInt8(ascii: ";") { i += 1 }
        var valueEnd = i
        while valueEnd > valueStart && (bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09) {
          valueEnd -= 1
        }
        if Self.equals(Self.trimmed(key), "q") {
          if let parsed = Self.qValue(UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd])) {
            q = parsed
          } else {
            malformed = true
          }
        }
      }
      // Anything else before the comma makes the element malformed.
      skipSpace()
      if i < n && bytes[i] != UInt8(ascii: ",") {
        malformed = true
        while i < n && bytes[i] != UInt8(ascii: ",") { i += 1 }
      }
      i += 1  // past the comma
      guard !malformed, !name.isEmpty else { continue }
      if Self.equals(name, "br") {
        br = max(br, q)
      } else if Self.equals(name, "gzip") {
        gzip = max(gzip, q)
      } else if Self.equals(name, "x-gzip") {
        xgzip = max(xgzip, q)
      } else if Self.equals(name, "identity") {
        identity = max(identity, q)
      } else if Self.equals(name, "*") {
        star = max(star, q)
      }
    }
  }

  static func trimmed(_ bytes: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
    var start = 0
    var end = bytes.count
    while start < end && (bytes[start] == 0x20 || bytes[start] == 0x09) { start += 1 }
    while end > start && (bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09) { end -= 1 }
    return UnsafeBufferPointer(rebasing: bytes[start..<end])
  }

  /// Case-insensitive comparison with a lower-case literal.
  static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
    guard bytes.count == literal.utf8CodeUnitCount else { return false }
    let p = literal.utf8Start
    for k in 0..<bytes.count {
      let b = bytes[k]
      if (b &- 65 < 26 ? b | 0x20 : b) != p[k] { return false }
    }
    return true
  }

  /// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths.
  static func qValue(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
    guard let first = bytes.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else {
      return nil
    }
    var value = first == UInt8(ascii: "1") ? 1000 : 0
    guard bytes.count > 1 else { return value }
    guard bytes[1] == UInt8(ascii: "."), bytes.count <= 5 else { return nil }
    var scale = 100
    for k in 2..<bytes.count {
      let d = bytes[k] &- 48
      guard d < 10 else { return nil }
      value += Int(d) * scale
      scale /= 10
    }
    return value <= 1000 ? value : nil
  }
}

extension Substring {
  func trimmingWhitespace() -> Substring {
    var s = self
    while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
    while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
    return s
  }
}
