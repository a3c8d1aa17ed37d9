import Deployment
import Edge
import EdgeTesting
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Accounts
@testable import Gateway

/// A deployment forwarding three routes to `core`, a school with one member of each role (and an
/// outsider), the gateway's routes with the JWKS, and a stand-in upstream that records each call
/// it receives and answers with `reply`.
struct GatewayFixture {
  static let config = #"""
    {
      "origin": "http://127.0.0.1:8080",
      "minimumAppVersion": {"ios": "1.0.0", "android": "1.0.0"},
      "upstreams": {
        "core": {"url": "http://127.0.0.1:8081"},
        "off": {"url": "http://127.0.0.1:8082", "enabled": false}
      },
      "forward": [
        {"path": "/api/client/v1/schools/:schoolId/students", "methods": {"GET": "read_only"},
         "upstream": "core", "capability": "studentManagement"},
        {"path": "/api/client/v1/schools/:schoolId/attendance", "methods": {"GET": "read_only", "POST": "teacher",
         "DELETE": "administrator"}, "upstream": "core", "since": "2.1", "maxBodyBytes": 64,
         "audit": "attendance.recorded", "capability": "attendance"},
        {"path": "/api/client/v1/schools/:schoolId/timetable", "methods": {"GET": "read_only"}, "upstream": "off",
         "capability": "scheduling"},
        {"path": "/api/client/v1/schools/:schoolId/reports", "methods": {"GET": "read_only"}, "upstream": "core",
         "enabled": false}
      ]
    }
    """#

  enum Who: String, CaseIterable, Sendable { case administrator, teacher, readOnly, outsider }

  let store: ClientStore
  let services: ClientServices
  let clock: TestClock
  let router: Router
  let deployment: Deployment
  let gateway: GatewayServices
  let key: SigningKey
  let school: School
  let tokens: [Who: String]
  let accounts: [Who: String]
  let standIn = StandIn()

  /// The stand-in upstream's record and answer.
  final class StandIn: Sendable {
    let calls = Mutex<[UpstreamCall]>([])
    let reply = Mutex<String>(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
  }

  init(_ engine: Engine, addressLimit: RateLimit = GatewayServices.addressLimit) throws {
    let (_, clock, location) = try makeStore(engine)
    let file = try TestDirectory.make("gateway").appendingPathComponent("config.json")
    try Self.config.write(to: file, atomically: true, encoding: .utf8)
    deployment = try DeploymentLoader.load(environment: [:], configPath: file.path).get()
    let services = ClientServices(database: location, lifetimes: SessionLifetimes(), clock: clock.read)
    store = try services.stores.value()
    self.services = services
    self.clock = clock
    school = try store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "test")
    _ = try store.createSchool(name: "Southgate Academy", slug: "southgate", actor: "test")
    var tokens: [Who: String] = [:]
    var accounts: [Who: String] = [:]
    let roles: [Who: (String, Role)] = [
      .administrator: ("northfield", .administrator), .teacher: ("northfield", .teacher),
      .readOnly: ("northfield", .readOnly), .outsider: ("southgate", .administrator),
    ]
    for who in Who.allCases {
      let email = EmailAddress(stringLiteral: "\(who.rawValue.lowercased())@example.test")
      let account = try store.createAccount(
        email: email, displayName: who.rawValue, passwordHash: "x", actor: "test")
      if let (slug, role) = roles[who] {
        try store.addMember(email: email, schoolSlug: slug, role: role, actor: "test")
      }
      let token = Secrets.token()
      _ = try store.createSession(
        accountID: account.id, kind: .native, platform: "ios", appVersion: "2.3.0", token: token,
        lifetimes: SessionLifetimes())
      tokens[who] = token
      accounts[who] = account.id
    }
    self.tokens = tokens
    self.accounts = accounts
    key = try SigningKey.generate()
    gateway = GatewayServices(
      ring: KeyRing([KeyRing.Entry(key: key, createdAt: 0, signsFrom: 0, replacedAt: nil)]),
      addressLimit: addressLimit, clock: clock.read)
    let forwarded = try ForwardedRoutes(services: services, deployment: deployment, gateway: gateway)
    router = try Router(forwarded.routes + [JWKSRoute.route(gateway)])
  }

  /// A client whose forwarded calls reach the stand-in upstream.
  func client(origin: String? = nil) -> InProcessClient {
    var client = InProcessClient(router, origin: origin)
    client.peer = "203.0.113.9:40000"
    client.upstream = { [standIn] call in
      standIn.calls.withLock { $0.append(call) }
      return .response(Self.parse(standIn.reply.withLock { $0 }, method: call.method))
    }
    return client
  }

  /// `request` sent as `who` (a Bearer token), with the fields given.
  func send(
    _ method: HTTPMethod, _ rest: String, as who: Who?, json: String? = nil, key: String? = nil,
    headers: [(String, String)] = [], school: String? = nil
  ) -> Response {
    var fields = headers
    if let who, let token = tokens[who] { fields.append(("Authorization", "Bearer \(token)")) }
    if let key { fields.append(("Idempotency-Key", key)) }
    let client = client()
    let request = client.request(
      method, path(rest, school: school), body: json.map(RequestBody.json) ?? .empty, headers: fields)
    return client.respond(to: request)
  }

  func path(_ rest: String, school: String? = nil) -> String {
    "/api/client/v1/schools/\(school ?? self.school.id)\(rest)"
  }

  /// How many calls reached the upstream.
  var sent: Int { standIn.calls.withLock { $0.count } }

  /// The last call's head, as (request line, fields).
  var lastHead: (line: String, fields: [(name: String, value: String)])? {
    guard let call = standIn.calls.withLock({ $0.last }) else { return nil }
    let lines = String(decoding: call.head, as: UTF8.self).components(separatedBy: "\r\n")
    let fields = lines.dropFirst().filter { !$0.isEmpty }.map { line in
      let colon = line.firstIndex(of: ":") ?? line.endIndex
      return (
        name: String(line[..<colon]),
        value: String(line[colon...].dropFirst()).trimmingCharacters(in: .whitespaces)
      )
    }
    return (lines.first ?? "", fields)
  }

  /// The values of field `name` in the last head, any case.
  func sentValues(_ name: String) -> [String] {
    (lastHead?.fields ?? []).filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
  }

  /// A whole upstream response parsed from `text`.
  static func parse(_ text: String, method: HTTPMethod) -> UpstreamResponse {
    var parser = HTTP1ResponseParser(method: method)
    let bytes = Array(text.utf8)
    let parsed = bytes.withUnsafeBytes { try? parser.finish($0) }
    guard let parsed else { preconditionFailure("the stand-in's response does not parse: \(text)") }
    return parsed
  }
}

/// The JSON body of `response` as an object.
func jsonObject(_ response: Response) -> [String: Any] {
  (try? JSONSerialization.jsonObject(with: Data(response.body.contents))) as? [String: Any] ?? [:]
}
