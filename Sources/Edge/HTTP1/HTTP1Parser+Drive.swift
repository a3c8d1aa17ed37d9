/// What one request of a byte stream came to, in a form that compares across feeding strategies.
public enum ParseOutcome: Equatable, Sendable, CustomStringConvertible {
  /// A request, summarised by its method, target, version, fields, body and trailers.
  case request(String)
  /// The stream was refused with this error.
  case failure(HTTPParseError)
  /// The stream ended inside a request.
  case incomplete

  public var description: String {
    switch self {
    case .request(let summary): summary
    case .failure(let error): "error \(error) (\(error.status.code))"
    case .incomplete: "incomplete"
    }
  }
}

extension HTTP1Parser {
  /// Parses every request in `bytes`, feeding the parser `step` bytes at a time (0: all at once).
  ///
  /// Stops at the first error. Tests use it to check that whole, byte-by-byte and concatenated
  /// input give the same outcomes; the fuzzer uses it to check the same on arbitrary input.
  public static func outcomes(of bytes: [UInt8], step: Int = 0, limits: Limits = Limits()) -> [ParseOutcome] {
    var parser = HTTP1Parser(limits: limits)
    var outcomes: [ParseOutcome] = []
    var start = 0
    var available = step == 0 ? bytes.count : min(step, bytes.count)
    while true {
      let result: Result<ParseResult, HTTPParseError> = bytes.withUnsafeBytes { all in
        let window = UnsafeRawBufferPointer(rebasing: all[start..<available])
        do throws(HTTPParseError) { return .success(try parser.parse(window)) } catch {
          return .failure(error)
        }
      }
      switch result {
      case .failure(let error):
        outcomes.append(.failure(error))
        return outcomes
      case .success(.continueExpected):
        continue
      case .success(.complete(let request, let consumed)):
        outcomes.append(.request(summary(request)))
        start += consumed
        if start == bytes.count { return outcomes }
      case .success(.needMore):
        if available == bytes.count {
          outcomes.append(.incomplete)
          return outcomes
        }
        available = step == 0 ? bytes.count : min(available + step, bytes.count)
      }
    }
  }

  static func summary(_ r: Request) -> String {
    let fields = r.headers.pairs.map { "\($0.name.lowercased())=\($0.value)" }.joined(separator: ",")
    let trailers = r.trailers.pairs.map { "\($0.name.lowercased())=\($0.value)" }.joined(separator: ",")
    let body = String(decoding: r.body, as: UTF8.self)
    return "\(r.method) \(r.target) \(r.version == .http10 ? "1.0" : "1.1") [\(fields)] body=\(body)"
      + (trailers.isEmpty ? "" : " trailers=[\(trailers)]") + (r.keepAlive ? "" : " close")
      + (r.expectsContinue ? " expect-continue" : "")
  }
}

/// The fuzz entry: parses `input` whole, byte by byte and in two halves, and traps if they disagree.
public func fuzzHTTP1Parser(_ input: UnsafeRawBufferPointer) {
  let bytes = Array(input)
  var limits = Limits()
  limits.maxTargetBytes = 256
  limits.maxHeaderBytes = 512
  limits.maxHeaderCount = 16
  limits.maxBodyBytes = 512
  limits.maxChunkExtensionBytes = 16
  let whole = HTTP1Parser.outcomes(of: bytes, limits: limits)
  let byByte = HTTP1Parser.outcomes(of: bytes, step: 1, limits: limits)
  let halves = HTTP1Parser.outcomes(of: bytes, step: max(1, (bytes.count + 1) / 2), limits: limits)
  precondition(whole == byByte && whole == halves, "parser outcome depends on how bytes arrive")
}
