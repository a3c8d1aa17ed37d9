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
  guard let header else { return .coding(.identity) }
  var weights: [String: Int] = [:]  // q in thousandths
  for element in header.split(separator: ",") {
    let parts = element.split(separator: ";")
    guard let first = parts.first else { continue }
    let name = first.trimmingWhitespace().lowercased()
    guard !name.isEmpty else { continue }
    var q = 1000
    for parameter in parts.dropFirst() {
      let pair = parameter.split(separator: "=", maxSplits: 1)
      guard pair.count == 2, pair[0].trimmingWhitespace().lowercased() == "q" else { continue }
      guard let parsed = qValue(pair[1].trimmingWhitespace()) else {
        q = -1  // a malformed weight: ignore the element
        break
      }
      q = parsed
    }
    if q >= 0 { weights[name] = max(weights[name] ?? -1, q) }
  }
  let star = weights["*"]
  func weight(_ coding: ContentCoding) -> Int {
    if let explicit = weights[coding.rawValue] { return explicit }
    if coding == .gzip, let legacy = weights["x-gzip"] { return legacy }
    if let star { return star }
    return coding == .identity ? 1 : 0
  }
  let best = available.map { (coding: $0, q: weight($0)) }.filter { $0.q > 0 }
    .min { $0.q != $1.q ? $0.q > $1.q : $0.coding < $1.coding }
  if let best { return .coding(best.coding) }
  // Nothing the client weighs above zero. identity is still fine unless it was refused itself.
  return weight(.identity) == 0 && (weights["identity"] != nil || star != nil)
    ? .notAcceptable : .coding(.identity)
}

/// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) (RFC 9110 §12.4.2), in thousandths.
func qValue(_ text: Substring) -> Int? {
  let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
  guard let whole = parts.first, whole == "0" || whole == "1" else { return nil }
  var fraction = 0
  if parts.count == 2 {
    let digits = parts[1]
    guard digits.count <= 3, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    fraction = Int(digits.padding(toLength: 3)) ?? 0
  }
  let value = (whole == "1" ? 1000 : 0) + fraction
  return value <= 1000 ? value : nil
}

extension Substring {
  func trimmingWhitespace() -> Substring {
    var s = self
    while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
    while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
    return s
  }

  func padding(toLength length: Int) -> String {
    String(self) + String(repeating: "0", count: Swift.max(0, length - count))
  }
}
