import Edge
import LinkAssoc

/// `GET` and `DELETE /api/client/v1/session` (client-api-v1.md, "Session") and the person's devices
/// (`GET /api/client/v1/sessions`, `DELETE /api/client/v1/sessions/{id}`), authenticated by a Bearer
/// token or the web session cookie. Pooled: each worker thread reads through its own connection.
public struct SessionAPI: Sendable {
  let context: ClientContext
  /// The parts of every answer that only the snapshot decides, serialised once.
  let deploymentJSON: [UInt8]
  let capabilitiesJSON: [UInt8]

  /// The endpoints over `context`.
  public init(_ context: ClientContext) {
    self.context = context
    let deployment = context.deployment
    var capabilities: [String: JSONValue] = [:]
    for name in Capabilities.names { capabilities[name] = .bool(deployment.capabilities[name]) }
    capabilitiesJSON = JSONValue.object(capabilities).canonicalBytes
    deploymentJSON =
      JSONValue.object([
        "environment": .string(deployment.environment.rawValue), "label": .string(deployment.label),
      ]).canonicalBytes
  }

  /// The most `GET /session` reads one statement answers (the pool takes those waiting together).
  static let readBatch = 32

  /// The routes: all private (`no-store`) and pooled (they read the database).
  public var routes: [Route] {
    [
      Route(
        .get, "/api/client/v1/session", cacheClass: .private, execution: .pooled,
        fastPath: { request in cachedSession(request) },
        batch: RequestBatch(limit: Self.readBatch) { requests in readSessions(requests) }
      ) { request in
        readSession(request)
      },
      Route(.delete, "/api/client/v1/session", cacheClass: .private, execution: .pooled) { request in
        authenticated(request, mutating: true) { signed, store, credential in
          try store.revokeSession(id: signed.session.id, reason: "signed_out", actor: signed.account.id)
          return Self.noContent(clearingCookie: credential.isCookie)
        }
      },
      Route(.get, "/api/client/v1/sessions", cacheClass: .private, execution: .pooled) { request in
        authenticated(request, mutating: false) { signed, store, _ in
          let sessions = try store.sessions(.accountID(signed.account.id))
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
    if let refusal = precheck(request, credential, mutating: mutating) { return refusal }
    do {
      let store = try context.store()
      guard let signed = try context.signed(credential, store, from: request) else {
        return Self.unauthorized(error: "invalid_token")
      }
      return try body(signed, store, credential)
    } catch {
      return ClientContext.storeFailure(error, html: false)
    }
  }

  /// The answers decided before the store is read: no or malformed credentials (401), an app
  /// below its platform's minimum (426), a cookie-authenticated change from another origin (403).
  func precheck(_ request: Request, _ credential: Credential, mutating: Bool) -> Response? {
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
    return nil
  }

  /// `GET /session` on the loop: the answers that need no store (401 without credentials, 426),
  /// and cache hits; nil sends the request to the pool.
  func cachedSession(_ request: Request) -> Response? {
    let credential = Credential(request)
    if let refusal = precheck(request, credential, mutating: false) { return refusal }
    guard let token = credential.token,
      let answer = context.sessionCache.answer(for: Secrets.digest(token), now: context.clock())
    else { return nil }
    return answer.response
  }

  /// `GET /session` on the pool, alone.
  func readSession(_ request: Request) -> Response { readSessions([request])[0] }

  /// `GET /session` on the pool for a batch of requests: one statement reads their sessions, the
  /// accounts and their live memberships; each answer is cached, stamped with the database's
  /// state before the read. One response per request, in order.
  func readSessions(_ requests: [Request]) -> [Response] {
    var answers: [Response?] = []
    var reads: [(index: Int, token: String)] = []
    for (index, request) in requests.enumerated() {
      let credential = Credential(request)
      if let refusal = precheck(request, credential, mutating: false) {
        answers.append(refusal)
      } else if let token = credential.token {
        answers.append(nil)
        reads.append((index, token))
      } else {
        answers.append(Self.unauthorized(error: "invalid_token"))
      }
    }
    guard !reads.isEmpty else { return answers.map { $0 ?? Self.unauthorized(error: "invalid_token") } }
    do {
      let stamp = context.sessionCache.stampBeforeRead()
      let store = try context.store()
      let views = try store.sessionViews(
        tokens: reads.map(\.token), lifetimes: context.lifetimes,
        networks: reads.map { context.network(requests[$0.index], store) })
      for ((index, token), view) in zip(reads, views) {
        guard let view else {
          answers[index] = Self.unauthorized(error: "invalid_token")
          continue
        }
        let body = sessionBody(view.account, view.memberships)
        guard let stamp else {
          answers[index] = Self.sessionResponse(body)
          continue
        }
        // Kept as ready bytes, so that a hit on the loop costs what a static file does.
        let answer = PrebuiltResponse(Self.sessionResponse(body), cacheClass: .private)
        let lifetimes = context.lifetimes
        let session = view.session
        let idle = session.kind == "native" ? lifetimes.nativeIdle : lifetimes.webIdle
        let validUntil = min(session.expiresAt, session.lastSeenAt + min(idle, ClientStore.seenResolution))
        context.sessionCache.store(answer, for: Secrets.digest(token), stamp: stamp, validUntil: validUntil)
        answers[index] = answer.response
      }
    } catch {
      let failure = ClientContext.storeFailure(error, html: false)
      for (index, _) in reads { answers[index] = failure }
    }
    return answers.map { $0 ?? Self.unauthorized(error: "invalid_token") }
  }

  static func sessionResponse(_ body: [UInt8]) -> Response {
    Response(status: .ok, headers: [("Content-Type", "application/json; charset=utf-8")], body: .bytes(body))
  }

  /// Exactly the contract's fields (client-api-v1.md, "Session"), written straight to bytes in
  /// canonical order (the same text `JSONValue.canonical` gives; a test holds them equal).
  func sessionBody(_ account: Account, _ memberships: [Membership]) -> [UInt8] {
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

  static func device(_ session: SessionRecord, current: Bool) -> JSONValue {
    .object([
      "id": .string(session.id), "kind": .string(session.kind),
      "platform": session.platform.map { .string($0) } ?? .null,
      "appVersion": session.appVersion.map { .string($0) } ?? .null,
      "browser": session.browser.map { .string($0) } ?? .null,
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
    // One rule for app versions, the handoff's: 2 or 3 parts of 1 to 6 ASCII digits.
    let parts = header.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, ["ios", "android"].contains(parts[0]), PKCE.validAppVersion(String(parts[1]))
    else {
      return JSONBody.error(
        .badRequest, "invalid_request", "Band-Licence-Client must be ios/x.y.z or android/x.y.z.")
    }
    let deployment = context.deployment
    let minimum = parts[0] == "ios" ? deployment.minimumIOSVersion : deployment.minimumAndroidVersion
    guard ClientStore.compareVersions(String(parts[1]), minimum) < 0 else { return nil }
    return APIError.response(
      .upgradeRequired, "app_version_unsupported", "Please update the app to continue.",
      extra: ["minimumVersion": .string(minimum)])
  }

  static func unauthorized(error: String?) -> Response {
    var challenge = "Bearer realm=\"band-licence\""
    if let error { challenge += ", error=\"\(error)\"" }
    return JSONBody.error(
      .unauthorized, error ?? "unauthorized", "Sign in to continue.",
      headers: [("WWW-Authenticate", challenge)])
  }
}
