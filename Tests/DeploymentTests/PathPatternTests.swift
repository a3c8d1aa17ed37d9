import Edge
import Testing

@testable import Deployment

struct PatternPair: CustomTestStringConvertible, Sendable {
  let a: String
  let b: String
  /// Whether some path matches both.
  let overlap: Bool
  var testDescription: String { "\(a) | \(b)" }
}

let patternPairs: [PatternPair] = [
  .init(a: "/x/:a", b: "/x/y", overlap: true),
  .init(a: "/x/:a", b: "/x/:b", overlap: true),
  .init(a: "/x/*", b: "/x/y/z", overlap: true),
  .init(a: "/x/*", b: "/x/", overlap: true),
  .init(a: "/x/*", b: "/x/:a/*", overlap: true),
  .init(a: "/*", b: "/api/client/v1/config", overlap: true),
  .init(a: "/x/:a/y", b: "/x/z/:b", overlap: true),
  .init(a: "/x/y*", b: "/x/z", overlap: true),
  .init(a: "/x/*", b: "/x", overlap: false),
  .init(a: "/x/:a", b: "/x/", overlap: false),
  .init(a: "/x/:a", b: "/x/:a/b", overlap: false),
  .init(a: "/x/y", b: "/x/z", overlap: false),
  .init(a: "/x/*", b: "/y/*", overlap: false),
  .init(a: "/x/:a/y", b: "/x/:a/z", overlap: false),
  .init(a: "/x/y/*", b: "/x/z/:a", overlap: false),
]

/// A table of one route at `pattern`.
func router(_ pattern: String) throws -> Router {
  try Router([Route(.get, pattern, cacheClass: .private, fixed: .text(.ok, "x"))])
}

func matches(_ router: Router, _ path: String) -> Bool {
  if case .found = router.match(.get, path) { return true }
  return false
}

@Suite("Path patterns, as the router reads them")
struct PathPatternTests {
  @Test(
    "overlap is found exactly, and the example path is one the router sends to both", arguments: patternPairs)
  func overlap(_ pair: PatternPair) throws {
    let (a, b) = (PathPattern(pair.a), PathPattern(pair.b))
    let example = a.commonPath(with: b)
    #expect((example != nil) == pair.overlap)
    #expect(b.commonPath(with: a) == example, "symmetric")
    if let example {
      #expect(matches(try router(pair.a), example), "\(pair.a) does not match \(example)")
      #expect(matches(try router(pair.b), example), "\(pair.b) does not match \(example)")
    }
  }

  @Test("a pattern overlaps itself")
  func itself() {
    for text in ["/x", "/x/:a", "/x/*", ForwardRoute.prefix + "students"] {
      #expect(PathPattern(text).commonPath(with: PathPattern(text)) != nil, "\(text)")
    }
  }
}
