import Accounts
import Deployment
import Edge

/// The session body of the contract (`Session` in docs/client-api-v1.openapi.json): what `GET /session`, the
/// native exchange and `PATCH /account` answer. The parts only the snapshot decides (capabilities,
/// deployment) are serialised once.
struct SessionJSON: Sendable {
  let deploymentJSON: [UInt8]
  let capabilitiesJSON: [UInt8]

  init(_ deployment: Deployment) {
    var capabilities: [String: JSONValue] = [:]
    for name in Capabilities.names { capabilities[name] = .bool(deployment.capabilities[name]) }
    capabilitiesJSON = JSONValue.object(capabilities).canonicalBytes
    deploymentJSON =
      JSONValue.object([
        "environment": .string(deployment.environment.rawValue), "label": .string(deployment.label),
      ]).canonicalBytes
  }

  /// A 200 with `body`.
  static func response(_ body: [UInt8]) -> Response {
    Response(status: .ok, headers: [("Content-Type", "application/json; charset=utf-8")], body: .bytes(body))
  }

  /// Exactly the contract's fields (`Session` in docs/client-api-v1.openapi.json), written straight
  /// to bytes in canonical order (the same text `JSONValue.canonical` gives; a test holds them equal).
  func body(_ account: Account, _ memberships: [Membership]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(320 + memberships.count * 128)
    out += #"{"account":{"displayName":"#.utf8
    JSONValue.appendString(account.displayName, to: &out)
    out += #","email":"#.utf8
    JSONValue.appendString(account.email, to: &out)
    out += #","id":"#.utf8
    JSONValue.appendString(account.id, to: &out)
    out += #"},"capabilities":"#.utf8
    out += capabilitiesJSON
    out += #","deployment":"#.utf8
    out += deploymentJSON
    out += #","schools":["#.utf8
    for (i, m) in memberships.enumerated() {
      out += (i == 0 ? #"{"id":"# : #",{"id":"#).utf8
      JSONValue.appendString(m.school.id, to: &out)
      out += #","name":"#.utf8
      JSONValue.appendString(m.school.name, to: &out)
      out += #","role":"#.utf8
      JSONValue.appendString(m.role.rawValue, to: &out)
      out += #","slug":"#.utf8
      JSONValue.appendString(m.school.slug, to: &out)
      out += "}".utf8
    }
    out += "]}".utf8
    return out
  }
}
