import Deployment
import Edge

/// The client API's error answer: `{"error": code, "message": message}` in JSON, with any `extra`
/// members beside them (`minimumVersion` on a 426). The one place that shape is written: the
/// API's own refusals and, through the composition's error renderer, the engine's.
public enum APIError {
  /// A `status` answer whose body is the JSON error `code` (snake_case) with its `message`.
  public static func response(
    _ status: Status, _ code: String, _ message: String, extra: [String: JSONValue] = [:],
    headers: [(name: String, value: String)] = []
  ) -> Response {
    var members = extra
    members["error"] = .string(code)
    members["message"] = .string(message)
    return JSONBody.response(status, .object(members), headers: headers)
  }
}
