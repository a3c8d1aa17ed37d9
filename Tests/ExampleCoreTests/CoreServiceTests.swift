import Deployment
import Edge
import Testing

@testable import Accounts
@testable import ExampleCore
@testable import Gateway

@Suite("The example core's routes and idempotency keys")
struct CoreServiceTests {
  static let now = Signing.now

  /// A POST of `body` to the attendance route under `key`, with request ID `jti`, signed for it.
  static func post(
    _ s: Signing, body: [UInt8] = Signing.body, key: String = "key-1", jti: String, role: Role = .teacher
  )
    throws -> Request
  {
    let token = try s.write(Signing.caller(role), request: Signing.binding(body: body, key: key, jti: jti))
    return Request(
      method: .post, target: Signing.target,
      headers: [
        ("Content-Type", "application/json"), ("Idempotency-Key", key), (AssertionVerifier.field, token),
      ],
      body: body)
  }

  static func json(_ response: CoreResponse) throws -> [String: JSONValue] {
    guard case .object(let members) = try JSONValue.parse(response.body) else { throw JSONParseError.invalid }
    return members
  }

  @Test("a read of the roster and of the marks; a refused assertion is 401 with its check")
  func reads() throws {
    let s = try Signing()
    let service = CoreService(verifier: s.verifier())
    let students = service.respond(
      to: Request(
        method: .get, target: "/api/client/v1/schools/sch_demo1/students",
        headers: [(AssertionVerifier.field, try s.read(Signing.caller(.readOnly)))]), now: Self.now)
    #expect(students.status == .ok)
    guard case .array(let roster)? = try Self.json(students)["students"] else { throw JSONParseError.invalid }
    #expect(roster.count == SchoolRecords.roster.count)
    let refused = service.respond(
      to: Request(method: .get, target: "/api/client/v1/schools/sch_demo1/attendance"), now: Self.now)
    #expect(refused.status == .unauthorized)
    #expect(
      try Self.json(refused)
        == ["error": .string("assertion_header"), "message": .string("no Band-Licence-Assertion field")])
    let unknown = service.respond(
      to: Request(method: .get, target: "/api/client/v1/schools/x/lessons"), now: Self.now)
    #expect(unknown.status == .notFound)
    let delete = service.respond(to: Request(method: .delete, target: Signing.target), now: Self.now)
    #expect(delete.status == .methodNotAllowed && delete.fields["Allow"] == "GET, HEAD, POST")
  }

  @Test("a key's first answer is replayed for the same request; another request under it is 422")
  func idempotency() throws {
    let s = try Signing()
    let service = CoreService(verifier: s.verifier())
    let first = service.respond(to: try Self.post(s, jti: "req_1"), now: Self.now)
    #expect(first.status == .created)
    let again = service.respond(to: try Self.post(s, jti: "req_2"), now: Self.now + 1)
    #expect(
      again.status == .created && again.body == first.body && again.fields["Idempotent-Replayed"] == "true")
    let other = Array(#"{"studentId":"stu_1","date":"2025-03-04","status":"absent"}"#.utf8)
    let reused = service.respond(to: try Self.post(s, body: other, jti: "req_3"), now: Self.now + 2)
    #expect(reused.status.code == 422)
    #expect(try Self.json(reused)["error"] == .string("idempotency_key_reused"))
    let replaced = service.respond(
      to: try Self.post(s, body: other, key: "key-2", jti: "req_4"), now: Self.now + 3)
    #expect(replaced.status == .ok)
    let marks = service.records.attendance(school: Signing.school)
    guard case .object(let list) = marks, case .array(let items)? = list["attendance"] else {
      throw JSONParseError.invalid
    }
    #expect(items.count == 1)
  }

  @Test("a key still in flight is 409; the ledger keeps keys apart per caller, school and route")
  func inFlight() {
    let ledger = IdempotencyLedger()
    let key = IdempotencyLedger.Key(subject: "acc_tom", school: "sch_1", route: "attendance", key: "k")
    #expect(ledger.begin(key, fingerprint: [1]) == .proceed)
    #expect(ledger.begin(key, fingerprint: [1]) == .inFlight)
    #expect(ledger.begin(key, fingerprint: [2]) == .mismatch)
    var other = key
    other.subject = "acc_ada"
    #expect(ledger.begin(other, fingerprint: [1]) == .proceed)
    let answer = CoreResponse.json(.created, .object([:]))
    ledger.finish(key, response: answer)
    #expect(ledger.begin(key, fingerprint: [1]) == .replay(answer))
  }

  @Test("a read_only member's POST is refused before the key is recorded; a bad body is 400")
  func refusedWrites() throws {
    let s = try Signing()
    let service = CoreService(verifier: s.verifier())
    let readOnly = service.respond(to: try Self.post(s, jti: "req_1", role: .readOnly), now: Self.now)
    #expect(readOnly.status == .unauthorized)
    #expect(try Self.json(readOnly)["error"] == .string("assertion_role"))
    let body = Array(#"{"studentId":"stu_99","date":"2025-03-04","status":"present"}"#.utf8)
    let unknown = service.respond(to: try Self.post(s, body: body, key: "key-2", jti: "req_2"), now: Self.now)
    #expect(unknown.status == .badRequest)
    #expect(try Self.json(unknown)["error"] == .string("unknown_student"))
    let first = service.respond(to: try Self.post(s, jti: "req_3"), now: Self.now)
    #expect(first.status == .created)
  }
}
