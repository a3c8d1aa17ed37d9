import Edge
import LinkAssoc

/// `GET` and `DELETE /api/client/v1/session` (client-api-v1.md, "Session") and the person's devices
/// (`GET /api/client/v1/sessions`, `DELETE /api/client/v1/sessions/{id}`), authenticated by a Bearer
/// token or the web session cookie. Pooled: each worker thread reads through its own connection.
public struct SessionAPI: Sendable {
  let context: ClientContext
  /// The parts of every answer that only the snapshot decides, built once.
  let deploymentJSON: JSONValue
  let capabilitiesJSON: JSONValue

  /// The endpoints over `context`.
  public init(_ context: ClientContext) {
    self.context = context
    let deployment = context.deployment
    var capabilities: [String: JSONValue] = [:]
    for name in Capabilities.names { capabilities[name] = .bool(deployment.capabilities[name]) }
    capabilitiesJSON = .object(capabilities)
    deploymentJSON = .object([
      "environment": .string(deployment.environment.rawValue), "label": .string(deployment.label),
    ])
  }

  /// The routes: all private (`no-store`) and pooled (they read the database).
  public var routes: [Route] {
    [
      Route(.get, "/api/client/v1/session", cacheClass: .private, execution: .pooled) { request in
        authenticated(request, mutating: false) { signed, _, _ in try sessionBody(signed) }
      },
      Route(.delete, "/api/client/v1/session", cacheClass: .private, execution: .pooled) { request in
        authenticated(request, mutating: true) { signed, store, credential in
          try store.revokeSession(id: signed.session.id, reason: "signed_out", actor: signed.account.id)
          return Self.noContent(clearingCookie: credential.isCookie)
        }
      },
      Route(.get, "/api/client/v1/sessions", cacheClass: .private, execution: .pooled) { request in
        authenticated(request, mutating: false) { signed, store, _ in
          let sessions = try store.sessions(.account(email: signed.account.email))
          return JSONBody.response(
            .ok,
            .object([
              "sessions": .array(sessions.map { Self.device($0, current: $0.id == signed.session.id) })
            ]))
        }
      },
      Route(.delete, "/api/client/v1/sessions/:id", cacheClass: .private, execution: .pooled) { request in
        authenticated(request, mutating: true) { signed, store, credential in
          let id = request.parameters["id"] ?? ""
          guard try store.revokeOwnSession(id: id, accountID: signed.account.id, reason: "revoked_by_owner")
          else {
            return JSONBody.error(.notFound, "not_found", "You have no active session with that ID.")
          }
          return Self.noContent(clearingCookie: id == signed.session.id && credential.isCookie)
        }
      },
    ]
  }

  /// Runs `body` for the live session the request presents; answers 401 (with the contract's
  /// challenge), 426 for an unsupported app version, 403 for a cookie-authenticated change
  /// without a same-origin `Origin`, 500 when the store fails.
  func authenticated(
    _ request: Request, mutating: Bool,
    _ body: (Signed, ClientStore, Credential) throws -> Response
  ) -> Response {
    let credential = Credential(request)
    switch credential {
    case .none: return Self.unauthorized(error: nil)  // RFC 6750 §3: no error attribute
    case .malformed: return Self.unauthorized(error: "invalid_request")
    case .bearer:
      if let client = request.headers["band-licence-client"], let refusal = versionRefusal(client) {
        return refusal
      }
    case .cookie:
      // The cookie travels with cross-site requests too; a change needs proof it is our page.
      if mutating,
        request.headers["origin"] == nil || !WebSecurity.sameOrigin(request, deployment: context.deployment)
      {
        return JSONBody.error(
          .forbidden, "cross_origin",
          "This change must come from a Band Licence page (same-origin Origin header).")
      }
    }
    do {
      let store = try context.store()
      guard let signed = try context.signed(credential, store) else {
        return Self.unauthorized(error: "invalid_token")
      }
      return try body(signed, store, credential)
    } catch {
      return ClientContext.storeFailure(error, html: false)
    }
  }

  func sessionBody(_ signed: Signed) throws(StoreError) -> Response {
    let store = try context.store()
    let schools: [JSONValue] = try store.memberships(accountID: signed.account.id).map { m in
      .object([
        "id": .string(m.school.id), "name": .string(m.school.name), "slug": .string(m.school.slug),
        "role": .string(m.role.rawValue),
      ])
    }
    let account = signed.account
    return JSONBody.response(
      .ok,
      .object([
        "account": .object([
          "id": .string(account.id), "displayName": .string(account.displayName),
          "email": .string(account.email),
        ]),
        "schools": .array(schools),
        "deployment": deploymentJSON,
        "capabilities": capabilitiesJSON,
      ]))
  }

  static func device(_ session: SessionRecord, current: Bool) -> JSONValue {
    .object([
      "id": .string(session.id), "kind": .string(session.kind),
      "platform": session.platform.map { .string($0) } ?? .null,
      "appVersion": session.appVersion.map { .string($0) } ?? .null,
      "createdAt": .string(Timestamp.iso8601(session.createdAt)),
      "lastSeenAt": .string(Timestamp.iso8601(session.lastSeenAt)), "current": .bool(current),
    ])
  }

  static func noContent(clearingCookie: Bool) -> Response {
    Response(
      status: .noContent,
      headers: clearingCookie
        ? [("Set-Cookie", WebSecurity.setCookie(WebSecurity.sessionCookie, "", maxAge: 0))] : [])
  }

  /// `Band-Licence-Client: <platform>/<version>`: 426 below the platform's minimum, 400 when malformed.
  func versionRefusal(_ header: String) -> Response? {
    let parts = header.split(separator: "/", maxSplits: 1)
    guard parts.count == 2, ["ios", "android"].contains(parts[0]),
      parts[1].split(separator: ".").allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) })
    else {
      return JSONBody.error(
        .badRequest, "invalid_request", "Band-Licence-Client must be ios/x.y.z or android/x.y.z.")
    }
    let deployment = context.deployment
    let minimum = parts[0] == "ios" ? deployment.minimumIOSVersion : deployment.minimumAndroidVersion
    guard ClientStore.compareVersions(String(parts[1]), minimum) < 0 else { return nil }
    return JSONBody.response(
      .upgradeRequired,
      .object([
        "error": .string("app_version_unsupported"), "minimumVersion": .string(minimum),
        "message": .string("Please update the app to continue."),
      ]))
  }

  static func unauthorized(error: String?) -> Response {
    var challenge = "Bearer realm=\"band-licence\""
    if let error { challenge += ", error=\"\(error)\"" }
    return JSONBody.error(
      .unauthorized, error ?? "unauthorized", "Sign in to continue.",
      headers: [("WWW-Authenticate", challenge)])
  }
}
