import TestSupport
import Testing

@testable import Accounts
@testable import Store

@Suite("Single-use tokens and the outbox, on every engine")
struct MailFoundationTests {
  static func store(_ engine: Engine) throws -> (ClientStore, TestClock, Account, () -> Void) {
    let (db, finish) = try engine.database()
    let (store, clock) = try makeStore(on: db)
    let ada = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    return (store, clock, ada, finish)
  }

  @Test(
    "a token works once, until its lifetime ends, and a password change voids it", arguments: Engine.available
  )
  func tokens(engine: Engine) throws {
    let (store, clock, ada, finish) = try Self.store(engine)
    defer { finish() }
    let token = try store.issueToken(.recovery, accountID: ada.id, email: "ada@example.test")
    #expect(try store.peekToken(token, purpose: .setPassword) == nil, "another purpose's token is no token")
    #expect(try store.peekToken(token, purpose: .recovery)?.accountID == ada.id)
    #expect(try store.consumeToken(token, purpose: .recovery)?.email == "ada@example.test")
    #expect(try store.consumeToken(token, purpose: .recovery) == nil, "single use")
    let late = try store.issueToken(.recovery, accountID: ada.id, email: "ada@example.test")
    clock.advance(TokenPurpose.recovery.lifetime)
    #expect(try store.peekToken(late, purpose: .recovery) == nil, "30 minutes and no more")
    let voided = try store.issueToken(.recovery, accountID: ada.id, email: "ada@example.test")
    try store.voidTokens(accountID: ada.id, [.recovery, .setPassword])
    #expect(try store.consumeToken(voided, purpose: .recovery) == nil)
  }

  @Test(
    "mail is written with its action or not at all; delivery erases the bodies", arguments: Engine.available)
  func outbox(engine: Engine) throws {
    let (store, clock, _, finish) = try Self.store(engine)
    defer { finish() }
    let message = MailTemplates.message(
      kind: "recovery", to: "ada@example.test", name: "Ada", subject: "Reset your password",
      paragraphs: ["Someone asked to reset the password."],
      link: ("Choose a new password", "https://x.example.test/r"),
      reason: "You got this because of a request on Band Licence.")
    _ = try? store.transactionForTests { () throws(StoreError) in
      try store.enqueueMail(message, host: "x.example.test")
      throw StoreError.failed("the action failed")
    }
    #expect(try store.outbox().isEmpty, "rolled back with its action")
    let id = try store.enqueueMail(message, host: "x.example.test")
    #expect(id.hasPrefix("<msg_") && id.hasSuffix("@x.example.test>"))
    let claimed = try store.claimDueMail()
    #expect(claimed.map(\.messageID) == [id])
    #expect(try store.claimDueMail().isEmpty, "claimed: no other sender takes it")
    try store.markFailed(claimed[0].id, error: "SMTP delivery failed: connection refused")
    #expect(try store.claimDueMail().isEmpty, "backing off")
    clock.advance(30)
    let again = try store.claimDueMail()
    #expect(again.map(\.messageID) == [id], "the same Message-ID at the next attempt")
    try store.markDelivered(again[0].id)
    let kept = try #require(try store.outboxEntry(id: again[0].id))
    #expect(kept.text == nil && kept.html == nil && kept.sentAt != nil && kept.attempts == 2)
    #expect(try store.claimDueMail().isEmpty)
  }

  @Test("the message: headers, a stable Message-ID, both parts in base64, an encoded subject")
  func format() throws {
    let entry = OutboxEntry(
      id: 1, messageID: "<msg_1@x.example.test>", kind: "recovery", to: "ada@example.test",
      subject: "Réinitialiser", text: "Hello Ada", html: "<p>Hello Ada</p>", createdAt: 0, attempts: 0,
      nextAttemptAt: 0, sentAt: nil, lastError: nil)
    let text = String(
      decoding: MailFormat.message(entry, from: "Band Licence <no-reply@x.example.test>", date: 0),
      as: UTF8.self)
    #expect(text.contains("\r\nMessage-ID: <msg_1@x.example.test>\r\n"))
    #expect(text.contains("\r\nDate: Thu, 01 Jan 1970 00:00:00 +0000\r\n"))
    #expect(text.contains("Subject: =?UTF-8?B?" + MailFormat.base64(Array("Réinitialiser".utf8)) + "?="))
    #expect(text.contains(MailFormat.base64(Array("Hello Ada".utf8))))
    #expect(!text.contains("\n\n") && !text.contains("Hello Ada"), "CRLF only; bodies encoded")
  }

  @Test(
    "the HTML part loads nothing (no images, stylesheets, scripts or links but the one given); its only style is inline"
  )
  func noTracking() {
    let message = MailTemplates.message(
      kind: "recovery", to: "ada@example.test", name: "Ada <b>", subject: "A \"quoted\" subject",
      paragraphs: ["One & two <script>alert(1)</script>"],
      link: ("Open", "https://x.example.test/r?token=a&b=c"),
      reason: "Why you got this.")
    let html = message.html.lowercased()
    for needle in ["<img", "<script", "<link", "<style", "<iframe", "src=", "url(", "@import", "http://"] {
      #expect(!html.contains(needle), "\(needle)")
    }
    // What docs/threat-model.md says the mail's styling is, exactly.
    let styles = html.split(separator: "style=\"").dropFirst().map { $0.prefix { $0 != "\"" } }
    #expect(styles == ["font-family: sans-serif; line-height: 1.5", "color: #555"])
    let hrefs = html.split(separator: "href=\"").dropFirst().map { $0.prefix { $0 != "\"" } }
    #expect(hrefs == ["https://x.example.test/r?token=a&amp;b=c"])
    #expect(
      message.text.contains("https://x.example.test/r?token=a&b=c") && message.text.contains("Hello Ada <b>,")
    )
  }

  @Test("a long subject in another script is folded into encoded words of at most 75 characters")
  func longSubject() throws {
    let subject = String(repeating: "Réinitialisez votre mot de passe — ", count: 4)
    let header = MailFormat.encodedWord(subject)
    let words = header.split(separator: "\r\n ").map(String.init)
    #expect(words.count > 1 && words.allSatisfy { $0.count <= 75 && $0.hasPrefix("=?UTF-8?B?") })
    let decoded = words.map { word -> String in
      let base64 = word.dropFirst("=?UTF-8?B?".count).dropLast(2)
      return String(decoding: Self.decodeBase64(String(base64)), as: UTF8.self)
    }.joined()
    #expect(decoded == subject)
    #expect(
      MailFormat.encodedWord("Plain\r\nBcc: x@example.test") == "PlainBcc: x@example.test",
      "no header injection")
  }

  static func decodeBase64(_ text: String) -> [UInt8] {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var bits = 0
    var count = 0
    var out: [UInt8] = []
    for c in text.utf8 where c != UInt8(ascii: "=") {
      guard let v = alphabet.firstIndex(of: c) else { continue }
      bits = bits << 6 | v
      count += 6
      if count >= 8 {
        count -= 8
        out.append(UInt8(truncatingIfNeeded: bits >> count))
      }
    }
    return out
  }

  @Test(
    "undelivered mail: given up after a week or after its attempts, its body erased, never sent blank",
    arguments: Engine.available)
  func givingUp(engine: Engine) throws {
    let (store, clock, _, finish) = try Self.store(engine)
    defer { finish() }
    let message = MailMessage(kind: "recovery", to: "ada@example.test", subject: "s", text: "t", html: "h")
    try store.enqueueMail(message, host: "x.example.test")
    clock.advance(8 * 86400)
    #expect(try store.eraseStaleMail(window: 7 * 86400) == 1)
    #expect(try store.claimDueMail().isEmpty, "an erased message is never sent blank")
    try store.enqueueMail(message, host: "x.example.test")
    for _ in 0..<ClientStore.mailAttempts {
      let due = try store.claimDueMail()
      #expect(due.count == 1)
      try store.markFailed(due[0].id, error: "SMTP delivery failed: 550", firstWait: 0)
    }
    #expect(try store.claimDueMail().isEmpty)
    let last = try #require(try store.outbox().first)
    #expect(last.text == nil && last.lastError?.hasPrefix("gave up after") == true)
  }

  static let origins: [(String, String)] = [
    ("https://app.example.test", "app.example.test"), ("https://app.example.test:8443", "app.example.test"),
    ("http://127.0.0.1:8080", "127.0.0.1"), ("http://[::1]:8080", "::1"),
    ("https://a.example.test/x", "a.example.test"),
  ]

  @Test("the host of an origin (the Message-ID's right side, the certificate check)", arguments: origins)
  func originHost(origin: String, host: String) {
    #expect(WebSecurity.host(of: origin) == host)
  }

  /// (relay URL, whether TLS is required, as printed)
  static let relays: [(String, Bool, String)] = [
    ("smtp://127.0.0.1:2525", false, "smtp://127.0.0.1:2525"),
    ("smtp://localhost:25", false, "smtp://localhost:25"),
    ("smtp://[::1]:25", false, "smtp://[::1]:25"),
    ("smtp://relay.example.test:587", true, "smtp://relay.example.test:587"),
    ("smtps://relay.example.test:465", true, "smtps://relay.example.test:465"),
    ("smtp://user:secret@127.0.0.1:25", false, "smtp://***@127.0.0.1:25"),
    ("smtp://127.0.0.1.example.test:25", true, "smtp://127.0.0.1.example.test:25"),
  ]

  @Test("STARTTLS is required except to a loopback relay; credentials never print", arguments: relays)
  func relay(url: String, tls: Bool, printed: String) {
    let settings = SMTPSettings(url: url, from: "Band Licence <no-reply@x.example.test>")
    #expect(settings.requiresTLS == tls)
    #expect(settings.description == printed)
    #expect(settings.envelopeFrom == "no-reply@x.example.test")
  }
}

extension ClientStore {
  /// A write transaction, for tests that roll one back.
  func transactionForTests(_ body: () throws(StoreError) -> Void) throws(StoreError) {
    try db.transaction(body)
  }
}
