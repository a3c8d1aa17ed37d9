import Testing

@testable import Gateway

@Suite("The key ring: when each key is published, signs and retires")
struct KeyRingTests {
  static let keys: [SigningKey] = (0..<3).compactMap { _ in try? SigningKey.generate() }

  /// The store's keys as read at `now`: A, the store's first, made at 0; B made at 1000 (a
  /// rotation); with `third`, C made at 1100. A key is in the ring once it has been made.
  static func ring(at now: Int = .max, third: Bool = false) -> KeyRing {
    var ring = KeyRing([]).adding(keys[0], at: 0)
    if now >= 1000 { ring = ring.adding(keys[1], at: 1000) }
    if third, now >= 1100 { ring = ring.adding(keys[2], at: 1100) }
    return ring
  }

  @Test(
    "one rotation: the new key published at once, signing 600 s later, the old one published 65 s more",
    arguments: [
      (0, 0, [0]), (999, 0, [0]), (1000, 0, [0, 1]), (1599, 0, [0, 1]), (1600, 1, [0, 1]), (1664, 1, [0, 1]),
      (1665, 1, [1]), (9_999_999, 1, [1]),
    ])
  func oneRotation(now: Int, signing: Int, published: [Int]) {
    let ring = Self.ring(at: now)
    #expect(ring.signingKey(at: now)?.kid == Self.keys[signing].kid)
    #expect(ring.published(at: now).map(\.key.kid) == published.map { Self.keys[$0].kid })
  }

  @Test(
    "two rotations 100 s apart: each key signs in turn, none starts before the one waiting",
    arguments: [
      (1599, 0, [0, 1, 2]), (1600, 1, [0, 1, 2]), (1665, 1, [1, 2]), (1699, 1, [1, 2]), (1700, 2, [1, 2]),
      (1765, 2, [2]),
    ])
  func twoRotations(now: Int, signing: Int, published: [Int]) {
    let ring = Self.ring(at: now, third: true)
    #expect(ring.entries.map(\.signsFrom) == [0, 1600, 1700])
    #expect(ring.entries.map(\.replacedAt) == [1600, 1700, nil])
    #expect(ring.signingKey(at: now)?.kid == Self.keys[signing].kid)
    #expect(ring.published(at: now).map(\.key.kid) == published.map { Self.keys[$0].kid })
  }

  @Test("the store's first key signs at once; a later one after the activation delay")
  func firstKeySignsAtOnce() {
    let empty = KeyRing([])
    #expect(empty.signingKey(at: 0) == nil && empty.published(at: 0).isEmpty)
    #expect(empty.signsFrom(newKeyAt: 500) == 500)
    var policy = KeyPolicy()
    policy.activationDelay = 60
    let one = KeyRing([], policy: policy).adding(Self.keys[0], at: 500)
    #expect(one.signsFrom(newKeyAt: 700) == 760)
    #expect(one.signingKey(at: 500)?.kid == Self.keys[0].kid)
  }

  @Test("a first key made by a clock running ahead still signs")
  func clockAhead() {
    let ring = KeyRing([KeyRing.Entry(key: Self.keys[0], createdAt: 100, signsFrom: 100, replacedAt: nil)])
    #expect(ring.signingKey(at: 99)?.kid == Self.keys[0].kid)
    #expect(ring.published(at: 99).count == 1)
  }

  @Test(
    "rotation is due when the newest key is 30 days old (or there is none)",
    arguments: [(nil, 0, true), (0, 2_591_999, false), (0, 2_592_000, true), (1000, 2_592_999, false)]
      as [(
        Int?, Int, Bool
      )])
  func rotationDue(newest: Int?, now: Int, due: Bool) {
    let ring = newest.map { KeyRing([]).adding(Self.keys[0], at: $0) } ?? KeyRing([])
    #expect(ring.rotationDue(at: now) == due)
  }

  @Test("the JWKS: the published keys' JWKs, oldest first, byte for byte")
  func jwks() throws {
    let rfc = try SigningKey(privateKey: SigningKeyTests.rfcPrivate)
    let ring = KeyRing([]).adding(rfc, at: 0)
    #expect(
      String(decoding: ring.jwks(at: 0), as: UTF8.self) == #"{"keys":["#
        + String(decoding: rfc.jwk, as: UTF8.self) + "]}")
    let two = Self.ring()
    #expect(
      two.jwks(at: 1000) == Array(#"{"keys":["#.utf8) + Self.keys[0].jwk + [UInt8(ascii: ",")]
        + Self.keys[1].jwk + Array("]}".utf8))
    #expect(two.jwks(at: 1665) == Array(#"{"keys":["#.utf8) + Self.keys[1].jwk + Array("]}".utf8))
    #expect(String(decoding: KeyRing([]).jwks(at: 0), as: UTF8.self) == #"{"keys":[]}"#)
  }

  @Test("across a rotation, assertions of the old and the new key both verify against the JWKS")
  func bothVerify() throws {
    let ring = Self.ring()
    let signer = try AssertionSigner(issuer: "https://band.example")
    let caller = Caller(
      account: "acc_A", session: "ses_S", school: "sch_1", role: .teacher, channel: .web, appVersion: nil)
    for now in [1599, 1600] {
      let key = try #require(ring.signingKey(at: now))
      let token = try signer.read(
        caller, audience: "api-core", key: key, now: now, cache: ReadAssertionCache())
      let published = ring.published(at: now + 60).map(\.key)
      let kid = try #require(published.first { token.hasPrefix($0.encodedHeader + ".") })
      #expect(try openJWS(token, publicKey: kid.publicKey).verified)
    }
  }

  @Test("the newest key is the one made last, also when both were made in the same second")
  func newestInOneSecond() {
    for order in [[0, 1], [1, 0]] {
      let ring = KeyRing([]).adding(Self.keys[order[0]], at: 500).adding(Self.keys[order[1]], at: 500)
      #expect(ring.newest?.key.kid == Self.keys[order[1]].kid)
    }
    #expect(KeyRing([]).newest == nil)
  }
}
