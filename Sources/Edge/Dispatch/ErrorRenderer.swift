/// An error the engine answers itself (404, 405, 413, 503, a parse error once the target is
/// known, ...): what its answer may be shaped from.
public struct EngineError: Sendable {
  public let status: Status
  /// The request's path, still percent-encoded; nil when it is not known (the request line did
  /// not parse).
  public let path: String?
  /// The request's `Accept` field, when it arrived.
  public let accept: String?
  /// The error's snake_case name (`not_found`, `payload_too_large`, `service_unavailable`, ...).
  public let code: String
  /// The plain-language sentence: what was wrong, never what was received.
  public let message: String
  /// Fields the answer carries whatever its shape (`Allow`, `Retry-After`).
  public let headers: [(name: String, value: String)]

  /// An error with `status` for a request whose `path` and `Accept` field are as given; `code`
  /// nil: the status's own (`ErrorRenderer.code(for:)`).
  init(
    _ status: Status, path: String?, accept: String?, code: String? = nil, _ message: String,
    headers: [(name: String, value: String)] = []
  ) {
    self.status = status
    self.path = path
    self.accept = accept
    self.code = code ?? ErrorRenderer.code(for: status)
    self.message = message
    self.headers = headers
  }

  /// The plain-text answer: the message and a line feed.
  public var plainText: Response { .text(status, message + "\n", headers: headers) }
}

/// The shape of every error the engine answers itself: the one place that turns an `EngineError`
/// into a response. The composition supplies it (JSON for an API, a page for browsers); the
/// engine's own is plain text.
public struct ErrorRenderer: Sendable {
  private let render: @Sendable (EngineError) -> Response

  /// A renderer that answers every engine error with `render`.
  public init(_ render: @escaping @Sendable (EngineError) -> Response) {
    self.render = render
  }

  /// The engine's default: the message as plain text.
  public static let plainText = ErrorRenderer { $0.plainText }

  /// The answer to an engine error for a request whose `path` (nil: unknown) and `Accept` field
  /// are as given.
  func refusal(
    _ status: Status, path: String?, accept: String?, code: String? = nil, _ message: String,
    headers: [(name: String, value: String)] = []
  ) -> Response {
    render(EngineError(status, path: path, accept: accept, code: code, message, headers: headers))
  }

  /// The answer to an engine error for a parsed request.
  func refusal(
    _ status: Status, _ request: Request, code: String? = nil, _ message: String,
    headers: [(name: String, value: String)] = []
  ) -> Response {
    refusal(
      status, path: request.path, accept: request.headers.combined("accept"), code: code, message,
      headers: headers)
  }

  /// The snake_case code of an engine error (`payload_too_large`, `service_unavailable`, ...).
  public static func code(for status: Status) -> String {
    switch status.code {
    case 413: "payload_too_large"
    default: String(status.reason.lowercased().map { $0 == " " || $0 == "-" ? "_" : $0 })
    }
  }

  /// Whether an `Accept` field asks for HTML: a `text/html` range whose weight is not zero
  /// (RFC 9110 §12.5.1).
  public static func acceptsHTML(_ accept: String?) -> Bool {
    guard let accept else { return false }
    for range in accept.split(separator: ",") {
      let parts = range.split(separator: ";").map { $0.filter { $0 != " " && $0 != "\t" }.lowercased() }
      guard parts.first == "text/html" else { continue }
      let weight = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
      if weight > 0 { return true }
    }
    return false
  }
}

extension Dispatcher {
  /// The plain-language sentence for each parse error: what was wrong, never what was received.
  static func message(for error: HTTPParseError) -> String {
    let detail: String =
      switch error {
      case .bareLineFeed: "a line ended in a bare LF; HTTP/1.1 lines end in CRLF"
      case .bareCarriageReturn: "a bare CR appeared outside a line ending"
      case .invalidRequestLine: "the request line is not 'METHOD target HTTP/1.1'"
      case .invalidMethod: "the method is not a valid token"
      case .methodTooLong: "the method is longer than any this server implements"
      case .invalidTarget: "the request target is not a valid path"
      case .fragmentInTarget: "the request target contains a fragment (#), which is never sent"
      case .invalidVersion: "the HTTP version is malformed"
      case .unsupportedVersion: "only HTTP/1.0 and HTTP/1.1 are served here"
      case .targetTooLong: "the request target is too long"
      case .headerSectionTooLarge: "the header fields are too large"
      case .tooManyHeaderFields: "there are too many header fields"
      case .invalidFieldName: "a header field name is invalid"
      case .whitespaceBeforeColon: "a header field name is followed by whitespace before its colon"
      case .obsoleteLineFolding: "a header field is folded over several lines"
      case .invalidFieldValue: "a header field value contains a control character"
      case .missingHost: "an HTTP/1.1 request needs a Host header field"
      case .duplicateHost: "the Host header field appears more than once"
      case .invalidHost: "the Host header field is invalid"
      case .emptyHost: "the Host header field is empty"
      case .invalidContentLength: "the Content-Length header field is invalid"
      case .duplicateContentLength: "the Content-Length header field appears more than once"
      case .contentLengthWithTransferEncoding: "Content-Length and Transfer-Encoding cannot both be sent"
      case .transferEncodingInHTTP10: "Transfer-Encoding is not allowed in an HTTP/1.0 request"
      case .chunkedNotFinal: "chunked must be the final transfer coding, applied once"
      case .unsupportedTransferCoding: "only the chunked transfer coding is supported"
      case .invalidChunkSize: "a chunk size is invalid"
      case .invalidChunkExtension: "a chunk extension is invalid"
      case .chunkExtensionTooLong: "a chunk extension is too long"
      case .invalidChunkTerminator: "chunk data is not followed by CRLF"
      case .bodyTooLarge: "the request body is too large"
      case .unsupportedExpectation: "only the 100-continue expectation is supported"
      }
    return "\(error.status.reason): \(detail)."
  }
}
