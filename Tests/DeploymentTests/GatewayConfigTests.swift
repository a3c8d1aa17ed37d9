import Edge
import FoundationEssentials
import Testing

@testable import Deployment

/// `"upstreams"` with one core, `core`, on loopback.
let coreUpstream = #"{"core": {"url": "http://127.0.0.1:8081"}}"#

/// A forwarded path: the school prefix, then `tail`.
func school(_ tail: String) -> String { ForwardRoute.prefix + tail }

/// A configuration for `environment` (staging and production: the valid production file of
/// DeploymentTests, relabelled for staging) with these `"upstreams"` and `"forward"` (JSON text).
func gatewayConfig(
  _ environment: Environment = .production, upstreams: String = coreUpstream, forward: String = "[]",
  more: [String: String] = [:]
) -> String {
  var changes = more
  changes["upstreams"] = upstreams
  changes["forward"] = forward
  switch environment {
  case .production: return production(changes)
  case .staging:
    return production(changes.merging(["environment": "\"staging\"", "label": "\"Staging\""]) { $1 })
  case .development:
    changes["environment"] = "\"development\""
    return "{"
      + changes.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ") + "}"
  }
}

/// One route object: `tail` under the school prefix, `methods`, upstream `core`, then `extra`
/// members (`, "audit": "x"`).
func route(_ tail: String = "students", methods: String = #"{"GET": "read_only"}"#, _ extra: String = "")
  -> String
{
  #"{"path": "\#(school(tail))", "methods": \#(methods), "upstream": "core"\#(extra)}"#
}

/// The problems of `text` (none when it loads), with `own` as band-edge's own route patterns.
func gatewayProblems(_ text: String, own: [String] = []) -> [String] {
  switch DeploymentLoader.load(
    environment: [:], configText: Array(text.utf8), name: "test.json", ownRoutes: own)
  {
  case .success: []
  case .failure(let problems): problems.lines
  }
}

/// A case a table refuses: the configuration and the one line expected among its problems.
struct GatewayRefusal: CustomTestStringConvertible, Sendable {
  let name: String
  let text: String
  let problem: String
  var testDescription: String { name }

  init(_ name: String, _ text: String, _ problem: String) {
    self.name = name
    self.text = text
    self.problem = problem
  }
}

// MARK: upstreams

struct URLCase: CustomTestStringConvertible, Sendable {
  let environment: Environment
  let url: String
  let target: UpstreamSettings.Target
  var testDescription: String { "\(environment.rawValue) \(url)" }
}

let acceptedURLs: [URLCase] = [
  .init(environment: .production, url: "http://127.0.0.1:8081", target: .http(host: "127.0.0.1", port: 8081)),
  .init(
    environment: .production, url: "http://127.5.6.7:9000/", target: .http(host: "127.5.6.7", port: 9000)),
  .init(environment: .staging, url: "http://[::1]:8081", target: .http(host: "::1", port: 8081)),
  .init(
    environment: .production, url: "unix:/run/core/core.sock", target: .unix(path: "/run/core/core.sock")),
  .init(
    environment: .production, url: "https://core.internal", target: .https(host: "core.internal", port: 443)),
  .init(
    environment: .production, url: "https://Core.Internal:8443/",
    target: .https(host: "core.internal", port: 8443)),
  .init(environment: .production, url: "https://10.1.2.3:8443", target: .https(host: "10.1.2.3", port: 8443)),
  .init(
    environment: .production, url: "https://[2001:db8::5]", target: .https(host: "2001:db8::5", port: 443)),
  .init(environment: .development, url: "http://10.1.2.3:8081", target: .http(host: "10.1.2.3", port: 8081)),
  .init(
    environment: .development, url: "http://localhost:8081", target: .http(host: "localhost", port: 8081)),
  .init(environment: .development, url: "http://core:8081", target: .http(host: "core", port: 8081)),
]

func upstreamURL(_ url: String, _ environment: Environment = .production, _ more: String = "") -> String {
  gatewayConfig(environment, upstreams: #"{"core": {"url": "\#(url)"\#(more)}}"#)
}

let plainHTTP = "must be https:// or unix: outside development: plain http:// only to 127.0.0.0/8 or [::1]"
let longSocket = "unix:/" + String(repeating: "s", count: 107)

let refusedURLs: [GatewayRefusal] = [
  .init(
    "staging, http to another host", upstreamURL("http://10.1.2.3:8081", .staging),
    "upstreams.core.url 'http://10.1.2.3:8081' \(plainHTTP)"),
  .init(
    "production, http to localhost (a name)", upstreamURL("http://localhost:8081"),
    "upstreams.core.url 'http://localhost:8081' \(plainHTTP)"),
  .init(
    "production, http to a name", upstreamURL("http://core.internal:8081"),
    "upstreams.core.url 'http://core.internal:8081' \(plainHTTP)"),
  .init(
    "http without a port", upstreamURL("http://127.0.0.1"),
    "upstreams.core.url 'http://127.0.0.1' needs a port: http://HOST:PORT"),
  .init(
    "port 0", upstreamURL("http://127.0.0.1:0"), "upstreams.core.url 'http://127.0.0.1:0' has an invalid port"
  ),
  .init(
    "port too large", upstreamURL("https://core.internal:65536"),
    "upstreams.core.url 'https://core.internal:65536' has an invalid port"),
  .init(
    "a path", upstreamURL("http://127.0.0.1:8081/api"),
    "upstreams.core.url 'http://127.0.0.1:8081/api' must not hold a path: the core's paths are the client API's"
  ),
  .init(
    "a query", upstreamURL("http://127.0.0.1:8081/?x=1"),
    "upstreams.core.url 'http://127.0.0.1:8081/?x=1' must not hold a query (?)"),
  .init(
    "a fragment", upstreamURL("https://core.internal#top"),
    "upstreams.core.url 'https://core.internal#top' must not hold a fragment (#)"),
  .init(
    "user info, masked", upstreamURL("https://user:secret@core.internal"),
    "upstreams.core.url 'https://***@core.internal' must not hold user info (user@)"),
  .init(
    "another scheme", upstreamURL("ftp://core.internal"),
    "upstreams.core.url 'ftp://core.internal' must be http://HOST:PORT, https://HOST[:PORT] or unix:/absolute/path"
  ),
  .init(
    "an upper-case scheme", upstreamURL("HTTP://127.0.0.1:8081"),
    "upstreams.core.url 'HTTP://127.0.0.1:8081' must be http://HOST:PORT, https://HOST[:PORT] or unix:/absolute/path"
  ),
  .init(
    "a relative socket", upstreamURL("unix:core.sock"),
    "upstreams.core.url 'unix:core.sock' must be unix: then an absolute path without //, . or .. segments"),
  .init(
    "a socket path with //", upstreamURL("unix:/run//core.sock"),
    "upstreams.core.url 'unix:/run//core.sock' must be unix: then an absolute path without //, . or .. segments"
  ),
  .init(
    "a socket path with ..", upstreamURL("unix:/run/../core.sock"),
    "upstreams.core.url 'unix:/run/../core.sock' must be unix: then an absolute path without //, . or .. segments"
  ),
  .init(
    "a socket path too long", upstreamURL(longSocket),
    "upstreams.core.url '\(longSocket)' names a socket path longer than 107 bytes"),
  .init(
    "an invalid host", upstreamURL("https://core_internal"),
    "upstreams.core.url 'https://core_internal' has an invalid host 'core_internal'"),
  .init(
    "an unclosed IPv6 literal", upstreamURL("https://[::1"),
    "upstreams.core.url 'https://[::1' has an unclosed ["),
  .init(
    "an invalid IPv6 literal", upstreamURL("https://[zz::1]"),
    "upstreams.core.url 'https://[zz::1]' has an invalid IPv6 address"),
  .init(
    "no url", gatewayConfig(upstreams: #"{"core": {"enabled": true}}"#),
    "upstreams.core.url is missing: http://127.0.0.1:PORT, https://HOST[:PORT] or unix:/path"),
  .init(
    "url not a string", gatewayConfig(upstreams: #"{"core": {"url": 8081}}"#),
    "'upstreams.core.url' must be a string"),
]

let refusedUpstreams: [GatewayRefusal] = [
  .init(
    "upper-case name", gatewayConfig(upstreams: #"{"Core": {"url": "http://127.0.0.1:8081"}}"#),
    "upstream name 'Core' must be 1 to 63 lower-case letters, digits and -, starting with a letter or digit"),
  .init(
    "name starting with -", gatewayConfig(upstreams: #"{"-core": {"url": "http://127.0.0.1:8081"}}"#),
    "upstream name '-core' must be 1 to 63 lower-case letters, digits and -, starting with a letter or digit"),
  .init(
    "name with _", gatewayConfig(upstreams: #"{"core_1": {"url": "http://127.0.0.1:8081"}}"#),
    "upstream name 'core_1' must be 1 to 63 lower-case letters, digits and -, starting with a letter or digit"
  ),
  .init(
    "name of 64 characters",
    gatewayConfig(upstreams: #"{"\#(String(repeating: "a", count: 64))": {"url": "http://127.0.0.1:8081"}}"#),
    "upstream name '\(String(repeating: "a", count: 64))' must be 1 to 63 lower-case letters, digits and -, "
      + "starting with a letter or digit"),
  .init(
    "upstreams not an object", gatewayConfig(upstreams: "[]"),
    "'upstreams' must be an object of named API cores"),
  .init(
    "an upstream not an object", gatewayConfig(upstreams: #"{"core": "http://127.0.0.1:8081"}"#),
    "'upstreams.core' must be an object"),
  .init(
    "an unknown key", upstreamURL("http://127.0.0.1:8081", .production, #", "timeout": 3"#),
    "unknown setting 'upstreams.core.timeout'"),
  .init(
    "enabled not a flag", upstreamURL("http://127.0.0.1:8081", .production, #", "enabled": "yes""#),
    "'upstreams.core.enabled' must be true or false"),
  .init(
    "caFile for http", upstreamURL("http://127.0.0.1:8081", .production, #", "caFile": "/etc/ssl/ca.pem""#),
    "upstreams.core.caFile is for https:// upstreams only"),
  .init(
    "serverName for a socket", upstreamURL("unix:/run/core.sock", .production, #", "serverName": "core""#),
    "upstreams.core.serverName is for https:// upstreams only"),
  .init(
    "caFile missing",
    upstreamURL("https://core.internal", .production, #", "caFile": "/nonexistent/ca.pem""#),
    "upstreams.core.caFile /nonexistent/ca.pem cannot be read"),
  .init(
    "caFile not PEM", upstreamURL("https://core.internal", .production, #", "caFile": "/etc/passwd""#),
    "upstreams.core.caFile /etc/passwd holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
  .init(
    "serverName not a DNS name", upstreamURL("https://10.1.2.3", .production, #", "serverName": "Core_1""#),
    "upstreams.core.serverName 'Core_1' must be a DNS name in lower case"),
]

/// `upstreams.core` with `key` set to `value` (JSON text).
func upstreamSetting(_ key: String, _ value: String) -> String {
  upstreamURL("http://127.0.0.1:8081", .production, #", "\#(key)": \#(value)"#)
}

let refusedNumbers: [GatewayRefusal] = [
  .init(
    "connect timeout too short", upstreamSetting("connectTimeout", "0.01"),
    "upstreams.core.connectTimeout must be between 0.05 and 600 seconds"),
  .init(
    "connect timeout too long", upstreamSetting("connectTimeout", "601"),
    "upstreams.core.connectTimeout must be between 0.05 and 600 seconds"),
  .init(
    "connect timeout a string", upstreamSetting("connectTimeout", #""1""#),
    "'upstreams.core.connectTimeout' must be a number"),
  .init(
    "first byte timeout 0", upstreamSetting("firstByteTimeout", "0"),
    "upstreams.core.firstByteTimeout must be between 0.05 and 600 seconds"),
  .init(
    "total timeout too long", upstreamSetting("totalTimeout", "3601"),
    "upstreams.core.totalTimeout must be between 0.05 and 3600 seconds"),
  .init(
    "no connections", upstreamSetting("maxConnections", "0"),
    "upstreams.core.maxConnections must be a whole number between 1 and 100000"),
  .init(
    "a fraction of a connection", upstreamSetting("maxConnections", "1.5"),
    "upstreams.core.maxConnections must be a whole number between 1 and 100000"),
  .init(
    "idle per loop negative", upstreamSetting("maxIdlePerLoop", "-1"),
    "upstreams.core.maxIdlePerLoop must be a whole number between 0 and 1024"),
  .init(
    "queue too long", upstreamSetting("queue", "100001"),
    "upstreams.core.queue must be a whole number between 0 and 100000"),
  .init(
    "queue timeout 0", upstreamSetting("queueTimeout", "0"),
    "upstreams.core.queueTimeout must be between 0.001 and 600 seconds"),
  .init(
    "idle timeout too short", upstreamSetting("idleTimeout", "0.05"),
    "upstreams.core.idleTimeout must be between 0.1 and 3600 seconds"),
  .init(
    "no requests per connection", upstreamSetting("maxRequestsPerConnection", "0"),
    "upstreams.core.maxRequestsPerConnection must be a whole number between 1 and 1000000"),
  .init(
    "connection age too long", upstreamSetting("maxConnectionAge", "86401"),
    "upstreams.core.maxConnectionAge must be between 1 and 86400 seconds"),
  .init(
    "response head too small", upstreamSetting("maxResponseHeadBytes", "100"),
    "upstreams.core.maxResponseHeadBytes must be a whole number of bytes between 1024 and 1048576"),
  .init(
    "response body too large", upstreamSetting("maxResponseBodyBytes", "1073741825"),
    "upstreams.core.maxResponseBodyBytes must be a whole number of bytes between 0 and 1073741824"),
  .init(
    "circuit never opens", upstreamSetting("failuresToOpen", "0"),
    "upstreams.core.failuresToOpen must be a whole number between 1 and 1000"),
  .init(
    "circuit open too long", upstreamSetting("openSeconds", "3601"),
    "upstreams.core.openSeconds must be between 0.1 and 3600 seconds"),
  .init(
    "total shorter than first byte", upstreamSetting("totalTimeout", "10"),
    "upstreams.core.totalTimeout (10 s) must be at least firstByteTimeout (15 s)"),
  .init(
    "total shorter than connect",
    upstreamURL(
      "http://127.0.0.1:8081", .production,
      #", "connectTimeout": 5, "firstByteTimeout": 1, "totalTimeout": 2.5"#),
    "upstreams.core.totalTimeout (2.5 s) must be at least connectTimeout (5 s)"),
  .init(
    "more idle than connections",
    upstreamURL("http://127.0.0.1:8081", .production, #", "maxIdlePerLoop": 200, "maxConnections": 100"#),
    "upstreams.core.maxIdlePerLoop (200) must be at most maxConnections (100)"),
]

@Suite("Gateway configuration: upstreams")
struct UpstreamConfigTests {
  @Test("accepted URLs, by environment", arguments: acceptedURLs)
  func accepted(_ c: URLCase) throws {
    let deployment = try load(upstreamURL(c.url, c.environment)).get()
    #expect(deployment.upstreams["core"]?.target == c.target)
  }

  @Test(
    "each refused upstream gets its own line",
    arguments: refusedURLs + refusedUpstreams + refusedNumbers)
  func refused(_ c: GatewayRefusal) {
    let problems = gatewayProblems(c.text)
    #expect(problems.contains(c.problem), "\(problems)")
  }

  @Test("no file setting: the documented defaults")
  func defaults() throws {
    let core = try #require(try load(gatewayConfig()).get().upstreams["core"])
    #expect(core.name == "core" && core.enabled && core.caFile == nil && core.serverName == nil)
    #expect(core.timeouts.connect == .seconds(1) && core.timeouts.firstByte == .seconds(15))
    #expect(core.timeouts.total == .seconds(30) && core.pool.queueTimeout == .seconds(1))
    #expect(core.pool.idleTimeout == .seconds(30) && core.pool.maxConnectionAge == .seconds(3600))
    #expect(core.pool.maxIdle == 64 && core.maxConnections == 128 && core.pool.queueLength == 256)
    #expect(
      core.pool.maxRequestsPerConnection == 1000 && core.pool.failuresToOpen == 5
        && core.pool.openDuration == .seconds(5))
    #expect(core.response.maxHeadBytes == 16384 && core.response.maxBodyBytes == 8 * 1024 * 1024)
  }

  @Test("maxConnections counts the instance's connections: each loop's pool gets an equal share")
  func poolLimitsPerLoop() throws {
    var core = try #require(try load(gatewayConfig()).get().upstreams["core"])
    core.maxConnections = 100
    core.pool.maxIdle = 7
    #expect(core.poolLimits(loops: 1).maxConnections == 100)
    #expect(core.poolLimits(loops: 3).maxConnections == 33 && core.poolLimits(loops: 3).maxIdle == 7)
    core.maxConnections = 2
    #expect(core.poolLimits(loops: 4).maxConnections == 1)
    // The queue is the instance's too; 0 (none wait) stays 0.
    core.pool.queueLength = 10
    #expect(core.poolLimits(loops: 4).queueLength == 2 && core.poolLimits(loops: 20).queueLength == 1)
    core.pool.queueLength = 0
    #expect(core.poolLimits(loops: 4).queueLength == 0)
  }

  @Test(
    "every number takes both ends of its range, and refuses past the top",
    arguments: GatewayLimits.upstream.map(\.key))
  func bounds(_ key: String) throws {
    let limit = try #require(GatewayLimits.upstream.first { $0.key == key })
    // What the number must agree with (`maxIdlePerLoop` <= `maxConnections`, the timeouts <=
    // `totalTimeout`) moves out of its way.
    let room =
      switch key {
      case "maxIdlePerLoop": #", "maxConnections": 100000"#
      case "maxConnections": #", "maxIdlePerLoop": 0"#
      case "connectTimeout", "firstByteTimeout": #", "totalTimeout": 3600"#
      case "totalTimeout": #", "connectTimeout": 0.05, "firstByteTimeout": 0.05"#
      default: ""
      }
    for value in [limit.range.lowerBound, limit.range.upperBound] {
      let text = upstreamURL("http://127.0.0.1:8081", .production, #", "\#(key)": \#(value)\#(room)"#)
      #expect(gatewayProblems(text) == [], "\(key) = \(value)")
    }
    let above = upstreamURL(
      "http://127.0.0.1:8081", .production, #", "\#(key)": \#(limit.range.upperBound + 1)"#)
    #expect(gatewayProblems(above).contains { $0.hasPrefix("upstreams.core.\(key) must be ") })
  }

  @Test("a readable PEM caFile and a serverName are kept")
  func tlsSettings() throws {
    let directory =
      FileManager.default.temporaryDirectory.path + "/gateway-ca-\(UInt64.random(in: 0...UInt64.max))"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let file = directory + "/ca.pem"
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    #expect(FileManager.default.createFile(atPath: file, contents: Data(pem.utf8)))
    let text = upstreamURL(
      "https://10.1.2.3:8443", .production, #", "caFile": "\#(file)", "serverName": "core.internal""#)
    let core = try #require(try load(text).get().upstreams["core"])
    #expect(core.caFile == file && core.serverName == "core.internal")
    #expect(core.target.description == "https://10.1.2.3:8443")
  }
}

// MARK: forward routes

/// A production configuration forwarding `routes` (route objects) to `core`.
func forwarding(_ routes: String...) -> String {
  gatewayConfig(forward: "[" + routes.joined(separator: ", ") + "]")
}

let acceptedPaths = [
  "students", "students/:studentId", "attendance/*", "a.b_c~d-e/:x/*", "*", "v2/classes/:classId/register",
]

let pathRule =
  "a literal segment is lower-case letters, digits and . _ ~ - (not . or ..), a parameter :name, or a last *"

let refusedPaths: [GatewayRefusal] = [
  .init(
    "the prefix alone",
    forwarding(
      #"{"path": "/api/client/v1/schools/:schoolId", "methods": {"GET": "read_only"}, "upstream": "core"}"#),
    "forward[0].path '/api/client/v1/schools/:schoolId' must start with /api/client/v1/schools/:schoolId/ and name at least one more segment"
  ),
  .init(
    "the prefix and a slash", forwarding(route("")),
    "forward[0].path '\(school(""))' must start with /api/client/v1/schools/:schoolId/ and name at least one more segment"
  ),
  .init(
    "another parameter name for the school",
    forwarding(
      #"{"path": "/api/client/v1/schools/:id/students", "methods": {"GET": "read_only"}, "upstream": "core"}"#
    ),
    "forward[0].path '/api/client/v1/schools/:id/students' must start with /api/client/v1/schools/:schoolId/ and name at least one more segment"
  ),
  .init(
    "outside the schools",
    forwarding(#"{"path": "/api/client/v1/students", "methods": {"GET": "read_only"}, "upstream": "core"}"#),
    "forward[0].path '/api/client/v1/students' must start with /api/client/v1/schools/:schoolId/ and name at least one more segment"
  ),
  .init(
    "upper case", forwarding(route("Students")),
    "forward[0].path '\(school("Students"))' has the segment 'Students': \(pathRule)"),
  .init(
    "a trailing slash", forwarding(route("students/")),
    "forward[0].path '\(school("students/"))' must not end in / or hold //"),
  .init(
    "an empty segment", forwarding(route("a//b")),
    "forward[0].path '\(school("a//b"))' must not end in / or hold //"),
  .init(
    "a star before the end", forwarding(route("*/x")),
    "forward[0].path '\(school("*/x"))' may hold * only as its last segment"),
  .init(
    "a star inside a segment", forwarding(route("a*")),
    "forward[0].path '\(school("a*"))' has the segment 'a*': \(pathRule)"),
  .init(
    "the school twice", forwarding(route(":schoolId")),
    "forward[0].path '\(school(":schoolId"))' names :schoolId twice"),
  .init(
    "a parameter twice", forwarding(route(":a/:a")), "forward[0].path '\(school(":a/:a"))' names :a twice"),
  .init(
    "a parameter starting with a digit", forwarding(route(":1a")),
    "forward[0].path '\(school(":1a"))' has the parameter ':1a': a parameter is : then letters and digits"),
  .init(
    "a dot-dot segment", forwarding(route("..")),
    "forward[0].path '\(school(".."))' has the segment '..': \(pathRule)"),
  .init(
    "an escaped byte", forwarding(route("a%20b")),
    "forward[0].path '\(school("a%20b"))' has the segment 'a%20b': \(pathRule)"),
  .init(
    "no path", forwarding(#"{"methods": {"GET": "read_only"}, "upstream": "core"}"#),
    "forward[0].path is missing"),
]

let refusedRouteSettings: [GatewayRefusal] = [
  .init(
    "an unknown role", forwarding(route(methods: #"{"GET": "reader"}"#)),
    "forward[0].methods.GET must be read_only, teacher or administrator"),
  .init(
    "a role not a string", forwarding(route(methods: #"{"GET": 1}"#)),
    "forward[0].methods.GET must be read_only, teacher or administrator"),
  .init(
    "a lower-case method", forwarding(route(methods: #"{"get": "read_only"}"#)),
    "forward[0].methods names 'get': a route forwards GET, HEAD, POST, PUT, PATCH or DELETE"),
  .init(
    "OPTIONS", forwarding(route(methods: #"{"OPTIONS": "read_only"}"#)),
    "forward[0].methods names 'OPTIONS': a route forwards GET, HEAD, POST, PUT, PATCH or DELETE"),
  .init("no method", forwarding(route(methods: "{}")), "forward[0].methods names no method"),
  .init(
    "methods missing", forwarding(#"{"path": "\#(school("x"))", "upstream": "core"}"#),
    "forward[0].methods is missing: an object from method to least role"),
  .init("methods a list", forwarding(route(methods: #"["GET"]"#)), "'forward[0].methods' must be an object"),
  .init(
    "HEAD beside GET", forwarding(route(methods: #"{"GET": "read_only", "HEAD": "teacher"}"#)),
    "forward[0].methods names HEAD beside GET: GET implies HEAD, with GET's role; remove HEAD"),
  .init(
    "an unknown upstream",
    forwarding(#"{"path": "\#(school("x"))", "methods": {"GET": "read_only"}, "upstream": "cor"}"#),
    "forward[0].upstream 'cor' names no upstream in \"upstreams\""),
  .init(
    "no upstream", forwarding(#"{"path": "\#(school("x"))", "methods": {"GET": "read_only"}}"#),
    "forward[0].upstream is missing"),
  .init(
    "a bad since", forwarding(route("x", methods: #"{"GET": "read_only"}"#, #", "since": "2""#)),
    "forward[0].since '2' must be MAJOR.MINOR[.PATCH]"),
  .init(
    "a body too large",
    forwarding(
      route("x", methods: #"{"POST": "teacher"}"#, #", "audit": "x.made", "maxBodyBytes": 16777217"#)),
    "forward[0].maxBodyBytes must be a whole number of bytes between 0 and 16777216"),
  .init(
    "a body limit without a body",
    forwarding(route("x", methods: #"{"GET": "read_only"}"#, #", "maxBodyBytes": 1024"#)),
    "forward[0].maxBodyBytes is for routes that forward a body (POST, PUT, PATCH)"),
  .init(
    "media types for DELETE",
    forwarding(
      route(
        "x", methods: #"{"DELETE": "teacher"}"#, #", "audit": "x.gone", "mediaTypes": ["application/json"]"#)),
    "forward[0].mediaTypes is for routes that forward a body (POST, PUT, PATCH)"),
  .init(
    "a media type with parameters",
    forwarding(
      route(
        "x", methods: #"{"PUT": "teacher"}"#,
        #", "audit": "x.set", "mediaTypes": ["application/json; charset=utf-8"]"#)),
    "forward[0].mediaTypes 'application/json; charset=utf-8' must be type/subtype in lower case, without parameters"
  ),
  .init(
    "an upper-case media type",
    forwarding(
      route("x", methods: #"{"PUT": "teacher"}"#, #", "audit": "x.set", "mediaTypes": ["Application/JSON"]"#)),
    "forward[0].mediaTypes 'Application/JSON' must be type/subtype in lower case, without parameters"),
  .init(
    "no media type",
    forwarding(route("x", methods: #"{"PATCH": "teacher"}"#, #", "audit": "x.set", "mediaTypes": []"#)),
    "forward[0].mediaTypes names no media type"),
  .init(
    "a media type twice",
    forwarding(
      route(
        "x", methods: #"{"PATCH": "teacher"}"#, #", "audit": "x.set", "mediaTypes": ["text/csv", "text/csv"]"#
      )),
    "forward[0].mediaTypes lists 'text/csv' twice"),
  .init(
    "a mutation without audit", forwarding(route("x", methods: #"{"GET": "read_only", "POST": "teacher"}"#)),
    "forward[0].audit is missing: a route that forwards POST, PUT, PATCH or DELETE names the audit event it records"
  ),
  .init(
    "DELETE without audit", forwarding(route("x", methods: #"{"DELETE": "administrator"}"#)),
    "forward[0].audit is missing: a route that forwards POST, PUT, PATCH or DELETE names the audit event it records"
  ),
  .init(
    "audit on a read", forwarding(route("x", methods: #"{"GET": "read_only"}"#, #", "audit": "x.read""#)),
    "forward[0].audit is for routes that forward POST, PUT, PATCH or DELETE"),
  .init(
    "a bad audit name",
    forwarding(route("x", methods: #"{"POST": "teacher"}"#, #", "audit": "Attendance-Recorded""#)),
    "forward[0].audit 'Attendance-Recorded' must be 1 to 64 lower-case letters, digits, _ and ."),
  .init(
    "band-edge's own capability",
    forwarding(route("x", methods: #"{"GET": "read_only"}"#, #", "capability": "nativeSignIn""#)),
    "forward[0].capability 'nativeSignIn' must be one an API core serves: attendance, scheduling, studentManagement"
  ),
  .init(
    "an unknown capability",
    forwarding(route("x", methods: #"{"GET": "read_only"}"#, #", "capability": "teleport""#)),
    "forward[0].capability 'teleport' must be one an API core serves: attendance, scheduling, studentManagement"
  ),
  .init(
    "enabled not a flag", forwarding(route("x", methods: #"{"GET": "read_only"}"#, #", "enabled": "no""#)),
    "'forward[0].enabled' must be true or false"),
  .init(
    "an unknown key", forwarding(route("x", methods: #"{"GET": "read_only"}"#, #", "role": "teacher""#)),
    "unknown setting 'forward[0].role'"),
  .init("forward not a list", gatewayConfig(forward: "{}"), "'forward' must be an array of routes"),
  .init("a route not an object", gatewayConfig(forward: #"["/x"]"#), "'forward[0]' must be an object"),
  .init(
    "the second route named by its index", forwarding(route("a"), route("b", methods: #"{"GET": "boss"}"#)),
    "forward[1].methods.GET must be read_only, teacher or administrator"),
]

@Suite("Gateway configuration: forward routes")
struct ForwardRouteConfigTests {
  @Test("accepted path patterns", arguments: acceptedPaths)
  func acceptedPath(_ tail: String) throws {
    let deployment = try load(forwarding(route(tail))).get()
    #expect(deployment.forwardRoutes.map(\.path) == [school(tail)])
  }

  @Test("each refused route setting gets its own line", arguments: refusedPaths + refusedRouteSettings)
  func refused(_ c: GatewayRefusal) {
    let problems = gatewayProblems(c.text)
    #expect(problems.contains(c.problem), "\(problems)")
  }

  @Test("a full route keeps every setting; defaults otherwise")
  func settings() throws {
    let full = route(
      "attendance/:date", methods: #"{"GET": "read_only", "POST": "teacher", "DELETE": "administrator"}"#,
      #", "since": "2.4", "maxBodyBytes": 1024, "mediaTypes": ["application/json", "text/csv"], "audit": "attendance.recorded", "capability": "attendance", "enabled": false"#
    )
    let routes = try load(forwarding(full, route())).get().forwardRoutes
    var expected = ForwardRoute(
      path: school("attendance/:date"), methods: [.get: .readOnly, .post: .teacher, .delete: .administrator],
      upstream: "core")
    expected.since = "2.4"
    expected.maxBodyBytes = 1024
    expected.mediaTypes = ["application/json", "text/csv"]
    expected.audit = "attendance.recorded"
    expected.capability = "attendance"
    expected.enabled = false
    #expect(routes.first == expected)
    let plain = try #require(routes.last)
    #expect(plain.maxBodyBytes == 65536 && plain.mediaTypes == ["application/json"] && plain.enabled)
    #expect(plain.since == nil && plain.audit == nil && plain.capability == nil)
  }

  @Test("HEAD follows GET's role; HEAD alone is its own")
  func head() throws {
    let routes = try load(
      forwarding(route("a", methods: #"{"GET": "teacher"}"#), route("b", methods: #"{"HEAD": "read_only"}"#))
    ).get().forwardRoutes
    #expect(routes[0].minimumRole(for: .head) == .teacher && routes[0].forwardedMethods == [.get, .head])
    #expect(routes[1].minimumRole(for: .head) == .readOnly && routes[1].minimumRole(for: .get) == nil)
    #expect(routes[0].minimumRole(for: .post) == nil)
  }

  @Test("roles rank read_only < teacher < administrator")
  func roles() {
    #expect(SchoolRole.readOnly < .teacher && SchoolRole.teacher < .administrator)
    #expect(SchoolRole.allCases.map(\.rawValue) == ["read_only", "teacher", "administrator"])
    #expect(SchoolRole.allCases.sorted() == [.readOnly, .teacher, .administrator])
  }
}

// MARK: routes together

struct ConflictCase: CustomTestStringConvertible, Sendable {
  let first: String
  let second: String
  /// The problem line, nil when both load together.
  let problem: String?
  var testDescription: String { "\(first) | \(second)" }
}

let overlap = "a path goes to one route"
let conflictCases: [ConflictCase] = [
  .init(
    first: route("x/:a"), second: route("x/y"),
    problem:
      "forward routes '\(school("x/:a"))' and '\(school("x/y"))' overlap: both match /api/client/v1/schools/1/x/y; \(overlap)"
  ),
  .init(
    first: route("x/*"), second: route("x/y/z"),
    problem:
      "forward routes '\(school("x/*"))' and '\(school("x/y/z"))' overlap: both match /api/client/v1/schools/1/x/y/z; \(overlap)"
  ),
  .init(
    first: route("*"), second: route("x/:a"),
    problem:
      "forward routes '\(school("*"))' and '\(school("x/:a"))' overlap: both match /api/client/v1/schools/1/x/1; \(overlap)"
  ),
  .init(
    first: route("x/:a"), second: route("x/:b"),
    problem:
      "forward routes '\(school("x/:a"))' and '\(school("x/:b"))' overlap: both match /api/client/v1/schools/1/x/1; \(overlap)"
  ),
  .init(
    first: route("x/:a/y"), second: route("x/z/:b"),
    problem:
      "forward routes '\(school("x/:a/y"))' and '\(school("x/z/:b"))' overlap: both match /api/client/v1/schools/1/x/z/y; \(overlap)"
  ),
  .init(
    first: route("x/*"), second: route("x/*", methods: #"{"DELETE": "teacher"}"#, #", "audit": "x.gone""#),
    problem: nil),
  .init(
    first: route("x"), second: route("x", methods: #"{"GET": "teacher"}"#),
    problem:
      "two forward routes for '\(school("x"))' both take GET, HEAD; each method of a path goes to one route"),
  .init(
    first: route("x"), second: route("x", methods: #"{"HEAD": "teacher"}"#),
    problem: "two forward routes for '\(school("x"))' both take HEAD; each method of a path goes to one route"
  ),
  .init(
    first: route("x"), second: route("x", methods: #"{"POST": "teacher"}"#, #", "audit": "x.made""#),
    problem: nil),
  .init(first: route("x/y"), second: route("x/z"), problem: nil),
  .init(first: route("x/:a"), second: route("x/:a/b"), problem: nil),
  .init(first: route("x/*"), second: route("x"), problem: nil),
  .init(first: route("x/*"), second: route("y/*"), problem: nil),
  .init(first: route("x/:a/y"), second: route("x/:a/z"), problem: nil),
]

let members = "/api/client/v1/schools/:schoolId/members"
let member = "/api/client/v1/schools/:schoolId/members/:accountId"

@Suite("Gateway configuration: routes together")
struct ForwardConflictTests {
  @Test("duplicates and overlaps, exactly", arguments: conflictCases)
  func conflict(_ c: ConflictCase) {
    let problems = gatewayProblems(forwarding(c.first, c.second))
    #expect(problems == (c.problem.map { [$0] } ?? []))
  }

  @Test("a route that overlaps band-edge's own route is refused; one beside them is not")
  func ownRoutes() {
    let own = [members, member, members]
    #expect(
      gatewayProblems(forwarding(route("members/*")), own: own) == [
        "forward route '\(school("members/*"))' overlaps band-edge's own route '\(member)': both match "
          + "/api/client/v1/schools/1/members/1; band-edge answers that path itself"
      ])
    #expect(
      gatewayProblems(forwarding(route(":section")), own: own) == [
        "forward route '\(school(":section"))' overlaps band-edge's own route '\(members)': both match "
          + "/api/client/v1/schools/1/members; band-edge answers that path itself"
      ])
    #expect(gatewayProblems(forwarding(route("students"), route("members-export")), own: own) == [])
    // A disabled route is held to the rule too: switching it on must not change what is answered.
    #expect(
      gatewayProblems(
        forwarding(route("members", methods: #"{"GET": "read_only"}"#, #", "enabled": false"#)), own: own
      ).count == 1)
  }
}

// MARK: capabilities

struct CapabilityCase: CustomTestStringConvertible, Sendable {
  let name: String
  let text: String
  let attendance: Bool
  var testDescription: String { name }
}

/// `core` and `other`, with `core` enabled or not.
func twoUpstreams(coreEnabled: Bool = true) -> String {
  #"{"core": {"url": "http://127.0.0.1:8081", "enabled": \#(coreEnabled)}, "other": {"url": "unix:/run/other.sock"}}"#
}

func attendanceRoute(_ tail: String = "attendance", enabled: Bool = true, upstream: String = "core") -> String
{
  #"{"path": "\#(school(tail))", "methods": {"GET": "read_only"}, "upstream": "\#(upstream)", "capability": "attendance", "enabled": \#(enabled)}"#
}

let capabilityCases: [CapabilityCase] = [
  .init(name: "no route", text: gatewayConfig(upstreams: twoUpstreams()), attendance: false),
  .init(
    name: "a route for another capability",
    text: gatewayConfig(
      upstreams: twoUpstreams(),
      forward:
        "[\(route("students", methods: #"{"GET": "read_only"}"#, #", "capability": "studentManagement""#))]"),
    attendance: false),
  .init(
    name: "an enabled route to an enabled upstream",
    text: gatewayConfig(upstreams: twoUpstreams(), forward: "[\(attendanceRoute())]"), attendance: true),
  .init(
    name: "the route disabled",
    text: gatewayConfig(upstreams: twoUpstreams(), forward: "[\(attendanceRoute(enabled: false))]"),
    attendance: false),
  .init(
    name: "the upstream disabled",
    text: gatewayConfig(upstreams: twoUpstreams(coreEnabled: false), forward: "[\(attendanceRoute())]"),
    attendance: false),
  .init(
    name: "a kill switch",
    text: gatewayConfig(
      upstreams: twoUpstreams(), forward: "[\(attendanceRoute())]", more: ["killSwitches": #"["attendance"]"#]
    ),
    attendance: false),
  .init(
    name: "one route of two still forwarded",
    text: gatewayConfig(
      upstreams: twoUpstreams(coreEnabled: false),
      forward: "[\(attendanceRoute()), \(attendanceRoute("attendance/today", upstream: "other"))]"),
    attendance: true),
]

@Suite("Gateway configuration: capabilities")
struct ForwardedCapabilityTests {
  @Test("attendance is on only while a route naming it is forwarded", arguments: capabilityCases)
  func derived(_ c: CapabilityCase) throws {
    let deployment = try load(c.text).get()
    #expect(deployment.capabilities["attendance"] == c.attendance)
    #expect(deployment.capabilities["studentManagement"] == c.name.contains("another capability"))
    let attendance = deployment.forwardRoutes.filter { $0.capability == "attendance" }
    #expect(attendance.contains(where: deployment.forwards) == c.attendance)
    #expect(
      deployment.summary.contains(
        c.attendance
          ? "capabilities on:    nativeSignIn, verifiedLinks, codeScanning, attendance\n"
          : "capabilities off:   attendance,"))
  }

  @Test("a forwarded capability set by hand is a problem, whatever its value", arguments: ["true", "false"])
  func byHand(_ value: String) {
    let problems = gatewayProblems(
      production(["capabilities": #"{"attendance": \#(value), "pdfReports": true}"#]))
    #expect(
      problems == [
        "capability 'attendance' follows the forward routes: it is on while an enabled route naming it goes to "
          + "an enabled upstream; remove it from \"capabilities\" (\"killSwitches\" still turns it off)"
      ])
  }

  @Test("the forwarded capabilities are the contract's, off by default")
  func forwardedSet() {
    #expect(Capabilities.forwarded.isSubset(of: Capabilities.names))
    #expect(Capabilities.forwarded == ["attendance", "scheduling", "studentManagement"])
    #expect(Capabilities.forwarded.allSatisfy { Capabilities.defaults[$0] == false })
  }
}

// MARK: the whole file

@Suite("Gateway configuration: summary and all problems at once")
struct GatewaySummaryTests {
  @Test("the summary lists the upstreams and the routes with their state")
  func summary() throws {
    let text = gatewayConfig(
      upstreams:
        #"{"core": {"url": "http://127.0.0.1:8081"}, "reports": {"url": "https://reports.internal", "enabled": false}}"#,
      forward:
        "[\(attendanceRoute()), \(route("students", methods: #"{"GET": "read_only", "POST": "administrator"}"#, #", "audit": "students.added", "enabled": false"#)), "
        + #"{"path": "\#(school("reports/*"))", "methods": {"GET": "teacher"}, "upstream": "reports"}]"#,
      more: ["killSwitches": #"["attendance"]"#])
    let summary = try load(text).get().summary
    #expect(
      summary.hasSuffix(
        """
        upstreams:          core http://127.0.0.1:8081 (enabled)
                            reports https://reports.internal (disabled)
        forward routes:     \(school("attendance")) GET:read_only -> core (not forwarded: kill switch attendance)
                            \(school("students")) GET:read_only POST:administrator -> core (disabled)
                            \(school("reports/*")) GET:teacher -> reports (not forwarded: upstream disabled)
        """), "\(summary)")
    #expect(
      try load(production()).get().summary.hasSuffix("upstreams:          (none)\nforward routes:     (none)")
    )
  }

  @Test("every problem of both sections is reported at once")
  func allAtOnce() {
    let text = gatewayConfig(
      .staging,
      upstreams:
        #"{"core": {"url": "http://10.1.2.3:8081", "connectTimeout": 0}, "Bad": {"url": "unix:/run/bad.sock"}}"#,
      forward:
        "[\(route("x/:a")), \(route("x/y", methods: #"{"POST": "boss"}"#)), \(attendanceRoute(upstream: "nowhere"))]",
      more: ["capabilities": #"{"scheduling": true}"#])
    let problems = gatewayProblems(text, own: [member])
    #expect(
      Set(problems) == [
        "capability 'scheduling' follows the forward routes: it is on while an enabled route naming it goes to "
          + "an enabled upstream; remove it from \"capabilities\" (\"killSwitches\" still turns it off)",
        "upstream name 'Bad' must be 1 to 63 lower-case letters, digits and -, starting with a letter or digit",
        "upstreams.core.url 'http://10.1.2.3:8081' \(plainHTTP)",
        "upstreams.core.connectTimeout must be between 0.05 and 600 seconds",
        "forward[1].methods.POST must be read_only, teacher or administrator",
        "forward[2].upstream 'nowhere' names no upstream in \"upstreams\"",
        "forward routes '\(school("x/:a"))' and '\(school("x/y"))' overlap: both match /api/client/v1/schools/1/x/y; \(overlap)",
      ], "\(problems)")
    #expect(problems.count == 7)
  }
}
