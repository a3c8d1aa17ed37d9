import Testing

@testable import Edge

/// One error-context case: what a refused (or unfinished) message shows of its path and `Accept`,
/// fed whole and one byte at a time.
struct ErrorContextCase: CustomTestStringConvertible, Sendable {
  let name: String
  let input: String
  /// `path accept=value` (accept=nil when none was found), or "nil" when the path is unknown.
  let whole: String
  /// The same, fed one byte at a time: only fields whose line was whole before the error count.
  let byByte: String
  var testDescription: String { name }
}

private var tight: Limits {
  var l = Limits()
  l.maxTargetBytes = 16
  l.maxHeaderBytes = 64
  return l
}

private let filler = "X: " + String(repeating: "b", count: 80) + "\r\n"

/// A head refused before it is complete still shows its `Accept`.
let errorContextCases: [ErrorContextCase] = [
  .init(
    name: "a 414's Accept after the over-long target is found in what arrived with it",
    input: "GET /" + String(repeating: "a", count: 40) + " HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n",
    whole: "/" + String(repeating: "a", count: 15) + " accept=text/html",
    byByte: "/" + String(repeating: "a", count: 15) + " accept=nil"),
  .init(
    name: "a 414 under /api/ keeps its path prefix",
    input: "GET /api/" + String(repeating: "a", count: 40) + " HTTP/1.1\r\nAccept: text/html\r\n\r\n",
    whole: "/api/aaaaaaaaaaa accept=text/html", byByte: "/api/aaaaaaaaaaa accept=nil"),
  .init(
    name: "a 431 with Accept on an early line",
    input: "GET /x HTTP/1.1\r\nAccept: text/html\r\nHost: a\r\n" + filler + "\r\n",
    whole: "/x accept=text/html", byByte: "/x accept=text/html"),
  .init(
    name: "a 431 whose Accept comes after the limit is not looked for",
    input: "GET /x HTTP/1.1\r\nHost: a\r\n" + filler + "Accept: text/html\r\n\r\n",
    whole: "/x accept=nil", byByte: "/x accept=nil"),
  .init(
    name: "several Accept lines, any case and OWS, are combined",
    input: "GET /x HTTP/1.1\r\nAccept: text/plain\r\naCCEPT:text/html \r\nX : y\r\n\r\n",
    whole: "/x accept=text/plain, text/html", byByte: "/x accept=text/plain, text/html"),
  .init(
    name: "an Accept line not yet ended counts for nothing",
    input: "GET /x HTTP/1.1\r\nAccept: text/ht", whole: "/x accept=nil", byByte: "/x accept=nil"),
  .init(
    name: "other names and a space before the colon are not Accept",
    input: "GET /x HTTP/1.1\r\nAccept-Language: text/html\r\nAccepts: text/html\r\nAccept : text/html\r\n",
    whole: "/x accept=nil", byByte: "/x accept=nil"),
  .init(
    name: "an Accept value with a control byte is ignored",
    input: "GET /x HTTP/1.1\r\nAccept: text/html\u{1}\r\n\r\n", whole: "/x accept=nil",
    byByte: "/x accept=nil"),
  .init(
    name: "the scan stops at a bare LF",
    input: "GET /x HTTP/1.1\r\nX: 1\nAccept: text/html\r\n\r\n", whole: "/x accept=nil",
    byByte: "/x accept=nil"),
  .init(
    name: "the scan stops at the end of the head",
    input: "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\nAccept: text/html\r\n",
    whole: "/x accept=nil", byByte: "/x accept=nil"),
  .init(
    name: "a complete head refused by its framing shows its parsed Accept",
    input: "GET /x HTTP/1.1\r\nAccept: text/html\r\n\r\n", whole: "/x accept=text/html",
    byByte: "/x accept=text/html"),
  .init(
    name: "a request line refused before its target shows nothing",
    input: "G(T /x HTTP/1.1\r\nAccept: text/html\r\n\r\n", whole: "nil", byByte: "nil"),
]

@Suite("HTTP/1.1 parser error context")
struct HTTP1ParserErrorContextTests {
  /// Feeds `input` `step` bytes at a time (0: whole) until the parser refuses it or it runs out,
  /// then describes the error context.
  static func context(_ input: String, step: Int) -> String {
    let bytes = Array(input.utf8)
    var parser = HTTP1Parser(limits: tight)
    var available = step == 0 ? bytes.count : min(step, bytes.count)
    return bytes.withUnsafeBytes { all in
      while true {
        let window = UnsafeRawBufferPointer(rebasing: all[0..<available])
        do throws(HTTPParseError) {
          if case .complete = try parser.advance(window) { return "complete" }
        } catch {
          break
        }
        if available == bytes.count { break }
        available = min(available + step, bytes.count)
      }
      let window = UnsafeRawBufferPointer(rebasing: all[0..<available])
      guard let context = parser.errorContext(window) else { return "nil" }
      return "\(context.path) accept=\(context.accept ?? "nil")"
    }
  }

  @Test("whole input", arguments: errorContextCases)
  func whole(_ c: ErrorContextCase) {
    #expect(Self.context(c.input, step: 0) == c.whole)
  }

  @Test("one byte at a time", arguments: errorContextCases)
  func byteByByte(_ c: ErrorContextCase) {
    #expect(Self.context(c.input, step: 1) == c.byByte)
  }
}
