/// A route pattern read exactly as `Edge.Router` reads one: `/`-separated segments, each a literal
/// (matched as written), a `:name` (any one non-empty segment), and an optional final `*` (one or
/// more segments, empty ones included). Used to tell whether two patterns can answer one path.
public struct PathPattern: Sendable, Equatable {
  /// One fixed segment.
  public enum Segment: Sendable, Equatable {
    /// Matches this text only.
    case literal(String)
    /// Matches any non-empty segment, bound to this name.
    case parameter(String)
  }

  /// The segments before any final `*`; the first is the empty one before the leading `/`.
  public let segments: [Segment]
  /// The pattern ends in `*`: the path goes on for at least one more segment, whatever it holds.
  public let rest: Bool

  /// The pattern `text` (`/api/client/v1/schools/:schoolId/students/*`). Like the router, a final
  /// `*` takes the place of the whole last segment (`/a/b*` is read as `/a/*`).
  public init(_ text: String) {
    rest = text.hasSuffix("*")
    var parts = (rest ? text.dropLast() : Substring(text)).split(
      separator: "/", omittingEmptySubsequences: false)
    if rest, !parts.isEmpty { parts.removeLast() }
    segments = parts.map { $0.hasPrefix(":") ? .parameter(String($0.dropFirst())) : .literal(String($0)) }
  }

  /// A request path both patterns match, or nil when no path matches both. Exact: the lengths
  /// must agree (a `*` stands for one or more segments) and, segment by segment, two literals must
  /// be equal and a literal meeting a parameter must not be empty; past the shorter pattern's fixed
  /// segments its `*` matches anything.
  public func commonPath(with other: PathPattern) -> String? {
    let (a, b) = (segments, other.segments)
    let length: Int
    switch (rest, other.rest) {
    case (false, false):
      guard a.count == b.count else { return nil }
      length = a.count
    case (true, false):
      guard b.count > a.count else { return nil }
      length = b.count
    case (false, true):
      guard a.count > b.count else { return nil }
      length = a.count
    case (true, true):
      length = max(a.count, b.count) + 1
    }
    var path: [String] = []
    for i in 0..<length {
      guard let segment = Self.meet(i < a.count ? a[i] : nil, i < b.count ? b[i] : nil) else { return nil }
      path.append(segment)
    }
    return path.joined(separator: "/")
  }

  /// A segment both match (nil: under a `*`), or nil when none does.
  private static func meet(_ x: Segment?, _ y: Segment?) -> String? {
    switch (x, y) {
    case (.literal(let p)?, .literal(let q)?): p == q ? p : nil
    case (.literal(let p)?, .parameter?), (.parameter?, .literal(let p)?): p.isEmpty ? nil : p
    case (.literal(let p)?, nil), (nil, .literal(let p)?): p
    case (.parameter?, _), (_, .parameter?): "1"
    case (nil, nil): "x"
    }
  }
}
