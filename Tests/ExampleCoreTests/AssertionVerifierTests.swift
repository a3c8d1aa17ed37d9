import Foundation
import Testing

@testable import Accounts
@testable import ExampleCore
@testable import Gateway

@Suite("The example core's assertion checks, in docs/gateway.md's order")
struct AssertionVerifierTests {
  /// A request that fails one check: what it carries, and the check and message expected.
  struct Case: CustomTestStringConvertible, Sendable {
    let name: String
    let check: AssertionRefusal.Check
    let message: String
    let input: @Sendable (Signing) throws -> AssertionVerifier.Input
    var testDescription: String { name }
  }

  static let now = Signing.now
  static let otherKey = Result { try SigningKey.generate() }

  static let cases: [Case] = [
    Case(name: "no field", check: .header, message: "no Band-Licence-Assertion field") { _ in
      Signing.input([])
    },
    Case(name: "two fields", check: .header, message: "more than one Band-Licence-Assertion field") { s in
      Signing.input([try s.write(), try s.write()])
    },
    Case(
      name: "two parts", check: .format, message: "the assertion is not three base64url parts (a compact JWS)"
    ) {
      s in Signing.input([String(try s.write().split(separator: ".").dropLast().joined(separator: "."))])
    },
    Case(
      name: "padding", check: .format, message: "the assertion is not three base64url parts (a compact JWS)"
    ) {
      s in Signing.input([try s.write() + "="])
    },
    Case(name: "alg none", check: .algorithm, message: "the JWS header's alg is not EdDSA") { s in
      Signing.input([try header(#"{"alg":"none","kid":"K","typ":"band-assertion+jwt"}"#, s)])
    },
    Case(name: "alg Ed25519 (RFC 9864)", check: .algorithm, message: "the JWS header's alg is not EdDSA") {
      s in
      Signing.input([try header(#"{"alg":"Ed25519","kid":"K","typ":"band-assertion+jwt"}"#, s)])
    },
    Case(name: "typ JWT", check: .type, message: "the JWS header's typ is not band-assertion+jwt") { s in
      Signing.input([try header(#"{"alg":"EdDSA","kid":"K","typ":"JWT"}"#, s)])
    },
    Case(name: "no kid", check: .format, message: "the JWS header has no kid") { s in
      Signing.input([try header(#"{"alg":"EdDSA","typ":"band-assertion+jwt"}"#, s)])
    },
    Case(name: "unknown kid", check: .key, message: "the kid is not in the JWKS, even fetched again") { s in
      let other = try otherKey.get()
      return Signing.input([
        try s.signer.write(
          Signing.caller(), audience: "core", request: Signing.binding(), key: other, now: now)
      ])
    },
    Case(
      name: "signature", check: .signature,
      message: "the Ed25519 signature does not verify under the kid's key"
    ) {
      s in
      let read = try s.read().split(separator: ".")
      let write = try s.write().split(separator: ".")
      return Signing.input(["\(write[0]).\(write[1]).\(read[2])"])
    },
    Case(
      name: "payload not an object", check: .claims,
      message: "the payload is not a JSON object with sub and sid"
    ) {
      s in Signing.input([try s.token(payload: "[]")])
    },
    Case(name: "iss", check: .issuer, message: "iss is not http://127.0.0.1:8080") { s in
      let signer = try AssertionSigner(issuer: "https://elsewhere.example.test")
      return Signing.input([
        try signer.write(Signing.caller(), audience: "core", request: Signing.binding(), key: s.key, now: now)
      ])
    },
    Case(name: "aud", check: .audience, message: "aud is not core") { s in
      Signing.input([
        try s.signer.write(
          Signing.caller(), audience: "api-core", request: Signing.binding(), key: s.key, now: now)
      ])
    },
  ]

  static let laterCases: [Case] = [
    Case(name: "lives 61 s", check: .lifetime, message: "exp - iat is not 1 to 60 seconds") { s in
      Signing.input([try s.token(payload: claims(iat: now, exp: now + 61))])
    },
    Case(name: "iat 6 s ahead", check: .lifetime, message: "iat is in the future") { s in
      Signing.input([try s.write(at: now + 6)])
    },
    Case(name: "expired 5 s ago", check: .lifetime, message: "the assertion has expired") { s in
      Signing.input([try s.write(at: now - 65)])
    },
    Case(name: "iat not an integer", check: .lifetime, message: "iat and exp are not integers") { s in
      Signing.input([
        try s.token(
          payload: claims(iat: now, exp: now + 60).replacingOccurrences(of: "\(now),", with: "\(now).5,"))
      ])
    },
    Case(name: "a read assertion on a POST", check: .scope, message: "a POST needs scp write") { s in
      Signing.input([try s.read()])
    },
    Case(name: "a write assertion on a GET", check: .scope, message: "a GET needs scp read") { s in
      Signing.input([try s.write()], method: "GET", body: [])
    },
    Case(name: "no idk", check: .binding, message: "a write assertion needs htm, htp, bh, idk and jti") { s in
      Signing.input([try s.token(payload: claims(iat: now, exp: now + 60, binding: false))])
    },
    Case(name: "htm", check: .method, message: "htm is not the request's method") { s in
      Signing.input([try s.write(request: Signing.binding(method: "PATCH"))])
    },
    Case(name: "htp", check: .target, message: "htp is not the request's target") { s in
      Signing.input([try s.write()], target: Signing.target + "?date=2025-03-04")
    },
    Case(name: "bh", check: .body, message: "bh is not the SHA-256 of the request's body") { s in
      Signing.input([try s.write()], body: Array(#"{"studentId":"stu_2"}"#.utf8))
    },
    Case(name: "school", check: .school, message: "school is not the path's school") { s in
      Signing.input([try s.write(Signing.caller(school: "sch_other"))])
    },
    Case(name: "read_only POSTs", check: .role, message: "a read_only may not POST here") { s in
      Signing.input([try s.write(Signing.caller(.readOnly))])
    },
    Case(name: "unknown role", check: .role, message: "role is not read_only, teacher or administrator") {
      s in
      Signing.input([try s.token(payload: claims(iat: now, exp: now + 60, role: "owner"))])
    },
  ]

  /// A token with `header` (JSON text) over a valid write payload, signed with the test key.
  static func header(_ header: String, _ s: Signing) throws -> String {
    try Assertion.compact(
      header: Array(header.utf8),
      payload: Assertion.payload(
        s.signer.claims(
          Signing.caller(), audience: "core", request: Signing.binding(), now: now)), key: s.key)
  }

  /// A write payload's JSON with these times and role, with or without `idk`.
  static func claims(iat: Int, exp: Int, role: String = "teacher", binding: Bool = true) -> String {
    let request = Signing.binding()
    return
      #"{"iss":"http://127.0.0.1:8080","aud":"core","sub":"acc_tom","sid":"ses_tom","school":"sch_demo1","#
      + #""role":"\#(role)","chn":"native","scp":"write","iat":\#(iat),"exp":\#(exp),"htm":"POST","#
      + #""htp":"\#(request.target)","bh":"\#(request.bodyHash)","jti":"req_1""#
      + (binding ? #","idk":"key-1"}"# : "}")
  }

  @Test("each check refuses in turn, naming itself", arguments: cases + laterCases)
  func refusal(_ test: Case) throws {
    let signing = try Signing()
    let verifier = signing.verifier()
    #expect(throws: AssertionRefusal(test.check, test.message)) {
      try verifier.verify(try test.input(signing), now: Self.now)
    }
  }

  @Test("a read and a write that pass every check, and the claims they give")
  func passes() throws {
    let signing = try Signing()
    let verifier = signing.verifier()
    let read = try verifier.verify(
      Signing.input(
        [try signing.read(Signing.caller(.readOnly))], method: "GET", body: [], minimumRole: .readOnly),
      now: Self.now + 64)
    #expect(read.role == .readOnly && read.school == Signing.school && read.write == nil)
    let write = try verifier.verify(Signing.input([try signing.write()]), now: Self.now - 5)
    #expect(write.subject == "acc_tom" && write.session == "ses_tom" && write.role == .teacher)
    #expect(write.write?.idempotencyKey == "key-1" && write.write?.requestID == "req_1")
    #expect(write.expiresAt - write.issuedAt == 60)
  }

  @Test("a write's jti is accepted once; the same write again is a replay")
  func replay() throws {
    let signing = try Signing()
    let verifier = signing.verifier()
    let token = try signing.write()
    _ = try verifier.verify(Signing.input([token]), now: Self.now)
    #expect(throws: AssertionRefusal(.replay, "this jti was seen before")) {
      try verifier.verify(Signing.input([token]), now: Self.now + 1)
    }
  }
}
