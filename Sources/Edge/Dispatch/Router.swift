#if canImport(Glibc)
  import Glibc
#endif

/// One route: method and path pattern to a handler, with the cache class and execution mode
/// every route must declare.
///
/// Patterns are literal segments, `:name` segments that bind one segment, and an optional final
/// `*` that binds the rest of the path (as parameter `*`).
///
/// A class: the dispatcher's decision, the HTTP/1 machine and the pool pass a route along on every
/// request, and a reference is one retain where a struct of this size was a dozen.
public final class Route: Sendable {
  /// What answers the request.
  public enum Handler: Sendable {
    /// Computed per request.
    case dynamic(@Sendable (Request) -> Response)
    /// Built once at load; served as ready bytes.
    case fixed(PrebuiltResponse)
    /// Chosen from the head's fields alone, on the loop, without a `Request` (a static file's
    /// negotiation, preconditions and ranges); pure: no clock, no I/O, no state.
    case head(@Sendable (any HeadFields) -> HeadAnswer)
  }

  public let method: HTTPMethod
  public let pattern: String
  public let cacheClass: CacheClass
  public let execution: Execution
  public let handler: Handler
  /// For a pooled or background route: an answer the loop may give without blocking (a cache hit,
  /// a rate-limit refusal), or nil to hand the request to its pool as usual.
  public let fastPath: (@Sendable (Request) -> Response?)?
  /// For a pooled route: how the pool may answer several of its requests at once (`handler`
  /// still answers one alone, as in-process callers use it).
  public let batch: RequestBatch?
  /// How it takes a body: judged on the head, before any of it is read (413, 415).
  public let body: BodyPolicy
  /// Its name in metrics (the `route` label): its pattern, or a name shared by a family of
  /// routes (every file of a static catalog under one name), never anything taken from a request.
  public let name: String
  /// `name`'s index in `RouteNames`.
  public let metricIndex: RouteIndex

  /// A route computed per request; a pooled one may have a non-blocking `fastPath` and a `batch`.
  public init(
    _ method: HTTPMethod, _ pattern: String, cacheClass: CacheClass, execution: Execution = .inline,
    body: BodyPolicy = .listenerLimit, fastPath: (@Sendable (Request) -> Response?)? = nil,
    batch: RequestBatch? = nil, name: String? = nil, handler: @escaping @Sendable (Request) -> Response
  ) {
    self.name = name ?? pattern
    metricIndex = RouteNames.index(name ?? pattern)
    self.method = method
    self.pattern = pattern
    self.cacheClass = cacheClass
    self.execution = execution
    self.body = body
    self.fastPath = execution == .inline ? nil : fastPath
    self.batch = execution == .pooled ? batch : nil
    self.handler = .dynamic(handler)
  }

  /// A route that always answers with `response`, prebuilt now with the route's cache class.
  public convenience init(
    _ method: HTTPMethod, _ pattern: String, cacheClass: CacheClass, name: String? = nil,
    fixed response: Response
  ) {
    self.init(
      method, pattern, cacheClass: cacheClass, name: name,
      kind: .fixed(PrebuiltResponse(response, cacheClass: cacheClass)))
  }

  /// A route whose answer its head's fields decide (`Handler.head`), on the loop. (A factory, not an
  /// initialiser: a trailing closure must never be taken for this kind of handler by accident.)
  public static func head(
    _ method: HTTPMethod, _ pattern: String, cacheClass: CacheClass, name: String? = nil,
    answer: @escaping @Sendable (any HeadFields) -> HeadAnswer
  ) -> Route {
    Route(method, pattern, cacheClass: cacheClass, name: name, kind: .head(answer))
  }

  /// An inline route that reads no body, answered by `kind`.
  private init(_ method: HTTPMethod, _ pattern: String, cacheClass: CacheClass, name: String?, kind: Handler)
  {
    self.name = name ?? pattern
    metricIndex = RouteNames.index(name ?? pattern)
    self.method = method
    self.pattern = pattern
    self.cacheClass = cacheClass
    self.execution = .inline
    self.body = .listenerLimit
    self.fastPath = nil
    self.batch = nil
    self.handler = kind
  }

  /// Answers `request` on the calling thread.
  public func respond(to request: Request) -> Response {
    switch handler {
    case .dynamic(let body): body(request)
    case .fixed(let prebuilt): prebuilt.response
    case .head(let answer): answer(RequestFields(fields: request.headers)).response
    }
  }
}

/// What a head route (`Route.head`) answers: most often one of the responses it built at load,
/// passed on as that one reference to the writer (no `Response` is made of it), else a response
/// made for this request.
public enum HeadAnswer: Sendable {
  case prebuilt(PrebuiltResponse)
  case made(Response)

  /// The answer as a `Response` (for in-process callers and tests).
  public var response: Response {
    switch self {
    case .prebuilt(let prebuilt): prebuilt.response
    case .made(let response): response
    }
  }
}

/// Why a route table was refused at start.
public enum RouterError: Error, Equatable, CustomStringConvertible {
  /// The route's pattern is under one of the table's private prefixes but its class is not private.
  case notPrivate(String, prefix: String)
  case duplicateRoute(String)
  case invalidPattern(String)

  public var description: String {
    switch self {
    case .notPrivate(let p, let prefix): "route \(p) is under \(prefix) and must use cache class private"
    case .duplicateRoute(let p): "route \(p) is declared twice"
    case .invalidPattern(let p): "route pattern \(p) must start with / and may end in a lone *"
    }
  }
}

/// The values a route pattern bound (`:name` segments, and `*` for a trailing wildcard), in the
/// path's order. A route binds one or two: a list searched by name costs less than a dictionary's
/// hashing on every request.
public struct RouteParameters: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
  public typealias Element = (key: String, value: String)
  private var pairs: [Element] = []

  public init() {}

  public init(dictionaryLiteral elements: (String, String)...) {
    for (key, value) in elements { self[key] = value }
  }

  /// The value bound to `name`, or nil; setting replaces a value bound before.
  public subscript(name: String) -> String? {
    get { pairs.first { $0.key == name }?.value }
    set {
      let index = pairs.firstIndex { $0.key == name }
      switch (index, newValue) {
      case (let i?, let value?): pairs[i].value = value
      case (let i?, nil): pairs.remove(at: i)
      case (nil, let value?): pairs.append((name, value))
      case (nil, nil): break
      }
    }
  }

  public var isEmpty: Bool { pairs.isEmpty }

  public func makeIterator() -> IndexingIterator<[Element]> { pairs.makeIterator() }

  /// Equal when the same names are bound to the same values, in any order (as a dictionary).
  public static func == (a: Self, b: Self) -> Bool {
    a.pairs.count == b.pairs.count && a.pairs.allSatisfy { b[$0.key] == $0.value }
  }
}

/// What the router found for a method and a path.
public enum RouteMatch: Sendable {
  /// A route; `headOnly` when a HEAD request is answered by the GET route.
  case found(Route, parameters: RouteParameters, headOnly: Bool)
  /// The path exists but not for this method; `allow` lists the methods that do.
  case methodNotAllowed(allow: String)
  /// Nothing here.
  case notFound
}

/// The route table: exact paths by dictionary, patterns in declaration order.
public struct Router: Sendable {
  fileprivate struct PathEntry: Sendable {
    var routes: [Route] = []
    var allow = ""
  }

  private struct PatternEntry: Sendable {
    let segments: [Substring]
    let wildcard: Bool
    var entry: PathEntry
    /// Each segment's bytes, nil for a parameter (`:name`); what a path is matched against.
    let literals: [[UInt8]?]
    /// Each parameter's name (without the colon), nil for a literal segment.
    let names: [String?]

    init(segments: [Substring], wildcard: Bool, entry: PathEntry) {
      self.segments = segments
      self.wildcard = wildcard
      self.entry = entry
      literals = segments.map { $0.utf8.first == UInt8(ascii: ":") ? nil : Array($0.utf8) }
      names = segments.map { $0.utf8.first == UInt8(ascii: ":") ? String($0.dropFirst()) : nil }
    }
  }

  /// What matching a path against one pattern reads: a class, so that trying a pattern costs one
  /// reference, not a copy (a retain and a release) of each of its arrays.
  private final class Matcher: Sendable {
    let literals: [[UInt8]?]
    let names: [String?]
    let wildcard: Bool
    let entry: PathEntry

    init(_ pattern: PatternEntry) {
      literals = pattern.literals
      names = pattern.names
      wildcard = pattern.wildcard
      entry = pattern.entry
    }
  }

  /// Exact paths (no parameter, no wildcard), found by their bytes.
  private let exact: ExactPaths
  /// The patterns that can match a path of `n` segments (`candidates[n]`, in declaration order):
  /// those of exactly `n` and wildcards of fewer; the last entry serves every longer path too.
  /// Only these are tried, so a path is compared with a few patterns, not every one.
  private let candidates: [[Matcher]]
  /// Every route, in declaration order (for listing and for tests that walk the table).
  public let routes: [Route]
  /// The shape of the errors the engine answers on this table's listener (404, 405, 413, ...).
  public let errors: ErrorRenderer
  /// Every method some route serves, with HEAD where GET is served, and OPTIONS (for `OPTIONS *`).
  public let methods: Set<HTTPMethod>
  /// `methods` as an `Allow` value, for `OPTIONS *`.
  public let allowAll: String

  /// A router over `routes`, its errors shaped by `errors`; refuses routes under any of
  /// `privatePrefixes` (the composition's: paths about a person, whatever their route) that are
  /// not `private`, duplicates and bad patterns.
  public init(
    _ routes: [Route], privatePrefixes: [String] = [], errors: ErrorRenderer = .plainText
  ) throws(RouterError) {
    self.routes = routes
    self.errors = errors
    var methods = Set(routes.map(\.method))
    if methods.contains(.get) { methods.insert(.head) }
    methods.insert(.options)
    self.methods = methods
    allowAll = methods.map(\.rawValue).sorted().joined(separator: ", ")
    var patterns: [PatternEntry] = []
    var exact: [String: PathEntry] = [:]
    for route in routes {
      let p = route.pattern
      guard p.hasPrefix("/"), !p.dropLast().contains("*") else { throw .invalidPattern(p) }
      if route.cacheClass != .private, let prefix = privatePrefixes.first(where: p.hasPrefix) {
        throw .notPrivate(p, prefix: prefix)
      }
      if !p.contains(":") && !p.hasSuffix("*") {
        var entry = exact[p] ?? PathEntry()
        guard !entry.routes.contains(where: { $0.method == route.method }) else { throw .duplicateRoute(p) }
        entry.routes.append(route)
        exact[p] = entry
        continue
      }
      let wildcard = p.hasSuffix("*")
      let segments = (wildcard ? p.dropLast() : Substring(p)).split(
        separator: "/", omittingEmptySubsequences: false)
      if let i = patterns.firstIndex(where: { $0.segments == segments && $0.wildcard == wildcard }) {
        guard !patterns[i].entry.routes.contains(where: { $0.method == route.method }) else {
          throw .duplicateRoute(p)
        }
        patterns[i].entry.routes.append(route)
      } else {
        patterns.append(
          PatternEntry(segments: segments, wildcard: wildcard, entry: PathEntry(routes: [route])))
      }
    }
    for key in exact.keys { exact[key]!.allow = Self.allow(exact[key]!.routes) }
    self.exact = ExactPaths(exact)
    for i in patterns.indices { patterns[i].entry.allow = Self.allow(patterns[i].entry.routes) }
    let matchers = patterns.map(Matcher.init)
    let longest = matchers.map(\.literals.count).max() ?? 0
    candidates = (0...longest + 1).map { n in
      matchers.filter { $0.wildcard ? n >= $0.literals.count : n == $0.literals.count }
    }
  }

  private static func allow(_ routes: [Route]) -> String {
    var methods = routes.map(\.method.rawValue)
    if methods.contains("GET") && !methods.contains("HEAD") { methods.append("HEAD") }
    return methods.sorted().joined(separator: ", ")
  }

  /// The methods of the IANA HTTP Method Registry (RFC 9110 §16.1: RFC 9110's own, PATCH, WebDAV's
  /// and the rest), and QUERY (draft-ietf-httpbis-safe-method-w-body). A path that does not serve
  /// one of them answers 405 with `Allow`; any other token is not a method this server knows.
  public static let registeredMethods: Set<HTTPMethod> = Set(
    [
      "ACL", "BASELINE-CONTROL", "BIND", "CHECKIN", "CHECKOUT", "CONNECT", "COPY", "DELETE", "GET", "HEAD",
      "LABEL", "LINK", "LOCK", "MERGE", "MKACTIVITY", "MKCALENDAR", "MKCOL", "MKREDIRECTREF", "MKWORKSPACE",
      "MOVE", "OPTIONS", "ORDERPATCH", "PATCH", "POST", "PRI", "PROPFIND", "PROPPATCH", "PUT", "QUERY",
      "REBIND", "REPORT", "SEARCH", "TRACE", "UNBIND", "UNCHECKOUT", "UNLINK", "UNLOCK", "UPDATE",
      "UPDATEREDIRECTREF", "VERSION-CONTROL",
    ].map(HTTPMethod.init))

  /// Whether `method` is one this server knows: a registered method or one some route serves.
  /// RFC 9110 §9.1: any other is answered 501 wherever it is sent.
  public func recognizes(_ method: HTTPMethod) -> Bool {
    // GET and HEAD are registered, and most requests: no hashing for them.
    method == .get || method == .head || methods.contains(method) || Self.registeredMethods.contains(method)
  }

  /// The path `bytes` (still percent-encoded, no query) as a string: an exact route's own pattern
  /// when it is one, so the paths most requests ask for cost no copy; else a copy ("/" when empty).
  public func path(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
    if bytes.isEmpty { return "/" }
    return exact.pattern(bytes) ?? String(decoding: bytes, as: UTF8.self)
  }

  /// The route for `method` and `path` (RFC 9110 §9.3.2: HEAD is answered by GET without content).
  public func match(_ method: HTTPMethod, _ path: String) -> RouteMatch {
    // The path's bytes, in place (a request's path is a native string; another is copied once).
    if let match = path.utf8.withContiguousStorageIfAvailable({ match(method, $0) }) { return match }
    return Array(path.utf8).withUnsafeBufferPointer { match(method, $0) }
  }

  /// The route for `method` and the path `bytes`.
  private func match(_ method: HTTPMethod, _ bytes: UnsafeBufferPointer<UInt8>) -> RouteMatch {
    if let entry = exact.find(bytes) {
      return Self.pick(method, entry, RouteParameters())
    }
    // The path's segments as byte ranges, matched against each pattern without copying the path;
    // only a match makes the parameters' strings.
    var count = 1
    for byte in bytes where byte == UInt8(ascii: "/") { count += 1 }
    // On the stack for any usual path (the standard library moves a large one to the heap).
    return withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: count) { segments in
      var n = 0
      var start = 0
      for i in bytes.indices where bytes[i] == UInt8(ascii: "/") {
        segments.initializeElement(at: n, to: start..<i)
        n += 1
        start = i + 1
      }
      segments.initializeElement(at: n, to: start..<bytes.count)
      let all = UnsafeBufferPointer(segments)
      for matcher in candidates[min(count, candidates.count - 1)] {
        if let parameters = Self.bind(matcher, bytes, all) {
          return Self.pick(method, matcher.entry, parameters)
        }
      }
      return .notFound
    }
  }

  private static func pick(_ method: HTTPMethod, _ entry: PathEntry, _ parameters: RouteParameters)
    -> RouteMatch
  {
    for route in entry.routes where route.method == method {
      return .found(route, parameters: parameters, headOnly: false)
    }
    if method == .head {
      for route in entry.routes where route.method == .get {
        return .found(route, parameters: parameters, headOnly: true)
      }
    }
    return .methodNotAllowed(allow: entry.allow)
  }

  private static func bind(
    _ pattern: Matcher, _ bytes: UnsafeBufferPointer<UInt8>, _ segments: UnsafeBufferPointer<Range<Int>>
  ) -> RouteParameters? {
    let fixed = pattern.literals.count - (pattern.wildcard ? 1 : 0)
    if pattern.wildcard ? segments.count < fixed + 1 : segments.count != fixed { return nil }
    for k in 0..<fixed {
      let segment = segments[k]
      if let literal = pattern.literals[k] {
        guard Self.equal(literal, bytes, segment) else { return nil }
      } else if segment.isEmpty {
        return nil
      }
    }
    var parameters = RouteParameters()
    for k in 0..<fixed {
      if let name = pattern.names[k] {
        parameters[name] = String(decoding: UnsafeBufferPointer(rebasing: bytes[segments[k]]), as: UTF8.self)
      }
    }
    // The rest of the path from the wildcard's segment on: the segments after it joined by "/".
    if pattern.wildcard {
      parameters["*"] = String(
        decoding: UnsafeBufferPointer(rebasing: bytes[segments[fixed].lowerBound...]), as: UTF8.self)
    }
    return parameters
  }

  /// Whether the path's `segment` is `literal` (one memcmp).
  private static func equal(_ literal: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>, _ segment: Range<Int>)
    -> Bool
  {
    guard literal.count == segment.count else { return false }
    guard let base = bytes.baseAddress, !segment.isEmpty else { return segment.isEmpty }
    return literal.withUnsafeBufferPointer { literal in
      literal.baseAddress.map { memcmp($0, base + segment.lowerBound, segment.count) == 0 } ?? false
    }
  }
}

extension Router {
  /// The exact paths, found by their bytes: open addressing over a 64-bit FNV-1a hash, so a path
  /// from a request is hashed once, cheaply (no per-process seeded hashing is needed: the table is
  /// fixed at load, so a path chosen to collide costs at most a probe per path in the table), and
  /// compared with one memcmp.
  fileprivate struct ExactPaths: Sendable {
    private struct Slot: Sendable {
      var hash: UInt64 = 0
      var start: Int32 = 0
      var count: Int32 = -1
      var entry: Int32 = -1
    }

    /// A power of two, at least twice as many as the paths (at most half full).
    private let slots: [Slot]
    private let bytes: [UInt8]
    private let entries: [PathEntry]
    private let patterns: [String]

    init(_ table: [String: PathEntry]) {
      var size = 8
      while size < 2 * table.count { size *= 2 }
      var slots = [Slot](repeating: Slot(), count: size)
      var bytes: [UInt8] = []
      var entries: [PathEntry] = []
      var patterns: [String] = []
      for (path, entry) in table.sorted(by: { $0.key < $1.key }) {
        let key = Array(path.utf8)
        let hash = key.withUnsafeBufferPointer(Self.hash)
        var i = Int(truncatingIfNeeded: hash) & (size - 1)
        while slots[i].entry >= 0 { i = (i + 1) & (size - 1) }
        slots[i] = Slot(
          hash: hash, start: Int32(bytes.count), count: Int32(key.count), entry: Int32(entries.count))
        bytes += key
        entries.append(entry)
        patterns.append(path)
      }
      self.slots = slots
      self.bytes = bytes
      self.entries = entries
      self.patterns = patterns
    }

    /// FNV-1a, 64 bits.
    static func hash(_ key: UnsafeBufferPointer<UInt8>) -> UInt64 {
      var hash: UInt64 = 0xcbf2_9ce4_8422_2325
      for byte in key { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
      return hash
    }

    /// The entry of the path `key`, if it is one.
    func find(_ key: UnsafeBufferPointer<UInt8>) -> PathEntry? {
      slot(key).map { entries[$0] }
    }

    /// The path `key` as the table's own string, if it is one.
    func pattern(_ key: UnsafeBufferPointer<UInt8>) -> String? {
      slot(key).map { patterns[$0] }
    }

    /// The index of the path `key`'s entry, if it is one.
    private func slot(_ key: UnsafeBufferPointer<UInt8>) -> Int? {
      let hash = Self.hash(key)
      let mask = slots.count - 1
      var i = Int(truncatingIfNeeded: hash) & mask
      return slots.withUnsafeBufferPointer { slots in
        while slots[i].entry >= 0 {
          let slot = slots[i]
          if slot.hash == hash && Int(slot.count) == key.count
            && bytes.withUnsafeBufferPointer({ stored in
              guard let stored = stored.baseAddress, let key = key.baseAddress else { return slot.count == 0 }
              return memcmp(stored + Int(slot.start), key, Int(slot.count)) == 0
            })
          {
            return Int(slot.entry)
          }
          i = (i + 1) & mask
        }
        return nil
      }
    }
  }
}
