import Testing

@testable import Deployment

let fingerprint =
  "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5"
let zeros = Array(repeating: "00", count: 32).joined(separator: ":")

/// A valid production configuration; each invalid case changes one thing.
func production(_ changes: [String: String] = [:], drop: Set<String> = []) -> String {
  var members: [String: String] = [
    "\"environment\"": "\"production\"",
    "\"origin\"": "\"https://app.bandlicence.test\"",
    "\"apple\"": "{\"appIDs\": [\"K7QW2X9P4M.test.bandlicence.app\"]}",
    "\"android\"":
      "{\"packageName\": \"test.bandlicence.app\", \"sha256CertFingerprints\": [\"\(fingerprint)\"]}",
  ]
  for key in drop { members["\"\(key)\""] = nil }
  for (key, value) in changes { members["\"\(key)\""] = value }
  return "{" + members.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
    + "}"
}

func load(_ text: String?, env: [String: String] = [:]) -> Result<Deployment, DeploymentProblems> {
  DeploymentLoader.load(environment: env, configText: text.map { Array($0.utf8) }, name: "test.json")
}

struct InvalidCase: CustomTestStringConvertible, Sendable {
  let name: String
  let text: String
  var env: [String: String] = [:]
  let problem: String
  var testDescription: String { name }
}

let invalidCases: [InvalidCase] = [
  .init(name: "not JSON", text: "{", problem: "config file test.json is not valid JSON"),
  .init(name: "not an object", text: "[]", problem: "config file test.json must hold a JSON object"),
  .init(
    name: "a key named twice",
    text: production(["apple": "{\"appIDs\": [], \"appIDs\": [\"K7QW2X9P4M.test.bandlicence.app\"]}"]),
    problem: "config file test.json names the key 'appIDs' twice in one object; keep one of them"),
  .init(
    name: "unknown environment", text: production(["environment": "\"prod\""]),
    problem: "environment 'prod' must be development, staging or production"),
  .init(
    name: "origin missing in production", text: production(drop: ["origin"]),
    problem: "origin is missing: set BAND_LICENCE_APP_URL or \"origin\" to https://<your host>"),
  .init(
    name: "http origin in production", text: production(["origin": "\"http://app.bandlicence.test\""]),
    problem: "origin 'http://app.bandlicence.test' must use https in production"),
  .init(
    name: "example.com origin", text: production(["origin": "\"https://example.com\""]),
    problem:
      "origin host 'example.com' is a placeholder (a documentation domain); set the real production host"),
  .init(
    name: "example.org subdomain", text: production(["origin": "\"https://app.example.org\""]),
    problem:
      "origin host 'app.example.org' is a placeholder (a documentation domain); set the real production host"),
  .init(
    name: ".invalid origin", text: production(["origin": "\"https://app.invalid\""]),
    problem: "origin host 'app.invalid' is a placeholder (a reserved name); set the real production host"),
  .init(
    name: "localhost origin in production", text: production(["origin": "\"https://localhost:8443\""]),
    problem: "origin host 'localhost' is a placeholder (localhost); set the real production host"),
  .init(
    name: "IPv4 origin", text: production(["origin": "\"https://192.0.2.10\""]),
    problem: "origin host '192.0.2.10' is a placeholder (an IP literal); set the real production host"),
  .init(
    name: "IPv6 origin", text: production(["origin": "\"https://[2001:db8::1]\""]),
    problem: "origin host '[2001:db8::1]' is a placeholder (an IP literal); set the real production host"),
  .init(
    name: "origin with a path", text: production(["origin": "\"https://app.bandlicence.test/app\""]),
    problem:
      "origin 'https://app.bandlicence.test/app' must be scheme://host[:port] with no path, query, user or trailing slash"
  ),
  .init(
    name: "origin with a trailing slash", text: production(["origin": "\"https://app.bandlicence.test/\""]),
    problem:
      "origin 'https://app.bandlicence.test/' must be scheme://host[:port] with no path, query, user or trailing slash"
  ),
  .init(
    name: "origin with a query", text: production(["origin": "\"https://app.bandlicence.test?x=1\""]),
    problem:
      "origin 'https://app.bandlicence.test?x=1' must be scheme://host[:port] with no path, query, user or trailing slash"
  ),
  .init(
    name: "origin with a bad port", text: production(["origin": "\"https://app.bandlicence.test:99999\""]),
    problem: "origin 'https://app.bandlicence.test:99999' has an invalid port"),
  .init(
    name: "environment variable origin wins", text: production(),
    env: ["BAND_LICENCE_APP_URL": "http://app.bandlicence.test"],
    problem: "origin 'http://app.bandlicence.test' must use https in production"),
  .init(
    name: "development on another host", text: "{}", env: ["BAND_LICENCE_APP_URL": "http://192.168.1.5:8080"],
    problem:
      "in development the origin must be http://localhost:<port> or http://127.0.0.1:<port>, not 'http://192.168.1.5:8080'"
  ),
  .init(
    name: "development over https", text: "{\"origin\": \"https://localhost:8443\"}",
    problem:
      "in development the origin must be http://localhost:<port> or http://127.0.0.1:<port>, not 'https://localhost:8443'"
  ),
  .init(
    name: "malformed app ID (short team)",
    text: production(["apple": "{\"appIDs\": [\"K7QW2X9.test.bandlicence.app\"]}"]),
    problem: "apple app ID 'K7QW2X9.test.bandlicence.app' must be <10-character team ID>.<bundle ID>"),
  .init(
    name: "malformed app ID (lower-case team)",
    text: production(["apple": "{\"appIDs\": [\"k7qw2x9p4m.test.bandlicence.app\"]}"]),
    problem: "apple app ID 'k7qw2x9p4m.test.bandlicence.app' must be <10-character team ID>.<bundle ID>"),
  .init(
    name: "placeholder team ID",
    text: production(["apple": "{\"appIDs\": [\"ABCDE12345.test.bandlicence.app\"]}"]),
    problem: "apple app ID 'ABCDE12345.test.bandlicence.app' is still a placeholder"),
  .init(
    name: "placeholder bundle ID",
    text: production(["apple": "{\"appIDs\": [\"K7QW2X9P4M.com.example.app\"]}"]),
    problem: "apple app ID 'K7QW2X9P4M.com.example.app' is still a placeholder"),
  .init(
    name: "duplicate app ID",
    text: production([
      "apple": "{\"appIDs\": [\"K7QW2X9P4M.test.bandlicence.app\", \"K7QW2X9P4M.test.bandlicence.app\"]}"
    ]),
    problem: "apple app ID 'K7QW2X9P4M.test.bandlicence.app' is listed twice"),
  .init(
    name: "lower-case fingerprint",
    text: production([
      "android":
        "{\"packageName\": \"test.bandlicence.app\", \"sha256CertFingerprints\": [\"\(fingerprint.lowercased())\"]}"
    ]),
    problem:
      "android fingerprint '\(fingerprint.lowercased())' must be 32 upper-case hex bytes joined by colons"),
  .init(
    name: "short fingerprint",
    text: production([
      "android": "{\"packageName\": \"test.bandlicence.app\", \"sha256CertFingerprints\": [\"AB:CD\"]}"
    ]),
    problem: "android fingerprint 'AB:CD' must be 32 upper-case hex bytes joined by colons"),
  .init(
    name: "placeholder fingerprint",
    text: production([
      "android": "{\"packageName\": \"test.bandlicence.app\", \"sha256CertFingerprints\": [\"\(zeros)\"]}"
    ]),
    problem: "android fingerprint '\(zeros)' is still a placeholder"),
  .init(
    name: "duplicate fingerprint",
    text: production([
      "android":
        "{\"packageName\": \"test.bandlicence.app\", \"sha256CertFingerprints\": [\"\(fingerprint)\", \"\(fingerprint)\"]}"
    ]),
    problem: "android fingerprint '\(fingerprint)' is listed twice"),
  .init(
    name: "invalid package name",
    text: production([
      "android": "{\"packageName\": \"bandlicence\", \"sha256CertFingerprints\": [\"\(fingerprint)\"]}"
    ]),
    problem: "android package name 'bandlicence' is not a valid application ID"),
  .init(
    name: "package without fingerprints",
    text: production(["android": "{\"packageName\": \"test.bandlicence.app\"}"]),
    problem: "android needs both packageName and sha256CertFingerprints, or neither"),
  .init(
    name: "production without an Android app", text: production(drop: ["android"]),
    problem:
      "no Android app: production with verified links or native sign-in needs its package and fingerprints"),
  .init(
    name: "link path without slash", text: production(["verifiedLinkPaths": "[\"native/callback\"]"]),
    problem: "verified link path 'native/callback' must start with / and hold no spaces, ? or #"),
  .init(
    name: "duplicate link path", text: production(["verifiedLinkPaths": "[\"/qr/*\", \"/qr/*\"]"]),
    problem: "verified link path '/qr/*' is listed twice"),
  .init(
    name: "staging using production's bundle ID",
    text: production([
      "environment": "\"staging\"", "label": "\"Staging\"",
      "knownIdentities": "{\"production\": {\"appleBundleIDs\": [\"test.bandlicence.app\"]}}",
    ]),
    problem: "staging uses production's bundle ID 'test.bandlicence.app'"),
  .init(
    name: "production using staging's package name",
    text: production(["knownIdentities": "{\"staging\": {\"androidPackageName\": \"test.bandlicence.app\"}}"]
    ),
    problem: "production uses staging's package name 'test.bandlicence.app'"),
  .init(
    name: "staging labelled Production",
    text: production(["environment": "\"staging\"", "label": "\"Production\""]),
    problem: "staging must not be labelled 'Production': people must see it is not production"),
  .init(
    name: "unknown capability", text: production(["capabilities": "{\"teleport\": true}"]),
    problem: "unknown setting 'capabilities.teleport'"),
  .init(
    name: "kill switch for nothing", text: production(["killSwitches": "[\"teleport\"]"]),
    problem: "kill switch 'teleport' names no capability"),
  .init(
    name: "bad minimum version", text: production(["minimumAppVersion": "{\"ios\": \"1\"}"]),
    problem: "minimumAppVersion.ios '1' must be MAJOR.MINOR[.PATCH]"),
  .init(
    name: "short handoff in production", text: production(["handoffLifetimeSeconds": "30"]),
    problem: "handoffLifetimeSeconds must be 120 in production"),
  .init(
    name: "link max-age out of range", text: production(["linkFileMaxAgeSeconds": "5"]),
    problem: "linkFileMaxAgeSeconds must be 60 to 86400"),
  .init(
    name: "unknown top-level key", text: production(["orign": "\"x\""]), problem: "unknown setting 'orign'"),
  .init(name: "wrong type", text: production(["label": "42"]), problem: "'label' must be a string"),
  .init(
    name: "a limit that is not a number", text: production(["limits": "{\"max-body-bytes\": \"1 MB\"}"]),
    problem: "limits.max-body-bytes must be a number"),
  .init(
    name: "limits not an object", text: production(["limits": "[1]"]), problem: "'limits' must be an object"),
]

@Suite("Deployment validation")
struct DeploymentValidationTests {
  @Test("the valid production configuration loads")
  func validProduction() throws {
    let deployment = try load(production()).get()
    #expect(deployment.environment == .production)
    #expect(deployment.origin == "https://app.bandlicence.test")
    #expect(deployment.label == "Production")
    #expect(deployment.summary.contains("time zone:          Europe/London"), "config check shows the zone")
  }

  @Test("each invalid configuration is refused with its own message", arguments: invalidCases)
  func invalid(_ c: InvalidCase) {
    switch load(c.text, env: c.env) {
    case .success: Issue.record("accepted: \(c.text)")
    case .failure(let problems): #expect(problems.lines.contains(c.problem), "\(problems.lines)")
    }
  }

  @Test("every problem is reported at once")
  func allProblems() {
    let text = production([
      "origin": "\"http://example.com\"", "apple": "{\"appIDs\": [\"bad\"]}", "verifiedLinkPaths": "[\"x\"]",
    ])
    guard case .failure(let problems) = load(text) else {
      Issue.record("accepted")
      return
    }
    #expect(problems.lines.count >= 4, "\(problems.lines)")
  }

  @Test("development defaults: loopback origin, default label, no identities")
  func developmentDefaults() throws {
    let deployment = try load(nil).get()
    #expect(deployment.environment == .development)
    #expect(deployment.origin == "http://127.0.0.1:8080")
    #expect(deployment.label == "Development")
  }

  @Test("the environment variable chooses the environment over the file")
  func environmentVariable() throws {
    // The file says development (which needs nothing more); the variable says staging, which
    // needs an origin: the variable wins, so the file is refused.
    let development = #"{"environment": "development"}"#
    #expect(try load(development).get().environment == .development)
    guard case .failure(let problems) = load(development, env: ["BAND_LICENCE_ENV": "staging"]) else {
      Issue.record("accepted: the file's environment won over the variable")
      return
    }
    #expect(
      problems.lines.first
        == "origin is missing: set BAND_LICENCE_APP_URL or \"origin\" to https://<your host>")
    // And the other way round: a file for staging (no origin) loads as development when the
    // variable says so.
    let staging = #"{"environment": "staging"}"#
    guard case .failure = load(staging) else {
      Issue.record("a staging file without an origin was accepted")
      return
    }
    #expect(try load(staging, env: ["BAND_LICENCE_ENV": "development"]).get().environment == .development)
  }
}
