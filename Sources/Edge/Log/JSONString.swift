/// JSON strings (RFC 8259 §7): quotes, backslashes and control characters escaped, every other
/// byte of the UTF-8 text as it is. The one escaper of the code base: the logs, the engine and
/// the application's JSON values all write strings with it.
public enum JSONString {
  /// Appends `text` as a JSON string, between its quotes.
  public static func append(_ text: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    appendEscaped(text, to: &out)
    out.append(UInt8(ascii: "\""))
  }

  /// `text` escaped to stand inside a JSON string (without the quotes).
  public static func escaped(_ text: String) -> String {
    var out: [UInt8] = []
    appendEscaped(text, to: &out)
    return String(decoding: out, as: UTF8.self)
  }

  /// Appends `text` escaped, without quotes. Text with nothing to escape (nearly all of it) is
  /// copied in one piece.
  public static func appendEscaped(_ text: String, to out: inout [UInt8]) {
    var text = text
    text.withUTF8 { bytes in
      forEachPiece(of: bytes) { out.append(contentsOf: $0.assumingMemoryBound(to: UInt8.self)) }
    }
  }

  /// Writes `text` escaped, without quotes, within `out`'s bound (`escapedBound`).
  public static func put(escaped text: String, to out: inout BoundedWriter) {
    var text = text
    text.withUTF8 { bytes in forEachPiece(of: bytes) { out.put($0) } }
  }

  /// How many bytes `text` takes escaped: its own, one more for each quote, backslash, `\n`, `\r`
  /// and `\t`, five more for each other control character. Exact, so that room made for it is not
  /// six times a long path.
  public static func escapedBound(_ text: String) -> Int {
    var count = 0
    for byte in text.utf8 {
      count +=
        byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") ? 1 : escapedLength(byte)
    }
    return count
  }

  /// The length of `byte`'s escape (2 or 6), for one that needs escaping.
  private static func escapedLength(_ byte: UInt8) -> Int {
    switch byte {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): 2
    default: 6
    }
  }

  /// Calls `emit` with `bytes` escaped, in pieces: runs that need nothing as they are (all of
  /// `bytes` at once, usually), and each escape.
  private static func forEachPiece(
    of bytes: UnsafeBufferPointer<UInt8>, _ emit: (UnsafeRawBufferPointer) -> Void
  ) {
    func plain(_ byte: UInt8) -> Bool {
      byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }
    var runStart = 0
    for (i, byte) in bytes.enumerated() where !plain(byte) {
      if i > runStart { emit(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[runStart..<i]))) }
      runStart = i + 1
      var escape: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (UInt8(ascii: "\\"), byte, 0, 0, 0, 0)
      var length = 2
      switch byte {
      case UInt8(ascii: "\n"): escape.1 = UInt8(ascii: "n")
      case UInt8(ascii: "\r"): escape.1 = UInt8(ascii: "r")
      case UInt8(ascii: "\t"): escape.1 = UInt8(ascii: "t")
      case 0..<0x20:
        escape = (UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)])
        length = 6
      default: break  // a quote or a backslash: after its backslash as it is
      }
      withUnsafeBytes(of: &escape) { emit(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
    }
    if runStart < bytes.count {
      emit(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[runStart...])))
    }
  }

  private static let hex: [UInt8] = Array("0123456789abcdef".utf8)
}
