/// The body of a request an `InProcessClient` sends, with the `Content-Type` that says what it is.
public struct RequestBody: Sendable {
  /// The bytes sent.
  public var bytes: [UInt8]
  /// The `Content-Type` sent with them; nil: none.
  public var contentType: String?

  /// `bytes` of `contentType`.
  public init(_ bytes: [UInt8], contentType: String?) {
    self.bytes = bytes
    self.contentType = contentType
  }

  /// No body and no `Content-Type`.
  public static let empty = RequestBody([], contentType: nil)

  /// `text` as `application/json`.
  public static func json(_ text: String) -> RequestBody {
    RequestBody(Array(text.utf8), contentType: "application/json")
  }

  /// `fields` as a browser submits a form: `application/x-www-form-urlencoded`, serialized by
  /// `formEncoded`.
  public static func form(_ fields: [(String, String)]) -> RequestBody {
    RequestBody(Array(formEncoded(fields).utf8), contentType: "application/x-www-form-urlencoded")
  }

  /// `name=value` pairs joined by `&`, each name and value serialized by `formEncoded(_:)`.
  public static func formEncoded(_ fields: [(String, String)]) -> String {
    fields.map { formEncoded($0.0) + "=" + formEncoded($0.1) }.joined(separator: "&")
  }

  /// `text` as the application/x-www-form-urlencoded serializer writes it (WHATWG URL §5.2): its
  /// UTF-8 bytes, with ASCII letters, digits and `*-._` as they are, a space as `+` and every other
  /// byte as `%` and two upper-case hex digits.
  public static func formEncoded(_ text: String) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count)
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "*"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "_"):
        out.append(byte)
      case UInt8(ascii: " "):
        out.append(UInt8(ascii: "+"))
      default:
        out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
      }
    }
    return String(decoding: out, as: UTF8.self)
  }
}
