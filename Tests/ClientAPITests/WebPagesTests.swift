import Deployment
import Edge
import EdgeTesting
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI
@testable import Store

func text(_ response: Response) -> String {
  let bytes = response.body.contents
  return String(decoding: bytes, as: UTF8.self)
}

@Suite("Web sign-in and account pages (in-process)")
struct WebPagesTests {
  func fixture(_ engine: Engine) throws -> SessionFixture {
    let f = try SessionFixture(engine)
    _ = try f.store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "test")
    let hash = f.pages.context.hasher.hash("correct horse battery")
    _ = try f.store.createAccount(
      email: "ada@example.test", displayName: "Ada Example", passwordHash: hash, actor: "test")
    try f.store.addMember(email: "ada@example.test", schoolSlug: "northfield", role: .teacher, actor: "test")
    return f
  }

  @Test(
    "sign in through the form: 303, the session cookie with exactly the contract's attributes",
    arguments: Engine.available)
  func signIn(engine: Engine) throws {
    let f = try fixture(engine)
    var browser = f.browser()
    let form = browser.send(.get, "/sign-in")
    #expect(form.status == .ok)
    #expect(form.header("Content-Security-Policy")?.contains("frame-ancestors 'none'") == true)
    #expect(form.header("Set-Cookie")?.hasPrefix("__Host-bl_csrf=") == true)
    let response = browser.send(
      .post, "/sign-in",
      form: [
        ("csrf", csrfToken(in: form)), ("email", " ADA@example.test "), ("password", "correct horse battery"),
      ])
    #expect(response.status == .seeOther)
    #expect(response.header("Location") == "/")
    let cookie = try #require(response.headers.first { $0.name == "Set-Cookie" }?.value)
    let attributes = cookie.split(separator: ";").dropFirst().map { $0.trimmingPrefix(" ") }
    #expect(cookie.hasPrefix("__Host-bl_session="))
    #expect(
      Set(attributes.map(String.init)) == ["Path=/", "Secure", "HttpOnly", "SameSite=Lax", "Max-Age=604800"])
    let session = browser.send(.get, "/api/client/v1/session")
    #expect(session.status == .ok)
    #expect(text(session).contains("\"email\":\"ada@example.test\""))
    let account = browser.send(.get, "/account")
    #expect(account.status == .ok)
    #expect(text(account).contains("Northfield Primary") && text(account).contains("Teacher"))
    let events = try f.store.auditEvents().map(\.action)
    #expect(events.contains("sign_in.succeeded"))
  }

  @Test("the cookie's value changes at sign-in and the old session ends", arguments: Engine.available)
  func rotation(engine: Engine) throws {
    let f = try fixture(engine)
    var browser = f.browser()
    _ = browser.signIn("ada@example.test", "correct horse battery")
    let first = try #require(browser.cookies[WebSecurity.sessionCookie])
    _ = browser.signIn("ada@example.test", "correct horse battery")  // GET /sign-in redirects when signed in
    browser.cookies[WebSecurity.sessionCookie] = first
    let form = browser.send(.get, "/sign-in")
    #expect(form.status == .seeOther)
    var fresh = f.browser()
    fresh.cookies[WebSecurity.sessionCookie] = first
    let page = fresh.send(.get, "/api/client/v1/session")
    #expect(page.status == .ok)
    // Sign in again from a browser that holds a session: the form is still reachable by POST.
    fresh.cookies[WebSecurity.csrfCookie] = "binding"
    let again = fresh.send(
      .post, "/sign-in",
      form: [
        ("csrf", WebSecurity.csrfToken(binding: "binding")), ("email", "ada@example.test"),
        ("password", "correct horse battery"),
      ])
    #expect(again.status == .seeOther)
    let second = try #require(fresh.cookies[WebSecurity.sessionCookie])
    #expect(second != first)
    var old = f.browser()
    old.cookies[WebSecurity.sessionCookie] = first
    #expect(old.send(.get, "/api/client/v1/session").status == .unauthorized)
  }

  @Test(
    "wrong password, unknown email and disabled account: the same page and status, audited without the email",
    arguments: Engine.available)
  func failures(engine: Engine) throws {
    let f = try fixture(engine)
    _ = try f.store.createAccount(
      email: "off@example.test", displayName: "Off",
      passwordHash: f.pages.context.hasher.hash("pw-for-off-account"), actor: "test")
    _ = try f.store.setDisabled(email: "off@example.test", true, actor: "test")
    var bodies: [String] = []
    for (email, password) in [
      ("ada@example.test", "wrong password"), ("nobody@example.test", "wrong password"),
      ("off@example.test", "pw-for-off-account"),
    ] {
      var browser = f.browser()
      let response = browser.signIn(email, password)
      #expect(response.status == .badRequest)
      #expect(browser.cookies[WebSecurity.sessionCookie] == nil)
      // The typed email is shown again (escaped); apart from it the pages are the same.
      bodies.append(
        text(response).replacingOccurrences(of: csrfToken(in: response), with: "").replacingOccurrences(
          of: " value=\"\(email)\"", with: ""))
    }
    #expect(Set(bodies).count == 1, "the three failures are indistinguishable")
    let failures = try f.store.auditEvents().filter { $0.action == "sign_in.failed" }
    #expect(failures.count == 3)
    #expect(failures.allSatisfy { ($0.detail ?? "").isEmpty && !($0.subject ?? "").contains("@") })
  }

  @Test(
    "a POST without our Origin, or without the right CSRF token, is refused and changes nothing",
    arguments: Engine.available)
  func forgery(engine: Engine) throws {
    let f = try fixture(engine)
    let cases: [(origin: String?, referer: String?, csrf: (Response) -> String)] = [
      ("https://evil.example", nil, csrfToken(in:)),
      ("null", nil, csrfToken(in:)),
      (nil, nil, csrfToken(in:)),
      (nil, "https://evil.example/sign-in", csrfToken(in:)),
      ("http://127.0.0.1:8080", nil, { _ in "" }),
      ("http://127.0.0.1:8080", nil, { _ in WebSecurity.csrfToken(binding: "someone-else") }),
    ]
    for c in cases {
      var browser = f.browser()
      let form = browser.send(.get, "/sign-in")
      browser.origin = c.origin
      let response = browser.send(
        .post, "/sign-in",
        form: [("csrf", c.csrf(form)), ("email", "ada@example.test"), ("password", "correct horse battery")],
        headers: c.referer.map { [("Referer", $0)] } ?? [])
      #expect(response.status == .forbidden, "\(c.origin ?? "-") \(c.referer ?? "-")")
      #expect(browser.cookies[WebSecurity.sessionCookie] == nil)
    }
    #expect(try f.store.sessions(.all).isEmpty)
    #expect(try !f.store.auditEvents().contains { $0.action.hasPrefix("sign_in") })
    // Referer from our own origin stands in for a missing Origin.
    var browser = f.browser()
    let form = browser.send(.get, "/sign-in")
    browser.origin = nil
    let ok = browser.send(
      .post, "/sign-in",
      form: [
        ("csrf", csrfToken(in: form)), ("email", "ada@example.test"), ("password", "correct horse battery"),
      ],
      headers: [("Referer", "http://127.0.0.1:8080/sign-in")])
    #expect(ok.status == .seeOther)
  }

  @Test(
    "sign out: 303, the cookie cleared, the session then 401; a forged sign-out changes nothing",
    arguments: Engine.available)
  func signOut(engine: Engine) throws {
    let f = try fixture(engine)
    var browser = f.browser()
    _ = browser.signIn("ada@example.test", "correct horse battery")
    let token = try #require(browser.cookies[WebSecurity.sessionCookie])
    let account = browser.send(.get, "/account")
    browser.origin = "https://evil.example"
    #expect(browser.send(.post, "/sign-out", form: [("csrf", csrfToken(in: account))]).status == .forbidden)
    browser.origin = "http://127.0.0.1:8080"
    #expect(browser.send(.post, "/sign-out", form: []).status == .forbidden)
    #expect(browser.send(.get, "/api/client/v1/session").status == .ok)
    let out = browser.send(.post, "/sign-out", form: [("csrf", csrfToken(in: account))])
    #expect(out.status == .seeOther)
    #expect(browser.cookies[WebSecurity.sessionCookie] == nil)
    var stale = f.browser()
    stale.cookies[WebSecurity.sessionCookie] = token
    #expect(stale.send(.get, "/api/client/v1/session").status == .unauthorized)
    #expect(stale.send(.get, "/account").header("Location") == "/sign-in?return=%2Faccount")
  }

  @Test("devices: list, revoke one's own, never another person's", arguments: Engine.available)
  func devices(engine: Engine) throws {
    let f = try fixture(engine)
    let other = try f.signedIn("bo@example.test")
    var browser = f.browser()
    _ = browser.signIn("ada@example.test", "correct horse battery")
    browser.origin = nil  // each DELETE below names its Origin, or sends none
    let list = browser.send(.get, "/api/client/v1/sessions")
    #expect(list.status == .ok)
    #expect(text(list).contains("\"current\":true"))
    let otherID = try #require(try f.store.sessions(.account(email: "bo@example.test")).first?.id)
    #expect(
      browser.send(
        .delete, "/api/client/v1/sessions/\(otherID)", headers: [("Origin", "http://127.0.0.1:8080")]
      ).status == .notFound)
    #expect(f.call(.get, token: other).status == .ok, "B's session is untouched")
    // Cookie-authenticated DELETE needs a same-origin Origin.
    let mine = try #require(try f.store.sessions(.account(email: "ada@example.test")).first?.id)
    #expect(browser.send(.delete, "/api/client/v1/sessions/\(mine)").status == .forbidden)
    #expect(
      browser.send(.delete, "/api/client/v1/session", headers: [("Origin", "https://evil.example")]).status
        == .forbidden)
    #expect(browser.send(.get, "/api/client/v1/session").status == .ok)
    let revoked = browser.send(
      .delete, "/api/client/v1/sessions/\(mine)", headers: [("Origin", "http://127.0.0.1:8080")])
    #expect(revoked.status == .noContent)
    #expect(revoked.header("Set-Cookie")?.contains("Max-Age=0") == true)
  }

  @Test(
    "a failed sign-in shows the typed email again, normalised and escaped; nothing that is not an address",
    arguments: Engine.available,
    [
      ("ada@example.test", " value=\"ada@example.test\""),
      ("Ada@Example.TEST", " value=\"ada@example.test\""),
      ("o'brien&co@example.test", " value=\"o&#39;brien&amp;co@example.test\""),
      ("\"><script>x</script>@example.test", nil), ("My Secret Passw0rd!", nil),
      ("ada@example.test\u{0}x", nil), ("ada@example.test\n", nil),
    ] as [(String, String?)])
  func keepsEmail(engine: Engine, row: (String, String?)) throws {
    let (email, shown) = row
    let f = try fixture(engine)
    var browser = f.browser()
    let response = browser.signIn(email, "wrong password")
    #expect(response.status == .badRequest)
    let page = text(response)
    if let shown {
      #expect(page.contains(shown))
    } else {
      #expect(
        !page.contains(
          "id=\"email\" name=\"email\" type=\"text\" inputmode=\"email\" autocomplete=\"username\" autocapitalize=\"none\" spellcheck=\"false\" required maxlength=\"254\" value="
        ))
    }
    #expect(!page.contains("wrong password"), "the password is never shown again")
    #expect(page.contains("type=\"text\" inputmode=\"email\" autocomplete=\"username\""))
  }

  @Test("the locked sentence is rendered in the form's alert, the same for every email")
  func locked() throws {
    let f = try fixture(.sqlite)  // the form is rendered from values: no store is read
    let request = Request(method: .get, target: "/sign-in", headers: [("Host", "127.0.0.1:8080")])
    let page = text(f.pages.signInForm(request, status: .badRequest, message: WebPages.lockedMessage))
    #expect(
      page.contains(
        "<p class=\"error\" id=\"alert\" role=\"alert\" tabindex=\"-1\" autofocus>"
          + "Too many attempts: wait a few minutes and try again.</p>"))
  }

  @Test(
    "sign-in returns the person to the page they asked for, and only to a same-origin path",
    arguments: Engine.available,
    [
      ("%2Faccount", "/account", "/account"), ("%2Faccount%2Fdelete", "/account/delete", "/account/delete"),
      ("%2F%2Fevil.example", "//evil.example", "/"),
      ("https%3A%2F%2Fevil.example", "https://evil.example", "/"),
      ("%2F%5Cevil.example", "/\\evil.example", "/"), ("%2F%09%2Fevil.example", "/\t/evil.example", "/"),
    ])
  func returns(engine: Engine, row: (String, String, String)) throws {
    let (query, raw, location) = row
    let f = try fixture(engine)
    var browser = f.browser()
    let form = browser.send(.get, "/sign-in?return=\(query)")
    #expect(form.status == .ok)
    let page = text(form)
    #expect(page.contains("name=\"return\"") == (location != "/"))
    let hidden = location == "/" ? [] : [("return", location)]
    let response = browser.send(
      .post, "/sign-in",
      form: [
        ("csrf", csrfToken(in: form)), ("email", "ada@example.test"), ("password", "correct horse battery"),
      ]
        + hidden)
    #expect(response.status == .seeOther)
    #expect(response.header("Location") == location)
    // A forged field is judged the same way as the query.
    var other = f.browser()
    let again = other.send(.get, "/sign-in")
    let forged = other.send(
      .post, "/sign-in",
      form: [
        ("csrf", csrfToken(in: again)), ("email", "ada@example.test"), ("password", "correct horse battery"),
        ("return", raw),
      ])
    #expect(forged.header("Location") == location)
  }

  @Test(
    "the account page: one word for signing a device out, times in the deployment's zone, labelled",
    arguments: Engine.available)
  func accountWords(engine: Engine) throws {
    let f = try fixture(engine)
    var browser = f.browser()
    f.clock.advance(ZoneRulesTests.utc(2026, 7, 1, 9, 30) - f.clock.read())
    _ = browser.signIn("ada@example.test", "correct horse battery")
    let page = text(browser.send(.get, "/account"))
    #expect(!page.contains("Revoke"))
    #expect(
      page.contains(
        "class=\"button danger small\" type=\"submit\" aria-label=\"Sign out: Web browser (this browser)\">Sign out</button>"
      ))
    #expect(page.contains("<time datetime=\"2026-07-01T09:30:00Z\">1 Jul 2026, 10:30 BST</time>"))
    #expect(page.contains("Times are in Europe/London time."))
  }

  @Test("a store failure on a page is a page (500), its cause only in the log")
  func failurePage() throws {
    let f = try fixture(.sqlite)  // the failure is the test's own: no store is read
    let response = f.pages.guarded { throw StoreError.failed("disk I/O error at /secret/path") }
    #expect(response.status == .internalServerError)
    #expect(response.header("Content-Type") == "text/html; charset=utf-8")
    let page = text(response)
    #expect(page.contains("<h1>Something went wrong</h1>") && !page.contains("secret"))
  }

  @Test(
    "each kind of store failure has its own page: an outage 503 with Retry-After, a refused rule 409, any other 500",
    arguments: [
      (StoreError.outage("PostgreSQL 57P01 at /secret/path"), 503, "Try again in a moment"),
      (StoreError.refused("the invitation was used meanwhile /secret/path"), 409, "That changed meanwhile"),
      (StoreError.failed("disk I/O error at /secret/path"), 500, "Something went wrong"),
    ])
  func failureKinds(error: StoreError, status: Int, heading: String) throws {
    let f = try fixture(.sqlite)  // the failure is the test's own: no store is read
    let page = f.pages.guarded { throw error }
    #expect(page.status.code == status)
    #expect((page.header("Retry-After") == "1") == (status == 503))
    #expect(text(page).contains("<h1>\(heading)</h1>") && !text(page).contains("secret"))
    let json = ClientContext.storeFailure(error, html: false)
    #expect(json.status.code == status)
    #expect(json.header("Content-Type") == "application/json; charset=utf-8")
    #expect((json.header("Retry-After") == "1") == (status == 503))
    #expect(!text(json).contains("secret"))
  }

  @Test("pages escape what people typed", arguments: Engine.available)
  func escaping(engine: Engine) throws {
    let f = try fixture(engine)
    let hash = f.pages.context.hasher.hash("another long password")
    _ = try f.store.createAccount(
      email: "x@example.test", displayName: "<script>alert(1)</script>", passwordHash: hash, actor: "test")
    var browser = f.browser()
    _ = browser.signIn("x@example.test", "another long password")
    let page = text(browser.send(.get, "/account"))
    #expect(!page.contains("<script>") && page.contains("&lt;script&gt;"))
  }

  @Test("an old password hash is upgraded at sign-in", arguments: Engine.available)
  func rehash(engine: Engine) throws {
    let f = try fixture(engine)
    var weak = PasswordHasher()
    weak.memoryKiB = 512
    weak.timeCost = 1
    _ = try f.store.createAccount(
      email: "old@example.test", displayName: "Old", passwordHash: weak.hash("an old long password"),
      actor: "test")
    var browser = f.browser()
    #expect(browser.signIn("old@example.test", "an old long password").status == .seeOther)
    let (_, hash) = try #require(try f.store.account(email: "old@example.test"))
    #expect(!f.pages.context.hasher.needsRehash(hash))
    #expect(try f.store.auditEvents().contains { $0.action == "account.password_rehashed" })
  }
}

@Suite("Web security helpers")
struct WebSecurityTests {
  @Test(
    "cookie parsing",
    arguments: [
      ("__Host-bl_session=abc", "abc"), ("a=1; __Host-bl_session=xyz; b=2", "xyz"), ("a=1", nil),
      ("__Host-bl_session=", nil), ("x__Host-bl_session=abc", nil),
    ] as [(String, String?)])
  func cookies(header: String, expected: String?) {
    let request = Request(method: .get, target: "/", headers: [("Cookie", header)])
    #expect(WebSecurity.cookie(WebSecurity.sessionCookie, in: request) == expected)
  }

  @Test(
    "form decoding",
    arguments: [
      ("a=1&b=two+words", ["a": "1", "b": "two words"]), ("e=ada%40example.test", ["e": "ada@example.test"]),
      ("a=%zz", nil), ("a=1&a=2", nil), ("a=%E2%82%AC", ["a": "€"]), ("a=%FF", nil), ("", [:]),
      ("flag", ["flag": ""]),
    ] as [(String, [String: String]?)])
  func forms(body: String, expected: [String: String]?) {
    let request = Request(
      method: .post, target: "/", headers: [("Content-Type", "application/x-www-form-urlencoded")],
      body: Array(body.utf8))
    #expect(WebSecurity.form(request) == expected)
  }

  @Test("what the test client's form encoder writes decodes to what was typed")
  func formRoundTrip() {
    let typed = [
      ("email", " Ada+Lovelace@Example.test "), ("password", "a & b = c; 100% \"sure\" ~ é€ 😀"),
      ("return", "/account?x=1#y"), ("empty", ""), ("new-password", "tab\there\nline"),
    ]
    let request = Request(
      method: .post, target: "/", headers: [("Content-Type", "application/x-www-form-urlencoded")],
      body: RequestBody.form(typed).bytes)
    #expect(WebSecurity.form(request) == Dictionary(uniqueKeysWithValues: typed))
  }

  @Test("a form body of another type is not a form")
  func formType() {
    let request = Request(
      method: .post, target: "/", headers: [("Content-Type", "application/json")], body: Array("a=1".utf8))
    #expect(WebSecurity.form(request) == nil)
  }

  @Test("CSRF tokens are bound to their binding")
  func csrf() {
    let token = WebSecurity.csrfToken(binding: "one")
    #expect(token.count == 43)
    #expect(WebSecurity.csrfValid(token, binding: "one"))
    #expect(!WebSecurity.csrfValid(token, binding: "two"))
    #expect(!WebSecurity.csrfValid(nil, binding: "one"))
    #expect(!WebSecurity.csrfValid(token, binding: nil))
  }
}
