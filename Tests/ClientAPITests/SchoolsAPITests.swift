import Deployment
import Edge
import EdgeTesting
import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI
@testable import Store

/// A school with one of each kind of caller: Ada administers Northfield, Tom teaches there, Rory
/// reads only, Nia administers Southgate only, Rev was Northfield's administrator until revoked;
/// Cy (a teacher) is the member the changes are made to, and one invitation is pending.
struct SchoolsFixture {
  let f: SessionFixture
  let router: Router
  let northfield: School
  let southgate: School
  var tokens: [Caller: String] = [:]
  var ids: [String: String] = [:]
  let invitationID: String

  enum Caller: String, CaseIterable, Sendable {
    case administrator, teacher, readOnly, nonMember, revoked
  }

  init(_ engine: Engine) throws {
    f = try SessionFixture(engine)
    let context = f.pages.context
    router = try Router(
      SessionAPI(context).routes + SchoolsAPI(context).routes + PeoplePages(context).routes
        + InvitationPages(context).routes)
    northfield = try f.store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "test")
    southgate = try f.store.createSchool(name: "Southgate Academy", slug: "southgate", actor: "test")
    let people: [(Caller?, String, [(String, Role)])] = [
      (.administrator, "ada@example.test", [("northfield", .administrator)]),
      (.teacher, "tom@example.test", [("northfield", .teacher)]),
      (.readOnly, "rory@example.test", [("northfield", .readOnly)]),
      (.nonMember, "nia@example.test", [("southgate", .administrator)]),
      (.revoked, "rev@example.test", [("northfield", .administrator)]),
      (nil, "cy@example.test", [("northfield", .teacher)]),
      (nil, "sam@example.test", [("southgate", .teacher)]),
    ]
    for (caller, email, schools) in people {
      let token = try f.signedIn(email, schools: schools)
      if let caller { tokens[caller] = token }
      ids[email] = try #require(try f.store.account(email: EmailAddress(stringLiteral: email))?.0.id)
    }
    try f.store.revokeMember(email: "rev@example.test", schoolSlug: "northfield", actor: "test")
    let admin = try #require(try f.store.account(id: ids["ada@example.test"] ?? ""))
    guard
      case .created(let invitation, _) = try f.pages.context.invite(
        "pat@example.test", as: .teacher, to: northfield, by: admin, in: f.store)
    else { throw StoreError.failed("no invitation") }
    invitationID = invitation.id
  }

  /// A client of the API: Bearer tokens, or a cookie with the `Origin` a test gives; none of its own.
  var client: InProcessClient { InProcessClient(router, origin: nil) }

  /// A new browser: cookies kept, our `Origin` on every unsafe request.
  func browser() -> InProcessClient { InProcessClient(router) }

  /// A call to the API as `token`, with a JSON `body` when given.
  func call(
    _ method: HTTPMethod, _ path: String, token: String?, json: String? = nil, key: String? = nil,
    headers: [(String, String)] = []
  ) -> Response {
    var fields = headers
    if let token { fields.append(("Authorization", "Bearer \(token)")) }
    if let key { fields.append(("Idempotency-Key", key)) }
    let body = json.map(RequestBody.json) ?? .empty
    return client.respond(to: client.request(method, path, body: body, headers: fields))
  }

  /// The school's API path.
  func path(_ school: School, _ rest: String) -> String { "/api/client/v1/schools/\(school.id)\(rest)" }
}

@Suite("School-scoped endpoints (in-process)")
struct SchoolsAPITests {
  enum Operation: String, CaseIterable, Sendable {
    case listMembers, listInvitations, invite, revokeInvitation, setRole, removeMember

    /// What an administrator of the school gets.
    var granted: Status {
      switch self {
      case .listMembers, .listInvitations, .setRole: .ok
      case .invite: .created
      case .revokeInvitation, .removeMember: .noContent
      }
    }

    func run(_ s: SchoolsFixture, as token: String?) -> Response {
      let cy = s.ids["cy@example.test"] ?? ""
      switch self {
      case .listMembers: return s.call(.get, s.path(s.northfield, "/members"), token: token)
      case .listInvitations: return s.call(.get, s.path(s.northfield, "/invitations"), token: token)
      case .invite:
        return s.call(
          .post, s.path(s.northfield, "/invitations"), token: token,
          json: #"{"email":"lee@example.test","role":"read_only"}"#, key: "k1")
      case .revokeInvitation:
        return s.call(.delete, s.path(s.northfield, "/invitations/\(s.invitationID)"), token: token)
      case .setRole:
        return s.call(
          .patch, s.path(s.northfield, "/members/\(cy)"), token: token, json: #"{"role":"read_only"}"#)
      case .removeMember: return s.call(.delete, s.path(s.northfield, "/members/\(cy)"), token: token)
      }
    }
  }

  @Test("every route is private and pooled, under the school's path")
  func routes() throws {
    let s = try SchoolsFixture(.sqlite)
    let routes = SchoolsAPI(s.f.pages.context).routes
    #expect(routes.count == 6)
    #expect(routes.allSatisfy { $0.cacheClass == .private && $0.execution == .pooled })
    #expect(routes.allSatisfy { $0.pattern.hasPrefix("/api/client/v1/schools/:schoolId/") })
    // What the gateway's configuration is checked against before a context exists.
    #expect(Set(routes.map(\.pattern)) == Set(SchoolsAPI.patterns))
    #expect(SchoolsAPI.patterns.count == Set(SchoolsAPI.patterns).count)
  }

  @Test("a forward route's least role names exactly the school roles the store keeps")
  func gatewayRoles() {
    #expect(Set(SchoolRole.allCases.map(\.rawValue)) == Set(Role.allCases.map(\.rawValue)))
    #expect(SchoolRole.allCases.count == Role.allCases.count)
  }

  @Test(
    "an administrator may do everything; teachers and read-only members get 403; others 404",
    arguments: Engine.available, SchoolsFixture.Caller.allCases)
  func access(engine: Engine, caller: SchoolsFixture.Caller) throws {
    for operation in Operation.allCases {
      let s = try SchoolsFixture(engine)
      let before = try s.f.store.auditEvents().count
      let response = operation.run(s, as: s.tokens[caller])
      let expected: Status =
        switch caller {
        case .administrator: operation.granted
        case .teacher, .readOnly: .forbidden
        case .nonMember, .revoked: .notFound
        }
      #expect(response.status == expected, "\(caller) \(operation)")
      #expect(
        response.header("Content-Type") == (expected == .noContent ? nil : "application/json; charset=utf-8"))
      if caller != .administrator {
        let error = try body(response)["error"] as? String
        #expect(error == (expected == .forbidden ? "forbidden" : "not_found"), "\(caller) \(operation)")
        #expect(try s.f.store.auditEvents().count == before, "a refusal changes nothing")
      }
    }
  }

  @Test("without a session: 401; a cookie-authenticated change from another origin: 403 cross_origin")
  func unauthenticated() throws {
    let s = try SchoolsFixture(.sqlite)
    for operation in Operation.allCases {
      #expect(operation.run(s, as: nil).status == .unauthorized, "\(operation)")
    }
    let cookie = [("Cookie", "\(WebSecurity.sessionCookie)=\(s.tokens[.administrator] ?? "")")]
    let cy = s.ids["cy@example.test"] ?? ""
    let refused = s.call(
      .delete, s.path(s.northfield, "/members/\(cy)"), token: nil,
      headers: cookie + [("Origin", "https://evil.test")])
    #expect(refused.status == .forbidden)
    #expect(try body(refused)["error"] as? String == "cross_origin")
    let noOrigin = s.call(.delete, s.path(s.northfield, "/members/\(cy)"), token: nil, headers: cookie)
    #expect(noOrigin.status == .forbidden)
    let read = s.call(.get, s.path(s.northfield, "/members"), token: nil, headers: cookie)
    #expect(read.status == .ok, "a read needs no Origin")
    let same = s.call(
      .delete, s.path(s.northfield, "/members/\(cy)"), token: nil,
      headers: cookie + [("Origin", "http://127.0.0.1:8080")])
    #expect(same.status == .noContent)
  }

  @Test("another school's IDs are 404 and change nothing", arguments: Engine.available)
  func crossSchool(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let ada = s.tokens[.administrator]
    let sam = s.ids["sam@example.test"] ?? ""
    let nia = s.tokens[.nonMember]
    guard
      case .created(let theirs, _) = try s.f.pages.context.invite(
        "kit@example.test", as: .teacher, to: s.southgate,
        by: try #require(try s.f.store.account(id: s.ids["nia@example.test"] ?? "")), in: s.f.store)
    else { throw StoreError.failed("no invitation") }
    let before = try s.f.store.auditEvents().count
    let answers = [
      // Their school's path, though Ada administers another.
      s.call(.get, s.path(s.southgate, "/members"), token: ada),
      s.call(.get, s.path(s.southgate, "/invitations"), token: ada),
      s.call(
        .post, s.path(s.southgate, "/invitations"), token: ada,
        json: #"{"email":"x@example.test","role":"teacher"}"#,
        key: "k"),
      s.call(.patch, s.path(s.southgate, "/members/\(sam)"), token: ada, json: #"{"role":"administrator"}"#),
      s.call(.delete, s.path(s.southgate, "/members/\(sam)"), token: ada),
      s.call(.delete, s.path(s.southgate, "/invitations/\(theirs.id)"), token: ada),
      // Her own school's path with their objects' IDs.
      s.call(.patch, s.path(s.northfield, "/members/\(sam)"), token: ada, json: #"{"role":"administrator"}"#),
      s.call(.delete, s.path(s.northfield, "/members/\(sam)"), token: ada),
      s.call(.delete, s.path(s.northfield, "/invitations/\(theirs.id)"), token: ada),
      // Made-up IDs.
      s.call(.get, s.path(School(id: "sch_nope", name: "", slug: ""), "/members"), token: ada),
      s.call(.delete, s.path(s.northfield, "/members/acc_nope"), token: ada),
    ]
    for (i, answer) in answers.enumerated() {
      #expect(answer.status == .notFound, "case \(i)")
      #expect(try body(answer)["error"] as? String == "not_found", "case \(i)")
    }
    #expect(try s.f.store.auditEvents().count == before)
    #expect(try s.f.store.pendingInvitations(schoolID: s.southgate.id).map(\.id) == [theirs.id])
    let members =
      try body(s.call(.get, s.path(s.southgate, "/members"), token: nia))["members"] as? [[String: Any]]
    #expect(
      members?.map { $0["role"] as? String }.sorted { ($0 ?? "") < ($1 ?? "") } == [
        "administrator", "teacher",
      ])
  }

  @Test(
    "members have exactly accountId, displayName, email and role; invitations no token",
    arguments: Engine.available)
  func fields(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let ada = s.tokens[.administrator]
    let response = s.call(.get, s.path(s.northfield, "/members"), token: ada)
    #expect(response.status == .ok)
    let members = try #require(try body(response)["members"] as? [[String: Any]])
    #expect(members.allSatisfy { Set($0.keys) == ["accountId", "displayName", "email", "role"] })
    #expect(
      Set(members.compactMap { $0["email"] as? String })
        == ["ada@example.test", "tom@example.test", "rory@example.test", "cy@example.test"],
      "only live members of this school")
    let invitations = try #require(
      try body(s.call(.get, s.path(s.northfield, "/invitations"), token: ada))["invitations"]
        as? [[String: Any]])
    #expect(invitations.count == 1)
    #expect(invitations.allSatisfy { Set($0.keys) == ["id", "email", "role", "expiresAt"] })
    #expect(invitations.first?["email"] as? String == "pat@example.test")
  }

  @Test("the last administrator cannot be demoted or removed (409)", arguments: Engine.available)
  func lastAdministrator(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let ada = s.tokens[.administrator]
    let me = s.ids["ada@example.test"] ?? ""
    let demote = s.call(
      .patch, s.path(s.northfield, "/members/\(me)"), token: ada, json: #"{"role":"teacher"}"#)
    #expect(demote.status == .conflict)
    #expect(try body(demote)["error"] as? String == "last_administrator")
    let remove = s.call(.delete, s.path(s.northfield, "/members/\(me)"), token: ada)
    #expect(remove.status == .conflict)
    #expect(try body(remove)["error"] as? String == "last_administrator")
    // A disabled administrator does not count.
    let tom = s.ids["tom@example.test"] ?? ""
    let promoted = s.call(
      .patch, s.path(s.northfield, "/members/\(tom)"), token: ada, json: #"{"role":"administrator"}"#)
    #expect(promoted.status == .ok)
    #expect(try body(promoted)["role"] as? String == "administrator")
    _ = try s.f.store.setDisabled(email: "tom@example.test", true, actor: "test")
    #expect(s.call(.delete, s.path(s.northfield, "/members/\(me)"), token: ada).status == .conflict)
    _ = try s.f.store.setDisabled(email: "tom@example.test", false, actor: "test")
    // With another administrator, Ada may step down.
    #expect(
      s.call(.patch, s.path(s.northfield, "/members/\(me)"), token: ada, json: #"{"role":"teacher"}"#).status
        == .ok)
    #expect(s.call(.get, s.path(s.northfield, "/members"), token: ada).status == .forbidden)
    let events = try s.f.store.auditEvents().map(\.action)
    #expect(events.filter { $0 == "membership.role_changed" }.count == 2)
  }

  @Test("bad bodies: 400; a non-JSON body: 415", arguments: Engine.available)
  func badBodies(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let ada = s.tokens[.administrator]
    let cy = s.ids["cy@example.test"] ?? ""
    let invitations = s.path(s.northfield, "/invitations")
    for json in [#"{"role":"owner"}"#, "[]", "{", #"{"role":"teacher","x":1}"#] {
      #expect(
        s.call(.patch, s.path(s.northfield, "/members/\(cy)"), token: ada, json: json).status == .badRequest)
    }
    for json in [#"{"email":"not an address","role":"teacher"}"#, #"{"email":"a@example.test"}"#, "null"] {
      #expect(s.call(.post, invitations, token: ada, json: json, key: json).status == .badRequest, "\(json)")
    }
    let form = s.client.respond(
      to: Request(
        method: .post, target: invitations,
        headers: [
          ("Host", "a"), ("Authorization", "Bearer \(ada ?? "")"), ("Content-Type", "text/plain"),
          ("Idempotency-Key", "k"),
        ], body: Array("x".utf8)))
    #expect(form.status == .unsupportedMediaType)
    // The request's own faults come first: an outdated app with a malformed body is told 400.
    let outdated = s.call(
      .patch, s.path(s.northfield, "/members/\(cy)"), token: ada, json: "\u{0}",
      headers: [("Band-Licence-Client", "ios/0.1.0")])
    #expect(outdated.status == .badRequest)
    let keyless = s.call(
      .post, invitations, token: ada, json: #"{"email":"a@example.test","role":"teacher"}"#,
      headers: [("Band-Licence-Client", "ios/0.1.0")])
    #expect(keyless.status == .badRequest)
    let member = s.call(
      .post, invitations, token: ada, json: #"{"email":"tom@example.test","role":"teacher"}"#, key: "m")
    #expect(member.status == .conflict)
    #expect(try body(member)["error"] as? String == "already_member")
  }

  @Test(
    "Idempotency-Key: the same key and body give the same answer; another body 422; none 400",
    arguments: Engine.available)
  func idempotency(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let ada = s.tokens[.administrator]
    let path = s.path(s.northfield, "/invitations")
    let json = #"{"email":"Lee@Example.test","role":"teacher"}"#
    let mailBefore = try s.f.store.outbox().count
    let first = s.call(.post, path, token: ada, json: json, key: "retry-1")
    #expect(first.status == .created)
    let again = s.call(.post, path, token: ada, json: json, key: "retry-1")
    #expect(again.status == .created)
    #expect(again.body.contents == first.body.contents, "the same answer, byte for byte")
    #expect(try s.f.store.outbox().count == mailBefore + 1, "one mail")
    let invitation = try body(first)
    #expect(invitation["email"] as? String == "lee@example.test")
    #expect(Set(invitation.keys) == ["id", "email", "role", "expiresAt"])
    let other = s.call(
      .post, path, token: ada, json: #"{"email":"lee@example.test","role":"teacher"}"#, key: "retry-1")
    #expect(other.status == .unprocessableContent)
    #expect(try body(other)["error"] as? String == "idempotency_key_reused")
    let none = s.call(.post, path, token: ada, json: json)
    #expect(none.status == .badRequest)
    #expect(try body(none)["error"] as? String == "idempotency_key_required")
    let twice = s.call(
      .post, path, token: ada, json: json, key: "retry-1", headers: [("idempotency-key", "retry-9")])
    #expect(twice.status == .badRequest, "two keys name no one request")
    #expect(try body(twice)["error"] as? String == "idempotency_key_required")
    // A new key is a new invitation; the earlier link to that address is withdrawn.
    let second = s.call(.post, path, token: ada, json: json, key: "retry-2")
    #expect(second.status == .created)
    let pending = try s.f.store.pendingInvitations(schoolID: s.northfield.id).filter {
      $0.email == "lee@example.test"
    }
    #expect(pending.map(\.id) == [try body(second)["id"] as? String])
  }

  @Test(
    "the mail carries a working link; only its digest is stored; audit has no email or token",
    arguments: Engine.available)
  func invitationMail(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let response = s.call(
      .post, s.path(s.northfield, "/invitations"), token: s.tokens[.administrator],
      json: #"{"email":"lee@example.test","role":"read_only"}"#, key: "k")
    #expect(response.status == .created)
    let mail = try #require(try s.f.store.outbox().first)
    #expect(mail.kind == "invitation" && mail.to == "lee@example.test")
    let text = try #require(mail.text)
    let start = try #require(text.range(of: "/invitations/accept?token="))
    let token = String(text[start.upperBound...].prefix { $0 != "\n" })
    #expect(token.count == 43)
    let (found, school) = try #require(try s.f.store.invitation(token: token))
    #expect(found.role == .readOnly && school.id == s.northfield.id)
    #expect(found.expiresAt - found.createdAt == 7 * 86400)
    let stored = try s.f.store.db.query(
      "SELECT token_digest FROM invitations WHERE id = ?", [.text(found.id)])
    #expect(stored.first?.first == .blob(Secrets.digest(token)))
    for event in try s.f.store.auditEvents() {
      let all = [event.actor, event.subject, event.detail].compactMap { $0 }.joined(separator: " ")
      #expect(!all.contains(token) && !all.contains("lee@example.test"), "\(event.action)")
    }
  }

  @Test("a removed member's next GET /session lacks the school", arguments: Engine.available)
  func removal(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let cyToken = try s.f.signedIn("cy2@example.test", schools: [("northfield", .teacher)])
    let cy2 = try #require(try s.f.store.account(email: "cy2@example.test")?.0.id)
    func schools() throws -> [String] {
      let answer = s.call(.get, "/api/client/v1/session", token: cyToken)
      return (try body(answer)["schools"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }
    #expect(try schools() == [s.northfield.id])
    #expect(
      s.call(.delete, s.path(s.northfield, "/members/\(cy2)"), token: s.tokens[.administrator]).status
        == .noContent)
    #expect(try schools() == [])
    #expect(try s.f.store.auditEvents().last?.action == "membership.revoked")
    #expect(
      s.call(.delete, s.path(s.northfield, "/members/\(cy2)"), token: s.tokens[.administrator]).status
        == .notFound)
  }

  @Test(
    "accepting: single use, as the invited address only; withdrawn and expired links refused",
    arguments: Engine.available)
  func accepting(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let store = s.f.store
    let admin = try #require(try store.account(id: s.ids["ada@example.test"] ?? ""))
    func invite(_ email: EmailAddress, _ role: Role = .teacher) throws -> (Invitation, String) {
      guard
        case .created(let i, let token) = try s.f.pages.context.invite(
          email, as: role, to: s.northfield, by: admin, in: store)
      else { throw StoreError.failed("not created") }
      return (i, token)
    }
    // An existing account (Sam, of Southgate) accepts as itself.
    let sam = s.ids["sam@example.test"] ?? ""
    let (_, samToken) = try invite("sam@example.test", .readOnly)
    #expect(
      try store.acceptInvitation(token: samToken, accountID: s.ids["nia@example.test"] ?? "") == .otherEmail)
    guard case .accepted = try store.acceptInvitation(token: samToken, accountID: sam) else {
      Issue.record("not accepted")
      return
    }
    #expect(try store.liveMembership(accountID: sam, schoolID: s.northfield.id)?.role == .readOnly)
    #expect(try store.isVerified(accountID: sam))
    #expect(try store.acceptInvitation(token: samToken, accountID: sam) == .invalid, "single use")
    // A new person.
    let (_, newToken) = try invite("lee@example.test")
    let session = Secrets.token()
    guard
      case .accepted(_, let lee) = try store.acceptInvitation(
        token: newToken, displayName: "Lee Example", passwordHash: "x", sessionToken: session,
        lifetimes: SessionLifetimes())
    else {
      Issue.record("not accepted")
      return
    }
    #expect(try store.isVerified(accountID: lee))
    #expect(try store.session(token: session, lifetimes: SessionLifetimes())?.1.id == lee)
    #expect(try store.liveMembership(accountID: lee, schoolID: s.northfield.id)?.role == .teacher)
    #expect(
      try store.acceptInvitation(
        token: newToken, displayName: "Lee", passwordHash: "x", sessionToken: Secrets.token(),
        lifetimes: SessionLifetimes()) == .invalid)
    // Withdrawn, then expired.
    let (withdrawn, withdrawnToken) = try invite("kit@example.test")
    #expect(try store.revokeInvitation(id: withdrawn.id, schoolID: s.northfield.id, actor: admin.id))
    #expect(try store.invitation(token: withdrawnToken) == nil)
    let (_, lateToken) = try invite("max@example.test")
    s.f.clock.advance(7 * 86400)
    #expect(try store.invitation(token: lateToken) == nil)
    let actions = try store.auditEvents().map(\.action)
    #expect(actions.filter { $0 == "invitation.accepted" }.count == 2)
    #expect(
      ClientStore.changesSessionAnswers.isSuperset(of: ["invitation.accepted", "membership.role_changed"]))
  }

  @Test("ended invitations are erased a day after they end", arguments: Engine.available)
  func retention(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let count = { () throws -> Int in
      if case .integer(let n)? = try s.f.store.db.query("SELECT count(*) FROM invitations").first?.first {
        return Int(n)
      }
      return -1
    }
    #expect(try s.f.store.revokeInvitation(id: s.invitationID, schoolID: s.northfield.id, actor: "test"))
    try s.f.store.pruneExpired()
    #expect(try count() == 1, "kept for a day")
    s.f.clock.advance(86400 + 1)
    try s.f.store.pruneExpired()
    #expect(try count() == 0)
  }
}
