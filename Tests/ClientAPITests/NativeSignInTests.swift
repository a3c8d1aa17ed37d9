import Deployment
import Edge
import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI

@Suite("PKCE and handoff parameters")
struct PKCETests {
  @Test("RFC 7636 Appendix B: the verifier hashes to the challenge")
  func appendixB() {
    let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    #expect(PKCE.challenge(forVerifier: verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    #expect(PKCE.matches(verifier: verifier, challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"))
    #expect(!PKCE.matches(verifier: verifier + "x", challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"))
  }

  @Test(
    "verifiers: 43 to 128 unreserved characters",
    arguments: [
      (String(repeating: "a", count: 43), true), (String(repeating: "a", count: 42), false),
      (String(repeating: "a", count: 128), true), (String(repeating: "a", count: 129), false),
      (String(repeating: "A", count: 40) + "-._~", true), (String(repeating: "a", count: 42) + "+", false),
      (String(repeating: "a", count: 42) + "/", false), (String(repeating: "a", count: 42) + "é", false),
    ])
  func verifiers(text: String, valid: Bool) { #expect(PKCE.validVerifier(text) == valid) }

  @Test(
    "challenges: exactly 43 base64url characters",
    arguments: [
      ("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", true),
      ("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-c", false),
      ("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM=", false),
      ("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw+cM", false),
      ("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw.cM", false),
    ])
  func challenges(text: String, valid: Bool) { #expect(PKCE.validChallenge(text) == valid) }

  @Test(
    "states: 16 to 512 URL-safe characters",
    arguments: [
      (String(repeating: "s", count: 16), true), (String(repeating: "s", count: 15), false),
      (String(repeating: "s", count: 512), true), (String(repeating: "s", count: 513), false),
      ("abcdefghijklmno&", false), ("abcdefghijklmno ", false), ("abcdefghijklmn~_", true),
    ])
  func states(text: String, valid: Bool) { #expect(PKCE.validState(text) == valid) }

  @Test(
    "app versions: MAJOR.MINOR[.PATCH]",
    arguments: [
      ("1.4", true), ("1.4.0", true), ("1", false), ("1.4.0.1", false), ("1..4", false), ("1.4-beta", false),
      ("v1.4", false), ("", false), ("1234567.0", false),
    ])
  func versions(text: String, valid: Bool) { #expect(PKCE.validAppVersion(text) == valid) }

  static let good: [String: String] = [
    "state": "state-0123456789abcdef", "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    "code_challenge_method": "S256", "platform": "ios", "app_version": "1.4.0",
  ]

  @Test(
    "every refusal of a sign-in link",
    arguments: [
      ("code_challenge_method", nil), ("code_challenge_method", "plain"), ("code_challenge", "short"),
      ("state", "short"), ("platform", "windows"), ("app_version", "1.3.9"), ("app_version", "one"),
      ("redirect_uri", "https://elsewhere.example/"), ("return_to", "/x"),
    ] as [(String, String?)])
  func refusals(name: String, value: String?) throws {
    var fields = Self.good
    fields[name] = value
    let deployment = try deployment()
    guard case .failure = HandoffParameters.parse(fields, deployment: deployment) else {
      Issue.record("\(name)=\(value ?? "nil") was accepted")
      return
    }
    guard case .success = HandoffParameters.parse(Self.good, deployment: deployment) else {
      Issue.record("the good parameters were refused")
      return
    }
  }

  func deployment() throws -> Deployment {
    let directory = try TestDirectory.make("pkce")
    let config = directory.appendingPathComponent("config.json")
    try #"{"minimumAppVersion": {"ios": "1.4.0", "android": "1.0.0"}}"#.write(
      to: config, atomically: true, encoding: .utf8)
    return try DeploymentLoader.load(environment: [:], configPath: config.path).get()
  }

  @Test("a sealed answer opens only with the same verifier's key and unaltered")
  func seal() throws {
    let key = Seal.key(verifier: String(repeating: "v", count: 43))
    let box = try #require(Seal.seal(Array("token".utf8), key: key))
    #expect(Seal.open(box, key: key) == Array("token".utf8))
    #expect(Seal.open(box, key: Seal.key(verifier: String(repeating: "w", count: 43))) == nil)
    var altered = box
    altered[14] ^= 1
    #expect(Seal.open(altered, key: key) == nil)
    #expect(!box.contains(Array("token".utf8)))
  }
}

@Suite("Native handoff exchange (store)")
struct HandoffStoreTests {
  let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
  let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

  func setUp(_ engine: Engine) throws -> (ClientStore, TestClock, String) {
    let (store, clock, _) = try makeStore(engine)
    let account = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    let code = try store.createHandoff(
      accountID: account.id, challenge: challenge, state: "state-0123456789abcdef", platform: "ios",
      appVersion: "1.4.0", lifetime: 120)
    return (store, clock, code)
  }

  func request(
    _ code: String, verifier: String? = nil, state: String = "state-0123456789abcdef", key: String? = "k1"
  )
    -> ExchangeRequest
  {
    let verifier = verifier ?? self.verifier
    return ExchangeRequest(
      code: code, codeVerifier: verifier, state: state, platform: "ios", appVersion: "1.4.0",
      idempotencyKey: key,
      bodyDigest: Secrets.digest(code + verifier + state))
  }

  @Test("the first exchange grants a native session; the code is then used up", arguments: Engine.available)
  func grant(engine: Engine) throws {
    let (store, _, code) = try setUp(engine)
    guard
      case .granted(let token, let session) = try store.exchange(request(code), lifetimes: SessionLifetimes())
    else {
      Issue.record("refused")
      return
    }
    #expect(session.kind == .native && session.platform == "ios" && session.appVersion == "1.4.0")
    #expect(try store.session(token: token, lifetimes: SessionLifetimes()) != nil)
    // An identical retry (same key, same body) gets the same session back, token and all.
    #expect(
      try store.exchange(request(code), lifetimes: SessionLifetimes())
        == .granted(token: token, session: session))
    // A different key is a replay: refused, and the session it issued is revoked.
    #expect(try store.exchange(request(code, key: "k2"), lifetimes: SessionLifetimes()) == .invalidGrant)
    #expect(try store.session(token: token, lifetimes: SessionLifetimes()) == nil)
    #expect(try store.auditEvents().contains { $0.action == "handoff.replayed" })
  }

  @Test(
    "wrong verifier, state or expired code: invalid_grant, and the code is used up",
    arguments: Engine.available)
  func refusals(engine: Engine) throws {
    for variant in 0..<4 {
      let (store, clock, code) = try setUp(engine)
      let first: ExchangeRequest
      switch variant {
      case 0: first = request(code, verifier: String(repeating: "x", count: 43))
      case 1: first = request(code, state: "state-0123456789abcdeX")
      case 2:
        clock.advance(120)
        first = request(code)
      default: first = request(Secrets.token())
      }
      #expect(try store.exchange(first, lifetimes: SessionLifetimes()) == .invalidGrant)
      // Then the right request: still refused (used up), except for an unknown code's real one.
      let right = try store.exchange(request(code, key: "k9"), lifetimes: SessionLifetimes())
      #expect((right == .invalidGrant) == (variant != 3), "variant \(variant)")
    }
  }

  @Test("the database never holds the code or the token in clear", arguments: Engine.available)
  func nothingInClear(engine: Engine) throws {
    let (store, _, code) = try setUp(engine)
    guard case .granted(let token, _) = try store.exchange(request(code), lifetimes: SessionLifetimes())
    else {
      Issue.record("refused")
      return
    }
    let rows = try store.db.query("SELECT * FROM handoffs") + (try store.db.query("SELECT * FROM sessions"))
    // Every stored value as bytes (a BLOB's description prints decimal bytes, which a search of text
    // never matches): neither the code nor the token, as text or as its bytes, is inside any.
    let stored: [[UInt8]] = rows.flatMap { row in
      row.compactMap { value -> [UInt8]? in
        switch value {
        case .text(let text): Array(text.utf8)
        case .blob(let bytes): bytes
        default: nil
        }
      }
    }
    for secret in [Array(code.utf8), Array(token.utf8)] {
      #expect(!stored.contains { Self.contains($0, secret) })
    }
    // What is kept is the SHA-256 of each.
    let handoff = try store.db.query("SELECT code_digest FROM handoffs")
    #expect(handoff.first?.first == .blob(Secrets.digest(code)))
    let session = try store.db.query("SELECT token_digest FROM sessions")
    #expect(session.first?.first == .blob(Secrets.digest(token)))
  }

  /// Whether `haystack` holds `needle` as a run of bytes.
  static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains {
      haystack[$0..<($0 + needle.count)].elementsEqual(needle)
    }
  }
}

@Suite("Native sign-in refusals speak to the person (in-process)")
struct NativeRefusalTests {
  static let deployment = try! DeploymentLoader.load(environment: [:], configPath: nil).get()
  static let good = PKCETests.good

  func refused(_ changes: [String: String?], deployment: Deployment = deployment)
    -> HandoffParameters.Refusal?
  {
    var fields = Self.good
    for (name, value) in changes { fields[name] = value }
    guard case .failure(let refusal) = HandoffParameters.parse(fields, deployment: deployment) else {
      return nil
    }
    return refusal
  }

  @Test(
    "every problem is listed, not only the first; the state is kept when it is valid",
    arguments: [
      (["code_challenge_method": "plain"], 1, true),
      (["code_challenge_method": nil, "code_challenge": "short", "platform": "windows"], 3, true),
      (["state": "short", "app_version": "one"], 2, false),
      (["redirect_uri": "https://elsewhere.example/", "state": nil, "code_challenge": nil], 3, false),
    ] as [([String: String?], Int, Bool)])
  func collected(changes: [String: String?], count: Int, keepsState: Bool) throws {
    let refusal = try #require(refused(changes))
    #expect(refusal.details.count == count, "\(refusal.details)")
    #expect((refusal.state != nil) == keepsState)
    #expect(refusal.message == HandoffParameters.Refusal.brokenLink)
  }

  @Test("an old app and a switched-off sign-in get their own sentence for the person")
  func sentences() throws {
    let old = try #require(refused(["app_version": "0.9.0"]))
    #expect(
      old.message.contains("too old")
        && old.details == ["app_version 0.9.0 is below the minimum for ios, 1.0.0."])
    var off = Self.deployment
    off.capabilities.values["nativeSignIn"] = false
    let disabled = try #require(refused([:], deployment: off))
    #expect(disabled.message.contains("turned off") && disabled.details.count == 1)
  }

  func page(_ refusal: HandoffParameters.Refusal) -> (Response, String) {
    let context = ClientContext(
      databasePath: "/nonexistent/never-opened.sqlite", deployment: Self.deployment,
      lifetimes: SessionLifetimes(), clock: { 0 })
    let response = NativeSignIn(context).refused(refusal)
    let bytes = response.body.contents
    return (response, String(decoding: bytes, as: UTF8.self))
  }

  @Test("the page: a plain sentence, the reasons in a details element, a way back to the app with the state")
  func refusedPage() throws {
    let (response, page) = page(
      try #require(refused(["code_challenge_method": "plain", "platform": "x"])))
    #expect(response.status == .badRequest)
    #expect(response.header("Referrer-Policy") == "no-referrer")
    #expect(page.contains("<p>\(HTMLText.escape(HandoffParameters.Refusal.brokenLink))</p>"))
    #expect(
      page.contains("<details class=\"developer\">\n<summary>Details for the app's developer</summary>"))
    #expect(
      page.contains("<li>code_challenge_method must be S256") && page.contains("<li>platform must be ios"))
    #expect(
      page.contains(
        "href=\"http://127.0.0.1:8080/native/callback?error=invalid_request&amp;state=state-0123456789abcdef\">Return to the app</a>"
      ))
  }

  @Test("no way back without a valid state, or when the callback is not an approved link path")
  func noWayBack() throws {
    let (_, invalid) = page(try #require(refused(["state": "bad state!"])))
    #expect(
      !invalid.contains("/native/callback")
        && invalid.contains("Return to the app and start signing in again."))
    var unapproved = try #require(refused(["platform": "x"]))
    unapproved = HandoffParameters.Refusal(
      unapproved.message, details: unapproved.details, state: unapproved.state)
    let context = ClientContext(
      databasePath: "/nonexistent/never-opened.sqlite",
      deployment: {
        var d = Self.deployment; d.verifiedLinkPaths = ["/qr/*"]; return d
      }(),
      lifetimes: SessionLifetimes(), clock: { 0 })
    let response = NativeSignIn(context).refused(unapproved)
    let bytes = response.body.contents
    #expect(!String(decoding: bytes, as: UTF8.self).contains("/native/callback"))
  }
}
