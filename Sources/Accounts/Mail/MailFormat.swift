import Edge

#if canImport(Glibc)
  import Glibc
#endif

/// An outbox message as an Internet message (RFC 5322) with a MIME multipart/alternative body
/// (RFC 2046 §5.1.4): plain text first, simple HTML second, both UTF-8 in base64 lines of 76.
public enum MailFormat {
  /// The message's bytes, CRLF line ends. `from` is the configured sender; `date` epoch seconds.
  public static func message(_ entry: OutboxEntry, from: String, date: Int) -> [UInt8] {
    let boundary =
      "=_band_edge_"
      + String(
        entry.messageID.utf8.reduce(UInt64(14_695_981_039_346_656_037)) {
          ($0 ^ UInt64($1)) &* 1_099_511_628_211
        }, radix: 36)
    var lines = [
      "From: \(from)",
      "To: \(entry.to)",
      "Subject: \(encodedWord(entry.subject))",
      "Date: \(rfc5322Date(date))",
      "Message-ID: \(entry.messageID)",
      "MIME-Version: 1.0",
      "Auto-Submitted: auto-generated",
      "Content-Type: multipart/alternative; boundary=\"\(boundary)\"",
      "",
      "--\(boundary)",
      "Content-Type: text/plain; charset=utf-8",
      "Content-Transfer-Encoding: base64",
      "",
    ]
    lines += base64Lines(entry.text ?? "")
    lines += [
      "--\(boundary)", "Content-Type: text/html; charset=utf-8", "Content-Transfer-Encoding: base64", "",
    ]
    lines += base64Lines(entry.html ?? "")
    lines += ["--\(boundary)--", ""]
    return Array(lines.joined(separator: "\r\n").utf8)
  }

  /// `text` as a header value: plain printable ASCII as it is, anything else as RFC 2047 encoded
  /// words of at most 45 bytes of UTF-8 each (75 characters encoded, §2), folded onto lines of
  /// their own; control characters dropped.
  static func encodedWord(_ text: String) -> String {
    let clean = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F })
    if clean.utf8.allSatisfy({ $0 < 0x7F }) { return clean }
    var words: [String] = []
    var chunk: [UInt8] = []
    for character in clean {
      let bytes = Array(character.utf8)
      if chunk.count + bytes.count > 45, !chunk.isEmpty {
        words.append("=?UTF-8?B?" + base64(chunk) + "?=")
        chunk = []
      }
      chunk += bytes
    }
    if !chunk.isEmpty { words.append("=?UTF-8?B?" + base64(chunk) + "?=") }
    return words.joined(separator: "\r\n ")
  }

  /// Standard base64 with padding (RFC 4648 §4).
  static func base64(_ bytes: [UInt8]) -> String {
    var text = Secrets.base64url(bytes).map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 }
    while text.count % 4 != 0 { text.append("=") }
    return String(text)
  }

  /// `Tue, 01 Dec 2026 10:20:00 +0000` (RFC 5322 §3.3), in UTC: the HTTP date with the zone as
  /// an offset ("GMT" is only an obsolete zone there, §4.3).
  static func rfc5322Date(_ epochSeconds: Int) -> String {
    String(Civil.imfFixdate(epochSeconds).dropLast(3)) + "+0000"
  }

  static func base64Lines(_ text: String) -> [String] {
    let encoded = Array(base64(Array(text.utf8)))
    return stride(from: 0, to: encoded.count, by: 76).map {
      String(encoded[$0..<min($0 + 76, encoded.count)])
    }
  }
}
