/// Why a request was refused while it was being parsed; each case knows its status.
public enum HTTPParseError: Error, Equatable, Sendable {
  case bareLineFeed
  case bareCarriageReturn
  case invalidRequestLine
  case invalidMethod
  case methodTooLong
  case invalidTarget
  case fragmentInTarget
  case invalidVersion
  case unsupportedVersion
  case targetTooLong
  case headerSectionTooLarge
  case tooManyHeaderFields
  case invalidFieldName
  case whitespaceBeforeColon
  case obsoleteLineFolding
  case invalidFieldValue
  case missingHost
  case duplicateHost
  case invalidHost
  case emptyHost
  case invalidContentLength
  case duplicateContentLength
  case contentLengthWithTransferEncoding
  case transferEncodingInHTTP10
  case chunkedNotFinal
  case unsupportedTransferCoding
  case invalidChunkSize
  case invalidChunkExtension
  case chunkExtensionTooLong
  case invalidChunkTerminator
  case bodyTooLarge
  case unsupportedExpectation

  /// The status the answer carries: 400 unless the RFC names another.
  public var status: Status {
    switch self {
    case .unsupportedVersion: .httpVersionNotSupported  // RFC 9110 §15.6.6
    case .methodTooLong: .notImplemented  // RFC 9112 §3
    case .targetTooLong: .uriTooLong  // RFC 9112 §3
    case .headerSectionTooLarge, .tooManyHeaderFields: .requestHeaderFieldsTooLarge  // RFC 6585 §5
    case .unsupportedTransferCoding: .notImplemented  // RFC 9112 §6.1
    case .bodyTooLarge: .contentTooLarge  // RFC 9110 §15.5.14
    case .unsupportedExpectation: .expectationFailed  // RFC 9110 §10.1.1
    default: .badRequest
    }
  }
}
