import Foundation
import Testing

@testable import Edge

/// One parser case: raw bytes in, expected outcomes out.
struct ParserCase: CustomTestStringConvertible, Sendable {
  let name: String
  let input: String
  let expected: [ParseOutcome]
  var limits = Limits()
  var testDescription: String { name }
}

private func ok(_ summary: String) -> ParseOutcome { .request(summary) }
private func fail(_ error: HTTPParseError) -> ParseOutcome { .failure(error) }

private var small: Limits {
  var l = Limits()
  l.maxTargetBytes = 32
  l.maxHeaderBytes = 64
  l.maxHeaderCount = 3
  l.maxBodyBytes = 10
  return l
}

/// Small body and extension bounds, for the framing cases.
private var framed: Limits {
  var l = Limits()
  l.maxBodyBytes = 15
  l.maxChunkExtensionBytes = 8
  return l
}

private let chunkedHead = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

let parserCases: [ParserCase] =
  strictnessCases + framingCases + [
    // Accepted shapes
    .init(
      name: "minimal GET", input: "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [ok("GET / 1.1 [host=a] body=")]),
    .init(
      name: "query kept in target", input: "GET /p?q=1 HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [ok("GET /p?q=1 1.1 [host=a] body=")]),
    .init(
      name: "OWS trimmed around values", input: "GET / HTTP/1.1\r\nHost: \t a \t\r\nX-A:b\r\n\r\n",
      expected: [ok("GET / 1.1 [host=a,x-a=b] body=")]),
    .init(
      name: "empty value", input: "GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n",
      expected: [ok("GET / 1.1 [host=a,x-empty=] body=")]),
    .init(
      name: "obs-text in value", input: "GET / HTTP/1.1\r\nHost: a\r\nX: caf\u{E9}\r\n\r\n",
      expected: [ok("GET / 1.1 [host=a,x=caf\u{E9}] body=")]),
    .init(
      name: "leading empty line ignored (RFC 9112 §2.2)", input: "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [ok("GET / 1.1 [host=a] body=")]),
    .init(
      name: "HTTP/1.0 without Host closes", input: "GET / HTTP/1.0\r\n\r\n",
      expected: [ok("GET / 1.0 [] body= close")]),
    .init(
      name: "HTTP/1.0 keep-alive", input: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
      expected: [ok("GET / 1.0 [connection=Keep-Alive] body=")]),
    .init(
      name: "Connection: close", input: "GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n",
      expected: [ok("GET / 1.1 [host=a,connection=foo, close] body= close")]),
    .init(
      name: "HTTP/1.2 treated as 1.1", input: "GET / HTTP/1.2\r\nHost: a\r\n\r\n",
      expected: [ok("GET / 1.1 [host=a] body=")]),
    .init(
      name: "Content-Length body", input: "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
      expected: [ok("POST /f 1.1 [host=a,content-length=5] body=hello")]),
    .init(
      name: "Content-Length zero", input: "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
      expected: [ok("POST /f 1.1 [host=a,content-length=0] body=")]),
    .init(
      name: "chunked body",
      input:
        "POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
      expected: [ok("POST /f 1.1 [host=a,transfer-encoding=chunked] body=hello world")]),
    .init(
      name: "chunked with extension and trailer",
      input:
        "POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nA;name=\"v\\\"x\" ; b\r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n",
      expected: [ok("POST /f 1.1 [host=a,transfer-encoding=chunked] body=0123456789 trailers=[x-sum=1]")]),
    .init(
      name: "chunk size in upper-case hex with leading zeros",
      input:
        "POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n00A\r\n0123456789\r\n0\r\n\r\n",
      expected: [ok("POST /f 1.1 [host=a,transfer-encoding=chunked] body=0123456789")]),
    .init(
      name: "Expect: 100-continue",
      input: "POST /f HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\nhi",
      expected: [ok("POST /f 1.1 [host=a,expect=100-Continue,content-length=2] body=hi expect-continue")]),
    .init(
      name: "Expect ignored in HTTP/1.0", input: "GET / HTTP/1.0\r\nExpect: something\r\n\r\n",
      expected: [ok("GET / 1.0 [expect=something] body= close")]),
    .init(
      name: "absolute-form target", input: "GET http://a/x?y HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [ok("GET http://a/x?y 1.1 [host=a] body=")]),
    .init(
      name: "OPTIONS asterisk-form", input: "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [ok("OPTIONS * 1.1 [host=a] body=")]),
    .init(
      name: "pipelined pair", input: "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [ok("GET /1 1.1 [host=a] body="), ok("GET /2 1.1 [host=a] body=")]),
    .init(
      name: "target at the limit",
      input: "GET /" + String(repeating: "a", count: 31) + " HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [ok("GET /" + String(repeating: "a", count: 31) + " 1.1 [host=a] body=")], limits: small),
    .init(name: "incomplete head", input: "GET / HTTP/1.1\r\nHost: a\r\n", expected: [.incomplete]),
    .init(
      name: "incomplete body", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhel",
      expected: [.incomplete]),

    // Line endings: CRLF only (RFC 9112 §2.2)
    .init(
      name: "bare LF after request line", input: "GET / HTTP/1.1\nHost: a\r\n\r\n",
      expected: [fail(.bareLineFeed)]),
    .init(
      name: "bare LF ending head", input: "GET / HTTP/1.1\r\nHost: a\r\n\n", expected: [fail(.bareLineFeed)]),
    .init(
      name: "bare CR in request line", input: "GET /\r HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [fail(.bareCarriageReturn)]),
    .init(
      name: "bare CR in value", input: "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
      expected: [fail(.bareCarriageReturn)]),
    .init(
      name: "bare CR in name", input: "GET / HTTP/1.1\r\nHost: a\r\nX\rY: a\r\n\r\n",
      expected: [fail(.bareCarriageReturn)]),
    .init(
      name: "bare LF in chunk size line",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
      expected: [fail(.bareLineFeed)]),
    .init(
      name: "bare LF after chunk data",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
      expected: [fail(.bareLineFeed)]),
    .init(
      name: "bare CR after chunk data",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\rX0\r\n\r\n",
      expected: [fail(.bareCarriageReturn)]),
    .init(
      name: "chunk data longer than its size",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n",
      expected: [fail(.invalidChunkTerminator)]),
    .init(
      name: "bare LF in trailer section",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\n",
      expected: [fail(.bareLineFeed)]),

    // Request line
    .init(
      name: "double space", input: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", expected: [fail(.invalidRequestLine)]
    ),
    .init(
      name: "tab separator", input: "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", expected: [fail(.invalidMethod)]),
    .init(name: "missing version (HTTP/0.9)", input: "GET /\r\n\r\n", expected: [fail(.invalidRequestLine)]),
    .init(
      name: "method not a token", input: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", expected: [fail(.invalidMethod)]
    ),
    .init(
      name: "NUL in target", input: "GET /\u{0} HTTP/1.1\r\nHost: a\r\n\r\n", expected: [fail(.invalidTarget)]
    ),
    .init(
      name: "DEL in target", input: "GET /\u{7F} HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [fail(.invalidTarget)]),
    .init(
      name: "non-ASCII in target", input: "GET /\u{E9} HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [fail(.invalidTarget)]),
    .init(
      name: "relative target", input: "GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", expected: [fail(.invalidTarget)]),
    .init(
      name: "asterisk with GET", input: "GET * HTTP/1.1\r\nHost: a\r\n\r\n", expected: [fail(.invalidTarget)]),
    .init(
      name: "authority-form", input: "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [fail(.invalidTarget)]),
    .init(
      name: "lower-case version", input: "GET / http/1.1\r\nHost: a\r\n\r\n",
      expected: [fail(.invalidVersion)]),
    .init(
      name: "version with extra digit", input: "GET / HTTP/1.10\r\nHost: a\r\n\r\n",
      expected: [fail(.invalidVersion)]),
    .init(
      name: "trailing space after version", input: "GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
      expected: [fail(.invalidVersion)]),
    .init(
      name: "HTTP/2.0 gets 505", input: "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
      expected: [fail(.unsupportedVersion)]),
    .init(
      name: "HTTP/0.9 version gets 505", input: "GET / HTTP/0.9\r\nHost: a\r\n\r\n",
      expected: [fail(.unsupportedVersion)]),
    .init(
      name: "target over the limit gets 414",
      input: "GET /" + String(repeating: "a", count: 32) + " HTTP/1.1\r\nHost: a\r\n\r\n",
      expected: [fail(.targetTooLong)], limits: small),
    .init(
      name: "over-long request line ending in a bare LF gets 414 (fuzz crasher)",
      input: "GET /" + String(repeating: "a", count: 200) + "\n", expected: [fail(.targetTooLong)],
      limits: small),
    .init(
      name: "over-long header line ending in a bare LF gets 431",
      input: "GET / HTTP/1.1\r\nX: " + String(repeating: "b", count: 80) + "\n",
      expected: [fail(.headerSectionTooLarge)],
      limits: small),
    .init(
      name: "unterminated long request line gets 414", input: "GET /" + String(repeating: "a", count: 200),
      expected: [fail(.targetTooLong)], limits: small),

    // Field lines
    .init(
      name: "obs-fold", input: "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
      expected: [fail(.obsoleteLineFolding)]),
    .init(
      name: "whitespace before first field", input: "GET / HTTP/1.1\r\n Host: a\r\n\r\n",
      expected: [fail(.obsoleteLineFolding)]),
    .init(
      name: "space before colon", input: "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
      expected: [fail(.whitespaceBeforeColon)]),
    .init(
      name: "tab before colon", input: "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n",
      expected: [fail(.whitespaceBeforeColon)]),
    .init(
      name: "no colon", input: "GET / HTTP/1.1\r\nHost a\r\n\r\n", expected: [fail(.whitespaceBeforeColon)]),
    .init(
      name: "empty name", input: "GET / HTTP/1.1\r\n: a\r\nHost: a\r\n\r\n",
      expected: [fail(.invalidFieldName)]
    ),
    .init(
      name: "name not a token", input: "GET / HTTP/1.1\r\nHo(st: a\r\n\r\n",
      expected: [fail(.invalidFieldName)]
    ),
    .init(
      name: "NUL in value", input: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n",
      expected: [fail(.invalidFieldValue)]),
    .init(
      name: "control in value", input: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{1}b\r\n\r\n",
      expected: [fail(.invalidFieldValue)]),
    .init(
      name: "DEL in value", input: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{7F}\r\n\r\n",
      expected: [fail(.invalidFieldValue)]),
    .init(
      name: "too many fields gets 431", input: "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
      expected: [fail(.tooManyHeaderFields)], limits: small),
    .init(
      name: "header section too large gets 431",
      input: "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 80) + "\r\n\r\n",
      expected: [fail(.headerSectionTooLarge)], limits: small),
    .init(
      name: "unterminated header section too large gets 431",
      input: "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 80),
      expected: [fail(.headerSectionTooLarge)], limits: small),

    // Host
    .init(
      name: "missing Host in 1.1", input: "GET / HTTP/1.1\r\nX: a\r\n\r\n", expected: [fail(.missingHost)]),
    .init(
      name: "duplicate Host", input: "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
      expected: [fail(.duplicateHost)]),
    .init(
      name: "duplicate Host in 1.0", input: "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
      expected: [fail(.duplicateHost)]),
    .init(
      name: "Host with a path", input: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", expected: [fail(.invalidHost)]),
    .init(
      name: "Host with a space", input: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", expected: [fail(.invalidHost)]),

    // Framing (RFC 9112 §6)
    .init(
      name: "Content-Length and Transfer-Encoding",
      input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      expected: [fail(.contentLengthWithTransferEncoding)]),
    .init(
      name: "two Content-Length fields",
      input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
      expected: [fail(.duplicateContentLength)]),
    .init(
      name: "repeated equal Content-Length",
      input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
      expected: [fail(.duplicateContentLength)]),
    .init(
      name: "Content-Length list", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\na",
      expected: [fail(.invalidContentLength)]),
    .init(
      name: "signed Content-Length", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\na",
      expected: [fail(.invalidContentLength)]),
    .init(
      name: "negative Content-Length", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
      expected: [fail(.invalidContentLength)]),
    .init(
      name: "hex Content-Length", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x1\r\n\r\na",
      expected: [fail(.invalidContentLength)]),
    .init(
      name: "empty Content-Length", input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
      expected: [fail(.invalidContentLength)]),
    .init(
      name: "huge Content-Length gets 413",
      input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
      expected: [fail(.bodyTooLarge)]),
    .init(
      name: "Content-Length over the limit gets 413",
      input: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n",
      expected: [fail(.bodyTooLarge)], limits: small),
    .init(
      name: "chunked body over the limit gets 413",
      input:
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n012345\r\n6\r\n012345\r\n0\r\n\r\n",
      expected: [fail(.bodyTooLarge)], limits: small),
    .init(
      name: "giant chunk size gets 413",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n",
      expected: [fail(.bodyTooLarge)]),
    .init(
      name: "Transfer-Encoding gzip only",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
      expected: [fail(.chunkedNotFinal)]),
    .init(
      name: "chunked not final",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
      expected: [fail(.chunkedNotFinal)]),
    .init(
      name: "chunked twice",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
      expected: [fail(.chunkedNotFinal)]),
    .init(
      name: "chunked twice across fields",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
      expected: [fail(.chunkedNotFinal)]),
    .init(
      name: "empty Transfer-Encoding", input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n",
      expected: [fail(.chunkedNotFinal)]),
    .init(
      name: "unknown transfer coding before chunked gets 501",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: foo, chunked\r\n\r\n0\r\n\r\n",
      expected: [fail(.unsupportedTransferCoding)]),
    .init(
      name: "gzip before chunked gets 501",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
      expected: [fail(.unsupportedTransferCoding)]),
    .init(
      name: "Transfer-Encoding in HTTP/1.0",
      input: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      expected: [fail(.transferEncodingInHTTP10)]),
    .init(
      name: "chunk size not hex",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nZ\r\n\r\n",
      expected: [fail(.invalidChunkSize)]),
    .init(
      name: "empty chunk size line",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
      expected: [fail(.invalidChunkSize)]),
    .init(
      name: "chunk size with junk",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n",
      expected: [fail(.invalidChunkExtension)]),
    .init(
      name: "chunk extension without name",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;\r\nhello\r\n0\r\n\r\n",
      expected: [fail(.invalidChunkExtension)]),
    .init(
      name: "unterminated quoted chunk extension",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"b\r\nhello\r\n0\r\n\r\n",
      expected: [fail(.invalidChunkExtension)]),
    .init(
      name: "control in trailer",
      input: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: \u{1}\r\n\r\n",
      expected: [fail(.invalidFieldValue)]),

    // Expectations
    .init(
      name: "unknown expectation gets 417",
      input: "POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\na",
      expected: [fail(.unsupportedExpectation)]),
  ]

/// A request line is refused at its first impossible byte; methods, fragments
/// and empty hosts.
let strictnessCases: [ParserCase] = [
  .init(
    name: "a TLS ClientHello is refused at its first byte", input: "\u{16}\u{03}\u{01}\u{02}",
    expected: [fail(.invalidRequestLine)]),
  .init(
    name: "a stray byte in the method is refused at once", input: "GE(T", expected: [fail(.invalidMethod)]),
  .init(
    name: "a target that cannot start so is refused at once", input: "GET a", expected: [fail(.invalidTarget)]
  ),
  .init(
    name: "a malformed version is refused at once", input: "GET / HTTX", expected: [fail(.invalidVersion)]),
  .init(name: "a space first is refused at once", input: " GET", expected: [fail(.invalidRequestLine)]),
  .init(
    name: "a method at the length bound",
    input: String(repeating: "M", count: 32) + " / HTTP/1.1\r\nHost: a\r\n\r\n",
    expected: [ok(String(repeating: "M", count: 32) + " / 1.1 [host=a] body=")]),
  .init(
    name: "an over-long method gets 501, not 414",
    input: String(repeating: "M", count: 33) + " / HTTP/1.1\r\nHost: a\r\n\r\n",
    expected: [fail(.methodTooLong)]),
  .init(
    name: "an unterminated over-long method gets 501", input: String(repeating: "M", count: 200),
    expected: [fail(.methodTooLong)], limits: small),
  .init(
    name: "a fragment in the target gets 400", input: "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n",
    expected: [fail(.fragmentInTarget)]),
  .init(
    name: "an empty Host gets 400 (RFC 9110 §4.2.1)", input: "GET / HTTP/1.1\r\nHost:\r\n\r\n",
    expected: [fail(.emptyHost)]),
  .init(
    name: "a blank Host gets 400", input: "GET / HTTP/1.1\r\nHost: \t \r\n\r\n", expected: [fail(.emptyHost)]),
  .init(
    name: "an unknown method that is a token parses (the router answers 501)",
    input: "BREW / HTTP/1.1\r\nHost: a\r\n\r\n", expected: [ok("BREW / 1.1 [host=a] body=")]),
]

/// Chunk framing is bounded and counted against the body limit.
let framingCases: [ParserCase] = [
  .init(
    name: "a chunked body of exactly the limit, framing included",
    input: chunkedHead + "5\r\nhello\r\n0\r\n\r\n",
    expected: [ok("POST / 1.1 [host=a,transfer-encoding=chunked] body=hello")],
    limits: framed),
  .init(
    name: "one byte more framing than the limit gets 413",
    input: chunkedHead + "6\r\nhello!\r\n0\r\n\r\n", expected: [fail(.bodyTooLarge)], limits: framed),
  .init(
    name: "chunk framing counts against the body limit",
    input: chunkedHead + "1;a=b\r\nx\r\n1\r\ny\r\n0\r\n\r\n", expected: [fail(.bodyTooLarge)], limits: framed),
  .init(
    name: "trailers count against the body limit",
    input: chunkedHead + "0\r\nX: 1234567890\r\n\r\n", expected: [fail(.bodyTooLarge)], limits: framed),
  .init(
    name: "a chunk extension at its bound", input: chunkedHead + "1;a=12345\r\nx\r\n0\r\n\r\n",
    expected: [fail(.bodyTooLarge)], limits: framed),
  .init(
    name: "a chunk extension at its bound within the body limit",
    input: chunkedHead + "1;a=12345\r\nx\r\n0\r\n\r\n",
    expected: [ok("POST / 1.1 [host=a,transfer-encoding=chunked] body=x")]),
  .init(
    name: "a chunk extension over its bound gets 400", input: chunkedHead + "1;a=123456789\r\nx\r\n0\r\n\r\n",
    expected: [fail(.chunkExtensionTooLong)],
    limits: {
      var l = framed; l.maxBodyBytes = 100; return l
    }()),
  .init(
    name: "an unterminated chunk extension is cut at its bound",
    input: chunkedHead + "1;" + String(repeating: "a", count: 300),
    expected: [fail(.chunkExtensionTooLong)]),
]

@Suite("HTTP/1.1 parser")
struct HTTP1ParserTests {
  @Test("whole input", arguments: parserCases)
  func whole(_ c: ParserCase) {
    #expect(HTTP1Parser.outcomes(of: Array(c.input.utf8), limits: c.limits) == c.expected)
  }

  @Test("one byte at a time", arguments: parserCases)
  func byteByByte(_ c: ParserCase) {
    #expect(HTTP1Parser.outcomes(of: Array(c.input.utf8), step: 1, limits: c.limits) == c.expected)
  }

  @Test("followed by a second request", arguments: parserCases)
  func concatenated(_ c: ParserCase) {
    let second = "GET /second HTTP/1.1\r\nHost: b\r\n\r\n"
    var expected = c.expected
    switch expected.last {
    case .incomplete?: return  // the second request would become part of the first
    case .request?: expected.append(.request("GET /second 1.1 [host=b] body="))
    default: break
    }
    let bytes = Array((c.input + second).utf8)
    #expect(HTTP1Parser.outcomes(of: bytes, limits: c.limits) == expected)
    #expect(HTTP1Parser.outcomes(of: bytes, step: 1, limits: c.limits) == expected)
  }

  @Test("every error maps to its RFC status")
  func statuses() {
    let table: [(HTTPParseError, Int)] = [
      (.bareLineFeed, 400), (.invalidRequestLine, 400), (.missingHost, 400), (.duplicateHost, 400),
      (.contentLengthWithTransferEncoding, 400), (.chunkedNotFinal, 400), (.obsoleteLineFolding, 400),
      (.unsupportedVersion, 505), (.targetTooLong, 414), (.headerSectionTooLarge, 431),
      (.tooManyHeaderFields, 431), (.bodyTooLarge, 413), (.unsupportedTransferCoding, 501),
      (.unsupportedExpectation, 417), (.methodTooLong, 501), (.fragmentInTarget, 400), (.emptyHost, 400),
      (.chunkExtensionTooLong, 400),
    ]
    for (error, code) in table { #expect(error.status.code == code, "\(error)") }
  }

  @Test("100-continue is announced once, before the body arrives")
  func continueExpected() throws {
    var parser = HTTP1Parser()
    let head = Array("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n".utf8)
    let first = try head.withUnsafeBytes { try parser.parse($0) }
    guard case .continueExpected = first else {
      Issue.record("expected continueExpected, got \(first)")
      return
    }
    let second = try head.withUnsafeBytes { try parser.parse($0) }
    guard case .needMore = second else {
      Issue.record("expected needMore, got \(second)")
      return
    }
    let whole = head + Array("ok".utf8)
    let third = try whole.withUnsafeBytes { try parser.parse($0) }
    guard case .complete(let request, let consumed) = third else {
      Issue.record("expected complete, got \(third)")
      return
    }
    #expect(consumed == whole.count)
    #expect(request.body == Array("ok".utf8))
    #expect(request.expectsContinue)
  }

  @Test("headers are looked up case-insensitively; path and query split")
  func lookups() throws {
    var parser = HTTP1Parser()
    let bytes = Array("GET /a/b?x=1&y HTTP/1.1\r\nHOST: h\r\nX-Two: 1\r\nx-two: 2\r\n\r\n".utf8)
    let result = try bytes.withUnsafeBytes { try parser.parse($0) }
    guard case .complete(let request, _) = result else {
      Issue.record("expected a request")
      return
    }
    #expect(request.headers["host"] == "h")
    #expect(request.headers.values("X-TWO") == ["1", "2"])
    #expect(request.headers.combined("x-two") == "1, 2")
    #expect(request.headers.combined("host") == "h")
    #expect(request.headers.combined("nope") == nil)
    #expect(request.headers["missing"] == nil)
    #expect(request.path == "/a/b")
    #expect(request.query == "x=1&y")
    #expect(request.queryItem("x") == "1")
    #expect(request.queryItem("y") == "")
    #expect(request.queryItem("z") == nil)
  }
}

/// Inputs the fuzzer found, kept byte for byte in Tests/fuzz/crashers: each must parse the same way
/// whole, byte by byte and in halves (fuzzHTTP1Parser traps otherwise).
let fuzzCrashers: [URL] = {
  let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("../../fuzz/crashers").standardized
  return
    ((try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? [])
    .sorted { $0.path < $1.path }
}()

@Test("fuzz crashers parse the same whole, byte by byte and in halves")
func fuzzCrashersReplay() throws {
  #expect(!fuzzCrashers.isEmpty, "Tests/fuzz/crashers holds the inputs the fuzzer found")
  for file in fuzzCrashers {
    let bytes = try Data(contentsOf: file)
    Array(bytes).withUnsafeBytes { fuzzHTTP1Parser($0) }
  }
}

@Suite("Byte classes")
struct ByteClassTests {
  @Test("the token and host masks match the RFC character lists")
  func masks() {
    let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    let host = Set("-._~!$&'()*+,;=%:[]0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    for b in 0...255 {
      #expect(ASCII.isToken(UInt8(b)) == tchar.contains(UInt8(b)), "tchar \(b)")
      #expect(ASCII.isHostCharacter(UInt8(b)) == host.contains(UInt8(b)), "host \(b)")
    }
  }
}
