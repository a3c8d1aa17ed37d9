import Synchronization
import Testing

@testable import Accounts
@testable import ExampleCore
@testable import Gateway

@Suite("The example core's JWKS: fetched when needed, at most every 30 s on an unknown kid")
struct KeySetTests {
  static let now = Signing.now

  @Test("the first lookup fetches; a known kid fetches nothing more until the set is 300 s old")
  func firstFetchAndAge() throws {
    let signing = try Signing()
    let keys = signing.verifier().keys
    #expect(keys.publicKey(kid: signing.key.kid, now: Self.now) == signing.key.publicKey)
    #expect(keys.publicKey(kid: signing.key.kid, now: Self.now + 299) == signing.key.publicKey)
    #expect(signing.fetches.load(ordering: .relaxed) == 1)
    #expect(keys.publicKey(kid: signing.key.kid, now: Self.now + 300) == signing.key.publicKey)
    #expect(signing.fetches.load(ordering: .relaxed) == 2)
  }

  @Test("an unknown kid fetches again only 30 s after the last fetch; a new key is found then")
  func refetchOnUnknownKid() throws {
    let signing = try Signing()
    let keys = signing.verifier().keys
    let next = try SigningKey.generate()
    _ = keys.publicKey(kid: signing.key.kid, now: Self.now)
    signing.published.withLock { $0.append(next) }
    #expect(keys.publicKey(kid: next.kid, now: Self.now + 29) == nil)
    #expect(keys.publicKey(kid: "made-up", now: Self.now + 29) == nil)
    #expect(signing.fetches.load(ordering: .relaxed) == 1)
    #expect(keys.publicKey(kid: next.kid, now: Self.now + 30) == next.publicKey)
    #expect(signing.fetches.load(ordering: .relaxed) == 2)
    #expect(keys.publicKey(kid: "made-up", now: Self.now + 31) == nil)
    #expect(signing.fetches.load(ordering: .relaxed) == 2)
  }

  @Test("a key the JWKS no longer lists is forgotten at the next fetch (a retired key)")
  func retiredKey() throws {
    let signing = try Signing()
    let keys = signing.verifier().keys
    _ = keys.publicKey(kid: signing.key.kid, now: Self.now)
    signing.published.withLock { $0 = [] }
    #expect(keys.publicKey(kid: signing.key.kid, now: Self.now + 300) == nil)
  }

  @Test("a failed fetch keeps the keys held and still waits 30 s before the next")
  func failedFetch() throws {
    let signing = try Signing()
    let calls = Atomic<Int>(0)
    let fail = Atomic<Bool>(false)
    let document = Signing.jwks([signing.key])
    let lines = Mutex<[String]>([])
    let keys = KeySet(
      fetch: {
        calls.add(1, ordering: .relaxed)
        return fail.load(ordering: .relaxed) ? .failure(.unreachable("refused")) : .success(document)
      }, log: { line in lines.withLock { $0.append(line) } })
    #expect(keys.publicKey(kid: signing.key.kid, now: Self.now) != nil)
    fail.store(true, ordering: .relaxed)
    #expect(keys.publicKey(kid: signing.key.kid, now: Self.now + 300) != nil)
    #expect(keys.publicKey(kid: "other", now: Self.now + 310) == nil)
    #expect(calls.load(ordering: .relaxed) == 2)
    #expect(lines.withLock { $0 } == ["the JWKS could not be fetched: refused"])
  }

  @Test("only Ed25519 signing keys whose kid is their thumbprint are kept; a kid named twice is dropped")
  func parsing() throws {
    let a = try SigningKey.generate()
    let b = try SigningKey.generate()
    let x = Secrets.base64url(a.publicKey)
    let jwks = #"""
      {"keys":[
        \#(String(decoding: a.jwk, as: UTF8.self)),
        {"kty":"OKP","crv":"Ed25519","kid":"not-the-thumbprint","x":"\#(x)"},
        {"kty":"OKP","crv":"X25519","kid":"\#(a.kid)","x":"\#(x)"},
        {"kty":"OKP","crv":"Ed25519","use":"enc","kid":"\#(a.kid)","x":"\#(x)"},
        {"kty":"OKP","crv":"Ed25519","alg":"Ed25519","kid":"\#(a.kid)","x":"\#(x)"},
        \#(String(decoding: b.jwk, as: UTF8.self)),
        \#(String(decoding: b.jwk, as: UTF8.self))
      ]}
      """#
    #expect(try KeySet.keys(jwks: Array(jwks.utf8)) == [a.kid: a.publicKey])
    #expect(KeySet.thumbprint(x: x) == a.kid)
    #expect(throws: KeySetError.invalidDocument) { try KeySet.keys(jwks: Array(#"{"keys":{}}"#.utf8)) }
  }

  @Test("base64url: no padding, no other alphabet, no stray bits")
  func base64url() {
    #expect(CoreCrypto.base64urlDecode("AQID"[...]) == [1, 2, 3])
    #expect(CoreCrypto.base64urlDecode("_-8"[...]) == [0xFF, 0xEF])
    #expect(CoreCrypto.base64urlDecode("AQ=="[...]) == nil)
    #expect(CoreCrypto.base64urlDecode("A+8"[...]) == nil)
    #expect(CoreCrypto.base64urlDecode("AR"[...]) == nil)
    #expect(CoreCrypto.base64urlDecode("A"[...]) == nil)
    for length in 0..<8 {
      let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 77 + 200) }
      #expect(CoreCrypto.base64url(bytes) == Secrets.base64url(bytes))
      #expect(CoreCrypto.base64urlDecode(CoreCrypto.base64url(bytes)[...]) == bytes)
    }
  }
}
