import Deployment
import Edge
import EdgeTesting
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI
@testable import Store

@Suite("People and invitation pages (in-process)")
struct PeoplePagesTests {
  @Test(
    "the People page: administrators only, 404 for another school; changes need CSRF",
    arguments: Engine.available)
  func people(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let path = "/schools/\(s.northfield.id)/people"
    var ada = s.browser()
    ada.cookies[WebSecurity.sessionCookie] = s.tokens[.administrator]
    let page = ada.send(.get, path)
    #expect(page.status == .ok)
    let html = text(page)
    for text in ["People at Northfield Primary", "cy@example.test", "pat@example.test", "Send invitation"] {
      #expect(html.contains(text), "\(text)")
    }
    #expect(!html.contains("sam@example.test"), "no other school's people")
    for (caller, status) in [
      (SchoolsFixture.Caller.teacher, Status.forbidden), (.nonMember, .notFound), (.revoked, .notFound),
    ] {
      var other = s.browser()
      other.cookies[WebSecurity.sessionCookie] = s.tokens[caller]
      #expect(other.send(.get, path).status == status, "\(caller)")
    }
    var signedOut = s.browser()
    #expect(signedOut.send(.get, path).header("Location")?.hasPrefix("/sign-in?return=%2Fschools%2F") == true)
    let cy = s.ids["cy@example.test"] ?? ""
    // Without the CSRF token: refused, nothing changed.
    #expect(
      ada.send(.post, path + "/role", form: [("account", cy), ("role", "read_only")]).status == .forbidden)
    let csrf = csrfToken(in: page)
    let changed = ada.send(
      .post, path + "/role", form: [("csrf", csrf), ("account", cy), ("role", "read_only")])
    #expect(changed.status == .seeOther)
    #expect(try s.f.store.liveMembership(accountID: cy, schoolID: s.northfield.id)?.role == .readOnly)
    let me = s.ids["ada@example.test"] ?? ""
    let last = ada.send(.post, path + "/remove", form: [("csrf", csrf), ("account", me)])
    #expect(last.status == .conflict)
    #expect(text(last).contains("at least one administrator"))
    #expect(ada.send(.post, path + "/remove", form: [("csrf", csrf), ("account", cy)]).status == .seeOther)
    #expect(try s.f.store.liveMembership(accountID: cy, schoolID: s.northfield.id) == nil)
    #expect(
      ada.send(
        .post, "/schools/\(s.northfield.id)/invitations/revoke",
        form: [("csrf", csrf), ("invitation", s.invitationID)]
      )
      .status == .seeOther)
    let invited = ada.send(
      .post, "/schools/\(s.northfield.id)/invitations",
      form: [("csrf", csrf), ("email", "lee@example.test"), ("role", "teacher")])
    #expect(invited.header("Location") == path + "?done=invited")
    #expect(text(ada.send(.get, path + "?done=invited")).contains("Invitation sent."))
    #expect(try s.f.store.pendingInvitations(schoolID: s.northfield.id).map(\.email) == ["lee@example.test"])
    // Another school's member through this school's form: not found.
    let sam = s.ids["sam@example.test"] ?? ""
    #expect(ada.send(.post, path + "/remove", form: [("csrf", csrf), ("account", sam)]).status == .notFound)
    let actions = try s.f.store.auditEvents().map(\.action)
    #expect(
      actions.suffix(4) == [
        "membership.role_changed", "membership.revoked", "invitation.revoked", "invitation.created",
      ])
  }

  @Test(
    "the link's token leaves the URL at once; a new person sets a name and password and is signed in",
    arguments: Engine.available)
  func acceptAsNewPerson(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let admin = try #require(try s.f.store.account(id: s.ids["ada@example.test"] ?? ""))
    guard
      case .created(_, let token) = try s.f.pages.context.invite(
        "lee@example.test", as: .teacher, to: s.northfield, by: admin, in: s.f.store)
    else { throw StoreError.failed("no invitation") }
    var lee = s.browser()
    let link = lee.send(.get, "/invitations/accept?token=\(token)")
    #expect(link.status == .seeOther)
    #expect(link.header("Location") == "/invitations/accept")
    #expect(link.header("Referrer-Policy") == "no-referrer")
    #expect(lee.cookies[InvitationPages.cookie] == token)
    let page = lee.send(.get, "/invitations/accept")
    #expect(page.status == .ok)
    #expect(!text(page).contains(token))
    #expect(text(page).contains("Create my account and join"))
    let csrf = csrfToken(in: page)
    let short = lee.send(
      .post, "/invitations/accept", form: [("csrf", csrf), ("name", "Lee"), ("password", "short")])
    #expect(short.status == .badRequest)
    let done = lee.send(
      .post, "/invitations/accept",
      form: [("csrf", csrf), ("name", "Lee Example"), ("password", "a long enough secret")])
    #expect(done.status == .seeOther)
    #expect(lee.cookies[InvitationPages.cookie] == nil)
    let session = try #require(lee.cookies[WebSecurity.sessionCookie])
    let (_, account) = try #require(try s.f.store.session(token: session, lifetimes: SessionLifetimes()))
    #expect(account.displayName == "Lee Example" && account.email == "lee@example.test")
    #expect(try s.f.store.isVerified(accountID: account.id))
    #expect(try s.f.store.liveMembership(accountID: account.id, schoolID: s.northfield.id)?.role == .teacher)
    // The link works once.
    var again = s.browser()
    _ = again.send(.get, "/invitations/accept?token=\(token)")
    #expect(again.send(.get, "/invitations/accept").status == .notFound)
  }

  @Test(
    "an existing account accepts when signed in as the invited address; another is told",
    arguments: Engine.available)
  func acceptAsExisting(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let admin = try #require(try s.f.store.account(id: s.ids["ada@example.test"] ?? ""))
    guard
      case .created(_, let token) = try s.f.pages.context.invite(
        "sam@example.test", as: .readOnly, to: s.northfield, by: admin, in: s.f.store)
    else { throw StoreError.failed("no invitation") }
    var visitor = s.browser()
    _ = visitor.send(.get, "/invitations/accept?token=\(token)")
    #expect(text(visitor.send(.get, "/invitations/accept")).contains("sign in to accept"))
    var nia = visitor
    nia.cookies[WebSecurity.sessionCookie] = s.tokens[.nonMember]
    let told = nia.send(.get, "/invitations/accept")
    #expect(told.status == .forbidden)
    #expect(text(told).contains("You are signed in as nia@example.test"))
    var sam = visitor
    sam.cookies[WebSecurity.sessionCookie] = try s.f.signedInToken(accountID: s.ids["sam@example.test"] ?? "")
    let page = sam.send(.get, "/invitations/accept")
    #expect(text(page).contains("Accept and join"))
    #expect(
      sam.send(.post, "/invitations/accept", form: [("csrf", csrfToken(in: page))]).status == .seeOther)
    #expect(
      try s.f.store.liveMembership(accountID: s.ids["sam@example.test"] ?? "", schoolID: s.northfield.id)?
        .role == .readOnly)
  }
}

extension SessionFixture {
  /// A new native session of `accountID`.
  func signedInToken(accountID: String) throws -> String {
    let token = Secrets.token()
    _ = try store.createSession(
      accountID: accountID, kind: .native, platform: "ios", appVersion: "1.4.0", token: token,
      lifetimes: SessionLifetimes())
    return token
  }
}
