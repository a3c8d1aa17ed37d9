/// What one response of a byte stream came to, in a form that compares across feeding strategies.
public enum ResponseOutcome: Equatable, Sendable, CustomStringConvertible {
  /// An interim (1xx) response with this status.
  case interim(Int)
  /// A final response, summarised by status, reason, version, fields, body and `close`.
  case response(String)
  /// A final response whose body the connection's close delimited (`finish`), summarised.
  case responseAtClose(String)
  /// The stream was refused with this error (by `parse`, or by `finish` at its end).
  case failure(ResponseParseError)

  public var description: String {
    switch self {
    case .interim(let status): "interim \(status)"
    case .response(let summary): summary
    case .responseAtClose(let summary): "\(summary) (at close)"
    case .failure(let error): "error \(error)"
    }
  }
}

extension HTTP1ResponseParser {
  /// Parses every response in `bytes`, each to a request of `method` (a new parser for each), and
  /// calls `finish` when the bytes end inside one: the connection closes after the last byte.
  ///
  /// The parser gets the first `firstCut` bytes (default: `step`, or all when `step` is 0), then
  /// `step` more at a time (0: all the rest). Stops at the first error. Traps when the parser
  /// breaks its contract (a `consumed` outside the buffer, a result past the limits). Tests use it
  /// to check that every way of feeding gives the same outcomes; the fuzzer uses it on arbitrary
  /// input.
  public static func outcomes(
    of bytes: [UInt8], method: HTTPMethod = .get, limits: ResponseLimits = ResponseLimits(), step: Int = 0,
    firstCut: Int? = nil
  ) -> [ResponseOutcome] {
    var parser = HTTP1ResponseParser(method: method, limits: limits)
    var outcomes: [ResponseOutcome] = []
    var start = 0
    var available = min(firstCut ?? (step == 0 ? bytes.count : step), bytes.count)
    while true {
      let atEnd = available == bytes.count
      let window = start..<available
      let result: Result<ResponseParseResult, ResponseParseError> = bytes.withUnsafeBytes { all in
        do throws(ResponseParseError) {
          return .success(try parser.parse(UnsafeRawBufferPointer(rebasing: all[window])))
        } catch {
          return .failure(error)
        }
      }
      switch result {
      case .failure(let error):
        outcomes.append(.failure(error))
        return outcomes
      case .success(.informational(let status, let consumed)):
        precondition(
          consumed > 0 && consumed <= window.count, "interim consumed \(consumed) of \(window.count)")
        precondition((100..<200).contains(status) && status != 101, "interim status \(status)")
        outcomes.append(.interim(status))
        start += consumed
      case .success(.complete(let response, let consumed)):
        precondition(consumed > 0 && consumed <= window.count, "consumed \(consumed) of \(window.count)")
        outcomes.append(.response(summary(response, limits)))
        start += consumed
        if start == bytes.count { return outcomes }
        parser = HTTP1ResponseParser(method: method, limits: limits)
      case .success(.needMore):
        guard atEnd else {
          available = step == 0 ? bytes.count : min(available + step, bytes.count)
          continue
        }
        let last: ResponseOutcome = bytes.withUnsafeBytes { all in
          do throws(ResponseParseError) {
            let response = try parser.finish(UnsafeRawBufferPointer(rebasing: all[window]))
            return .responseAtClose(summary(response, limits))
          } catch {
            return .failure(error)
          }
        }
        return outcomes + [last]
      }
    }
  }

  /// A response as one line, checked against the limits it was parsed under.
  static func summary(_ r: UpstreamResponse, _ limits: ResponseLimits) -> String {
    precondition((200...599).contains(r.status), "final status \(r.status)")
    precondition(r.body.count <= limits.maxBodyBytes, "body of \(r.body.count) bytes")
    precondition(r.fields.count <= limits.maxFieldCount, "\(r.fields.count) fields")
    let fields = r.fields.pairs.map { "\($0.name.lowercased())=\($0.value)" }.joined(separator: ",")
    let body = String(decoding: r.body, as: UTF8.self)
    return "\(r.status) \(r.reason) \(r.version == .http10 ? "1.0" : "1.1") [\(fields)] body=\(body)"
      + (r.keepAlive ? "" : " close")
  }
}

/// The fuzz entry for the response parser: for a GET and a HEAD, parses `input` whole, byte by
/// byte and in two halves, and two of its prefixes whole and byte by byte; traps if the ways of
/// feeding disagree, if a prefix's outcomes contradict the whole input's, or if the parser breaks
/// its contract (see `HTTP1ResponseParser.outcomes`).
public func fuzzHTTP1ResponseParser(_ input: UnsafeRawBufferPointer) {
  let bytes = Array(input)
  let limits = ResponseLimits(
    maxHeadBytes: 512, maxFieldCount: 16, maxBodyBytes: 512, maxChunkExtensionBytes: 16)
  for method in [HTTPMethod.get, .head] {
    func outcomes(_ bytes: [UInt8], step: Int = 0, firstCut: Int? = nil) -> [ResponseOutcome] {
      HTTP1ResponseParser.outcomes(of: bytes, method: method, limits: limits, step: step, firstCut: firstCut)
    }
    let whole = outcomes(bytes)
    precondition(
      whole == outcomes(bytes, step: 1) && whole == outcomes(bytes, firstCut: bytes.count / 2),
      "response parser outcome depends on how bytes arrive")
    for cut in [bytes.count / 3, 2 * bytes.count / 3] {
      let prefix = outcomes(Array(bytes[..<cut]))
      precondition(
        prefix == outcomes(Array(bytes[..<cut]), step: 1), "prefix outcome depends on how bytes arrive")
      precondition(agrees(prefix, with: whole), "a prefix contradicts the whole input")
    }
  }
}

/// Whether the outcomes of a prefix of some input fit those of the whole input: the same up to
/// the last, which may instead be the prefix's end (a truncation, or a body the close delimited).
private func agrees(_ prefix: [ResponseOutcome], with whole: [ResponseOutcome]) -> Bool {
  guard let last = prefix.last, prefix.count <= whole.count else { return false }
  guard prefix.dropLast() == whole.prefix(prefix.count - 1) else { return false }
  switch last {
  case .failure(.noResponse), .failure(.truncatedHead), .failure(.truncatedBody), .responseAtClose:
    return true
  default: return last == whole[prefix.count - 1]
  }
}
