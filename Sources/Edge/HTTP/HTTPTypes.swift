/// A request method token (RFC 9110 §9). Case-sensitive, compared by its bytes.
public struct HTTPMethod: Hashable, Sendable, CustomStringConvertible {
  /// The token as received.
  public let rawValue: String

  /// A method from its token; the caller has checked it is a token.
  public init(_ rawValue: String) { self.rawValue = rawValue }

  public static let get = HTTPMethod("GET")
  public static let head = HTTPMethod("HEAD")
  public static let post = HTTPMethod("POST")
  public static let put = HTTPMethod("PUT")
  public static let delete = HTTPMethod("DELETE")
  public static let patch = HTTPMethod("PATCH")
  public static let options = HTTPMethod("OPTIONS")
  public static let connect = HTTPMethod("CONNECT")
  public static let trace = HTTPMethod("TRACE")

  public var description: String { rawValue }
}

/// The protocol version of a request: 1.0, or 1.1 for any 1.x with x >= 1 (RFC 9110 §6.2).
public enum HTTPVersion: Sendable, Equatable {
  case http10
  case http11
}

/// A response status code with its reason phrase.
public struct Status: Hashable, Sendable {
  /// The three-digit code.
  public let code: Int
  /// The reason phrase written on the status line.
  public let reason: String

  /// A status from its code and reason phrase.
  public init(_ code: Int, _ reason: String) {
    self.code = code
    self.reason = reason
  }

  public static let `continue` = Status(100, "Continue")
  public static let ok = Status(200, "OK")
  public static let created = Status(201, "Created")
  public static let noContent = Status(204, "No Content")
  public static let partialContent = Status(206, "Partial Content")
  public static let movedPermanently = Status(301, "Moved Permanently")
  public static let seeOther = Status(303, "See Other")
  public static let notModified = Status(304, "Not Modified")
  public static let permanentRedirect = Status(308, "Permanent Redirect")
  public static let badRequest = Status(400, "Bad Request")
  public static let unauthorized = Status(401, "Unauthorized")
  public static let forbidden = Status(403, "Forbidden")
  public static let notFound = Status(404, "Not Found")
  public static let methodNotAllowed = Status(405, "Method Not Allowed")
  public static let notAcceptable = Status(406, "Not Acceptable")
  public static let requestTimeout = Status(408, "Request Timeout")
  public static let contentTooLarge = Status(413, "Content Too Large")
  public static let uriTooLong = Status(414, "URI Too Long")
  public static let unsupportedMediaType = Status(415, "Unsupported Media Type")
  public static let rangeNotSatisfiable = Status(416, "Range Not Satisfiable")
  public static let expectationFailed = Status(417, "Expectation Failed")
  public static let upgradeRequired = Status(426, "Upgrade Required")
  public static let tooManyRequests = Status(429, "Too Many Requests")
  public static let requestHeaderFieldsTooLarge = Status(431, "Request Header Fields Too Large")
  public static let internalServerError = Status(500, "Internal Server Error")
  public static let notImplemented = Status(501, "Not Implemented")
  public static let badGateway = Status(502, "Bad Gateway")
  public static let serviceUnavailable = Status(503, "Service Unavailable")
  public static let gatewayTimeout = Status(504, "Gateway Timeout")
  public static let httpVersionNotSupported = Status(505, "HTTP Version Not Supported")

  /// Whether a response with this status never has content (RFC 9110 §6.4.1).
  public var forbidsContent: Bool { code < 200 || code == 204 || code == 304 }
}
