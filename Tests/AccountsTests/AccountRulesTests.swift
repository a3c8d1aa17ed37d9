import TestSupport
import Testing

@testable import Accounts

@Suite("What a person may call themselves (AccountRules)")
struct AccountRulesTests {
  @Test(
    "names people have are kept, trimmed",
    arguments: [
      ("Ada Example", "Ada Example"), ("  Ada Example ", "Ada Example"), ("J. R. Hartley", "J. R. Hartley"),
      ("J.R. Hartley", "J.R. Hartley"), ("Zoë O'Brien-Smith", "Zoë O'Brien-Smith"), ("山田 花子", "山田 花子"),
      ("محمد", "محمد"), ("Ms. Example", "Ms. Example"), ("Ada (music)", "Ada (music)"),
      (String(repeating: "n", count: 100), String(repeating: "n", count: 100)),
    ])
  func kept(typed: String, name: String) {
    #expect(AccountRules.displayName(typed) == name)
  }

  @Test(
    "names that could carry a link into mail, reorder text or hide characters are refused",
    arguments: [
      "", "   ", String(repeating: "n", count: 101), "Ada\nExample", "Ada\u{7}",
      "Ada\u{202E}tset.live\u{202C}",
      "Ada\u{2066}x\u{2069}", "Ada\u{200B}Example", "Ada\u{200D}", "\u{FEFF}Ada", "Ada\u{2028}Example",
      "www.example.test", "Visit WWW.example.test", "https://example.test", "ftp://x", "ada@example.test",
      "Ada evil.example", "Ada example.test/login", "Ada /reset", "Ada \\\\host", "St.John",
      "evil\u{FF0E}example",
    ])
  func refused(typed: String) {
    #expect(
      AccountRules.displayName(typed) == nil, "\(typed.unicodeScalars.map { $0.escaped(asASCII: true) })")
  }

  @Test("a stored name that fails today's rules is left out of mail")
  func mail() {
    #expect(MailTemplates.safeName("Ada Example") == "Ada Example")
    #expect(MailTemplates.safeName("see evil.example") == nil)
    let message = MailTemplates.message(
      kind: "t", to: "ada@example.test", name: "see evil.example", subject: "s", paragraphs: ["p"],
      reason: "r")
    #expect(!message.text.contains("evil") && message.text.hasPrefix("Hello,"))
  }
}
