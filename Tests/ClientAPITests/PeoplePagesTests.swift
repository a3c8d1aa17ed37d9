import Deployment
import Edge
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI
@testable import Store

/// A browser over `SchoolsFixture`'s routes: cookies kept, our Origin on every POST.
private struct PageBrowser {
  let s: SchoolsFixture
  var cookies: [String: String] = [:]

  mutating func send(_ method: HTTPMethod, _ target: String, form: [(String, String)]? = nil) -> Response {
    var fields: [(String, String)] = [("Host", "127.0.0.1:8080")]
    if !cookies.isEmpty {
      fields.append(("Cookie", cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")))
    }
    if method == .post { fields.append(("Origin", "http://127.0.0.1:8080")) }
    var body: [UInt8] = []
    if let form {
      fields.append(("Content-Type", "application/x-www-form-urlencoded"))
      body = Array(form.map { "\($0.0)=\(PeoplePages.escapeQuery($0.1))" }.joined(separator: "&").utf8)
    }
    let response = s.send(Request(method: method, target: target, headers: fields, body: body))
    for (name, value) in response.headers where name == "Set-Cookie" {
      let pair = value.split(separator: ";")[0].split(
        separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      cookies[String(pair[0])] = value.contains("Max-Age=0") ? nil : String(pair[1])
    }
    return response
  }

  /// The page's text.
  static func html(_ response: Response) -> String {
    String(decoding: response.body.contents, as: UTF8.self)
  }

  /// The CSRF token in the page's first form.
  static func csrf(_ response: Response) -> String {
    let page = html(response)
    guard let start = page.range(of: "name=\"csrf\" value=\"") else { return "" }
    return String(page[start.upperBound...].prefix { $0 != "\"" })
  }
}

@Suite("People and invitation pages (in-process)")
struct PeoplePagesTests {
  @Test(
    "the People page: administrators only, 404 for another school; changes need CSRF",
    arguments: Engine.available)
  func people(engine: Engine) throws {
    let s = try SchoolsFixture(engine)
    let path = "/schools/\(s.northfield.id)/people"
    var ada = PageBrowser(s: s)
    ada.cookies[WebSecurity.sessionCookie] = s.tokens[.administrator]
    let page = ada.send(.get, path)
    #expect(page.status == .ok)
    let html = PageBrowser.html(page)
    for text in ["People at Northfield Primary", "cy@example.test", "pat@example.test", "Send invitation"] {
      #expect(html.contains(text), "\(text)")
    }
    #expect(!html.contains("sam@example.test"), "no other school's people")
    for (caller, status) in [
      (SchoolsFixture.Caller.teacher, Status.forbidden), (.nonMember, .notFound), (.revoked, .notFound),
    ] {
      var other = PageBrowser(s: s)
      other.cookies[WebSecurity.sessionCookie] = s.tokens[caller]
      #expect(other.send(.get, path).status == status, "\(caller)")
    }
    var signedOut = PageBrowser(s: s)
    #expect(signedOut.send(.get, path).header("Location")?.hasPrefix("/sign-in?return=%2Fschools%2F") == true)
    let cy = s.ids["cy@example.test"] ?? ""
    // Without the CSRF token: refused, nothing changed.
    #expect(
      ada.send(.post, path + "/role", form: [("account", cy), ("role", "read_only")]).status == .forbidden)
    let csrf = PageBrowser.csrf(page)
    let changed = ada.send(
      .post, path + "/role", form: [("csrf", csrf), ("account", cy), ("role", "read_only")])
    #expect(changed.status == .seeOther)
    #expect(try s.f.store.liveMembership(accountID: cy, schoolID: s.northfield.id)?.role == .readOnly)
    let me = s.ids["ada@example.test"] ?? ""
    let last = ada.send(.post, path + "/remove", form: [("csrf", csrf), ("account", me)])
    #expect(last.status == .conflict)
    #expect(PageBrowser.html(last).contains("at least one administrator"))
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
    #expect(PageBrowser.html(ada.send(.get, path + "?done=invited")).contains("Invitation sent."))
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
    else { throw StoreError("no invitation") }
    var lee = PageBrowser(s: s)
    let link = lee.send(.get, "/invitations/accept?token=\(token)")
    #expect(link.status == .seeOther)
    #expect(link.header("Location") == "/invitations/accept")
    #expect(link.header("Referrer-Policy") == "no-referrer")
    #expect(lee.cookies[InvitationPages.cookie] == token)
    let page = lee.send(.get, "/invitations/accept")
    #expect(page.status == .ok)
    #expect(!PageBrowser.html(page).contains(token))
    #expect(PageBrowser.html(page).contains("Create my account and join"))
    let csrf = PageBrowser.csrf(page)
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
    var again = PageBrowser(s: s)
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
    else { throw StoreError("no invitation") }
    var visitor = PageBrowser(s: s)
    _ = visitor.send(.get, "/invitations/accept?token=\(token)")
    #expect(PageBrowser.html(visitor.send(.get, "/invitations/accept")).contains("sign in to accept"))
    var nia = visitor
    nia.cookies[WebSecurity.sessionCookie] = s.tokens[.nonMember]
    let told = nia.send(.get, "/invitations/accept")
    #expect(told.status == .forbidden)
    #expect(PageBrowser.html(told).contains("You are signed in as nia@example.test"))
    var sam = visitor
    sam.cookies[WebSecurity.sessionCookie] = try s.f.signedInToken(accountID: s.ids["sam@example.test"] ?? "")
    let page = sam.send(.get, "/invitations/accept")
    #expect(PageBrowser.html(page).contains("Accept and join"))
    #expect(
      sam.send(.post, "/invitations/accept", form: [("csrf", PageBrowser.csrf(page))]).status == .seeOther)
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
