import Edge

/// What a `Range` field asks of a representation of `size` bytes (RFC 9110 §14.2).
public enum RangeResult: Equatable, Sendable {
  /// Send the whole representation (no Range, one we ignore, or If-Range did not match).
  case whole
  /// 206 with these bytes.
  case partial(ClosedRange<Int>)
  /// 416 with `Content-Range: bytes */size`.
  case unsatisfiable
}

/// Evaluates a single byte range, honouring `If-Range` (strong ETag or exact date).
///
/// Several ranges, other units and malformed values are ignored (the whole representation is
/// sent), as RFC 9110 §14.2 allows. `bytes=-n` is the last n bytes.
public func parseRange(
  _ header: String?, ifRange: String?, size: Int, etag: String, lastModified: Int?
) -> RangeResult {
  guard let header else { return .whole }
  if let ifRange {
    // RFC 9110 §13.1.5: a strong validator must match exactly, else send everything.
    let trimmed = String(Substring(ifRange).trimmingWhitespace())
    if trimmed.hasPrefix("\"") || trimmed.hasPrefix("W/") {
      guard trimmed == etag else { return .whole }
    } else {
      guard let date = parseHTTPDate(trimmed), let lastModified, date == lastModified else { return .whole }
    }
  }
  let text = Substring(header).trimmingWhitespace()
  guard text.lowercased().hasPrefix("bytes=") else { return .whole }
  let spec = text.dropFirst(6).trimmingWhitespace()
  guard !spec.contains(",") else { return .whole }
  let bounds = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
  guard bounds.count == 2 else { return .whole }
  let first = bounds[0].trimmingWhitespace()
  let last = bounds[1].trimmingWhitespace()
  func number(_ s: Substring) -> Int? {
    guard !s.isEmpty, s.count <= 18, s.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    return Int(s)
  }
  if first.isEmpty {
    // suffix-range: the last n bytes
    guard let n = number(last) else { return .whole }
    guard n > 0, size > 0 else { return .unsatisfiable }
    return .partial(max(0, size - n)...(size - 1))
  }
  guard let start = number(first) else { return .whole }
  if !last.isEmpty && number(last) == nil { return .whole }
  if let end = number(last), end < start { return .whole }  // invalid range-spec: ignore
  guard start < size else { return .unsatisfiable }
  let end = min(number(last) ?? (size - 1), size - 1)
  return .partial(start...end)
}
