import Edge

/// A client's `Idempotency-Key`: 1 to 255 visible ASCII characters, taken byte for byte (a quoted
/// structured-field string keeps its quotes). One rule for every endpoint that takes one, and for
/// the mutations the gateway forwards.
public struct IdempotencyKey: Sendable, Hashable, CustomStringConvertible {
  /// The longest key accepted, in bytes.
  public static let maxBytes = 255

  /// The key as sent.
  public let description: String

  /// The key in `text`, or nil when it is missing, empty, too long, or holds a byte that is not
  /// visible ASCII.
  public init?(_ text: String?) {
    guard let text, !text.isEmpty, text.utf8.count <= Self.maxBytes,
      text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
    else { return nil }
    description = text
  }

  /// The key of `request`: its one `Idempotency-Key` field (nil when absent, repeated or malformed).
  public init?(of request: Request) {
    let values = request.headers.values("idempotency-key")
    guard values.count == 1 else { return nil }
    self.init(values[0])
  }
}
