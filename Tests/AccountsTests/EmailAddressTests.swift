import TestSupport
import Testing

@testable import Accounts

@Suite("Email addresses: one normalisation")
struct EmailAddressTests {
  @Test(
    "plausible addresses normalise to one form; everything else is not an address",
    arguments: [
      ("ada@example.test", "ada@example.test"),
      ("  Ada@Example.TEST ", "ada@example.test"),
      ("\u{00A0}ada@example.test\u{3000}", "ada@example.test"),
      ("ada@example.test\t", nil), ("ada@example.test\n", nil), ("\rada@example.test", nil),
      ("ada@example.test\u{85}", nil),
      ("o'brien+band@mail.example.test", "o'brien+band@mail.example.test"),
      ("first.last@xn--mnchen-3ya.example", "first.last@xn--mnchen-3ya.example"),
      ("a@b.co", "a@b.co"),
      ("ada@example.test\u{0}x", nil),
      ("\u{0}ada@example.test", nil),
      ("ada\u{0}@example.test", nil),
      ("ada@exаmple.test", nil),  // Cyrillic а
      ("adа@example.test", nil),
      ("ada@example.test\u{200B}", nil),  // zero-width space stays: not ASCII
      ("ｔｏｍ@example.test", nil),  // full-width letters
      ("ada @example.test", nil),
      ("ada@example.test\r\nBcc: x@example.test", nil),
      ("ada@@example.test", nil),
      ("\"ada\"@example.test", nil),
      (".ada@example.test", nil),
      ("ada.@example.test", nil),
      ("a..da@example.test", nil),
      ("ada@example", nil),
      ("ada@example.test.", nil),
      ("ada@-example.test", nil),
      ("ada@example-.test", nil),
      ("ada@example.123", nil),
      ("ada@exam_ple.test", nil),
      ("@example.test", nil),
      ("ada@", nil),
      ("", nil),
      ("ada%00x@example.test", "ada%00x@example.test"),  // '%' is atext: the form decoder decodes once
      (String(repeating: "a", count: 65) + "@example.test", nil),
      (
        String(repeating: "a", count: 64) + "@example.test",
        String(repeating: "a", count: 64) + "@example.test"
      ),
      ("a@" + String(repeating: "b", count: 64) + ".test", nil),
      (
        "a@" + Array(repeating: String(repeating: "b", count: 60), count: 5).joined(separator: ".") + ".test",
        nil
      ),
    ] as [(String, String?)])
  func table(typed: String, normalised: String?) {
    #expect(EmailAddress(typed)?.normalised == normalised)
  }
}
