import Edge
import Testing

@testable import Accounts

@Suite struct IdempotencyKeyTests {
  @Test(
    "a key is 1 to 255 visible ASCII characters, byte for byte",
    arguments: [
      ("k", true), ("8e03978e-40d5-43e8-bc93-6894a57f9324", true), ("\"quoted\"", true),
      (String(repeating: "a", count: 255), true), (String(repeating: "a", count: 256), false), ("", false),
      ("has space", false), ("tab\there", false), ("caf\u{e9}", false), ("nul\u{0}", false),
    ])
  func text(text: String, valid: Bool) {
    #expect((IdempotencyKey(text) != nil) == valid)
    #expect(IdempotencyKey(text)?.description == (valid ? text : nil))
  }

  @Test("a request's key: exactly one field; absent or repeated is none")
  func request() {
    let one = Request(method: .post, target: "/", headers: [("Idempotency-Key", "k1")])
    let two = Request(
      method: .post, target: "/", headers: [("Idempotency-Key", "k1"), ("idempotency-key", "k2")])
    #expect(IdempotencyKey(of: one)?.description == "k1")
    #expect(IdempotencyKey(of: two) == nil)
    #expect(IdempotencyKey(of: Request(method: .post, target: "/")) == nil)
  }
}
