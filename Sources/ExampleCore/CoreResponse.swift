import Deployment
import Edge

/// One answer of the example core: a status and a JSON body, never cached.
public struct CoreResponse: Equatable, Sendable {
  /// The status.
  public var status: Status
  /// The JSON body (sent for every method but HEAD, whose length it still gives).
  public var body: [UInt8]
  /// Fields beyond the fixed ones (`Allow`, `Idempotent-Replayed`).
  public var fields: [String: String] = [:]
  /// What the log says of it beyond the status (the refusal's reason); never sent.
  public var note: String? = nil

  /// `value` as JSON with `status`.
  public static func json(_ status: Status, _ value: JSONValue) -> CoreResponse {
    CoreResponse(status: status, body: value.canonicalBytes)
  }

  /// The error shape `{"error","message"}` with `status`.
  public static func error(_ status: Status, _ code: String, _ message: String) -> CoreResponse {
    json(status, .object(["error": .string(code), "message": .string(message)]))
  }

  /// The refusal of an assertion: 401, its check and its message, logged with both.
  public static func refused(_ refusal: AssertionRefusal) -> CoreResponse {
    var response = error(.unauthorized, refusal.code, refusal.message)
    response.note = refusal.description
    return response
  }

  /// The bytes on the wire: status line, fields (`Connection: close` unless `keepAlive`), body
  /// unless `head`.
  public func serialized(head: Bool = false, keepAlive: Bool) -> [UInt8] {
    var text = "HTTP/1.1 \(status.code) \(status.reason)\r\n"
    text += "Content-Type: application/json\r\nCache-Control: no-store\r\n"
    text += "Content-Length: \(body.count)\r\n"
    for (name, value) in fields.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
    if !keepAlive { text += "Connection: close\r\n" }
    text += "\r\n"
    return Array(text.utf8) + (head ? [] : body)
  }
}
