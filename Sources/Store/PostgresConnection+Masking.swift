extension PostgresConnection {
  /// `uri` with any password replaced by `***`: the `user:password@` of a URI, every
  /// `password=` query parameter, and `password=` in a key=value connection string.
  public static func maskedURI(_ uri: String) -> String {
    var text = Array(uri.utf8)
    for range in passwordRanges(text).reversed() { text.replaceSubrange(range, with: Array("***".utf8)) }
    return String(decoding: text, as: UTF8.self)
  }

  /// `message` (from libpq, which quotes parts of a URI it cannot parse) with `uri`'s passwords,
  /// as written and percent-decoded, replaced by `***`.
  static func scrubbed(_ message: String, of uri: String) -> String {
    let text = Array(uri.utf8)
    var result = Array(message.utf8)
    for range in passwordRanges(text) where !range.isEmpty {
      for secret in [Array(text[range]), percentDecoded(text[range])] where !secret.isEmpty {
        result = replacing(secret, in: result)
      }
    }
    return String(decoding: result, as: UTF8.self)
  }

  /// Where the passwords are in the connection string `text`, in order.
  private static func passwordRanges(_ text: [UInt8]) -> [Range<Int>] {
    let lower = text.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
    guard let scheme = ["postgresql://", "postgres://"].map({ Array($0.utf8) }).first(where: lower.starts)
    else { return keywordPasswordRanges(text, lower) }
    var ranges: [Range<Int>] = []
    // The user:password@ part: up to the last `@` before the query, or else where libpq's URI
    // parser finds it (the first `@` before any `/`), so that a password holding a raw `/` or
    // `?` is masked whole too.
    let query = text[scheme.count...].firstIndex(of: UInt8(ascii: "?")) ?? text.count
    var i = text[scheme.count..<query].lastIndex(of: UInt8(ascii: "@")) ?? scheme.count
    while i < text.count, text[i] != UInt8(ascii: "@"), text[i] != UInt8(ascii: "/") { i += 1 }
    if i < text.count, text[i] == UInt8(ascii: "@"),
      let colon = text[scheme.count..<i].firstIndex(of: UInt8(ascii: ":"))
    {
      ranges.append((colon + 1)..<i)
    }
    // password=... among the &-separated query parameters.
    guard let question = text[i...].firstIndex(of: UInt8(ascii: "?")) else { return ranges }
    var start = question + 1
    while start <= text.count {
      let end = text[start...].firstIndex(of: UInt8(ascii: "&")) ?? text.count
      if let equals = text[start..<end].firstIndex(of: UInt8(ascii: "=")),
        lower[start..<equals].elementsEqual("password".utf8)
      {
        ranges.append((equals + 1)..<end)
      }
      start = end + 1
    }
    return ranges
  }

  /// `password = value` in a key=value connection string, the value bare or single-quoted.
  private static func keywordPasswordRanges(_ text: [UInt8], _ lower: [UInt8]) -> [Range<Int>] {
    func isSpace(_ byte: UInt8) -> Bool { byte == 32 || (byte >= 9 && byte <= 13) }
    let key = Array("password".utf8)
    var ranges: [Range<Int>] = []
    var i = 0
    while i < text.count {
      guard i == 0 || isSpace(text[i - 1]), lower[i...].starts(with: key) else {
        i += 1
        continue
      }
      var j = i + key.count
      while j < text.count, isSpace(text[j]) { j += 1 }
      guard j < text.count, text[j] == UInt8(ascii: "=") else {
        i += 1
        continue
      }
      j += 1
      while j < text.count, isSpace(text[j]) { j += 1 }
      var end = j
      if end < text.count, text[end] == UInt8(ascii: "'") {
        end += 1
        while end < text.count, text[end] != UInt8(ascii: "'") {
          end += text[end] == UInt8(ascii: "\\") ? 2 : 1
        }
        end = min(end + 1, text.count)
      } else {
        while end < text.count, !isSpace(text[end]) { end += 1 }
      }
      ranges.append(j..<end)
      i = max(end, i + 1)
    }
    return ranges
  }

  private static func replacing(_ needle: [UInt8], in haystack: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var i = 0
    while i < haystack.count {
      if haystack[i...].starts(with: needle) {
        out += "***".utf8
        i += needle.count
      } else {
        out.append(haystack[i])
        i += 1
      }
    }
    return out
  }

  private static func percentDecoded(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
    var out: [UInt8] = []
    var i = bytes.startIndex
    while i < bytes.endIndex {
      if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.endIndex,
        let value = UInt8(String(decoding: bytes[(i + 1)...(i + 2)], as: UTF8.self), radix: 16)
      {
        out.append(value)
        i += 3
      } else {
        out.append(bytes[i])
        i += 1
      }
    }
    return out
  }
}
