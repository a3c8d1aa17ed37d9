/// What conditional request headers decide for a GET or HEAD (RFC 9110 §13.2.2).
public enum PreconditionResult: Equatable, Sendable {
  /// Send the representation.
  case proceed
  /// 304 Not Modified.
  case notModified
}

/// Evaluates `If-None-Match`, then (only when it is absent) `If-Modified-Since`, for GET/HEAD.
///
/// - Parameters:
///   - ifNoneMatch: the combined field value, or nil.
///   - ifModifiedSince: the field value, or nil; ignored when unparsable or when If-None-Match is present.
///   - etag: the selected representation's strong entity-tag, quotes included (`"abc"`).
///   - lastModified: seconds since the epoch of the representation, if known.
public func evaluatePreconditions(
  ifNoneMatch: String?, ifModifiedSince: String?, etag: String, lastModified: Int?
) -> PreconditionResult {
  if let ifNoneMatch {
    // RFC 9110 §13.1.2: weak comparison; "*" matches any current representation.
    if ifNoneMatch.utf8.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == UInt8(ascii: "*") })
      && ifNoneMatch.utf8.contains(UInt8(ascii: "*"))
    {
      return .notModified
    }
    return entityTags(ifNoneMatch).contains { opaque($0) == opaque(Substring(etag)) }
      ? .notModified : .proceed
  }
  if let ifModifiedSince, let lastModified, let since = parseHTTPDate(ifModifiedSince) {
    // RFC 9110 §13.1.3: not modified when the representation is not newer than the date.
    return lastModified <= since ? .notModified : .proceed
  }
  return .proceed
}

/// The entity-tags of a list (`"a", W/"b"`); malformed elements are dropped.
public func entityTags(_ list: String) -> [Substring] {
  var tags: [Substring] = []
  var rest = Substring(list)
  while true {
    rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "," }
    guard !rest.isEmpty else { return tags }
    let tag = rest.hasPrefix("W/") ? rest.dropFirst(2) : rest
    guard tag.first == "\"", let close = tag.dropFirst().firstIndex(of: "\"") else { return tags }
    tags.append(rest[rest.startIndex...close])
    rest = rest[rest.index(after: close)...]
  }
}

/// The opaque-tag of an entity-tag, without a weakness prefix.
public func opaque(_ tag: Substring) -> Substring { tag.hasPrefix("W/") ? tag.dropFirst(2) : tag }

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to seconds since the epoch; nil otherwise.
/// The obsolete formats of RFC 9110 §5.6.7 are not accepted (the condition is then ignored).
public func parseHTTPDate(_ text: String) -> Int? {
  let parts = text.split(separator: " ")
  guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT" else { return nil }
  let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
  guard let day = Int(parts[1]), parts[1].count == 2,
    let monthIndex = months.firstIndex(of: String(parts[2])),
    let year = Int(parts[3]), parts[3].count == 4
  else { return nil }
  let clock = parts[4].split(separator: ":")
  guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }), let h = Int(clock[0]), let m = Int(clock[1]),
    let s = Int(clock[2]), h < 24, m < 60, s < 61, day >= 1, day <= 31
  else { return nil }
  return Civil.days(year: year, month: monthIndex + 1, day: day) * 86400 + h * 3600 + m * 60 + s
}
