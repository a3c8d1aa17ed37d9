import Deployment
import Edge
import EdgeTesting
import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI

@Suite("Corrections on /account and PATCH /account (in-process)")
struct CorrectionTests {
  static let password = "the password of ada here"
  static let new = "another long phrase for ada"

  /// A fixture with Ada signed in on two browsers; the first is the one making corrections.
  static func twoBrowsers(_ engine: Engine) throws -> (
    SessionFixture, Account, InProcessClient, InProcessClient
  ) {
    let f = try SessionFixture(engine)
    let ada = try f.account("ada@example.test", password: password)
    var one = f.browser()
    var two = f.browser()
    #expect(one.signIn("ada@example.test", password).status == .seeOther)
    #expect(two.signIn("ada@example.test", password).status == .seeOther)
    return (f, ada, one, two)
  }

  @Test("the name changes, within its rules", arguments: Engine.available)
  func rename(engine: Engine) throws {
    var (f, ada, one, _) = try Self.twoBrowsers(engine)
    let page = one.send(.get, "/account")
    let csrf = csrfToken(in: page)
    for bad in ["", "   ", String(repeating: "n", count: 101), "Ada\nExample", "Ada\u{7}"] {
      let refused = one.send(.post, "/account/name", form: [("csrf", csrf), ("name", bad)])
      #expect(refused.status == .badRequest && text(refused).contains(AccountRules.nameProblem))
    }
    #expect(one.send(.post, "/account/name", form: [("name", "Ada Lovelace")]).status == .forbidden)
    let done = one.send(.post, "/account/name", form: [("csrf", csrf), ("name", "  Ada Lovelace ")])
    #expect(done.header("Location") == "/account?changed=name")
    let after = one.send(.get, "/account?changed=name")
    #expect(text(after).contains("Your name has been changed.") && text(after).contains("Ada Lovelace"))
    #expect(try f.store.account(id: ada.id)?.displayName == "Ada Lovelace")
    #expect(try f.actions().last == "account.name_changed")
  }

  @Test(
    "PATCH /account: the name, JSON only, authenticated, same-origin for cookies", arguments: Engine.available
  )
  func patch(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let token = try f.signedIn("ada@example.test")
    var api = f.browser()
    api.origin = nil
    let bearer = [("Authorization", "Bearer \(token)")]
    // The session answer is cached on the loop before the change...
    #expect(f.call(.get, token: token).status == .ok)
    let ok = api.send(
      .patch, "/api/client/v1/account", json: #"{"displayName": "Ada Lovelace"}"#, headers: bearer)
    #expect(ok.status == .ok && ok.header("Content-Type") == "application/json; charset=utf-8")
    let answer = try body(ok)
    #expect((answer["account"] as? [String: Any])?["displayName"] as? String == "Ada Lovelace")
    // ... and the change reaches GET /session at once.
    let session = try body(f.call(.get, token: token))
    #expect((session["account"] as? [String: Any])?["displayName"] as? String == "Ada Lovelace")
    let cases: [(String?, String, Int, String)] = [
      (nil, #"{"displayName": "X"}"#, 401, "unauthorized"),
      (nil, "not json", 400, "invalid_request"),
      (token, #"{"displayName": ""}"#, 400, "invalid_display_name"),
      (token, #"{"displayName": "a\u0000b"}"#, 400, "invalid_display_name"),
      (token, "{\"displayName\": \"\(String(repeating: "n", count: 101))\"}", 400, "invalid_display_name"),
      (token, #"{"displayName": 7}"#, 400, "invalid_request"),
      (token, #"{"displayName": "Ada", "email": "x@example.test"}"#, 400, "invalid_request"),
      (token, "not json", 400, "invalid_request"),
    ]
    for (credential, json, status, error) in cases {
      let headers = credential.map { [("Authorization", "Bearer \($0)")] } ?? []
      let response = api.send(.patch, "/api/client/v1/account", json: json, headers: headers)
      #expect(response.status.code == status, "\(json)")
      #expect(try body(response)["error"] as? String == error, "\(json)")
    }
    let form = api.send(.patch, "/api/client/v1/account", form: [("displayName", "Ada")], headers: bearer)
    #expect(form.status == .unsupportedMediaType)
    // A cookie needs a same-origin Origin.
    var browser = f.browser()
    _ = try f.account("bo@example.test", password: Self.password)
    _ = browser.signIn("bo@example.test", Self.password)
    browser.origin = nil
    #expect(
      browser.send(.patch, "/api/client/v1/account", json: #"{"displayName": "Bo"}"#).status == .forbidden)
    browser.origin = "http://127.0.0.1:8080"
    #expect(browser.send(.patch, "/api/client/v1/account", json: #"{"displayName": "Bo"}"#).status == .ok)
    #expect(try f.actions().filter { $0 == "account.name_changed" }.count == 2)
  }

  @Test("the password changes with the current one; every other session ends", arguments: Engine.available)
  func changePassword(engine: Engine) throws {
    var (f, ada, one, two) = try Self.twoBrowsers(engine)
    let csrf = csrfToken(in: one.send(.get, "/account"))
    let wrong = one.send(
      .post, "/account/password",
      form: [("csrf", csrf), ("current-password", "not the password"), ("new-password", Self.new)])
    #expect(wrong.status == .badRequest && text(wrong).contains("Your current password is not right."))
    let weak = one.send(
      .post, "/account/password",
      form: [("csrf", csrf), ("current-password", Self.password), ("new-password", "ada")])
    #expect(weak.status == .badRequest && text(weak).contains("at least 12 characters"))
    let done = one.send(
      .post, "/account/password",
      form: [("csrf", csrf), ("current-password", Self.password), ("new-password", Self.new)])
    #expect(done.header("Location") == "/account?changed=password")
    #expect(one.send(.get, "/account").status == .ok)
    #expect(two.send(.get, "/account").status == .seeOther)
    #expect(try f.store.sessions(.accountID(ada.id)).count == 1)
    #expect(
      try f.mail(to: "ada@example.test", kind: "password_changed")?.text?.contains("every other device")
        == true)
    #expect(try f.actions().contains("account.password_changed"))
    var fresh = f.browser()
    #expect(fresh.signIn("ada@example.test", Self.password).header("Location") == nil)
    #expect(fresh.signIn("ada@example.test", Self.new).status == .seeOther)
  }

  @Test("wrong current passwords count towards the lockout", arguments: Engine.available)
  func changePasswordLockout(engine: Engine) throws {
    var (f, _, one, _) = try Self.twoBrowsers(engine)
    let csrf = csrfToken(in: one.send(.get, "/account"))
    var last = ""
    for _ in 0..<Lockout.threshold {
      last = text(
        one.send(
          .post, "/account/password",
          form: [("csrf", csrf), ("current-password", "not the password"), ("new-password", Self.new)]))
    }
    #expect(last.contains(WebPages.lockedMessage))
    // This browser signed in before, so its trusted-device cookie takes the failures: the email
    // itself stays open to Ada's other devices (see `TrustedDevice`).
    #expect(try !f.store.isLocked(email: "ada@example.test"))
    one.cookies[TrustedDevice.cookie] = nil
    for _ in 0..<Lockout.threshold {
      last = text(
        one.send(
          .post, "/account/password",
          form: [("csrf", csrf), ("current-password", "not the password"), ("new-password", Self.new)]))
    }
    #expect(last.contains(WebPages.lockedMessage))
    #expect(try f.store.isLocked(email: "ada@example.test"))
  }

  @Test(
    "the email changes only when the link to the new address is followed from the account's own session",
    arguments: Engine.available)
  func changeEmail(engine: Engine) throws {
    var (f, ada, one, two) = try Self.twoBrowsers(engine)
    _ = try f.account("bo@example.test", name: "Bo Example", password: Self.password)
    let csrf = csrfToken(in: one.send(.get, "/account"))
    func ask(_ email: String, _ password: String = Self.password) -> Response {
      one.send(
        .post, "/account/email", form: [("csrf", csrf), ("new-email", email), ("email-password", password)])
    }
    #expect(text(ask("ada@example.test")).contains("That is already your email address."))
    #expect(text(ask("nonsense")).contains("Enter the new email address."))
    #expect(text(ask("ada.new@example.test", "wrong password")).contains("not right"))
    #expect(try f.store.outbox().isEmpty)
    // An address another account has is answered alike; its owner is told instead.
    #expect(ask("bo@example.test").header("Location") == "/account?changed=email")
    let inUse = try #require(try f.mail(to: "bo@example.test", kind: "email_change_in_use"))
    #expect(f.linkPath(inUse) == "/account/recover")
    #expect(try f.mail(to: "bo@example.test", kind: "email_change") == nil)
    #expect(ask("Ada.New@example.test").header("Location") == "/account?changed=email")
    let notice = try #require(try f.mail(to: "ada@example.test", kind: "email_change_notice"))
    #expect(notice.text?.contains("ada.new@example.test") == true && notice.text?.contains("token") == false)
    let link = try #require(f.linkPath(try f.mail(to: "ada.new@example.test", kind: "email_change")))
    #expect(try f.store.account(id: ada.id)?.email == "ada@example.test")
    // The account page shows the pending change, with a way to cancel it.
    let pending = text(one.send(.get, "/account"))
    #expect(pending.contains("ada.new@example.test") && pending.contains("action=\"/account/email/cancel\""))

    // Someone holding only the link (not signed in) cannot confirm it.
    var phone = f.browser()
    let landed = phone.send(.get, link)
    #expect(landed.header("Location") == "/account/email/confirm")
    #expect(landed.header("Referrer-Policy") == "no-referrer")
    let asked = phone.send(.get, "/account/email/confirm")
    #expect(text(asked).contains("Sign in to confirm") && !text(asked).contains("ada@example.test"))
    #expect(
      phone.send(.post, "/account/email/confirm", form: [("csrf", csrfToken(in: asked))]).status
        != .ok)
    #expect(try f.store.account(id: ada.id)?.email == "ada@example.test")
    // Signed in to another account, neither.
    _ = try f.account("cy@example.test", name: "Cy Example", password: Self.password)
    #expect(phone.signIn("cy@example.test", Self.password).status == .seeOther)
    #expect(phone.send(.get, "/account/email/confirm").status == .forbidden)
    #expect(try f.store.account(id: ada.id)?.email == "ada@example.test")

    // Ada's own signed-in browser confirms it.
    _ = one.send(.get, link)
    let page = one.send(.get, "/account/email/confirm")
    #expect(text(page).contains("ada.new@example.test"))
    #expect(one.send(.post, "/account/email/confirm", form: []).status == .forbidden)
    let done = one.send(.post, "/account/email/confirm", form: [("csrf", csrfToken(in: page))])
    #expect(done.header("Location") == "/account/email/confirmed")
    #expect(try f.store.account(id: ada.id)?.email == "ada.new@example.test")
    #expect(try f.store.isVerified(accountID: ada.id))
    #expect(try f.actions().contains("account.email_changed"))
    #expect(one.send(.get, "/account").status == .ok && two.send(.get, "/account").status == .ok)
    #expect(text(one.send(.get, "/account")).contains("ada.new@example.test"))
    #expect(one.send(.get, link).status.code == 410)
    // The old address is told it took effect, with a way back.
    let changed = try #require(try f.mail(to: "ada@example.test", kind: "email_changed"))
    #expect(f.linkPath(changed)?.hasPrefix("/account/email/restore?token=") == true)
    var fresh = f.browser()
    #expect(fresh.signIn("ada.new@example.test", Self.password).status == .seeOther)
  }

  @Test(
    "the old address takes the account back: its address again, every session ended, a new password chosen",
    arguments: Engine.available)
  func restoreEmail(engine: Engine) throws {
    var (f, ada, one, two) = try Self.twoBrowsers(engine)
    let csrf = csrfToken(in: one.send(.get, "/account"))
    _ = one.send(
      .post, "/account/email",
      form: [("csrf", csrf), ("new-email", "taken.over@example.test"), ("email-password", Self.password)])
    let confirm = try #require(f.linkPath(try f.mail(to: "taken.over@example.test", kind: "email_change")))
    _ = one.send(.get, confirm)
    let page = one.send(.get, "/account/email/confirm")
    _ = one.send(.post, "/account/email/confirm", form: [("csrf", csrfToken(in: page))])
    #expect(try f.store.account(id: ada.id)?.email == "taken.over@example.test")
    let back = try #require(f.linkPath(try f.mail(to: "ada@example.test", kind: "email_changed")))

    var owner = f.browser()
    #expect(owner.send(.get, back).header("Location") == "/account/email/restore")
    let ask = owner.send(.get, "/account/email/restore")
    #expect(text(ask).contains("Take your account back"))
    let restored = owner.send(.post, "/account/email/restore", form: [("csrf", csrfToken(in: ask))])
    #expect(restored.header("Location") == "/account/reset")
    #expect(try f.store.account(id: ada.id)?.email == "ada@example.test")
    // Every session ended; the old password no longer signs in; the link works once.
    #expect(one.send(.get, "/account").status == .seeOther && two.send(.get, "/account").status == .seeOther)
    var attacker = f.browser()
    #expect(attacker.signIn("ada@example.test", Self.password).status != .seeOther)
    #expect(owner.send(.get, back).status.code == 410)
    // The reset form is next, its link in its cookie: the owner chooses a new password.
    let form = owner.send(.get, "/account/reset")
    #expect(text(form).contains("Choose a new password"))
    let set = owner.send(
      .post, "/account/reset", form: [("csrf", csrfToken(in: form)), ("password", Self.new)])
    #expect(set.header("Location") == "/account/reset/done")
    #expect(owner.signIn("ada@example.test", Self.new).status == .seeOther)
    #expect(try f.actions().contains("account.email_restored"))
  }

  @Test("an address taken between the request and the link is not changed to", arguments: Engine.available)
  func takenMeanwhile(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let ada = try f.account("ada@example.test", password: Self.password)
    _ = try f.account("cy@example.test", password: Self.password)
    let known = try f.store.issueToken(.emailChange, accountID: ada.id, email: "cy@example.test")
    #expect(
      try f.store.confirmEmailChange(known, accountID: ada.id, host: "example.test") { _, to, _ in
        MailTemplates.message(kind: "t", to: to, name: nil, subject: "s", paragraphs: [], reason: "r")
      } == .addressTaken)
    #expect(try f.store.account(id: ada.id)?.email == "ada@example.test")
  }
}
