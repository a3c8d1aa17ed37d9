import Edge
import LinkAssoc

/// `GET` and `DELETE /api/client/v1/session` (client-api-v1.md, "Session"), authenticated by a
/// Bearer token. Pooled: each worker thread reads through its own store connection.
public struct SessionAPI: Sendable {
  let stores: ThreadLocal<ClientStore>
  let deployment: Deployment
  let lifetimes: SessionLifetimes
  /// The parts of every answer that only the snapshot decides, built once.
  let deploymentJSON: JSONValue
  let capabilitiesJSON: JSONValue

  /// The endpoint over the database at `path`, for `deployment`.
  public init(
    databasePath: String, deployment: Deployment, lifetimes: SessionLifetimes,
    clock: @escaping @Sendable () -> Int
  ) {
    stores = ThreadLocal { try ClientStore(path: databasePath, clock: clock) }
    self.deployment = deployment
    self.lifetimes = lifetimes
    var capabilities: [String: JSONValue] = [:]
    for name in Capabilities.names { capabilities[name] = .bool(deployment.capabilities[name]) }
    capabilitiesJSON = .object(capabilities)
    deploymentJSON = .object([
      "environment": .string(deployment.environment.rawValue), "label": .string(deployment.label),
    ])
  }

  /// The routes: both private (`no-store`) and pooled (they read the database).
  public var routes: [Route] {
    [
      Route(.get, "/api/client/v1/session", cacheClass: .private, execution: .pooled) { request in
        respond(to: request, delete: false)
      },
      Route(.delete, "/api/client/v1/session", cacheClass: .private, execution: .pooled) { request in
        respond(to: request, delete: true)
      },
    ]
  }

  func respond(to request: Request, delete: Bool) -> Response {
    // RFC 6750 §3: no credentials at all gets a challenge without an error attribute.
    guard let authorization = request.headers["authorization"] else {
      return Self.unauthorized(error: nil)
    }
    let parts = authorization.split(separator: " ", maxSplits: 1)
    guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
      return Self.unauthorized(error: "invalid_request")
    }
    if let client = request.headers["band-licence-client"], let refusal = versionRefusal(client) {
      return refusal
    }
    do {
      let store = try stores.value()
      guard let (session, account) = try store.session(token: String(parts[1]), lifetimes: lifetimes) else {
        return Self.unauthorized(error: "invalid_token")
      }
      if delete {
        try store.revokeSession(id: session.id, reason: "signed_out", actor: account.id)
        return Response(status: .noContent)
      }
      let schools: [JSONValue] = try store.memberships(accountID: account.id).map { m in
        .object([
          "id": .string(m.school.id), "name": .string(m.school.name), "slug": .string(m.school.slug),
          "role": .string(m.role.rawValue),
        ])
      }
      let body: JSONValue = .object([
        "account": .object([
          "id": .string(account.id), "displayName": .string(account.displayName),
          "email": .string(account.email),
        ]),
        "schools": .array(schools),
        "deployment": deploymentJSON,
        "capabilities": capabilitiesJSON,
      ])
      return Self.json(.ok, body)
    } catch {
      Log.event("error", "session_store", [("error", "\(error)")])
      return Self.json(
        .internalServerError,
        .object([
          "error": .string("internal_error"),
          "message": .string("Something went wrong on our side. Please try again."),
        ]))
    }
  }

  /// `Band-Licence-Client: <platform>/<version>`: 426 below the platform's minimum, 400 when malformed.
  func versionRefusal(_ header: String) -> Response? {
    let parts = header.split(separator: "/", maxSplits: 1)
    guard parts.count == 2, ["ios", "android"].contains(parts[0]),
      parts[1].split(separator: ".").allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) })
    else {
      return Self.json(
        .badRequest,
        .object([
          "error": .string("invalid_request"),
          "message": .string("Band-Licence-Client must be ios/x.y.z or android/x.y.z."),
        ]))
    }
    let minimum = parts[0] == "ios" ? deployment.minimumIOSVersion : deployment.minimumAndroidVersion
    guard ClientStore.compareVersions(String(parts[1]), minimum) < 0 else { return nil }
    return Self.json(
      .upgradeRequired,
      .object([
        "error": .string("app_version_unsupported"), "minimumVersion": .string(minimum),
        "message": .string("Please update the app to continue."),
      ]))
  }

  static func unauthorized(error: String?) -> Response {
    var challenge = "Bearer realm=\"band-licence\""
    if let error { challenge += ", error=\"\(error)\"" }
    return json(
      .unauthorized,
      .object([
        "error": .string(error ?? "unauthorized"), "message": .string("Sign in to continue."),
      ]), headers: [("WWW-Authenticate", challenge)])
  }

  static func json(_ status: Status, _ body: JSONValue, headers: [(name: String, value: String)] = [])
    -> Response
  {
    Response(
      status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers,
      body: .bytes(Array(body.canonical.utf8)))
  }
}
