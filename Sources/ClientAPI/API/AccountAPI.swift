import Accounts
import Deployment
import Edge

/// `PATCH /api/client/v1/account` (docs/client-api-v1.openapi.json): the person's own
/// display name, for the apps. Authenticated like `/session` (a Bearer token, or the cookie with a
/// same-origin `Origin`); answers `200` with the session body, as `GET /session` would now.
public struct AccountAPI: Sendable {
  let context: ClientContext
  let json: SessionJSON

  /// The longest body read.
  static let maxBodyBytes = 4096

  /// The body, judged by the dispatcher on the head (and while a body of unknown length is read),
  /// before `patch` runs: JSON, at most `maxBodyBytes` (the size held once more by `patch`, see
  /// `JSONBody.pastLimit`).
  static let jsonBody = BodyPolicy.json(
    maxBytes: maxBodyBytes,
    tooLarge: JSONBody.error(.contentTooLarge, "request_too_large", "The body is too large."),
    unsupported: JSONBody.error(
      .unsupportedMediaType, "unsupported_media_type", "Send the change as application/json."))

  /// The endpoint over `context`.
  public init(_ context: ClientContext) {
    self.context = context
    json = SessionJSON(context.deployment)
  }

  /// The route: private (`no-store`) and pooled.
  public var routes: [Route] {
    [
      Route(.patch, "/api/client/v1/account", cacheClass: .private, execution: .pooled, body: Self.jsonBody) {
        request in
        patch(request)
      }
    ]
  }

  /// The body is judged first, the same for everyone (`jsonBody`: 415 unless JSON, 413 past
  /// `maxBodyBytes`; 400 unless exactly `{"displayName": string}` with a valid name); then the
  /// caller is authenticated as for `/session` (401, 426, 403 for a cookie without a same-origin
  /// `Origin`).
  func patch(_ request: Request) -> Response {
    if let refusal = JSONBody.pastLimit(request, Self.jsonBody) { return refusal }
    let parsed = JSONBody.parse(request.body)
    if let refusal = parsed.refusal { return refusal }
    guard case .object(let body)? = parsed.value, body.count == 1,
      case .string(let typed)? = body["displayName"]
    else {
      return JSONBody.error(
        .badRequest, "invalid_request", "The body must be a JSON object with displayName as its only field.")
    }
    guard let name = AccountRules.displayName(typed) else {
      return JSONBody.error(.badRequest, "invalid_display_name", AccountRules.nameProblem)
    }
    return context.authenticator.authenticated(request, unsafe: true) { signed, store, _ in
      try store.rename(accountID: signed.account.id, to: name)
      let account = Account(
        id: signed.account.id, email: signed.account.email, displayName: name, disabled: false)
      return SessionJSON.response(json.body(account, try store.memberships(accountID: account.id)))
    }
  }
}
