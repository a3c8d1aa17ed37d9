import Edge
import Testing

@testable import Accounts

/// What a request presents as proof of a session: one rule for every surface.
@Suite struct CredentialTests {
  @Test(
    "Bearer in any case wins over the cookie; anything else in Authorization, or two of it, is malformed",
    arguments: [
      ([("Authorization", "Bearer abc")], Credential.bearer("abc")),
      ([("authorization", "bEaReR abc")], .bearer("abc")),
      ([("Authorization", "Bearer abc"), ("Cookie", "__Host-bl_session=web")], .bearer("abc")),
      ([("Authorization", "Basic YTpi")], .malformed),
      ([("Authorization", "Bearer")], .malformed),
      ([("Authorization", "Bearer abc"), ("Authorization", "Bearer def")], .malformed),
      ([("Authorization", "Bearer abc"), ("authorization", "Bearer abc")], .malformed),
      ([("Authorization", "Bearer ")], .malformed),
      ([("Authorization", "Bearerabc")], .malformed),
      ([("Authorization", "Bearer a b")], .bearer("a b")),
      ([], .none),
    ])
  func credential(headers: [(String, String)], expected: Credential) {
    #expect(Credential(Request(method: .get, target: "/", headers: headers)) == expected)
  }
}
