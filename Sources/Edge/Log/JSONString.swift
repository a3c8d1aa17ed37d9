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
      if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
        out.append(contentsOf: bytes)
        return
      }
      let hex = Array("0123456789abcdef".utf8)
      for byte in bytes {
        switch byte {
        case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
        case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
        case UInt8(ascii: "\n"): out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
        case UInt8(ascii: "\r"): out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
        case UInt8(ascii: "\t"): out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
        case 0..<0x20:
          out += [
            UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)],
          ]
        default: out.append(byte)
        }
      }
    }
  }
}
