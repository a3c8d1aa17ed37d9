import Testing

@testable import Edge

/// Which ALPN protocol is chosen from a client's list (RFC 7301 §3.1).
@Suite("TLS")
struct TLSContextTests {
  static func wire(_ names: [String]) -> [UInt8] {
    names.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
  }

  @Test(
    "ALPN picks http/1.1, else http/1.0; nothing when the client offers neither",
    arguments: [
      (["h2", "http/1.1"], "http/1.1"), (["http/1.0", "http/1.1"], "http/1.1"), (["http/1.0"], "http/1.0"),
      (["h3"], nil), (["h2"], nil), (["http/1.11"], nil), ([], nil),
    ] as [([String], String?)])
  func select(offered: [String], expected: String?) {
    let list = Self.wire(offered)
    let picked = list.withUnsafeBufferPointer { buffer in
      TLSContext.selectProtocol(buffer).map { String(decoding: buffer[$0.0..<($0.0 + $0.1)], as: UTF8.self) }
    }
    #expect(picked == expected)
  }

  @Test(
    "with HTTP/2 on, ALPN picks h2 first, then http/1.1 and http/1.0",
    arguments: [
      (["http/1.1", "h2"], "h2"), (["h2"], "h2"), (["http/1.1"], "http/1.1"), (["h2c"], nil),
      (["h3", "http/1.0"], "http/1.0"),
    ] as [([String], String?)])
  func selectWithHTTP2(offered: [String], expected: String?) {
    let list = Self.wire(offered)
    let picked = list.withUnsafeBufferPointer { buffer in
      TLSContext.selectProtocol(buffer, http2: true).map {
        String(decoding: buffer[$0.0..<($0.0 + $0.1)], as: UTF8.self)
      }
    }
    #expect(picked == expected)
  }

  @Test("a malformed ALPN list selects nothing")
  func malformed() {
    let list: [UInt8] = [8] + Array("http/1".utf8)
    #expect(list.withUnsafeBufferPointer { TLSContext.selectProtocol($0) } == nil)
  }

  @Test(
    "plain HTTP on a TLS port is answered 400 in the clear, without HSTS, then closed; JSON under /api/",
    arguments: [
      ("", false),
      ("G", false),
      ("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n", false),
      ("GET /healthz HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\n\r\n", false),
      ("GET /ap", false),
      ("GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n", true),
      ("GET /api/x HTTP/1.1\r\n", true),
      ("POST /api/client/v1/session HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab", true),
      ("GET /api/x HTTP/1.1\r\nHost:\r\n\r\n", true),
    ])
  func plainHTTP(received: String, json: Bool) {
    var h = Harness(secure: true)
    Array(received.utf8).withUnsafeBytes { h.machine.refusePlainHTTP($0, context: &h.context) }
    let (out, step) = h.drainOutput()
    #expect(out.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
    let message = "Bad Request: plain HTTP was sent to the HTTPS port; use https://."
    if json {
      #expect(out.contains("Content-Type: application/json; charset=utf-8\r\n"), "\(out)")
      #expect(out.hasSuffix("\r\n\r\n{\"error\":\"bad_request\",\"message\":\"\(message)\"}"), "\(out)")
    } else {
      #expect(out.contains("Content-Type: text/plain; charset=utf-8\r\n"), "\(out)")
      #expect(out.hasSuffix("\r\n\r\n\(message)\n"), "\(out)")
    }
    #expect(out.contains("Connection: close\r\n") && !out.contains("Strict-Transport-Security"))
    #expect(step.close == .shutdownWrite)
  }
}
