import Testing

@testable import Edge

/// Bytes written in place within a bound: decimals, pieces, and an array's tail trimmed to what
/// was written.
@Suite("Bounded writer")
struct BoundedWriterTests {
  static func written(bound: Int, _ body: (inout BoundedWriter) -> Void) -> String {
    var bytes: [UInt8] = Array("head:".utf8)
    bytes.append(bound: bound, body)
    return String(decoding: bytes, as: UTF8.self)
  }

  static let decimals: [(Int, String)] = [
    (0, "0"), (7, "7"), (10, "10"), (99, "99"), (1013, "1013"), (-1, "-1"), (-42, "-42"),
    (Int.max, "9223372036854775807"), (Int.min, "-9223372036854775808"),
  ]

  @Test("decimals as OutputQueue writes them, from zero to the extremes", arguments: decimals)
  func decimal(_ value: Int, _ text: String) {
    #expect(
      Self.written(bound: BoundedWriter.maxDecimalBytes + 1) { $0.put(decimal: value) } == "head:" + text)
    if value >= 0 {
      var queue: [UInt8] = []
      OutputQueue.appendDecimal(value, to: &queue)
      #expect(String(decoding: queue, as: UTF8.self) == text)
    }
  }

  @Test("pieces of every kind land in order; the array keeps only what was written")
  func pieces() {
    let text = Self.written(bound: 64) { out in
      out.put(static: "a")
      out.put(utf8: "béc")
      out.put(UInt8(ascii: "-"))
      out.put(Array("xyz".utf8)[1...])
      out.put([UInt8(ascii: "!")])
    }
    #expect(text == "head:abéc-yz!")
    #expect(Self.written(bound: 16) { _ in } == "head:")
  }

  @Test("an array grows once for many lines, keeping what it had")
  func growth() {
    var bytes: [UInt8] = []
    for n in 0..<500 {
      bytes.append(bound: 40) {
        $0.put(decimal: n)
        $0.put(static: ";")
      }
    }
    #expect(String(decoding: bytes, as: UTF8.self) == (0..<500).map { "\($0);" }.joined())
  }

  static let escapes: [(String, String)] = [
    ("plain", "plain"), ("a\"b\\c\n\u{1}", #"a\"b\\c\n\u0001"#), ("é\r\t\u{1f}/x", #"é\r\t\u001f/x"#),
    ("", ""),
    ("\"", #"\""#), ("end\\", #"end\\"#), ("\u{7f}", "\u{7f}"),
  ]

  @Test(
    "JSON escaping within an exact bound: the escapes RFC 8259 asks for, as the array form",
    arguments: escapes)
  func escaped(_ text: String, _ expected: String) {
    var appended: [UInt8] = []
    JSONString.appendEscaped(text, to: &appended)
    #expect(String(decoding: appended, as: UTF8.self) == expected)
    #expect(JSONString.escapedBound(text) == expected.utf8.count)
    #expect(
      Self.written(bound: JSONString.escapedBound(text)) { JSONString.put(escaped: text, to: &$0) }
        == "head:" + expected)
  }
}
