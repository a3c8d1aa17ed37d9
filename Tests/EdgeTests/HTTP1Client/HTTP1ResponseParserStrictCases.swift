@testable import Edge

private func ok(_ summary: String) -> ResponseOutcome { .response(summary) }
private func fail(_ error: ResponseParseError) -> ResponseOutcome { .failure(error) }

/// A small head, field count and body.
private let small = ResponseLimits(
  maxHeadBytes: 64, maxFieldCount: 3, maxBodyBytes: 10, maxChunkExtensionBytes: 8)
/// Room for a chunked body of 15 bytes on the wire, and short chunk extensions.
private let framed = ResponseLimits(maxBodyBytes: 15, maxChunkExtensionBytes: 8)
private let chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

/// The status line (RFC 9112 §4), refused at its first impossible byte.
let statusLineResponses: [ResponseCase] = [
  .init(
    name: "101 Switching Protocols", input: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    expected: [fail(.switchingProtocols)]),
  .init(
    name: "101 refused as soon as its code is read", input: "HTTP/1.1 101",
    expected: [fail(.switchingProtocols)]),
  .init(name: "status 99", input: "HTTP/1.1 99 Low\r\n\r\n", expected: [fail(.invalidStatusCode)]),
  .init(name: "status 099", input: "HTTP/1.1 099 Low\r\n\r\n", expected: [fail(.invalidStatusCode)]),
  .init(name: "status 600", input: "HTTP/1.1 600 High\r\n\r\n", expected: [fail(.invalidStatusCode)]),
  .init(name: "four-digit status", input: "HTTP/1.1 2000 OK\r\n\r\n", expected: [fail(.invalidStatusCode)]),
  .init(name: "status not digits", input: "HTTP/1.1 2x0 OK\r\n\r\n", expected: [fail(.invalidStatusCode)]),
  .init(
    name: "status cut by the line end", input: "HTTP/1.1 20\r\n\r\n", expected: [fail(.invalidStatusCode)]),
  .init(
    name: "two spaces before the status", input: "HTTP/1.1  200 OK\r\n\r\n",
    expected: [fail(.invalidStatusCode)]),
  .init(
    name: "tab before the reason", input: "HTTP/1.1 200\tOK\r\n\r\n", expected: [fail(.invalidStatusCode)]),
  .init(name: "lower-case HTTP-name", input: "http/1.1 200 OK\r\n\r\n", expected: [fail(.invalidStatusLine)]),
  .init(
    name: "not HTTP at all, refused at its first byte", input: "ICY 200 OK\r\n\r\n",
    expected: [fail(.invalidStatusLine)]),
  .init(
    name: "an empty line before the status line", input: "\r\nHTTP/1.1 200 OK\r\n\r\n",
    expected: [fail(.invalidStatusLine)]),
  .init(name: "HTTP/2.0", input: "HTTP/2.0 200 OK\r\n\r\n", expected: [fail(.unsupportedVersion)]),
  .init(name: "HTTP/0.9", input: "HTTP/0.9 200 OK\r\n\r\n", expected: [fail(.unsupportedVersion)]),
  .init(
    name: "two-digit minor version", input: "HTTP/1.10 200 OK\r\n\r\n", expected: [fail(.invalidStatusLine)]),
  .init(
    name: "version without its dot", input: "HTTP/11 200 OK\r\n\r\n", expected: [fail(.invalidStatusLine)]),
  .init(
    name: "NUL in the reason", input: "HTTP/1.1 200 O\u{0}K\r\n\r\n", expected: [fail(.invalidReasonPhrase)]),
  .init(
    name: "DEL in the reason", input: "HTTP/1.1 200 OK\u{7F}\r\n\r\n", expected: [fail(.invalidReasonPhrase)]),
  .init(
    name: "bare CR in the reason", input: "HTTP/1.1 200 O\rK\r\n\r\n", expected: [fail(.bareCarriageReturn)]),
  .init(
    name: "bare CR after the status", input: "HTTP/1.1 200\rX\r\n\r\n", expected: [fail(.bareCarriageReturn)]),
  .init(
    name: "bare LF ending the status line", input: "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
    expected: [fail(.bareLineFeed)]),
  .init(name: "bare LF inside the version", input: "HTTP/1\n", expected: [fail(.bareLineFeed)]),
]

/// Field lines (RFC 9112 §5), as strict as the request parser's.
let fieldLineResponses: [ResponseCase] = [
  .init(
    name: "obs-fold", input: "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n",
    expected: [fail(.obsoleteLineFolding)]),
  .init(
    name: "obs-fold with a tab", input: "HTTP/1.1 200 OK\r\nX: a\r\n\tb\r\n\r\n",
    expected: [fail(.obsoleteLineFolding)]),
  .init(
    name: "whitespace before the first field", input: "HTTP/1.1 200 OK\r\n X: a\r\n\r\n",
    expected: [fail(.obsoleteLineFolding)]),
  .init(
    name: "space before the colon", input: "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n",
    expected: [fail(.whitespaceBeforeColon)]),
  .init(
    name: "tab before the colon", input: "HTTP/1.1 200 OK\r\nX\t: a\r\n\r\n",
    expected: [fail(.whitespaceBeforeColon)]),
  .init(name: "no colon", input: "HTTP/1.1 200 OK\r\nX\r\n\r\n", expected: [fail(.invalidFieldName)]),
  .init(name: "empty name", input: "HTTP/1.1 200 OK\r\n: a\r\n\r\n", expected: [fail(.invalidFieldName)]),
  .init(
    name: "name not a token", input: "HTTP/1.1 200 OK\r\nX(Y: a\r\n\r\n", expected: [fail(.invalidFieldName)]),
  .init(
    name: "NUL in a value", input: "HTTP/1.1 200 OK\r\nX: a\u{0}b\r\n\r\n",
    expected: [fail(.invalidFieldValue)]),
  .init(
    name: "control in a value", input: "HTTP/1.1 200 OK\r\nX: a\u{1}b\r\n\r\n",
    expected: [fail(.invalidFieldValue)]),
  .init(
    name: "CR in a value", input: "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", expected: [fail(.bareCarriageReturn)]),
  .init(
    name: "CR in a name", input: "HTTP/1.1 200 OK\r\nX\rY: a\r\n\r\n", expected: [fail(.bareCarriageReturn)]),
  .init(
    name: "bare LF ending a field line", input: "HTTP/1.1 200 OK\r\nX: a\nY: b\r\n\r\n",
    expected: [fail(.bareLineFeed)]),
  .init(
    name: "bare LF ending the head", input: "HTTP/1.1 200 OK\r\nX: a\r\n\n", expected: [fail(.bareLineFeed)]),
  .init(
    name: "a bad field in an interim response", input: "HTTP/1.1 100 Continue\r\nX : a\r\n\r\n",
    expected: [fail(.whitespaceBeforeColon)]),
]

/// Chunked framing (RFC 9112 §7.1).
let chunkResponses: [ResponseCase] = [
  .init(
    name: "chunk size overflow", input: chunkedHead + "FFFFFFFFFFFFFFFFFF\r\n",
    expected: [fail(.bodyTooLarge)]),
  .init(name: "chunk size not hex", input: chunkedHead + "Z\r\n\r\n", expected: [fail(.invalidChunkSize)]),
  .init(name: "empty chunk size line", input: chunkedHead + "\r\n", expected: [fail(.invalidChunkSize)]),
  .init(name: "negative chunk size", input: chunkedHead + "-1\r\n", expected: [fail(.invalidChunkSize)]),
  .init(
    name: "junk after the chunk size", input: chunkedHead + "5 x\r\nhello\r\n0\r\n\r\n",
    expected: [fail(.invalidChunkExtension)]),
  .init(
    name: "chunk extension without a name", input: chunkedHead + "5;\r\nhello\r\n0\r\n\r\n",
    expected: [fail(.invalidChunkExtension)]),
  .init(
    name: "unterminated quoted chunk extension", input: chunkedHead + "5;a=\"b\r\nhello\r\n0\r\n\r\n",
    expected: [fail(.invalidChunkExtension)]),
  .init(
    name: "chunk extension at its bound", input: chunkedHead + "1;a=12345\r\nx\r\n0\r\n\r\n",
    expected: [ok("200 OK 1.1 [transfer-encoding=chunked] body=x")],
    limits: ResponseLimits(maxChunkExtensionBytes: 8)),
  .init(
    name: "chunk extension over its bound", input: chunkedHead + "1;a=123456\r\nx\r\n0\r\n\r\n",
    expected: [fail(.chunkExtensionTooLong)], limits: ResponseLimits(maxChunkExtensionBytes: 8)),
  .init(
    name: "unterminated chunk extension cut at its bound",
    input: chunkedHead + "1;" + String(repeating: "a", count: 300), expected: [fail(.chunkExtensionTooLong)]),
  .init(
    name: "chunk data longer than its size", input: chunkedHead + "2\r\nhello\r\n0\r\n\r\n",
    expected: [fail(.invalidChunkTerminator)]),
  .init(
    name: "bare LF after chunk data", input: chunkedHead + "5\r\nhello\n0\r\n\r\n",
    expected: [fail(.bareLineFeed)]),
  .init(
    name: "bare CR after chunk data", input: chunkedHead + "5\r\nhello\rX0\r\n\r\n",
    expected: [fail(.bareCarriageReturn)]),
  .init(
    name: "bare LF ending the chunk size line", input: chunkedHead + "5\nhello\r\n0\r\n\r\n",
    expected: [fail(.bareLineFeed)]),
  .init(name: "bare LF ending the trailers", input: chunkedHead + "0\r\n\n", expected: [fail(.bareLineFeed)]),
  .init(
    name: "control in a trailer", input: chunkedHead + "0\r\nX: \u{1}\r\n\r\n",
    expected: [fail(.invalidFieldValue)]),
  .init(
    name: "obs-fold in the trailers", input: chunkedHead + "0\r\nX: a\r\n b\r\n\r\n",
    expected: [fail(.obsoleteLineFolding)]),
]

/// Every limit, exactly at it and one over.
let limitResponses: [ResponseCase] = [
  .init(
    name: "a head of exactly the limit", input: headOfSize(64), expected: [ok(headOfSizeSummary(64))],
    limits: small),
  .init(
    name: "a head one byte over the limit", input: headOfSize(65), expected: [fail(.headTooLarge)],
    limits: small),
  .init(
    name: "a head of exactly the default limit", input: headOfSize(16384),
    expected: [ok(headOfSizeSummary(16384))]),
  .init(
    name: "a head one byte over the default limit", input: headOfSize(16385), expected: [fail(.headTooLarge)]),
  .init(
    name: "an unterminated head over the limit",
    input: "HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 100), expected: [fail(.headTooLarge)],
    limits: small),
  .init(
    name: "a status line over the limit",
    input: "HTTP/1.1 200 " + String(repeating: "a", count: 100) + "\r\n\r\n", expected: [fail(.headTooLarge)],
    limits: small),
  .init(
    name: "a status line whose LF is one over the limit",
    input: "HTTP/1.1 200 " + String(repeating: "a", count: 50) + "\r\n\r\n", expected: [fail(.headTooLarge)],
    limits: small),
  .init(
    name: "an over-long field line ending in a bare LF",
    input: "HTTP/1.1 200 OK\r\nX: " + String(repeating: "b", count: 80) + "\n",
    expected: [fail(.headTooLarge)], limits: small),
  .init(
    name: "interim heads draw on the head limit",
    input: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
    expected: [.interim(100), .interim(100), fail(.headTooLarge)], limits: small),
  .init(
    name: "fields at the count limit", input: "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n",
    expected: [ok("200 OK 1.1 [a=1,b=2,content-length=0] body=")], limits: small),
  .init(
    name: "fields one over the count limit",
    input: "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nContent-Length: 0\r\n\r\n",
    expected: [fail(.tooManyFields)], limits: small),
  .init(
    name: "trailer lines count with the fields",
    input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
    expected: [fail(.tooManyFields)], limits: ResponseLimits(maxFieldCount: 3)),
  .init(
    name: "trailers count against the head limit",
    input: chunkedHead + "0\r\nX: " + String(repeating: "a", count: 20) + "\r\n\r\n",
    expected: [fail(.headTooLarge)], limits: ResponseLimits(maxHeadBytes: 64)),
  .init(
    name: "a fixed body of exactly the limit",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",
    expected: [ok("200 OK 1.1 [content-length=10] body=0123456789")], limits: small),
  .init(
    name: "a declared body over the limit, refused before any of it",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", expected: [fail(.bodyTooLarge)], limits: small),
  .init(
    name: "a chunked body of exactly the limit, framing included",
    input: chunkedHead + "5\r\nhello\r\n0\r\n\r\n",
    expected: [ok("200 OK 1.1 [transfer-encoding=chunked] body=hello")], limits: framed),
  .init(
    name: "a chunked body one byte over the limit", input: chunkedHead + "6\r\nhello!\r\n0\r\n\r\n",
    expected: [fail(.bodyTooLarge)], limits: framed),
  .init(
    name: "a chunk over the limit, refused before its data", input: chunkedHead + "10\r\n",
    expected: [fail(.bodyTooLarge)], limits: framed),
  .init(
    name: "trailers count against the body limit", input: chunkedHead + "0\r\nX: 1234567890\r\n\r\n",
    expected: [fail(.bodyTooLarge)], limits: framed),
  .init(
    name: "a body delimited by the close of exactly the limit", input: "HTTP/1.1 200 OK\r\n\r\n0123456789",
    expected: [.responseAtClose("200 OK 1.1 [] body=0123456789 close")], limits: small),
  .init(
    name: "a body delimited by the close, one byte over the limit",
    input: "HTTP/1.1 200 OK\r\n\r\n0123456789!", expected: [fail(.bodyTooLarge)], limits: small),
]

/// The connection closes too early.
let truncatedResponses: [ResponseCase] = [
  .init(name: "no byte at all", input: "", expected: [fail(.noResponse)]),
  .init(name: "inside the status line", input: "HTTP/1.1 20", expected: [fail(.truncatedHead)]),
  .init(
    name: "between the status line's CR and LF", input: "HTTP/1.1 200 OK\r", expected: [fail(.truncatedHead)]),
  .init(name: "inside the fields", input: "HTTP/1.1 200 OK\r\nContent-Len", expected: [fail(.truncatedHead)]),
  .init(
    name: "after interim responses only", input: "HTTP/1.1 100 Continue\r\n\r\n",
    expected: [.interim(100), fail(.truncatedHead)]),
  .init(
    name: "inside a fixed body", input: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
    expected: [fail(.truncatedBody)]),
  .init(
    name: "a fixed body not begun", input: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
    expected: [fail(.truncatedBody)]),
  .init(name: "inside chunk data", input: chunkedHead + "5\r\nhel", expected: [fail(.truncatedBody)]),
  .init(
    name: "before the last chunk", input: chunkedHead + "5\r\nhello\r\n", expected: [fail(.truncatedBody)]),
  .init(name: "inside the trailers", input: chunkedHead + "0\r\nX: 1\r\n", expected: [fail(.truncatedBody)]),
]
