import Accounts

/// What binds a write's assertion to its one request (as DPoP binds a proof with `htm` and `htu`,
/// RFC 9449 §4.2).
public struct WriteRequest: Equatable, Sendable {
  /// `htm`: the method, as sent (`POST`).
  public var method: String
  /// `htp`: the path with its query, as forwarded (`/api/client/v1/schools/sch_…/students?x=1`).
  public var target: String
  /// `bh`: base64url (no padding) of the SHA-256 of the body forwarded (`bodyHash(_:)`).
  public var bodyHash: String
  /// `idk`: the request's `Idempotency-Key`.
  public var idempotencyKey: String
  /// `jti`: the request's ID, unique per request.
  public var requestID: String

  /// A binding with every member given.
  public init(method: String, target: String, bodyHash: String, idempotencyKey: String, requestID: String) {
    self.method = method
    self.target = target
    self.bodyHash = bodyHash
    self.idempotencyKey = idempotencyKey
    self.requestID = requestID
  }

  /// `bh` for `body`: base64url of its SHA-256, without padding (an empty body has one too).
  public static func bodyHash(_ body: [UInt8]) -> String { Secrets.base64url(Secrets.digest(bytes: body)) }
}
