import Deployment
import Edge
import EdgeTesting
import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI
@testable import Store

/// A session endpoint over a fresh store on `engine`, a deployment whose iOS minimum is 1.4, and helpers.
struct SessionFixture {
  let store: ClientStore
  let api: SessionAPI
  let pages: WebPages
  /// The session endpoints, the web pages and `PATCH /account`.
  let router: Router
  let clock: TestClock
  /// Where the store lives: another connection to it is `location.open()`.
  let location: DatabaseLocation

  init(_ engine: Engine) throws {
    let (_, clock, location) = try makeStore(engine)
    let config = try TestDirectory.make("fixture").appendingPathComponent("config.json")
    try #"{"minimumAppVersion": {"ios": "1.4.0", "android": "1.0.0"}}"#.write(
      to: config, atomically: true, encoding: .utf8)
    let deployment = try DeploymentLoader.load(environment: [:], configPath: config.path).get()
    self.clock = clock
    self.location = location
    var hasher = PasswordHasher()
    hasher.memoryKiB = 1024  // cheap for tests; rehash-on-sign-in is tested with the real parameters
    hasher.timeCost = 1
    let services = ClientServices(
      database: location, lifetimes: SessionLifetimes(), hasher: hasher, clock: clock.read)
    // The services' own connection on this thread, as the handlers use it: its changes reach the
    // loop-side cache at commit on either engine. (Another connection's reach it by the WAL index
    // or the change listener; those are tested where they happen.)
    store = try services.stores.value()
    let context = ClientContext(services: services, deployment: deployment, stylesheet: "/styles.test.css")
    api = SessionAPI(context)
    pages = WebPages(context)
    router = try Router(api.routes + pages.routes + AccountAPI(context).routes)
  }

  /// A client of the API: it sends Bearer tokens, so no `Origin` of its own.
  var client: InProcessClient { InProcessClient(router, origin: nil) }

  /// A new browser: cookies kept, our `Origin` on every unsafe request.
  func browser() -> InProcessClient { InProcessClient(router) }

  /// Whether the loop would answer `GET /session` for `token` without the pool.
  func answeredOnLoop(_ token: String) -> Bool {
    guard case .found(let route, _, _) = router.match(.get, "/api/client/v1/session") else { return false }
    return route.fastPath?(
      Request(method: .get, target: "/api/client/v1/session", headers: [("Authorization", "Bearer \(token)")])
    ) != nil
  }

  func signedIn(_ email: String, schools: [(String, Role)] = []) throws -> String {
    let account = try store.createAccount(
      email: EmailAddress(stringLiteral: email), displayName: email, passwordHash: "x", actor: "test")
    for (slug, role) in schools {
      try store.addMember(
        email: EmailAddress(stringLiteral: email), schoolSlug: slug, role: role, actor: "test")
    }
    let token = Secrets.token()
    _ = try store.createSession(
      accountID: account.id, kind: .native, platform: "ios", appVersion: "1.4.0", token: token,
      lifetimes: SessionLifetimes())
    return token
  }

  func call(_ method: HTTPMethod, token: String?, headers: [(String, String)] = []) -> Response {
    let auth = token.map { [("Authorization", "Bearer \($0)")] } ?? []
    return client.respond(to: client.request(method, "/api/client/v1/session", headers: auth + headers))
  }
}

func body(_ response: Response) throws -> [String: Any] {
  let bytes = response.body.contents
  return try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] ?? [:]
}

@Suite("Session endpoint (in-process)")
struct SessionAPITests {
  @Test("every route is private and pooled")
  func routes() throws {
    let f = try SessionFixture(.sqlite)  // the route table only: no store is read
    #expect(f.api.routes.allSatisfy { $0.cacheClass == .private && $0.execution == .pooled })
  }

  @Test("no credentials: 401 with a bare challenge; a bad token: invalid_token", arguments: Engine.available)
  func unauthorized(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let none = f.call(.get, token: nil)
    #expect(none.status == .unauthorized)
    #expect(none.header("WWW-Authenticate") == "Bearer realm=\"band-licence\"")
    let bad = f.call(.get, token: Secrets.token())
    #expect(bad.header("WWW-Authenticate") == "Bearer realm=\"band-licence\", error=\"invalid_token\"")
  }

  @Test(
    "the session has exactly the contract's fields and only this account's live schools",
    arguments: Engine.available)
  func session(engine: Engine) throws {
    let f = try SessionFixture(engine)
    _ = try f.store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "test")
    _ = try f.store.createSchool(name: "Southgate Academy", slug: "southgate", actor: "test")
    let ada = try f.signedIn("ada@example.test", schools: [("northfield", .teacher)])
    let bo = try f.signedIn("bo@example.test", schools: [("southgate", .administrator)])
    let response = f.call(.get, token: ada)
    #expect(response.status == .ok)
    #expect(response.header("Content-Type") == "application/json; charset=utf-8")
    let json = try body(response)
    #expect(Set(json.keys) == ["account", "schools", "deployment", "capabilities"])
    let account = try #require(json["account"] as? [String: Any])
    #expect(Set(account.keys) == ["id", "displayName", "email"])
    #expect(account["email"] as? String == "ada@example.test")
    let schools = try #require(json["schools"] as? [[String: Any]])
    #expect(schools.map { $0["slug"] as? String } == ["northfield"])
    #expect(schools.map { $0["role"] as? String } == ["teacher"])
    let boSchools = try #require(try body(f.call(.get, token: bo))["schools"] as? [[String: Any]])
    #expect(boSchools.map { $0["slug"] as? String } == ["southgate"], "B never sees A's schools, nor A B's")
    // A revoked membership disappears from the very next answer.
    try f.store.revokeMember(email: "ada@example.test", schoolSlug: "northfield", actor: "test")
    #expect((try body(f.call(.get, token: ada))["schools"] as? [Any])?.isEmpty == true)
    // A disabled account gets 401 at once (bo is southgate's only administrator: forced).
    _ = try f.store.setDisabled(email: "bo@example.test", true, actor: "test", force: true)
    #expect(f.call(.get, token: bo).status == .unauthorized)
  }

  @Test(
    "the hand-written session body is the canonical JSON of the contract's object",
    arguments: [0, 1, 2])
  func canonicalBody(schools: Int) throws {
    let f = try SessionFixture(.sqlite)  // the body is built from values: no store is read
    let account = Account(
      id: "acc_x", email: "q\"uote@example.test", displayName: "Zoë \\ \u{1}Tab\t", disabled: false)
    let memberships = (0..<schools).map {
      Membership(school: School(id: "sch_\($0)", name: "School \"\($0)\"", slug: "s\($0)"), role: .readOnly)
    }
    let expected = JSONValue.object([
      "account": .object([
        "id": .string(account.id), "displayName": .string(account.displayName),
        "email": .string(account.email),
      ]),
      "schools": .array(
        memberships.map {
          .object([
            "id": .string($0.school.id), "name": .string($0.school.name), "slug": .string($0.school.slug),
            "role": .string($0.role.rawValue),
          ])
        }),
      "deployment": .object(["environment": .string("development"), "label": .string("Development")]),
      "capabilities": try JSONValue.parse(f.api.json.capabilitiesJSON),
    ]).canonical
    #expect(String(decoding: f.api.json.body(account, memberships), as: UTF8.self) == expected)
  }

  // SQLite only: this holds SQLite's rule that any commit invalidates at once. On PostgreSQL the
  // cache hears of announced changes through its ChangeListener a moment after the commit (see
  // PostgresFleetTests.listener and the end-to-end test_fleet_revocation).
  @Test(
    "cached answers: served on the loop only while nothing but its own last-seen writes was committed and the session is fresh",
    arguments: [Engine.sqlite])
  func cache(engine: Engine) throws {
    let f = try SessionFixture(engine)
    _ = try f.store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "test")
    let ada = try f.signedIn("ada@example.test", schools: [("northfield", .teacher)])
    let bo = try f.signedIn("bo@example.test")
    #expect(!f.answeredOnLoop(ada), "nothing cached yet")
    let first = f.call(.get, token: ada)
    #expect(f.answeredOnLoop(ada))
    #expect(!f.answeredOnLoop(bo), "one person's entry never answers another token")
    let cached =
      f.client.respond(
        to: Request(
          method: .get, target: "/api/client/v1/session", headers: [("Authorization", "Bearer \(ada)")])
      ).body.contents
    #expect(cached == first.body.contents)
    // Any commit, by any connection, invalidates: here an unrelated account's change.
    _ = try f.store.setDisabled(email: "bo@example.test", true, actor: "test")
    #expect(!f.answeredOnLoop(ada))
    _ = f.call(.get, token: ada)
    #expect(f.answeredOnLoop(ada))
    try f.store.revokeMember(email: "ada@example.test", schoolSlug: "northfield", actor: "test")
    #expect(!f.answeredOnLoop(ada))
    #expect((try body(f.call(.get, token: ada))["schools"] as? [Any])?.isEmpty == true)
    // The last-seen resolution bounds an entry's life, so reads keep marking the session seen.
    #expect(f.answeredOnLoop(ada))
    let cy = try f.signedIn("cy@example.test")
    f.clock.advance(ClientStore.seenResolution)
    #expect(!f.answeredOnLoop(ada))
    _ = f.call(.get, token: cy)
    #expect(f.answeredOnLoop(cy))
    // That read marks Ada's session seen: a commit, but this process's own last-seen write, which
    // changes no cached answer: her fresh answer and Cy's stay cached.
    _ = f.call(.get, token: ada)
    #expect(f.answeredOnLoop(ada))
    #expect(f.answeredOnLoop(cy))
    // Another process's last-seen write is a commit like any other: everything is read again.
    let other = try ClientStore(database: try f.location.open(), clock: f.clock.read)
    f.clock.advance(ClientStore.seenResolution)
    _ = f.call(.get, token: cy)
    #expect(f.answeredOnLoop(cy))
    #expect(try other.session(token: ada, lifetimes: SessionLifetimes()) != nil)
    #expect(!f.answeredOnLoop(cy))
    // A session revoked from another connection (another process, the CLI) ends at once.
    _ = try other.revokeSessions(.account(email: "ada@example.test"), reason: "test", actor: "cli")
    #expect(!f.answeredOnLoop(ada))
    #expect(f.call(.get, token: ada).status == .unauthorized)
  }

  @Test("DELETE revokes the presented session at once", arguments: Engine.available)
  func delete(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let token = try f.signedIn("ada@example.test")
    #expect(f.call(.delete, token: token).status == .noContent)
    #expect(f.call(.get, token: token).status == .unauthorized)
    #expect(f.call(.delete, token: token).status == .unauthorized)
  }

  @Test(
    "an app below its platform's minimum gets 426; a malformed client header 400", arguments: Engine.available
  )
  func versions(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let token = try f.signedIn("ada@example.test")
    let old = f.call(.get, token: token, headers: [("Band-Licence-Client", "ios/1.3.9")])
    #expect(old.status == .upgradeRequired)
    #expect(try body(old)["minimumVersion"] as? String == "1.4.0")
    #expect(f.call(.get, token: token, headers: [("Band-Licence-Client", "ios/1.4.0")]).status == .ok)
    #expect(f.call(.get, token: token, headers: [("Band-Licence-Client", "android/1.0")]).status == .ok)
    #expect(
      f.call(.get, token: token, headers: [("Band-Licence-Client", "windows/1.0")]).status == .badRequest)
  }

  @Test(
    "Band-Licence-Client follows the documented pattern: ios|android / 2 or 3 parts of 1 to 6 ASCII digits",
    arguments: Engine.available,
    [
      ("ios/1.4.0", 200), ("android/2.1", 200), ("ios/1.4.0.1", 400), ("ios/1", 400), ("ios/1..4", 400),
      ("ios/1.4.", 400), ("ios/", 400), ("ios/١.٤", 400), ("ios/1.4.0x", 400), ("IOS/1.4.0", 400),
      ("ios/1234567.0", 400), ("ios/1.4/0", 400), ("ios 1.4.0", 400),
    ])
  func clientHeaderPattern(engine: Engine, row: (String, Int)) throws {
    let (header, status) = row
    let f = try SessionFixture(engine)
    let token = try f.signedIn("ada@example.test")
    #expect(f.call(.get, token: token, headers: [("Band-Licence-Client", header)]).status.code == status)
  }

  @Test("answers never contain the token or its digest", arguments: Engine.available)
  func noSecrets(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let token = try f.signedIn("ada@example.test")
    let digest = Secrets.digest(token).map { String(format: "%02x", $0) }.joined()
    for response in [f.call(.get, token: token), f.call(.get, token: Secrets.token())] {
      let bytes = response.body.contents
      let text = String(decoding: bytes, as: UTF8.self)
      #expect(!text.contains(token) && !text.contains(digest))
    }
  }
}

/// The pool's batch of `GET /session` reads: every answer its own person's, in order, and each
/// cached under its own token.
@Suite("Session reads in one batch (in-process)")
struct SessionBatchTests {
  @Test(
    "a batch of mixed requests: each answered in order, each cached answer its own person's",
    arguments: [Engine.sqlite])
  func batch(engine: Engine) throws {
    let f = try SessionFixture(engine)
    _ = try f.store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "test")
    _ = try f.store.createSchool(name: "Aldgate Music", slug: "aldgate", actor: "test")
    let ada = try f.signedIn("ada@example.test", schools: [("northfield", .teacher)])
    let bo = try f.signedIn("bo@example.test", schools: [("aldgate", .administrator)])
    let cy = try f.signedIn("cy@example.test")
    func get(_ headers: [(String, String)]) -> Request {
      Request(method: .get, target: "/api/client/v1/session", headers: [("Host", "a")] + headers)
    }
    let requests = [
      get([]), get([("Authorization", "Basic eA==")]),
      get([("Authorization", "Bearer \(ada)"), ("Band-Licence-Client", "ios/1.0.0")]),
      get([("Authorization", "Bearer \(Secrets.token())")]), get([("Authorization", "Bearer \(ada)")]),
      get([("Authorization", "Bearer \(bo)")]), get([("Authorization", "Bearer \(ada)")]),
      get([("Cookie", "\(WebSecurity.sessionCookie)=\(cy)")]),
    ]
    let answers = f.api.readSessions(requests)
    #expect(answers.map(\.status.code) == [401, 401, 426, 401, 200, 200, 200, 200])
    let emails = answers.map {
      (try? body($0))?["account"].flatMap { ($0 as? [String: Any])?["email"] as? String }
    }
    #expect(
      emails.suffix(4) == ["ada@example.test", "bo@example.test", "ada@example.test", "cy@example.test"])
    let schools = answers.map {
      ((try? body($0))?["schools"] as? [[String: Any]])?.compactMap { $0["slug"] as? String }
    }
    #expect(schools.suffix(4) == [["northfield"], ["aldgate"], ["northfield"], []])
    // Now from the loop's cache: each token its own answer.
    for (token, email) in [(ada, "ada@example.test"), (bo, "bo@example.test")] {
      let cached = f.api.cachedSession(get([("Authorization", "Bearer \(token)")]))
      let account = cached.flatMap { try? body($0) }?["account"] as? [String: Any]
      #expect(account?["email"] as? String == email)
    }
    #expect(f.api.cachedSession(get([("Authorization", "Bearer \(Secrets.token())")])) == nil)
  }
}

/// The credential a request carries: one reading of the `Authorization` field and the cookie.
@Suite("Credentials")
struct CredentialTests {
  static let cases: [(headers: [(String, String)], expected: Credential)] = [
    ([], .none),
    ([("Authorization", "Bearer abc")], .bearer("abc")),
    ([("Authorization", "bearer abc")], .bearer("abc")),
    ([("Authorization", "BEARER abc-_0")], .bearer("abc-_0")),
    ([("Authorization", "Bearer")], .malformed),
    ([("Authorization", "Basic YWRhOng=")], .malformed),
    ([("Authorization", "Bearers abc")], .malformed),
    ([("Authorization", "Bearxr abc")], .malformed),
    ([("Authorization", "Bearer a b")], .bearer("a b")),
    ([("Authorization", "Bearer abc"), ("authorization", "Bearer def")], .malformed),
    ([("Authorization", "Bearer abc"), ("Accept", "*/*"), ("AUTHORIZATION", "Bearer abc")], .malformed),
    ([("Authorization", "Bearer abc"), ("Cookie", "\(WebSecurity.sessionCookie)=xyz")], .bearer("abc")),
    ([("Cookie", "\(WebSecurity.sessionCookie)=xyz")], .cookie("xyz")),
  ]

  @Test("Authorization wins over the cookie; the scheme in any case; anything else is malformed")
  func table() {
    for (headers, expected) in Self.cases {
      let request = Request(method: .get, target: "/api/client/v1/session", headers: headers)
      #expect(Credential(request) == expected, "\(headers)")
    }
  }
}
