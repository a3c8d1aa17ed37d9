import Edge
import Synchronization

@testable import Accounts
@testable import ExampleCore
@testable import Gateway

/// What the tests sign with and verify against: band-edge's own signer and key, a JWKS made from
/// its key ring, and a verifier fetching that JWKS through a counter.
final class Signing: Sendable {
  static let now = 1_700_000_000
  static let issuer = "http://127.0.0.1:8080"
  static let school = "sch_demo1"
  static let target = "/api/client/v1/schools/sch_demo1/attendance"
  static let body = Array(#"{"studentId":"stu_1","date":"2025-03-04","status":"present"}"#.utf8)

  let key: SigningKey
  let signer: AssertionSigner
  /// The keys the JWKS publishes (the signing key unless a test changes it).
  let published: Mutex<[SigningKey]>
  let fetches = Atomic<Int>(0)

  init() throws {
    key = try SigningKey.generate()
    signer = try AssertionSigner(issuer: Self.issuer)
    published = Mutex([key])
  }

  /// The JWKS document of `keys`, as band-edge serves it.
  static func jwks(_ keys: [SigningKey]) -> [UInt8] {
    KeyRing(keys.map { KeyRing.Entry(key: $0, createdAt: 0, signsFrom: 0, replacedAt: nil) }).jwks(at: now)
  }

  /// A verifier whose key set fetches the JWKS of `published`, counting the fetches.
  func verifier(audience: String = "core") -> AssertionVerifier {
    let keys = KeySet(fetch: { [self] in
      fetches.add(1, ordering: .relaxed)
      return .success(Signing.jwks(published.withLock { $0 }))
    })
    return AssertionVerifier(issuer: Self.issuer, audience: audience, keys: keys)
  }

  /// A caller of the demo school with `role`.
  static func caller(_ role: Role = .teacher, school: String = school) -> Caller {
    Caller(
      account: "acc_tom", session: "ses_tom", school: school, role: role, channel: .native,
      appVersion: "ios/1.4.2")
  }

  /// The binding of a POST of `body` to `target` under `key` with request ID `jti`.
  static func binding(
    method: String = "POST", target: String = target, body: [UInt8] = body, key: String = "key-1",
    jti: String = "req_1"
  ) -> WriteRequest {
    WriteRequest(
      method: method, target: target, bodyHash: WriteRequest.bodyHash(body), idempotencyKey: key,
      requestID: jti)
  }

  /// A read assertion for `caller`, signed at `now`.
  func read(_ caller: Caller = caller(), audience: String = "core", at time: Int = now) throws -> String {
    try Assertion.compact(claims: signer.claims(caller, audience: audience, now: time), key: key)
  }

  /// A write assertion for `caller` bound to `request`, signed at `now`.
  func write(_ caller: Caller = caller(), request: WriteRequest = binding(), at time: Int = now) throws
    -> String
  {
    try signer.write(caller, audience: "core", request: request, key: key, now: time)
  }

  /// A token with this key's header and any `payload` (JSON text), signed.
  func token(payload: String) throws -> String {
    try Assertion.compact(
      header: Array(#"{"alg":"EdDSA","kid":"\#(key.kid)","typ":"band-assertion+jwt"}"#.utf8),
      payload: Array(payload.utf8), key: key)
  }

  /// The verifier's input for a request carrying `fields`.
  static func input(
    _ fields: [String], method: String = "POST", target: String = target, body: [UInt8] = body,
    school: String = school, minimumRole: CoreRole = .teacher
  ) -> AssertionVerifier.Input {
    AssertionVerifier.Input(
      fields: fields, method: method, target: target, body: body, school: school, minimumRole: minimumRole)
  }
}
