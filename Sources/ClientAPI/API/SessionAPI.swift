import Accounts
import Deployment
import Edge

/// `GET` and `DELETE /api/client/v1/session` (docs/client-api-v1.openapi.json) and the person's devices
/// (`GET /api/client/v1/sessions`, `DELETE /api/client/v1/sessions/{id}`), authenticated by a Bearer
/// token or the web session cookie. Pooled: each worker thread reads through its own connection.
public struct SessionAPI: Sendable {
  let context: ClientContext
  /// The session body's parts that only the snapshot decides.
  let json: SessionJSON

  /// The endpoints over `context`.
  public init(_ context: ClientContext) {
    self.context = context
    json = SessionJSON(context.deployment)
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
        context.authenticator.authenticated(request, unsafe: true) { signed, store, credential in
          try store.revokeSession(id: signed.session.id, reason: "signed_out", actor: signed.account.id)
          return Self.noContent(clearingCookie: credential.isCookie)
        }
      },
      Route(.get, "/api/client/v1/sessions", cacheClass: .private, execution: .pooled) { request in
        context.authenticator.authenticated(request, unsafe: false) { signed, store, _ in
          let sessions = try store.sessions(.accountID(signed.account.id))
          return JSONBody.response(
            .ok,
            .object([
              "sessions": .array(sessions.map { Self.device($0, current: $0.id == signed.session.id) })
            ]))
        }
      },
      Route(.delete, "/api/client/v1/sessions/:id", cacheClass: .private, execution: .pooled) { request in
        context.authenticator.authenticated(request, unsafe: true) { signed, store, credential in
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

  /// `GET /session` on the loop: the answers that need no store (401 without credentials, 426),
  /// and cache hits; nil sends the request to the pool.
  func cachedSession(_ request: Request) -> Response? {
    let credential = Credential(request)
    if let failure = context.authenticator.precheck(request, credential, unsafe: false) {
      return failure.response
    }
    guard let token = credential.token,
      let answer = context.sessionCache.answer(for: Secrets.digest(token), now: context.clock())
    else { return nil }
    return answer.response
  }

  /// `GET /session` on the pool, alone.
  func readSession(_ request: Request) -> Response { readSessions([request])[0] }

  /// `GET /session` on the pool for a batch of requests: one statement reads their sessions, the
  /// accounts and their live memberships; each answer is cached in the change epoch taken
  /// before the read. One response per request, in order.
  func readSessions(_ requests: [Request]) -> [Response] {
    var answers: [Response?] = []
    var reads: [(index: Int, token: String)] = []
    for (index, request) in requests.enumerated() {
      let credential = Credential(request)
      if let failure = context.authenticator.precheck(request, credential, unsafe: false) {
        answers.append(failure.response)
      } else if let token = credential.token {
        answers.append(nil)
        reads.append((index, token))
      } else {
        answers.append(AuthFailure.invalidToken.response)
      }
    }
    guard !reads.isEmpty else { return answers.map { $0 ?? AuthFailure.invalidToken.response } }
    do {
      let epoch = context.sessionCache.epochBeforeRead()
      let store = try context.store()
      let views = try store.sessionViews(
        tokens: reads.map(\.token), lifetimes: context.lifetimes,
        networks: reads.map { context.network(requests[$0.index], store) })
      for ((index, token), view) in zip(reads, views) {
        guard let view else {
          answers[index] = AuthFailure.invalidToken.response
          continue
        }
        let body = json.body(view.account, view.memberships)
        guard let epoch else {
          answers[index] = SessionJSON.response(body)
          continue
        }
        // Kept as ready bytes, so that a hit on the loop costs what a static file does.
        let answer = PrebuiltResponse(SessionJSON.response(body), cacheClass: .private)
        context.sessionCache.store(
          answer, for: Secrets.digest(token), epoch: epoch,
          validUntil: context.authenticator.answerableUntil(view.session))
        answers[index] = answer.response
      }
    } catch {
      let failure = ClientContext.storeFailure(error, html: false)
      for (index, _) in reads { answers[index] = failure }
    }
    return answers.map { $0 ?? AuthFailure.invalidToken.response }
  }

  static func device(_ session: SessionRecord, current: Bool) -> JSONValue {
    .object([
      "id": .string(session.id), "kind": .string(session.kind.rawValue),
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
}
