import Testing

@testable import Accounts
@testable import Gateway

@Suite("The identity assertion: header, claims, signature")
struct AssertionTests {
  static let teacher = Caller(
    account: "acc_A", session: "ses_S", school: "sch_1", role: .teacher, channel: .native,
    appVersion: "ios/1.4.2")
  static let write = WriteRequest(
    method: "POST", target: "/api/client/v1/schools/sch_1/lessons?x=1",
    bodyHash: WriteRequest.bodyHash(Array(#"{"a":1}"#.utf8)), idempotencyKey: "idem-0123456789abcdef",
    requestID: "req_1")

  @Test("the header is exactly alg, kid and typ, in that order")
  func header() throws {
    let key = try SigningKey(privateKey: SigningKeyTests.rfcPrivate)
    let signer = try AssertionSigner(issuer: "https://band.example")
    let token = try signer.read(
      Self.teacher, audience: "api-core", key: key, now: 1000, cache: ReadAssertionCache())
    let opened = try openJWS(token, publicKey: key.publicKey)
    #expect(
      opened.header
        == #"{"alg":"EdDSA","kid":"kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k","typ":"band-assertion+jwt"}"#)
    #expect(opened.verified)
  }

  @Test(
    "the claims, member by member, for a read and a write",
    arguments: [
      (
        nil,
        #"{"iss":"https://band.example","aud":"api-core","sub":"acc_A","sid":"ses_S","school":"sch_1","#
          + #""role":"teacher","chn":"native","av":"ios/1.4.2","scp":"read","iat":1000,"exp":1060}"#
      ),
      (
        write,
        #"{"iss":"https://band.example","aud":"api-core","sub":"acc_A","sid":"ses_S","school":"sch_1","#
          + #""role":"teacher","chn":"native","av":"ios/1.4.2","scp":"write","iat":1000,"exp":1060,"#
          + #""htm":"POST","htp":"/api/client/v1/schools/sch_1/lessons?x=1","#
          + #""bh":"AVq9f1zFei3ZS3WQ8ErYCEJzkF7jPsXOvq5iJ2qX-GI","idk":"idem-0123456789abcdef","jti":"req_1"}"#
      ),
    ] as [(WriteRequest?, String)])
  func claims(_ request: WriteRequest?, _ json: String) throws {
    let signer = try AssertionSigner(issuer: "https://band.example")
    let claims = signer.claims(Self.teacher, audience: "api-core", request: request, now: 1000)
    #expect(String(decoding: Assertion.payload(claims), as: UTF8.self) == json)
    let key = try SigningKey.generate()
    let opened = try openJWS(try Assertion.compact(claims: claims, key: key), publicKey: key.publicKey)
    #expect(opened.payload == json && opened.verified)
  }

  @Test("a web caller has no av member; text is escaped by the one JSON escaper")
  func webAndEscaping() throws {
    let caller = Caller(
      account: "acc_\"q\"", session: "ses_S", school: "sch\\1", role: .readOnly, channel: .web,
      appVersion: nil)
    let claims = try AssertionSigner(issuer: "https://band.example", lifetime: 30)
      .claims(caller, audience: "api-core", now: 5)
    #expect(
      String(decoding: Assertion.payload(claims), as: UTF8.self)
        == #"{"iss":"https://band.example","aud":"api-core","sub":"acc_\"q\"","sid":"ses_S","school":"sch\\1","#
        + #""role":"read_only","chn":"web","scp":"read","iat":5,"exp":35}"#)
  }

  @Test("a write is signed afresh every time and carries its own request")
  func writeNotCached() throws {
    let key = try SigningKey.generate()
    let signer = try AssertionSigner(issuer: "https://band.example")
    var other = Self.write
    other.requestID = "req_2"
    let first = try signer.write(Self.teacher, audience: "api-core", request: Self.write, key: key, now: 1000)
    let second = try signer.write(Self.teacher, audience: "api-core", request: other, key: key, now: 1000)
    #expect(first != second)
    #expect(try openJWS(second, publicKey: key.publicKey).payload.contains(#""jti":"req_2""#))
  }

  @Test("a lifetime of 1 to 60 seconds is allowed, nothing else", arguments: [-1, 0, 1, 30, 60, 61, 3600])
  func lifetime(_ seconds: Int) {
    let signer = try? AssertionSigner(issuer: "https://band.example", lifetime: seconds)
    #expect((signer != nil) == (1...60).contains(seconds))
  }

  @Test("bh of the empty body is SHA-256 of nothing, base64url without padding")
  func emptyBody() {
    #expect(WriteRequest.bodyHash([]) == "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU")
  }

  @Test(
    "a caller from its session: sid is the row ID, chn the kind, av the client field or the session's",
    arguments: [
      (SessionRecord.Kind.native, "ios", "1.2", "ios/1.4.2", Caller.Channel.native, "ios/1.4.2"),
      (.native, "android", "2.0.1", nil, .native, "android/2.0.1"),
      (.native, nil, nil, nil, .native, nil),
      (.web, nil, nil, nil, .web, nil),
      (.web, nil, nil, "ios/9.9", .web, nil),
    ] as [(SessionRecord.Kind, String?, String?, String?, Caller.Channel, String?)])
  func fromSession(
    kind: SessionRecord.Kind, platform: String?, version: String?, client: String?, channel: Caller.Channel,
    av: String?
  ) {
    let session = SessionRecord(
      id: "ses_row", accountID: "acc_A", kind: kind, platform: platform, appVersion: version, createdAt: 1,
      lastSeenAt: 1, expiresAt: 2, revokedAt: nil, revokedReason: nil)
    let caller = Caller(session: session, school: "sch_1", role: .administrator, client: client)
    #expect(caller.session == "ses_row" && caller.account == "acc_A" && caller.role == .administrator)
    #expect(caller.channel == channel && caller.appVersion == av)
  }
}
