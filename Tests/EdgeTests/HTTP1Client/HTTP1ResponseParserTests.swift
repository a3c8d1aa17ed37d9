import Testing

@testable import Edge

/// The points where a case's input is split in two: every one for short inputs, a spread of about
/// 300 (and the last two) for long ones.
private func splitPoints(_ count: Int) -> [Int] {
  guard count > 600 else { return Array(0...count) }
  return Array(stride(from: 0, through: count, by: count / 300)) + [count - 1, count]
}

/// The response that follows each case on the same connection, and its outcome.
private func second(_ method: HTTPMethod) -> (input: String, outcome: ResponseOutcome) {
  method == .head
    ? ("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n", .response("200 OK 1.1 [content-length=6] body="))
    : (
      "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond",
      .response("200 OK 1.1 [content-length=6] body=second")
    )
}

@Suite("HTTP/1.1 response parser")
struct HTTP1ResponseParserTests {
  @Test("whole input", arguments: responseCases)
  func whole(_ c: ResponseCase) {
    #expect(
      HTTP1ResponseParser.outcomes(of: Array(c.input.utf8), method: c.method, limits: c.limits) == c.expected)
  }

  @Test("one byte at a time", arguments: responseCases)
  func byteByByte(_ c: ResponseCase) {
    let outcomes = HTTP1ResponseParser.outcomes(
      of: Array(c.input.utf8), method: c.method, limits: c.limits, step: 1)
    #expect(outcomes == c.expected)
  }

  @Test("split in two", arguments: responseCases)
  func halves(_ c: ResponseCase) {
    let bytes = Array(c.input.utf8)
    for cut in splitPoints(bytes.count) {
      let outcomes = HTTP1ResponseParser.outcomes(
        of: bytes, method: c.method, limits: c.limits, firstCut: cut)
      #expect(outcomes == c.expected, "split at \(cut)")
    }
  }

  @Test("followed by a second response", arguments: responseCases)
  func followed(_ c: ResponseCase) {
    var expected = c.expected
    switch expected.last {
    // The second response would become part of the first (its body, or the rest of its head).
    case .responseAtClose?, .failure(.noResponse)?, .failure(.truncatedHead)?, .failure(.truncatedBody)?:
      return
    case .response?: expected.append(second(c.method).outcome)
    default: break
    }
    let bytes = Array((c.input + second(c.method).input).utf8)
    #expect(HTTP1ResponseParser.outcomes(of: bytes, method: c.method, limits: c.limits) == expected)
    #expect(HTTP1ResponseParser.outcomes(of: bytes, method: c.method, limits: c.limits, step: 1) == expected)
    let boundary = c.input.utf8.count
    for cut in [boundary - 1, boundary, boundary + 1] where cut >= 0 {
      let outcomes = HTTP1ResponseParser.outcomes(
        of: bytes, method: c.method, limits: c.limits, firstCut: cut)
      #expect(outcomes == expected, "split at \(cut)")
    }
  }

  @Test("the fuzz entry accepts every case")
  func fuzzEntry() {
    for c in responseCases { Array(c.input.utf8).withUnsafeBytes { fuzzHTTP1ResponseParser($0) } }
  }

  @Test("an interim response, then the final one from the rest of the bytes")
  func interimThenFinal() throws {
    var parser = HTTP1ResponseParser(method: .post)
    let bytes = Array(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nX-Id: 7\r\nContent-Length: 2\r\n\r\nokHTTP".utf8)
    let first = try bytes.withUnsafeBytes { try parser.parse($0) }
    guard case .informational(let status, let consumed) = first else {
      Issue.record("expected an interim response, got \(first)")
      return
    }
    #expect(status == 100 && consumed == 25)
    let rest = Array(bytes[consumed...])
    let second = try rest.withUnsafeBytes { try parser.parse($0) }
    guard case .complete(let response, let used) = second else {
      Issue.record("expected a response, got \(second)")
      return
    }
    #expect(used == rest.count - 4)
    #expect(response.status == 201 && response.reason == "Created" && response.version == .http11)
    #expect(response.fields["x-id"] == "7" && response.fields.count == 2)
    #expect(response.body == Array("ok".utf8) && response.keepAlive)
  }

  @Test("finish completes a body delimited by the close, and only that")
  func finish() throws {
    var parser = HTTP1ResponseParser(method: .get)
    let bytes = Array("HTTP/1.1 200 OK\r\n\r\nabc".utf8)
    let result = try bytes.withUnsafeBytes { try parser.parse($0) }
    guard case .needMore = result else {
      Issue.record("expected needMore, got \(result)")
      return
    }
    let more = bytes + Array("def".utf8)
    let response = try more.withUnsafeBytes { try parser.finish($0) }
    #expect(response.body == Array("abcdef".utf8) && !response.keepAlive)

    var fixed = HTTP1ResponseParser(method: .get)
    let cut = Array("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabc".utf8)
    #expect(throws: ResponseParseError.truncatedBody) { try cut.withUnsafeBytes { try fixed.finish($0) } }
  }

  @Test("the defaults")
  func defaults() {
    let limits = ResponseLimits()
    #expect(limits.maxHeadBytes == 16384 && limits.maxFieldCount == 100)
    #expect(limits.maxBodyBytes == 8 << 20 && limits.maxChunkExtensionBytes == 256)
  }

  @Test("every error says what was wrong, each in its own words")
  func descriptions() {
    let all = ResponseParseError.allCases.map(\.description)
    #expect(Set(all).count == all.count && !all.contains(""))
  }
}
