import Testing

@testable import Accounts
@testable import Gateway

@Suite("Ed25519 signing keys, their JWK and thumbprint")
struct SigningKeyTests {
  /// The key of RFC 8037 appendix A.1 (RFC 8032 §7.1 test 1).
  static let rfcPrivate = hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")

  @Test("the RFC 8037 A.1 key: its `d` and `x`, and its A.3 thumbprint as the kid")
  func rfcKey() throws {
    #expect(Secrets.base64url(Self.rfcPrivate) == "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
    let key = try SigningKey(privateKey: Self.rfcPrivate)
    #expect(Secrets.base64url(key.publicKey) == "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
    #expect(key.kid == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k")
    #expect(SigningKey.thumbprint(x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo") == key.kid)
    #expect(try key.privateKey() == Self.rfcPrivate)
  }

  @Test("the RFC 8037 A.4 JWS, byte for byte (Ed25519 is deterministic)")
  func rfcSignature() throws {
    let key = try SigningKey(privateKey: Self.rfcPrivate)
    let jws = try Assertion.compact(
      header: Array(#"{"alg":"EdDSA"}"#.utf8), payload: Array("Example of Ed25519 signing".utf8), key: key)
    #expect(
      jws
        == "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
        + "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg")
    #expect(try openJWS(jws, publicKey: key.publicKey).verified)
  }

  @Test("the public JWK: members in order, no private part")
  func jwk() throws {
    let key = try SigningKey(privateKey: Self.rfcPrivate)
    #expect(
      String(decoding: key.jwk, as: UTF8.self)
        == #"{"alg":"EdDSA","crv":"Ed25519","kid":"kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k","kty":"OKP","#
        + #""use":"sig","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#)
  }

  @Test("new keys differ, sign and verify; a changed message or another key does not verify")
  func generated() throws {
    let a = try SigningKey.generate()
    let b = try SigningKey.generate()
    #expect(a.kid != b.kid && a.publicKey != b.publicKey)
    let message = Array("hello".utf8)
    let signature = try a.sign(message)
    #expect(SigningKey.verify(signature, of: message, publicKey: a.publicKey))
    #expect(!SigningKey.verify(signature, of: Array("hellO".utf8), publicKey: a.publicKey))
    #expect(!SigningKey.verify(signature, of: message, publicKey: b.publicKey))
  }

  @Test("a private key of another length is refused", arguments: [0, 31, 33, 64])
  func wrongLength(_ count: Int) {
    #expect(throws: GatewayError.self) { try SigningKey(privateKey: [UInt8](repeating: 1, count: count)) }
  }

  @Test("one key signs from many threads at once, each signature valid")
  func concurrentSigning() throws {
    let key = try SigningKey.generate()
    let results = together(8) { i in
      (0..<50).allSatisfy { n in
        let message = Array("message \(i) \(n)".utf8)
        return (try? key.sign(message)).map { SigningKey.verify($0, of: message, publicKey: key.publicKey) }
          ?? false
      }
    }
    #expect(results == Array(repeating: true, count: 8))
  }
}
