import Deployment
import Edge
import EdgeTesting
import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI

extension SessionFixture {
  /// An account with a real (cheap) password hash.
  func account(_ email: String, name: String = "Ada Example", password: String) throws -> Account {
    try store.createAccount(
      email: EmailAddress(stringLiteral: email), displayName: name,
      passwordHash: pages.context.hasher.hash(password), actor: "test")
  }

  /// The newest outbox message to `to` of `kind`.
  func mail(to: String, kind: String) throws -> OutboxEntry? {
    try store.outbox().first { $0.to == to && $0.kind == kind }
  }

  /// The path and query of the link in a message's text (`/account/reset?token=..`).
  func linkPath(_ entry: OutboxEntry?) -> String? {
    guard let text = entry?.text, let start = text.firstRange(of: "http://127.0.0.1:8080/") else {
      return nil
    }
    return String(text[text.index(before: start.upperBound)...].prefix { !$0.isWhitespace })
  }

  func actions() throws -> [String] { try store.auditEvents().map(\.action) }
}

@Suite("Password recovery and set-password links (in-process)")
struct RecoveryTests {
  static let old = "the old password of ada"
  static let new = "a brand new phrase for ada"

  @Test(
    "known and unknown addresses get the same answer; only the known gets mail", arguments: Engine.available)
  func sameAnswer(engine: Engine) throws {
    let f = try SessionFixture(engine)
    _ = try f.account("ada@example.test", password: Self.old)
    var answers: [(Status, String?)] = []
    for email in ["ada@example.test", "nobody@example.test", "ADA@example.test "] {
      var browser = f.browser()
      let form = browser.send(.get, "/account/recover")
      #expect(form.status == .ok)
      let sent = browser.send(
        .post, "/account/recover", form: [("csrf", csrfToken(in: form)), ("email", email)])
      answers.append((sent.status, sent.header("Location")))
    }
    #expect(answers.allSatisfy { $0.0 == .seeOther && $0.1 == "/account/recover/sent" })
    #expect(try f.store.outbox().map(\.to) == ["ada@example.test", "ada@example.test"])
    #expect(try f.actions().filter { $0 == "account.recovery_requested" }.count == 3)
    let events = try f.store.auditEvents().filter { $0.action == "account.recovery_requested" }
    #expect(events.allSatisfy { $0.detail == nil })
  }

  @Test("at most three unused links per address per hour", arguments: Engine.available)
  func perEmailLimit(engine: Engine) throws {
    let f = try SessionFixture(engine)
    _ = try f.account("ada@example.test", password: Self.old)
    var browser = f.browser()
    for _ in 0..<5 {
      let form = browser.send(.get, "/account/recover")
      let sent = browser.send(
        .post, "/account/recover", form: [("csrf", csrfToken(in: form)), ("email", "ada@example.test")])
      #expect(sent.status == .seeOther)
    }
    #expect(try f.store.outbox().count == ClientStore.recoveryLinksPerHour)
    #expect(try f.store.auditEvents().filter { $0.detail == "limited" }.count == 2)
    f.clock.advance(3601)
    let form = browser.send(.get, "/account/recover")
    _ = browser.send(
      .post, "/account/recover", form: [("csrf", csrfToken(in: form)), ("email", "ada@example.test")])
    #expect(try f.store.outbox().count == ClientStore.recoveryLinksPerHour + 1)
  }

  @Test("a recovery form needs same-origin and CSRF; a bad address is a 400", arguments: Engine.available)
  func recoverRefusals(engine: Engine) throws {
    let f = try SessionFixture(engine)
    var browser = f.browser()
    let form = browser.send(.get, "/account/recover")
    #expect(
      browser.send(.post, "/account/recover", form: [("email", "ada@example.test")]).status == .forbidden)
    browser.origin = "https://evil.example"
    #expect(
      browser.send(
        .post, "/account/recover", form: [("csrf", csrfToken(in: form)), ("email", "ada@example.test")]
      ).status == .forbidden)
    browser.origin = "http://127.0.0.1:8080"
    let bad = browser.send(
      .post, "/account/recover", form: [("csrf", csrfToken(in: form)), ("email", "not an address")])
    #expect(bad.status == .badRequest && text(bad).contains("Enter the email address you sign in with."))
    #expect(text(bad).contains("value=\"not an address\""), "a malformed address stays to be corrected")
    #expect(try f.store.outbox().isEmpty)
  }

  @Test(
    "the whole reset: the token leaves the URL, the policy holds, everything a reset implies",
    arguments: Engine.available)
  func reset(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let ada = try f.account("ada@example.test", password: Self.old)
    var elsewhere = f.browser()
    #expect(elsewhere.signIn("ada@example.test", Self.old).status == .seeOther)
    for _ in 0..<Lockout.threshold {
      try f.store.recordSignInFailure(accountID: ada.id, email: "ada@example.test")
    }
    #expect(try f.store.isLocked(email: "ada@example.test"))
    #expect(try !f.store.isVerified(accountID: ada.id))

    var browser = f.browser()
    let form = browser.send(.get, "/account/recover")
    _ = browser.send(
      .post, "/account/recover", form: [("csrf", csrfToken(in: form)), ("email", "ada@example.test")])
    let mail = try f.mail(to: "ada@example.test", kind: "recovery")
    let link = try #require(f.linkPath(mail))
    #expect(link.hasPrefix("/account/reset?token="))
    #expect(mail?.html?.contains("/account/reset?token=") == true)
    let token = String(link.dropFirst("/account/reset?token=".count))

    let landed = browser.send(.get, link)
    #expect(landed.status == .seeOther && landed.header("Location") == "/account/reset")
    #expect(landed.header("Referrer-Policy") == "no-referrer")
    let cookie = try #require(landed.headers.first { $0.name == "Set-Cookie" }?.value)
    #expect(cookie.hasPrefix("__Host-bl_reset=\(token); Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age="))
    let page = browser.send(.get, "/account/reset")
    #expect(page.status == .ok && text(page).contains("ada@example.test"))
    #expect(!text(page).contains(token))

    let weak = browser.send(
      .post, "/account/reset", form: [("csrf", csrfToken(in: page)), ("password", "password1234")])
    #expect(weak.status == .badRequest && text(weak).contains("one of the most common"))
    let noCSRF = browser.send(.post, "/account/reset", form: [("password", Self.new)])
    #expect(noCSRF.status == .forbidden)
    let done = browser.send(
      .post, "/account/reset", form: [("csrf", csrfToken(in: page)), ("password", Self.new)])
    #expect(done.status == .seeOther && done.header("Location") == "/account/reset/done")
    #expect(browser.cookies["__Host-bl_reset"] == nil)
    #expect(browser.send(.get, "/account/reset/done").status == .ok)

    #expect(elsewhere.send(.get, "/api/client/v1/session").status == .unauthorized)
    #expect(try f.store.sessions(.accountID(ada.id)).isEmpty)
    #expect(try !f.store.isLocked(email: "ada@example.test"))
    #expect(try f.store.isVerified(accountID: ada.id))
    #expect(try f.mail(to: "ada@example.test", kind: "password_changed") != nil)
    #expect(try f.actions().contains("account.password_reset"))
    for event in try f.store.auditEvents() {
      #expect(!(event.detail ?? "").contains(token) && !(event.detail ?? "").contains(Self.new))
    }

    var again = f.browser()
    #expect(again.signIn("ada@example.test", Self.old).header("Location") == nil)
    #expect(again.signIn("ada@example.test", Self.new).status == .seeOther)
    // The link works once.
    var late = f.browser()
    let used = late.send(.get, link)
    #expect(used.status.code == 410 && used.header("Referrer-Policy") == "no-referrer")
    late.cookies["__Host-bl_reset"] = token
    #expect(late.send(.get, "/account/reset").status.code == 410)
  }

  @Test("a reset voids the other links; an expired link is refused", arguments: Engine.available)
  func voidedAndExpired(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let ada = try f.account("ada@example.test", password: Self.old)
    let first = try f.store.issueToken(.recovery, accountID: ada.id, email: "ada@example.test")
    let second = try f.store.issueToken(.recovery, accountID: ada.id, email: "ada@example.test")
    var browser = f.browser()
    _ = browser.send(.get, "/account/reset?token=\(first)")
    let page = browser.send(.get, "/account/reset")
    _ = browser.send(
      .post, "/account/reset", form: [("csrf", csrfToken(in: page)), ("password", Self.new)])
    #expect(browser.send(.get, "/account/reset?token=\(second)").status.code == 410)
    let third = try f.store.issueToken(.recovery, accountID: ada.id, email: "ada@example.test")
    f.clock.advance(TokenPurpose.recovery.lifetime + 1)
    #expect(browser.send(.get, "/account/reset?token=\(third)").status.code == 410)
    #expect(browser.send(.get, "/account/reset?token=").status.code == 410)
  }

  @Test(
    "a set-password link from an operator sets the first password and verifies", arguments: Engine.available)
  func setPassword(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let bo = try f.store.createAccountWithSetPasswordLink(
      email: "bo@example.test", displayName: "Bo Example", unknownHash: f.pages.context.hasher.decoy(),
      actor: "cli", origin: "http://127.0.0.1:8080")
    var browser = f.browser()
    #expect(browser.signIn("bo@example.test", "any password at all").status == .badRequest)
    let link = try #require(f.linkPath(try f.mail(to: "bo@example.test", kind: "set_password")))
    #expect(link.hasPrefix("/account/set-password?token="))
    let landed = browser.send(.get, link)
    #expect(landed.header("Location") == "/account/set-password")
    let page = browser.send(.get, "/account/set-password")
    #expect(page.status == .ok && text(page).contains("Choose your password"))
    let short = browser.send(
      .post, "/account/set-password", form: [("csrf", csrfToken(in: page)), ("password", "short")])
    #expect(short.status == .badRequest && text(short).contains("at least 12 characters"))
    let done = browser.send(
      .post, "/account/set-password", form: [("csrf", csrfToken(in: page)), ("password", Self.new)])
    #expect(done.header("Location") == "/account/set-password/done")
    #expect(try f.store.isVerified(accountID: bo.id))
    #expect(try f.actions().contains("account.password_set"))
    #expect(browser.signIn("bo@example.test", Self.new).status == .seeOther)
    // A recovery link is not a set-password link.
    let recovery = try f.store.issueToken(.recovery, accountID: bo.id, email: "bo@example.test")
    #expect(browser.send(.get, "/account/set-password?token=\(recovery)").status.code == 410)
  }

  @Test("a password chosen before the policy still signs in", arguments: Engine.available)
  func shortPasswordsStillSignIn(engine: Engine) throws {
    let f = try SessionFixture(engine)
    _ = try f.account("ada@example.test", password: "short")
    var browser = f.browser()
    #expect(browser.signIn("ada@example.test", "short").status == .seeOther)
  }

  @Test("the sign-in page links to recovery")
  func forgotLink() throws {
    let f = try SessionFixture(.sqlite)
    var browser = f.browser()
    #expect(
      text(browser.send(.get, "/sign-in")).contains("<a href=\"/account/recover\">Forgot your password?</a>"))
  }
}
