extension HTTP1ResponseParser {
  /// Scans the status line (RFC 9112 §4: HTTP-version SP status-code SP [ reason-phrase ]) from
  /// `scanned` on, refusing it at the first byte that cannot belong to it. Returns the index of
  /// the line's CR once its CRLF is there.
  ///
  /// `HTTP/1.1 200` with no space and no reason is taken as an empty reason, as common clients
  /// take it; a CR or LF anywhere else ends nothing but the scan.
  mutating func scanStatusLine(_ buffer: UnsafeRawBufferPointer) throws(ResponseParseError) -> Int? {
    let count = buffer.count
    var i = reader.scanned
    defer { reader.scanned = i }
    while i < count {
      // Size first, then syntax: the same bytes fail the same way however they arrived.
      if i >= headRoom { throw .headTooLarge }
      let b = buffer[i]
      if b == ASCII.lf { throw .bareLineFeed }  // RFC 9112 §2.2: lines end in CRLF.
      if b == ASCII.cr && i >= 12 {
        guard i + 1 < count else { return nil }  // the next byte decides
        if i + 1 >= headRoom { throw .headTooLarge }
        guard buffer[i + 1] == ASCII.lf else { throw .bareCarriageReturn }
        return i
      }
      try statusLineByte(b, at: i)
      i += 1
    }
    return nil
  }

  /// Checks byte `b` at offset `k` of the status line (any byte but the line's CRLF).
  private mutating func statusLineByte(_ b: UInt8, at k: Int) throws(ResponseParseError) {
    switch k {
    case 0..<5:
      // RFC 9112 §2.3: HTTP-name is "HTTP", case-sensitive.
      let name: StaticString = "HTTP/"
      guard b == name.utf8Start[k] else { throw .invalidStatusLine }
    case 5:
      guard b &- 48 < 10 else { throw .invalidStatusLine }
      // RFC 9110 §6.2: only major version 1 is spoken here.
      guard b == UInt8(ascii: "1") else { throw .unsupportedVersion }
    case 6:
      guard b == UInt8(ascii: ".") else { throw .invalidStatusLine }
    case 7:
      guard b &- 48 < 10 else { throw .invalidStatusLine }
      version = b == UInt8(ascii: "0") ? .http10 : .http11
    case 8:
      guard b == ASCII.sp else { throw .invalidStatusLine }
    case 9, 10, 11:
      // RFC 9110 §15: status-code = 3DIGIT; 100...599 are the classes defined.
      let digit = b &- 48
      guard digit < 10, k != 9 || (1...5).contains(digit) else { throw .invalidStatusCode }
      status = status * 10 + Int(digit)
      // RFC 9110 §15.2.2: 101 switches protocols, and no upgrade is ever asked for.
      if k == 11 && status == 101 { throw .switchingProtocols }
    case 12:
      guard b == ASCII.sp else { throw .invalidStatusCode }
    default:
      // RFC 9112 §4: reason-phrase = 1*( HTAB / SP / VCHAR / obs-text ).
      guard ASCII.isFieldValue(b) else { throw .invalidReasonPhrase }
    }
  }
}
