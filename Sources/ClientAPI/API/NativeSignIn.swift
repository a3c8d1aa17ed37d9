import Accounts
import Deployment
import Edge
import Store

/// The parameters a native app opens `/native/sign-in` with in the system browser, validated as a
/// whole before anything is shown.
struct HandoffParameters: Equatable {
  let state: String
  let challenge: String
  let platform: String
  let appVersion: String

  /// The parameters in `fields`, or every problem with them: one sentence for the person, each
  /// technical reason for the app's developer, and the state when it is valid (so the person can
  /// be sent back to the app with `error=invalid_request`).
  static func parse(_ fields: [String: String]?, deployment: Deployment) -> Result<HandoffParameters, Refusal>
  {
    guard let fields else {
      return .failure(
        Refusal(
          Refusal.brokenLink, details: ["A parameter is repeated or not UTF-8 (RFC 6749 §3.1)."], state: nil))
    }
    var details: [String] = []
    var message = Refusal.brokenLink
    if fields["redirect_uri"] != nil || fields["return_to"] != nil {
      details.append("redirect_uri and return_to are not accepted: the callback is fixed by the server.")
    }
    if fields["code_challenge_method"] != "S256" {
      details.append(
        fields["code_challenge_method"] == nil
          ? "code_challenge_method is missing; it must be S256 (RFC 7636 §4.3)."
          : "code_challenge_method must be S256; plain and others are refused (RFC 7636 §4.3).")
    }
    let challenge = fields["code_challenge"].flatMap { PKCE.validChallenge($0) ? $0 : nil }
    if challenge == nil { details.append("code_challenge must be 43 base64url characters (RFC 7636 §4.2).") }
    let state = fields["state"].flatMap { PKCE.validState($0) ? $0 : nil }
    if state == nil { details.append("state must be 16 to 512 URL-safe characters.") }
    let platform = fields["platform"].flatMap { $0 == "ios" || $0 == "android" ? $0 : nil }
    if platform == nil { details.append("platform must be ios or android.") }
    let appVersion = fields["app_version"].flatMap { PKCE.validAppVersion($0) ? $0 : nil }
    if appVersion == nil { details.append("app_version must look like 1.4 or 1.4.0.") }
    if let platform, let appVersion {
      let minimum = platform == "ios" ? deployment.minimumIOSVersion : deployment.minimumAndroidVersion
      if ClientStore.compareVersions(appVersion, minimum) < 0 {
        details.append("app_version \(appVersion) is below the minimum for \(platform), \(minimum).")
        message = "This version of the app is too old. Please update the app, then sign in again."
      }
    }
    if !deployment.capabilities["nativeSignIn"] {
      details.append("Native sign-in is switched off on this deployment (capability nativeSignIn).")
      message = "Signing in from the app is turned off for now. Please try again later."
    }
    guard details.isEmpty, let challenge, let state, let platform, let appVersion else {
      return .failure(Refusal(message, details: details, state: state))
    }
    return .success(
      HandoffParameters(state: state, challenge: challenge, platform: platform, appVersion: appVersion))
  }

  /// Why a sign-in link was refused: a sentence for the person holding the phone, the reasons for
  /// the app's developer, and the link's state when it was valid.
  struct Refusal: Error, Equatable {
    /// The sentence for a link the app built wrongly.
    static let brokenLink = "The app opened a sign-in link that does not work, so you cannot sign in with it."
    let message: String
    let details: [String]
    let state: String?
    init(_ message: String, details: [String], state: String?) {
      self.message = message
      self.details = details
      self.state = state
    }
  }

  /// The hidden fields that carry the parameters through the form.
  var hiddenFields: String {
    [
      ("state", state), ("code_challenge", challenge), ("code_challenge_method", "S256"),
      ("platform", platform),
      ("app_version", appVersion),
    ].map { "<input type=\"hidden\" name=\"\($0.0)\" value=\"\(HTMLText.escape($0.1))\">\n" }.joined()
  }
}

/// `GET/POST /native/sign-in`, `GET /native/callback` and `POST /api/client/v1/native/exchange`:
/// the system-browser handoff with PKCE S256. The app opens `/native/sign-in` with a challenge;
/// once signed in, the browser is sent to `/native/callback` with a one-time code, which the app
/// exchanges, with the verifier, for a session.
public struct NativeSignIn: Sendable {
  let context: ClientContext
  let json: SessionJSON
  /// Largest exchange body accepted (it holds five short strings).
  static let maxExchangeBytes = 4096

  /// The exchange's body, judged by the dispatcher on the head (and while a body of unknown length
  /// is read), before `exchange` runs: JSON, at most `maxExchangeBytes` (the size held once more by
  /// `exchange`, see `JSONBody.pastLimit`); its refusals carry `Pragma: no-cache` like every answer
  /// of the token endpoint.
  static let exchangeBody = BodyPolicy.json(
    maxBytes: maxExchangeBytes,
    tooLarge: JSONBody.error(
      .contentTooLarge, "request_too_large", "The exchange body is too large.",
      headers: [("Pragma", "no-cache")]),
    unsupported: JSONBody.error(
      .unsupportedMediaType, "unsupported_media_type", "Send the exchange as application/json.",
      headers: [("Pragma", "no-cache")]))

  public init(_ context: ClientContext) {
    self.context = context
    json = SessionJSON(context.deployment)
  }

  public var routes: [Route] {
    [
      Route(.get, "/native/sign-in", cacheClass: .private, execution: .pooled) { request in
        context.guardedPage { try page(request) }
      },
      Route(
        .post, "/native/sign-in", cacheClass: .private, execution: .background,
        fastPath: { request in
          let refused = context.limited(request, by: context.signInLimiter, refusal: context.tooManySignIns)
          if refused != nil { Metrics.signIn(.native, .rateLimited) }
          return refused
        }
      ) { request in
        context.guardedPage { try submit(request) }
      },
      Route(.get, "/native/callback", cacheClass: .private, fixed: callbackPage),
      Route(
        .post, "/api/client/v1/native/exchange", cacheClass: .private, execution: .pooled,
        body: Self.exchangeBody,
        fastPath: { request in
          context.limited(request, by: context.exchangeLimiter) { _ in
            JSONBody.error(
              .tooManyRequests, "rate_limited", "Too many attempts. Wait a moment, then try again.",
              headers: [("Pragma", "no-cache")])
          }
        }
      ) { request in
        exchange(request)
      },
    ]
  }

  // MARK: the browser side

  func page(_ request: Request) throws(StoreError) -> Response {
    let query = request.query.map { Array($0.utf8) } ?? []
    switch HandoffParameters.parse(WebSecurity.fields(query), deployment: context.deployment) {
    case .failure(let refusal): return refused(refusal)
    case .success(let parameters):
      let signed = try context.authenticator.signed(request, try context.store())
      return form(request, parameters, signedIn: signed?.account, status: .ok, message: nil)
    }
  }

  func submit(_ request: Request) throws(StoreError) -> Response {
    if let refusal = context.formRefusal(
      request, binding: WebSecurity.cookie(WebSecurity.csrfCookie, in: request))
    {
      Metrics.signIn(.native, .refused)
      return refusal
    }
    let fields = WebSecurity.form(request)
    let parameters: HandoffParameters
    switch HandoffParameters.parse(fields, deployment: context.deployment) {
    case .failure(let refusal):
      Metrics.signIn(.native, .refused)
      return refused(refusal)
    case .success(let parsed): parameters = parsed
    }
    let fields_ = fields ?? [:]
    let store = try context.store()
    let origin = context.deployment.origin
    if fields_["action"] == "cancel" {
      return WebPages.redirect("\(origin)/native/callback?error=access_denied&state=\(parameters.state)")
    }
    let account: Account
    // A sign-in with the password leaves a trusted-device cookie in the system browser.
    var device: String? = nil
    if fields_["action"] == "continue" {
      guard let signed = try context.authenticator.signed(request, store) else {
        return form(
          request, parameters, signedIn: nil, status: .badRequest,
          message: "Your browser session has ended. Please sign in.")
      }
      account = signed.account
    } else {
      let email = fields_["email"] ?? ""
      let password = fields_["password"] ?? ""
      let typed = WebPages.redisplayed(email)
      guard !email.isEmpty, !password.isEmpty, email.utf8.count <= WebPages.maxEmailBytes,
        password.utf8.count <= WebPages.maxPasswordBytes
      else {
        Metrics.signIn(.native, .refused)
        return form(
          request, parameters, signedIn: nil, status: .badRequest, message: nil, email: typed,
          errors: WebPages.missingCredentials(email: email, password: password))
      }
      switch try context.authenticator.checkPassword(
        email: email, password: password, store: store, request: request)
      {
      case .passed(let found, let upgradedHash):
        if let upgradedHash { try store.upgradeHash(accountID: found.id, to: upgradedHash) }
        account = found
        device = try context.authenticator.trustBrowser(found, request, store)
      case .refused:
        Metrics.signIn(.native, .badCredentials)
        return form(
          request, parameters, signedIn: nil, status: .badRequest, message: nil, email: typed,
          errors: FieldErrors("email", WebPages.failureMessage))
      case .locked:
        Metrics.signIn(.native, .locked)
        return form(
          request, parameters, signedIn: nil, status: .badRequest, message: nil, email: typed,
          errors: FieldErrors("email", WebPages.lockedMessage))
      }
    }
    let code = try store.createHandoff(
      accountID: account.id, challenge: parameters.challenge, state: parameters.state,
      platform: parameters.platform,
      appVersion: parameters.appVersion, lifetime: context.deployment.handoffLifetimeSeconds)
    if device != nil { Metrics.signIn(.native, .ok) }  // a password sign-in, not "continue as"
    // Built from configuration only: the origin is the deployment's, never a request's.
    return WebPages.redirect(
      "\(origin)/native/callback?code=\(code)&state=\(parameters.state)",
      cookie: device)
  }

  /// The native sign-in form; `email` is what the person typed last time (shown again, escaped).
  func form(
    _ request: Request, _ parameters: HandoffParameters, signedIn: Account?, status: Status, message: String?,
    email: String = "", errors: FieldErrors = FieldErrors()
  ) -> Response {
    let (binding, headers) = WebPages.csrfBinding(request)
    let csrf = "<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: binding))\">\n"
    let app = parameters.platform == "ios" ? "iPhone or iPad app" : "Android app"
    var page = HTMLPage(title: "Sign in to the app")
    page.html("<h1>Sign in to the Band Licence app</h1>\n")
    page.summary(errors)
    page.html("<p>You are signing in to the \(app).</p>\n")
    page.alert(message)
    if let signedIn {
      page.html("<form method=\"post\" action=\"/native/sign-in\">\n" + csrf + parameters.hiddenFields)
      page.html("<input type=\"hidden\" name=\"action\" value=\"continue\">\n")
      page.html("<button class=\"button\" type=\"submit\">Continue as ")
      page.text(signedIn.displayName)
      page.html("</button>\n</form>\n<h2>Or sign in as someone else</h2>\n")
    }
    page.html(
      "<form class=\"form\" method=\"post\" action=\"/native/sign-in\">\n" + csrf + parameters.hiddenFields)
    page.html(WebPages.credentialFields(email: email, errors: errors))
    page.html("<button class=\"button\" type=\"submit\">Sign in</button>\n</form>\n")
    // As on the web's sign-in page; once a new password is chosen, the app's sign-in starts again.
    page.html("<p><a href=\"/account/recover\">Forgot your password?</a></p>\n")
    page.html("<form method=\"post\" action=\"/native/sign-in\">\n" + csrf + parameters.hiddenFields)
    page.html("<input type=\"hidden\" name=\"action\" value=\"cancel\">\n")
    page.html("<button class=\"link\" type=\"submit\">Cancel and return to the app</button>\n</form>\n")
    return page.response(status, context: context, headers: headers)
  }

  /// The 400 page for a refused link: the sentence for the person, every reason in a small
  /// "Details for the app's developer" element, and, when the link's state is valid and the
  /// callback is an approved link path, a button back to the app with `error=invalid_request`
  /// (RFC 6749 §4.1.2.1). No referrer: the page's address carries the link's parameters.
  func refused(_ refusal: HandoffParameters.Refusal) -> Response {
    var page = HTMLPage(title: "This sign-in link cannot be used")
    page.html("<h1>This sign-in link cannot be used</h1>\n<p>")
    page.text(refusal.message)
    page.html("</p>\n")
    let deployment = context.deployment
    if let state = refusal.state, deployment.verifiedLinkPaths.contains("/native/callback") {
      // Built from configuration only (and a state that is URL-safe by validation).
      let back = "\(deployment.origin)/native/callback?error=invalid_request&state=\(state)"
      page.html("<p><a class=\"button\" href=\"\(HTMLText.escape(back))\">Return to the app</a></p>\n")
    } else {
      page.html("<p>Return to the app and start signing in again.</p>\n")
    }
    page.html("<details class=\"developer\">\n<summary>Details for the app's developer</summary>\n<ul>\n")
    for detail in refusal.details {
      page.html("<li>")
      page.text(detail)
      page.html("</li>\n")
    }
    page.html("</ul>\n</details>\n")
    return page.response(.badRequest, context: context, referrerPolicy: "no-referrer")
  }

  /// Shown when the callback opens in a browser (the app is not installed, or the link was not
  /// handed to it). It never repeats the code and sends no referrer.
  var callbackPage: Response {
    var page = HTMLPage(title: "Return to the app")
    page.html("<h1>Return to the Band Licence app</h1>\n")
    page.html("<p>To finish signing in, open the Band Licence app on this device. ")
    page.html(
      "If the app is not installed, install it from the App Store or Google Play, then sign in again from the app.</p>\n"
    )
    return page.response(.ok, context: context, referrerPolicy: "no-referrer")
  }

  // MARK: the exchange

  func exchange(_ request: Request) -> Response {
    let pragma: [(name: String, value: String)] = [("Pragma", "no-cache")]
    if let refusal = JSONBody.pastLimit(request, Self.exchangeBody) { return refusal }
    guard context.deployment.capabilities["nativeSignIn"] else {
      return JSONBody.error(
        .forbidden, "native_sign_in_disabled", "Signing in from the app is turned off for now.",
        headers: pragma)
    }
    let parsed = JSONBody.parse(request.body, headers: pragma)
    if let refusal = parsed.refusal { return refusal }
    guard case .object(let body)? = parsed.value,
      case .string(let code)? = body["code"], case .string(let verifier)? = body["codeVerifier"],
      case .string(let state)? = body["state"], case .string(let platform)? = body["platform"],
      case .string(let appVersion)? = body["appVersion"]
    else {
      return JSONBody.error(
        .badRequest, "invalid_request",
        "The body must be a JSON object with code, codeVerifier, state, platform and appVersion as strings.",
        headers: pragma)
    }
    if platform == "ios" || platform == "android", PKCE.validAppVersion(appVersion) {
      let minimum =
        platform == "ios" ? context.deployment.minimumIOSVersion : context.deployment.minimumAndroidVersion
      if ClientStore.compareVersions(appVersion, minimum) < 0 {
        return APIError.response(
          .upgradeRequired, "app_version_unsupported", "Please update the app to continue.",
          extra: ["minimumVersion": .string(minimum)], headers: pragma)
      }
    }
    do {
      let store = try context.store()
      let outcome = try store.exchange(
        ExchangeRequest(
          code: code, codeVerifier: verifier, state: state, platform: platform, appVersion: appVersion,
          idempotencyKey: request.headers["idempotency-key"], bodyDigest: Secrets.digest(bytes: request.body)),
        lifetimes: context.lifetimes)
      guard case .granted(let token, let session) = outcome,
        let view = try store.sessionView(token: token, lifetimes: context.lifetimes)
      else {
        return JSONBody.error(
          .badRequest, "invalid_grant",
          "This sign-in cannot be completed. Start signing in again from the app.",
          headers: pragma)
      }
      var out: [UInt8] = []
      out += #"{"expiresAt":"#.utf8
      JSONValue.appendString(Timestamp.iso8601(session.expiresAt), to: &out)
      out += #","session":"#.utf8
      out += json.body(view.account, view.memberships)
      out += #","sessionToken":"#.utf8
      JSONValue.appendString(token, to: &out)
      out += #","tokenType":"Bearer"}"#.utf8
      return Response(
        status: .ok, headers: [("Content-Type", "application/json; charset=utf-8")] + pragma,
        body: .bytes(out))
    } catch {
      return ClientContext.storeFailure(error, html: false)
    }
  }
}
