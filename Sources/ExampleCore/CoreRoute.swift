/// The example core's routes, all under `/api/client/v1/schools/:schoolId/`, with the least role
/// each method needs (the rule `role` is checked against: a `read_only` member changes nothing).
public enum CoreRoute: String, Sendable, CaseIterable {
  /// `GET …/students`: the school's students.
  case students
  /// `GET …/attendance`: the marks recorded; `POST …/attendance`: records one.
  case attendance

  static let prefix = "/api/client/v1/schools/"

  /// The route and the `:schoolId` of `path`, or nil when it is not one of them.
  public static func match(_ path: String) -> (route: CoreRoute, school: String)? {
    guard path.hasPrefix(prefix) else { return nil }
    let rest = path.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
    guard rest.count == 2, !rest[0].isEmpty, let route = CoreRoute(rawValue: String(rest[1])) else {
      return nil
    }
    return (route, String(rest[0]))
  }

  /// The least role that may use `method` here, or nil when the route does not answer it.
  public func minimumRole(_ method: String) -> CoreRole? {
    switch (self, method) {
    case (_, "GET"), (_, "HEAD"): .readOnly
    case (.attendance, "POST"): .teacher
    default: nil
    }
  }

  /// The `Allow` field of a 405.
  public var allowed: String { self == .attendance ? "GET, HEAD, POST" : "GET, HEAD" }
}
