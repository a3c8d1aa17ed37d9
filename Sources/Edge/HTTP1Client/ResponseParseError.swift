/// Why an upstream response was refused while it was being parsed.
///
/// Every case means the same to the caller: the client gets 502 and the connection to the
/// upstream is closed, never reused (the bytes after the refusal cannot be trusted to start the
/// next response). The cases only tell the log what was wrong.
public enum ResponseParseError: Error, Equatable, Sendable, CaseIterable, CustomStringConvertible {
  /// A line ended in LF without CR.
  case bareLineFeed
  /// A CR not followed by LF.
  case bareCarriageReturn
  /// The status line is not `HTTP/1.x SP 3DIGIT [SP reason]`.
  case invalidStatusLine
  /// An HTTP version other than 1.x.
  case unsupportedVersion
  /// A status code that is not three digits within 100...599.
  case invalidStatusCode
  /// A control character in the reason phrase.
  case invalidReasonPhrase
  /// `101 Switching Protocols`: no upgrade is ever asked for.
  case switchingProtocols
  /// The head (with earlier interim responses and trailers) is larger than `maxHeadBytes`.
  case headTooLarge
  /// More field lines than `maxFieldCount`.
  case tooManyFields
  /// A field name that is empty or not a token, or a line without a colon.
  case invalidFieldName
  /// Whitespace between a field name and its colon.
  case whitespaceBeforeColon
  /// A field line that starts with whitespace (obs-fold).
  case obsoleteLineFolding
  /// A control character in a field value.
  case invalidFieldValue
  /// A Content-Length value that is not a list of digits, or too large to represent.
  case invalidContentLength
  /// Content-Length values that differ.
  case conflictingContentLength
  /// Both Transfer-Encoding and Content-Length.
  case contentLengthWithTransferEncoding
  /// Transfer-Encoding in an HTTP/1.0 response.
  case transferEncodingInHTTP10
  /// A transfer coding other than one `chunked` (nothing else is decoded).
  case unsupportedTransferCoding
  /// A chunk-size line that does not start with hex digits.
  case invalidChunkSize
  /// A malformed chunk extension.
  case invalidChunkExtension
  /// Chunk extensions longer than `maxChunkExtensionBytes`.
  case chunkExtensionTooLong
  /// Chunk data not followed by CRLF.
  case invalidChunkTerminator
  /// The body is (or says it will be) larger than `maxBodyBytes`.
  case bodyTooLarge
  /// The connection closed before any byte of a response.
  case noResponse
  /// The connection closed inside a head, or after interim responses only.
  case truncatedHead
  /// The connection closed before the end of a body framed by Content-Length or chunks.
  case truncatedBody

  public var description: String {
    switch self {
    case .bareLineFeed: "line ended in a bare LF"
    case .bareCarriageReturn: "bare CR"
    case .invalidStatusLine: "malformed status line"
    case .unsupportedVersion: "HTTP version other than 1.x"
    case .invalidStatusCode: "status code not within 100...599"
    case .invalidReasonPhrase: "control character in the reason phrase"
    case .switchingProtocols: "101 Switching Protocols"
    case .headTooLarge: "head too large"
    case .tooManyFields: "too many field lines"
    case .invalidFieldName: "malformed field name"
    case .whitespaceBeforeColon: "whitespace before a field's colon"
    case .obsoleteLineFolding: "obs-fold in the field section"
    case .invalidFieldValue: "control character in a field value"
    case .invalidContentLength: "malformed Content-Length"
    case .conflictingContentLength: "Content-Length values differ"
    case .contentLengthWithTransferEncoding: "both Content-Length and Transfer-Encoding"
    case .transferEncodingInHTTP10: "Transfer-Encoding in HTTP/1.0"
    case .unsupportedTransferCoding: "transfer coding other than chunked"
    case .invalidChunkSize: "malformed chunk size"
    case .invalidChunkExtension: "malformed chunk extension"
    case .chunkExtensionTooLong: "chunk extension too long"
    case .invalidChunkTerminator: "chunk data not followed by CRLF"
    case .bodyTooLarge: "body too large"
    case .noResponse: "connection closed before a response"
    case .truncatedHead: "connection closed inside the head"
    case .truncatedBody: "connection closed inside the body"
    }
  }

  /// The same refusal of a field line or chunk extension, from the syntax shared with the request
  /// parser.
  init(_ error: HTTPParseError) {
    switch error {
    case .bareLineFeed: self = .bareLineFeed
    case .bareCarriageReturn: self = .bareCarriageReturn
    case .obsoleteLineFolding: self = .obsoleteLineFolding
    case .whitespaceBeforeColon: self = .whitespaceBeforeColon
    case .invalidFieldName: self = .invalidFieldName
    case .invalidChunkExtension: self = .invalidChunkExtension
    default: self = .invalidFieldValue
    }
  }
}

extension ResponseParseError: HTTP1FramingError {}
