import Testing

@testable import Accounts
@testable import Gateway

@Suite("Read assertions: signed once, reused until shortly before they expire")
struct ReadAssertionCacheTests {
  static let keys = [SigningKeyTests.rfcPrivate, hex(String(repeating: "42", count: 32))].compactMap {
    try? SigningKey(privateKey: $0)
  }
  static let caller = Caller(
    account: "acc_A", session: "ses_S", school: "sch_1", role: .teacher, channel: .native,
    appVersion: "ios/1.4")

  /// A second read at `later` seconds after the first (at 1000, lifetime 60), with `change` made
  /// to what it is for: whether it gets the first token back.
  struct Case: CustomTestStringConvertible, Sendable {
    let name: String
    var later = 0
    var margin = 10
    var change: @Sendable (inout Caller, inout String, inout Int) -> Void = { _, _, _ in }
    let reused: Bool
    var testDescription: String { name }
  }

  static let cases: [Case] = [
    Case(name: "the same read at once", reused: true),
    Case(name: "49 s later, 11 s before exp", later: 49, reused: true),
    Case(name: "50 s later: exp minus the margin, signed again", later: 50, reused: false),
    Case(name: "margin 0: 59 s later", later: 59, margin: 0, reused: true),
    Case(name: "margin 0: at exp", later: 60, margin: 0, reused: false),
    Case(name: "the clock stepped back", later: -1, reused: false),
    Case(name: "another role", change: { caller, _, _ in caller.role = .administrator }, reused: false),
    Case(name: "another school", change: { caller, _, _ in caller.school = "sch_2" }, reused: false),
    Case(name: "another session", change: { caller, _, _ in caller.session = "ses_T" }, reused: false),
    Case(
      name: "another app version", change: { caller, _, _ in caller.appVersion = "ios/1.5" }, reused: false),
    Case(name: "another upstream", change: { _, audience, _ in audience = "reports" }, reused: false),
    Case(name: "another signing key", change: { _, _, key in key = 1 }, reused: false),
  ]

  @Test("a second read", arguments: cases)
  func secondRead(_ c: Case) throws {
    let signer = try AssertionSigner(issuer: "https://band.example")
    let cache = ReadAssertionCache(margin: c.margin)
    let first = try signer.read(Self.caller, audience: "api-core", key: Self.keys[0], now: 1000, cache: cache)
    var (caller, audience, key) = (Self.caller, "api-core", 0)
    c.change(&caller, &audience, &key)
    let second = try signer.read(
      caller, audience: audience, key: Self.keys[key], now: 1000 + c.later, cache: cache)
    #expect((first == second) == c.reused)
    let opened = try openJWS(second, publicKey: Self.keys[key].publicKey)
    #expect(opened.verified && opened.payload.contains(#""scp":"read""#))
    #expect(opened.payload.contains(#""iat":\#(1000 + (c.reused ? 0 : c.later)),"#))
  }

  @Test("a token signed again at exp minus the margin is then reused in its turn")
  func resignedThenReused() throws {
    let signer = try AssertionSigner(issuer: "https://band.example")
    let cache = ReadAssertionCache()
    let read = { (now: Int) throws in
      try signer.read(Self.caller, audience: "api-core", key: Self.keys[0], now: now, cache: cache)
    }
    let first = try read(1000)
    let second = try read(1050)
    #expect(first != second)
    #expect(try read(1099) == second && read(1100) != second)
    #expect(cache.count == 1)
  }

  @Test("the cache holds at most its capacity; the oldest signed goes first")
  func bounded() throws {
    let signer = try AssertionSigner(issuer: "https://band.example")
    let cache = ReadAssertionCache(capacity: 3)
    var tokens: [String] = []
    for i in 0..<4 {
      var caller = Self.caller
      caller.school = "sch_\(i)"
      tokens.append(
        try signer.read(caller, audience: "api-core", key: Self.keys[0], now: 1000 + i, cache: cache))
    }
    #expect(cache.count == 3)
    var oldest = Self.caller
    oldest.school = "sch_0"
    var newest = Self.caller
    newest.school = "sch_3"
    #expect(
      try signer.read(newest, audience: "api-core", key: Self.keys[0], now: 1005, cache: cache) == tokens[3])
    #expect(
      try signer.read(oldest, audience: "api-core", key: Self.keys[0], now: 1005, cache: cache) != tokens[0])
    #expect(cache.count == 3)
  }

  @Test("signing the same few reads again and again keeps the bookkeeping bounded")
  func churn() throws {
    let signer = try AssertionSigner(issuer: "https://band.example", lifetime: 11)
    let cache = ReadAssertionCache(capacity: 4, margin: 10)
    for now in 0..<500 {
      var caller = Self.caller
      caller.school = "sch_\(now % 6)"
      _ = try signer.read(caller, audience: "api-core", key: Self.keys[0], now: now, cache: cache)
      #expect(cache.count <= 4 && cache.orderRecords <= 8)
    }
  }
}
