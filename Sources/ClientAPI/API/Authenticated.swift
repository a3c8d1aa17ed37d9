import Accounts
import Deployment
import Edge
import Store

extension AuthFailure {
  /// The answer: 401 with the contract's Bearer challenge (RFC 6750 §3: no `error` attribute when
  /// nothing was presented), 400, 426 naming the minimum version, or 403.
  package var response: Response {
    switch self {
    case .missing: Self.unauthorized(error: nil)
    case .malformed: Self.unauthorized(error: "invalid_request")
    case .invalidToken: Self.unauthorized(error: "invalid_token")
    case .invalidClient:
      JSONBody.error(
        .badRequest, "invalid_request", "Band-Licence-Client must be ios/x.y.z or android/x.y.z.")
    case .appVersionUnsupported(let minimum):
      APIError.response(
        .upgradeRequired, "app_version_unsupported", "Please update the app to continue.",
        extra: ["minimumVersion": .string(minimum)])
    case .crossOrigin:
      JSONBody.error(
        .forbidden, "cross_origin",
        "This change must come from a Band Licence page (same-origin Origin header).")
    }
  }

  static func unauthorized(error: String?) -> Response {
    var challenge = "Bearer realm=\"band-licence\""
    if let error { challenge += ", error=\"\(error)\"" }
    return JSONBody.error(
      .unauthorized, error ?? "unauthorized", "Sign in to continue.",
      headers: [("WWW-Authenticate", challenge)])
  }
}

extension Authenticator {
  /// The whole check for the JSON API: `precheck`, then the live session. Runs `body` with it,
  /// the store and the credential; otherwise answers the failure (401, 400, 426, 403), or 500/503
  /// when the store fails.
  package func authenticated(
    _ request: Request, unsafe: Bool, _ body: (Signed, ClientStore, Credential) throws -> Response
  ) -> Response {
    let credential = Credential(request)
    if let failure = precheck(request, credential, unsafe: unsafe) { return failure.response }
    do {
      let store = try services.store()
      guard let signed = try signed(credential, store, from: request) else {
        return AuthFailure.invalidToken.response
      }
      return try body(signed, store, credential)
    } catch {
      return ClientContext.storeFailure(error, html: false)
    }
  }
}

extension ClientContext {
  /// The authenticator of this snapshot.
  var authenticator: Authenticator { Authenticator(services: services, deployment: deployment) }
}
