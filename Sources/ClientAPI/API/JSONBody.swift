import Accounts
import Deployment
import Edge

/// JSON responses of the client API.
enum JSONBody {
  static func response(_ status: Status, _ body: JSONValue, headers: [(name: String, value: String)] = [])
    -> Response
  {
    Response(
      status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers,
      body: .bytes(body.canonicalBytes))
  }

  /// `{"error": code, "message": message}` (`APIError`).
  static func error(
    _ status: Status, _ code: String, _ message: String, headers: [(name: String, value: String)] = []
  )
    -> Response
  {
    APIError.response(status, code, message, headers: headers)
  }

  /// `policy`'s own refusal (413) when `request`'s body is past its `maxBytes`. The dispatcher
  /// refuses such a body on its head or as it is read, except over HTTP/2 when a body of unknown
  /// length arrives in the same read as its head: the engine then limits only the DATA that comes
  /// later (a known issue in EdgeTests' `HTTP2ConnectionTests`). Until it does, a size-limited
  /// route's handler holds the limit here.
  static func pastLimit(_ request: Request, _ policy: BodyPolicy) -> Response? {
    guard let limit = policy.maxBytes, request.body.count > limit else { return nil }
    return policy.tooLarge
  }

  /// A request body read as JSON: its value (nil when it is not JSON, which each endpoint answers
  /// in its own words), or the 400 for an object naming a key twice (RFC 7493 §2.3).
  struct Parsed {
    let value: JSONValue?
    let refusal: Response?
  }

  /// `body` read as JSON (`Parsed`); `headers` go on the refusal.
  static func parse(_ body: [UInt8], headers: [(name: String, value: String)] = []) -> Parsed {
    do {
      return Parsed(value: try JSONValue.parse(body), refusal: nil)
    } catch .repeatedKey {
      return Parsed(
        value: nil,
        refusal: error(
          .badRequest, "invalid_request", "The body names a key more than once; send each key once.",
          headers: headers))
    } catch {
      return Parsed(value: nil, refusal: nil)
    }
  }
}
