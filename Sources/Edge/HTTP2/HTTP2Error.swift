/// RFC 9113 §7's error codes, as RST_STREAM and GOAWAY carry them.
enum HTTP2Error: UInt32 {
  case noError = 0x0
  case protocolError = 0x1
  case internalError = 0x2
  case flowControlError = 0x3
  case settingsTimeout = 0x4
  case streamClosed = 0x5
  case frameSizeError = 0x6
  case refusedStream = 0x7
  case cancel = 0x8
  case compressionError = 0x9
  case connectError = 0xA
  case enhanceYourCalm = 0xB
  case inadequateSecurity = 0xC
  case http11Required = 0xD
}
