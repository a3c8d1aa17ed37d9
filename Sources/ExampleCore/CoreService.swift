import Deployment
import Edge

/// The example core's answers: the route, the assertion (docs/gateway.md's checks 1 to 10), the
/// idempotency key of a write (check 11), then the school's data. Shared by every connection.
public final class CoreService: Sendable {
  /// The assertion's checks.
  public let verifier: AssertionVerifier
  /// The writes' keys.
  public let ledger: IdempotencyLedger
  /// The students and their marks.
  public let records: SchoolRecords

  /// A core verifying with `verifier`, with no marks and no keys yet.
  public init(verifier: AssertionVerifier, ledger: IdempotencyLedger = IdempotencyLedger()) {
    self.verifier = verifier
    self.ledger = ledger
    records = SchoolRecords()
  }

  /// The answer to `request` at `now` (seconds since 1970).
  public func respond(to request: Request, now: Int) -> CoreResponse {
    let method = request.method.rawValue
    guard let (route, school) = CoreRoute.match(request.path).map({ ($0.route, $0.school) }) else {
      return .error(.notFound, "not_found", "the example core has no such route")
    }
    guard let minimumRole = route.minimumRole(method) else {
      var response = CoreResponse.error(.methodNotAllowed, "method_not_allowed", "\(route.allowed) only")
      response.fields["Allow"] = route.allowed
      return response
    }
    let input = AssertionVerifier.Input(
      fields: request.headers.values(AssertionVerifier.field), method: method, target: request.target,
      body: request.body, school: school, minimumRole: minimumRole)
    let caller: VerifiedAssertion
    do throws(AssertionRefusal) { caller = try verifier.verify(input, now: now) } catch {
      return .refused(error)
    }
    guard let write = caller.write else {
      return .json(.ok, route == .students ? records.students() : records.attendance(school: school))
    }
    return once(write, caller: caller, route: route) {
      record(request.body, caller: caller, now: now)
    }
  }

  /// `perform`'s answer the first time a write's key is seen; the first answer again for the same
  /// request (method, target and body) under the same key; 422 for another request; 409 while the
  /// first is still being answered.
  func once(
    _ write: VerifiedAssertion.WriteBinding, caller: VerifiedAssertion, route: CoreRoute,
    perform: () -> CoreResponse
  ) -> CoreResponse {
    let key = IdempotencyLedger.Key(
      subject: caller.subject, school: caller.school, route: route.rawValue, key: write.idempotencyKey)
    let fingerprint = CoreCrypto.sha256(Array("\(write.method) \(write.target) \(write.bodyHash)".utf8))
    switch ledger.begin(key, fingerprint: fingerprint) {
    case .proceed:
      let response = perform()
      ledger.finish(key, response: response)
      return response
    case .replay(var response):
      response.fields["Idempotent-Replayed"] = "true"
      return response
    case .inFlight:
      return .error(
        Status(409, "Conflict"), "idempotency_key_in_use",
        "a request with this Idempotency-Key is still running")
    case .mismatch:
      return .error(
        Status(422, "Unprocessable Content"), "idempotency_key_reused",
        "this Idempotency-Key was used for another request")
    }
  }

  /// Records the mark a `POST …/attendance` body gives: `{"studentId","date","status"}`, a student
  /// of the roster, a `YYYY-MM-DD` date and a known status. 201 for a new mark, 200 for a
  /// replaced one, 400 for a body that is not one.
  func record(_ body: [UInt8], caller: VerifiedAssertion, now: Int) -> CoreResponse {
    guard case .object(let fields)? = try? JSONValue.parse(body),
      case .string(let student)? = fields["studentId"],
      case .string(let date)? = fields["date"], case .string(let status)? = fields["status"]
    else {
      return .error(.badRequest, "invalid_body", #"the body is {"studentId","date","status"}"#)
    }
    guard SchoolRecords.roster.contains(where: { $0.id == student }) else {
      return .error(.badRequest, "unknown_student", "no such student in this school")
    }
    guard Self.isDate(date) else { return .error(.badRequest, "invalid_date", "date is YYYY-MM-DD") }
    guard SchoolRecords.statuses.contains(status) else {
      return .error(.badRequest, "invalid_status", "status is present, absent, late or excused")
    }
    let mark = SchoolRecords.Mark(
      student: student, date: date, status: status, recordedBy: caller.subject, recordedAt: now)
    let created = records.record(mark, school: caller.school)
    return .json(created ? .created : .ok, .object(["mark": SchoolRecords.json(mark)]))
  }

  /// Whether `text` is `YYYY-MM-DD` with a month 01-12 and a day 01-31.
  static func isDate(_ text: String) -> Bool {
    let parts = text.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
      parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
      let month = Int(parts[1]), let day = Int(parts[2])
    else { return false }
    return (1...12).contains(month) && (1...31).contains(day)
  }
}
