import Edge
import Testing

@testable import Shell

@Suite("Accept-Encoding negotiation (RFC 9110 §12.5.3)")
struct NegotiationTests {
  static let all: [ContentCoding] = [.br, .gzip, .identity]
  static let gzipOnly: [ContentCoding] = [.gzip, .identity]

  static let table: [(header: String?, available: [ContentCoding], expected: EncodingChoice)] = [
    (nil, all, .coding(.identity)),
    ("", all, .coding(.identity)),
    ("br, gzip", all, .coding(.br)),
    ("gzip, br", all, .coding(.br)),
    ("gzip", all, .coding(.gzip)),
    ("br;q=0.5, gzip;q=1", all, .coding(.gzip)),
    ("br;q=0, gzip", all, .coding(.gzip)),
    ("BR;Q=0.9, GZIP;Q=0.8", all, .coding(.br)),
    ("gzip;q=0", all, .coding(.identity)),
    ("gzip;q=0, br;q=0", all, .coding(.identity)),
    ("gzip, identity;q=0", gzipOnly, .coding(.gzip)),
    ("identity;q=0", gzipOnly, .notAcceptable),
    ("*;q=0", all, .notAcceptable),
    ("*;q=0, identity", all, .coding(.identity)),
    ("*;q=0, identity;q=0.1", all, .coding(.identity)),
    ("*", all, .coding(.br)),
    ("*;q=0.5, br;q=0", all, .coding(.gzip)),
    ("identity", all, .coding(.identity)),
    ("deflate", all, .coding(.identity)),
    ("x-gzip", gzipOnly, .coding(.gzip)),
    ("br", gzipOnly, .coding(.identity)),
    ("gzip;q=0.001, identity;q=0.002", all, .coding(.identity)),
    ("gzip;q=1.5", all, .coding(.identity)),  // malformed weight: element ignored
    ("gzip;q=abc, br", all, .coding(.br)),
    (" gzip ; q=0.3 ,br;q=0.2", all, .coding(.gzip)),
    (",,gzip,,", all, .coding(.gzip)),
    ("gzip;q=0.5;level=9, br;q=0.4", all, .coding(.gzip)),  // other parameters are ignored
    ("gzip;q= 0.5, br;q=0.4", all, .coding(.br)),  // no whitespace around "=": element ignored
    ("gzip junk, br;q=0.1", all, .coding(.br)),  // junk after a coding: element ignored
    ("GZip;Q=1.000", gzipOnly, .coding(.gzip)),
    ("br;q=1.0001", all, .coding(.identity)),
  ]

  @Test("table", arguments: table.indices)
  func negotiate(_ i: Int) {
    let row = Self.table[i]
    #expect(
      selectEncoding(row.header, available: row.available) == row.expected,
      "\(String(describing: row.header))")
  }
}

@Suite("Preconditions (RFC 9110 §13)")
struct PreconditionTests {
  static let etag = "\"abc\""
  static let modified = 784_111_777  // Sun, 06 Nov 1994 08:49:37 GMT

  static let table: [(ifNoneMatch: String?, ifModifiedSince: String?, expected: PreconditionResult)] = [
    (nil, nil, .proceed),
    ("\"abc\"", nil, .notModified),
    ("W/\"abc\"", nil, .notModified),  // weak comparison
    ("\"xyz\"", nil, .proceed),
    ("\"xyz\", \"abc\"", nil, .notModified),
    ("\"xyz\",W/\"abc\"", nil, .notModified),
    ("*", nil, .notModified),
    ("\"ab\"", nil, .proceed),
    ("abc", nil, .proceed),  // unquoted: not an entity-tag
    ("\"xyz\"", "Sun, 06 Nov 1994 08:49:37 GMT", .proceed),  // If-None-Match wins
    (nil, "Sun, 06 Nov 1994 08:49:37 GMT", .notModified),
    (nil, "Mon, 07 Nov 1994 08:49:37 GMT", .notModified),
    (nil, "Sat, 05 Nov 1994 08:49:37 GMT", .proceed),
    (nil, "Sunday, 06-Nov-94 08:49:37 GMT", .proceed),  // obsolete format ignored
    (nil, "garbage", .proceed),
  ]

  @Test("table", arguments: table.indices)
  func evaluate(_ i: Int) {
    let row = Self.table[i]
    #expect(
      evaluatePreconditions(
        ifNoneMatch: row.ifNoneMatch, ifModifiedSince: row.ifModifiedSince, etag: Self.etag,
        lastModified: Self.modified) == row.expected)
  }

  @Test("HTTP dates parse to epoch seconds")
  func dates() {
    #expect(parseHTTPDate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
    #expect(parseHTTPDate("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
    #expect(parseHTTPDate("Mon, 30 Nov 2026 08:00:00 GMT") == 1_796_025_600)
    #expect(parseHTTPDate("Sun, 06 Nov 1994 08:49:37 UTC") == nil)
  }
}

@Suite("Ranges (RFC 9110 §14)")
struct RangeTests {
  static let etag = "\"abc\""
  static let date = "Sun, 06 Nov 1994 08:49:37 GMT"

  static let table: [(range: String?, ifRange: String?, size: Int, expected: RangeResult)] = [
    (nil, nil, 100, .whole),
    ("bytes=0-9", nil, 100, .partial(0...9)),
    ("bytes=90-", nil, 100, .partial(90...99)),
    ("bytes=90-200", nil, 100, .partial(90...99)),
    ("bytes=-10", nil, 100, .partial(90...99)),
    ("bytes=-200", nil, 100, .partial(0...99)),
    ("bytes=100-", nil, 100, .unsatisfiable),
    ("bytes=-0", nil, 100, .unsatisfiable),
    ("bytes=0-0", nil, 100, .partial(0...0)),
    ("bytes=0-", nil, 0, .unsatisfiable),
    ("bytes=5-1", nil, 100, .whole),  // invalid: ignored
    ("bytes=0-1,5-6", nil, 100, .whole),  // several ranges: whole
    ("items=0-1", nil, 100, .whole),
    ("bytes=a-b", nil, 100, .whole),
    ("bytes=0-9", "\"abc\"", 100, .partial(0...9)),
    ("bytes=0-9", "\"old\"", 100, .whole),
    ("bytes=0-9", "W/\"abc\"", 100, .whole),  // If-Range needs a strong match
    ("bytes=0-9", date, 100, .partial(0...9)),
    ("bytes=0-9", "Mon, 07 Nov 1994 08:49:37 GMT", 100, .whole),
  ]

  @Test("table", arguments: table.indices)
  func range(_ i: Int) {
    let row = Self.table[i]
    #expect(
      parseRange(row.range, ifRange: row.ifRange, size: row.size, etag: Self.etag, lastModified: 784_111_777)
        == row.expected, "\(String(describing: row.range)) \(String(describing: row.ifRange))")
  }
}
