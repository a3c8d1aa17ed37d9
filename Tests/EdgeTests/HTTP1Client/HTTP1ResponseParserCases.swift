import Testing

@testable import Edge

/// One response-parser case: raw bytes in (the connection closes after them), outcomes out.
struct ResponseCase: CustomTestStringConvertible, Sendable {
  let name: String
  let input: String
  let expected: [ResponseOutcome]
  var method = HTTPMethod.get
  var limits = ResponseLimits()
  var testDescription: String { name }
}

private func ok(_ summary: String) -> ResponseOutcome { .response(summary) }
private func fail(_ error: ResponseParseError) -> ResponseOutcome { .failure(error) }

/// A small head, field count and body.
private let small = ResponseLimits(
  maxHeadBytes: 64, maxFieldCount: 3, maxBodyBytes: 10, maxChunkExtensionBytes: 8)

private let chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

/// A head of exactly `size` bytes (at least 43): status line, Content-Length: 0, one filler field.
func headOfSize(_ size: Int) -> String {
  "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: " + String(repeating: "a", count: size - 43) + "\r\n\r\n"
}

func headOfSizeSummary(_ size: Int) -> String {
  "200 OK 1.1 [content-length=0,x=" + String(repeating: "a", count: size - 43) + "] body="
}

let responseCases: [ResponseCase] =
  acceptedResponses + framingResponses + statusLineResponses + fieldLineResponses + chunkResponses
  + limitResponses + truncatedResponses

/// Responses taken as they are.
let acceptedResponses: [ResponseCase] = [
  .init(
    name: "fixed body", input: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    expected: [ok("200 OK 1.1 [content-length=5] body=hello")]),
  .init(
    name: "Content-Length zero", input: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    expected: [ok("200 OK 1.1 [content-length=0] body=")]),
  .init(
    name: "chunked body", input: chunkedHead + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    expected: [ok("200 OK 1.1 [transfer-encoding=chunked] body=hello world")]),
  .init(
    name: "chunk extensions and trailers are checked and dropped",
    input: chunkedHead + "5;a=b ; c=\"d\\\"e\"\r\nhello\r\n0;last\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n",
    expected: [ok("200 OK 1.1 [transfer-encoding=chunked] body=hello")]),
  .init(
    name: "chunk size in upper-case hex with leading zeros",
    input: chunkedHead + "00A\r\n0123456789\r\n0\r\n\r\n",
    expected: [ok("200 OK 1.1 [transfer-encoding=chunked] body=0123456789")]),
  .init(
    name: "chunked in any case, empty list elements ignored (RFC 9110 §5.6.1)",
    input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: , Chunked ,\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    expected: [ok("200 OK 1.1 [transfer-encoding=, Chunked ,] body=ok")]),
  .init(
    name: "body delimited by the close",
    input: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close",
    expected: [.responseAtClose("200 OK 1.1 [content-type=text/plain] body=until close close")]),
  .init(
    name: "empty body delimited by the close", input: "HTTP/1.1 200 OK\r\n\r\n",
    expected: [.responseAtClose("200 OK 1.1 [] body= close")]),
  .init(
    name: "HEAD: Content-Length present, no body read", input: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
    expected: [ok("200 OK 1.1 [content-length=5] body=")], method: .head),
  .init(
    name: "HEAD: chunked announced, no body read", input: chunkedHead,
    expected: [ok("200 OK 1.1 [transfer-encoding=chunked] body=")], method: .head),
  .init(
    name: "HEAD: no framing fields, no body and no close", input: "HTTP/1.1 200 OK\r\n\r\n",
    expected: [ok("200 OK 1.1 [] body=")], method: .head),
  .init(
    name: "HEAD: a Content-Length past the body limit is only a length",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
    expected: [ok("200 OK 1.1 [content-length=99999999999] body=")], method: .head, limits: small),
  .init(
    name: "204 with Content-Length: no body read",
    input: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    expected: [ok("204 No Content 1.1 [content-length=5] body=")]),
  .init(
    name: "304 with Content-Length: no body read",
    input: "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\nETag: \"x\"\r\n\r\n",
    expected: [ok("304 Not Modified 1.1 [content-length=100,etag=\"x\"] body=")]),
  .init(
    name: "interim responses before the final one",
    input: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
      + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    expected: [.interim(100), .interim(103), ok("200 OK 1.1 [content-length=2] body=ok")]),
  .init(
    name: "102 and an unknown 1xx are interim; 599 is final",
    input: "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 199 X\r\n\r\nHTTP/1.1 599 Y\r\nContent-Length: 0\r\n\r\n",
    expected: [.interim(102), .interim(199), ok("599 Y 1.1 [content-length=0] body=")]),
  .init(
    name: "identical repeated Content-Length (RFC 9110 §8.6)",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    expected: [ok("200 OK 1.1 [content-length=3,content-length=3] body=abc")]),
  .init(
    name: "Content-Length list of one value", input: "HTTP/1.1 200 OK\r\nContent-Length: 3 , 3\r\n\r\nabc",
    expected: [ok("200 OK 1.1 [content-length=3 , 3] body=abc")]),
  .init(
    name: "HTTP/1.0 closes, keep-alive or not",
    input: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
    expected: [ok("200 OK 1.0 [connection=keep-alive,content-length=2] body=hi close")]),
  .init(
    name: "Connection: close closes",
    input: "HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0\r\n\r\n",
    expected: [ok("200 OK 1.1 [connection=Keep-Alive, Close,content-length=0] body= close")]),
  .init(
    name: "Connection: keep-alive on 1.1 keeps",
    input: "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
    expected: [ok("200 OK 1.1 [connection=keep-alive,content-length=0] body=")]),
  .init(
    name: "a status line without a reason or its space", input: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
    expected: [ok("200  1.1 [content-length=0] body=")]),
  .init(
    name: "an empty reason after its space", input: "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n",
    expected: [ok("404  1.1 [content-length=0] body=")]),
  .init(
    name: "a reason with spaces, a tab and obs-text",
    input: "HTTP/1.1 503 Try\tlater caf\u{E9}\r\nContent-Length: 0\r\n\r\n",
    expected: [ok("503 Try\tlater caf\u{E9} 1.1 [content-length=0] body=")]),
  .init(
    name: "HTTP/1.2 is taken as 1.1", input: "HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n",
    expected: [ok("200 OK 1.1 [content-length=0] body=")]),
  .init(
    name: "OWS around values trimmed, empty value kept",
    input: "HTTP/1.1 200 OK\r\nX: \t a \t\r\nY:\r\nContent-Length: 0\r\n\r\n",
    expected: [ok("200 OK 1.1 [x=a,y=,content-length=0] body=")]),
]

/// Message framing (RFC 9112 §6.3).
let framingResponses: [ResponseCase] = [
  .init(
    name: "Content-Length and Transfer-Encoding",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    expected: [fail(.contentLengthWithTransferEncoding)]),
  .init(
    name: "Content-Length and Transfer-Encoding, even to HEAD",
    input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
    expected: [fail(.contentLengthWithTransferEncoding)], method: .head),
  .init(
    name: "differing Content-Length fields",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    expected: [fail(.conflictingContentLength)]),
  .init(
    name: "differing Content-Length list", input: "HTTP/1.1 200 OK\r\nContent-Length: 2, 1\r\n\r\nab",
    expected: [fail(.conflictingContentLength)]),
  .init(
    name: "Content-Length values equal in number but not in digits",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 05\r\n\r\nhello",
    expected: [fail(.conflictingContentLength)]),
  .init(
    name: "differing Content-Length on a 304 too",
    input: "HTTP/1.1 304 Not Modified\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    expected: [fail(.conflictingContentLength)]),
  .init(
    name: "signed Content-Length", input: "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\na",
    expected: [fail(.invalidContentLength)]),
  .init(
    name: "negative Content-Length", input: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    expected: [fail(.invalidContentLength)]),
  .init(
    name: "hex Content-Length", input: "HTTP/1.1 200 OK\r\nContent-Length: 0x1\r\n\r\na",
    expected: [fail(.invalidContentLength)]),
  .init(
    name: "empty Content-Length", input: "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
    expected: [fail(.invalidContentLength)]),
  .init(
    name: "Content-Length with an empty list element",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 1,\r\n\r\na",
    expected: [fail(.invalidContentLength)]),
  .init(
    name: "Content-Length with a space inside", input: "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
    expected: [fail(.invalidContentLength)]),
  .init(
    name: "Content-Length past Int.max",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    expected: [fail(.invalidContentLength)]),
  .init(
    name: "Content-Length past Int.max, to HEAD too",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n",
    expected: [fail(.invalidContentLength)], method: .head),
  .init(
    name: "Content-Length at Int.max is too large a body",
    input: "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n",
    expected: [fail(.bodyTooLarge)]),
  .init(
    name: "Transfer-Encoding gzip alone", input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc",
    expected: [fail(.unsupportedTransferCoding)]),
  .init(
    name: "Transfer-Encoding gzip, chunked (not decoded here)",
    input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    expected: [fail(.unsupportedTransferCoding)]),
  .init(
    name: "chunked not final", input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    expected: [fail(.unsupportedTransferCoding)]),
  .init(
    name: "chunked twice across fields",
    input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    expected: [fail(.unsupportedTransferCoding)]),
  .init(
    name: "chunked with a parameter", input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;q=1\r\n\r\n",
    expected: [fail(.unsupportedTransferCoding)]),
  .init(
    name: "empty Transfer-Encoding", input: "HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n",
    expected: [fail(.unsupportedTransferCoding)]),
  .init(
    name: "Transfer-Encoding in HTTP/1.0",
    input: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    expected: [fail(.transferEncodingInHTTP10)]),
]
