import Accounts
import Deployment
import Edge
import Store

/// `/invitations/accept`: where an invitation's link leads. The link's token leaves the URL at
/// once: `GET ?token=` answers `303` to the bare path (no referrer) and keeps the token in a
/// short-lived `__Host-` cookie, so the page the person reads, bookmarks or shares carries no
/// token, and its forms post with an ordinary same-origin `Origin` (a page under `no-referrer`
/// makes browsers send `Origin: null`, which the same-origin check must refuse).
///
/// An existing account accepts after signing in as the invitation's address; a new person chooses a
/// display name and a password, which makes the account (its email verified: the link proves it),
/// grants the membership and signs them in — all in one transaction, audited `invitation.accepted`.
public struct InvitationPages: Sendable {
  let context: ClientContext

  /// Holds the invitation's token between its link and the answer (an hour: long enough to sign in).
  static let cookie = "__Host-bl_invite"
  static let cookieLifetime = 3600
  static let path = "/invitations/accept"

  /// The pages over `context`.
  public init(_ context: ClientContext) { self.context = context }

  public var routes: [Route] {
    [
      Route(.get, Self.path, cacheClass: .private, execution: .pooled) { request in
        context.guardedPage { try show(request) }
      },
      Route(
        .post, Self.path, cacheClass: .private, execution: .background,
        fastPath: { request in
          context.limited(request, by: context.signInLimiter) { wait in
            HTMLPage.problem(
              .tooManyRequests, "Too many attempts",
              "There have been too many attempts from your network. Wait \(wait) seconds, then try again.",
              context: context)
          }
        }
      ) { request in context.guardedPage { try accept(request) } },
    ]
  }

  // MARK: the page

  func show(_ request: Request) throws(StoreError) -> Response {
    if let token = request.query.flatMap({ WebSecurity.fields(Array($0.utf8)) })?["token"] {
      // The token leaves the URL before anything is shown; a bad one is told so on the bare page.
      var response = Response(
        status: .seeOther,
        headers: [("Location", Self.path)] + HTMLPage.headers(referrerPolicy: "no-referrer"))
      let valid = !token.isEmpty && token.utf8.count <= 128 && token.utf8.allSatisfy { Self.tokenByte($0) }
      response.add(
        "Set-Cookie",
        WebSecurity.setCookie(Self.cookie, valid ? token : "", maxAge: valid ? Self.cookieLifetime : 0))
      return response
    }
    return try form(request, status: .ok, message: nil)
  }

  /// The page for the invitation in the request's cookie, as the person's state calls for.
  func form(
    _ request: Request, status: Status, message: String?, errors: FieldErrors = FieldErrors()
  ) throws(StoreError) -> Response {
    let store = try context.store()
    guard let token = WebSecurity.cookie(Self.cookie, in: request),
      let (invitation, school) = try store.invitation(token: token)
    else { return invalid }
    let signed = try context.authenticator.signed(request, store)
    var page = HTMLPage(title: "Join \(school.name)")
    page.heading("Join \(school.name)")
    page.summary(errors)
    page.alert(message)
    page.html("<p>You are invited to join ")
    page.text(school.name)
    page.html(" on Band Licence as \(invitation.role.label.lowercased()). The invitation is for ")
    page.text(invitation.email)
    page.html(".</p>\n")
    if let signed {
      let csrf = WebSecurity.csrfToken(binding: signed.token)
      guard signed.account.email == invitation.email else {
        page.html("<p>You are signed in as ")
        page.text(signed.account.email)
        page.html(". To accept, sign out and continue with the invited address.</p>\n")
        page.html("<form method=\"post\" action=\"/sign-out\">\n")
        page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">\n")
        // Signing out keeps the invitation's cookie, and comes back here (`WebPages.signOut`).
        page.html("<input type=\"hidden\" name=\"return\" value=\"\(Self.path)\">\n")
        page.html("<button class=\"button\" type=\"submit\">Sign out and continue</button>\n</form>\n")
        return page.response(status == .ok ? .forbidden : status, context: context)
      }
      page.html("<form class=\"form\" method=\"post\" action=\"\(Self.path)\">\n")
      page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">\n")
      page.html("<button class=\"button\" type=\"submit\">Accept and join</button>\n</form>\n")
      return page.response(status, context: context)
    }
    if let email = EmailAddress(invitation.email), try store.account(email: email) != nil {
      page.html("<p>You already have an account: sign in to accept.</p>\n")
      page.html("<p><a class=\"button\" href=\"/sign-in?return=%2Finvitations%2Faccept\">Sign in</a></p>\n")
      return page.response(status, context: context)
    }
    let (binding, headers) = WebPages.csrfBinding(request)
    page.html("<p>Choose the name colleagues will see and a password of at least 12 characters.</p>\n")
    page.html("<form class=\"form\" method=\"post\" action=\"\(Self.path)\">\n")
    page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: binding))\">\n")
    page.html("<input type=\"hidden\" name=\"username\" autocomplete=\"username\" value=\"")
    page.text(invitation.email)
    page.html("\">\n")
    // After a refusal the name stays as typed; a password is never shown back.
    page.html(
      HTMLPage.field(
        "name", label: "Your name",
        attributes: "type=\"text\" autocomplete=\"name\" required maxlength=\"100\"",
        value: errors.isEmpty ? nil : WebPages.retyped(request, ["name"])["name"], errors: errors))
    page.html(WebPages.newPasswordField(label: "Password", errors: errors))
    page.html("<button class=\"button\" type=\"submit\">Create my account and join</button>\n</form>\n")
    return page.response(status, context: context, headers: headers)
  }

  var invalid: Response {
    var response = HTMLPage.problem(
      .notFound, "This invitation link does not work",
      "It may have been used already, withdrawn, or it has expired. Ask the school's administrator for a new one.",
      context: context, next: ("/sign-in", "Go to sign in"))
    response.add("Set-Cookie", WebSecurity.setCookie(Self.cookie, "", maxAge: 0))
    return response
  }

  // MARK: the answer

  func accept(_ request: Request) throws(StoreError) -> Response {
    let store = try context.store()
    let signed = try context.authenticator.signed(request, store)
    let binding = signed?.token ?? WebSecurity.cookie(WebSecurity.csrfCookie, in: request)
    if let refusal = context.formRefusal(request, binding: binding) { return refusal }
    guard let token = WebSecurity.cookie(Self.cookie, in: request) else { return invalid }
    let clear = WebSecurity.setCookie(Self.cookie, "", maxAge: 0)
    if let signed {
      switch try store.acceptInvitation(token: token, accountID: signed.account.id) {
      case .accepted: return WebPages.redirect("/account", cookie: clear)
      case .otherEmail, .accountExists: return try form(request, status: .forbidden, message: nil)
      case .invalid: return invalid
      }
    }
    let fields = WebSecurity.form(request) ?? [:]
    let password = fields["password"] ?? ""
    // The one rule for names, as on /account (at most 100 characters).
    guard let name = AccountRules.displayName(fields["name"] ?? "") else {
      return try form(
        request, status: .badRequest, message: nil, errors: FieldErrors("name", AccountRules.nameProblem))
    }
    guard let invited = try store.invitation(token: token) else { return invalid }
    if let problem = Self.passwordProblem(password, email: invited.0.email) {
      return try form(request, status: .badRequest, message: nil, errors: FieldErrors("password", problem))
    }
    let sessionToken = Secrets.token()
    let outcome = try store.acceptInvitation(
      token: token, displayName: name, passwordHash: context.hasher.hash(password),
      sessionToken: sessionToken,
      lifetimes: context.lifetimes, browser: BrowserLabel.summary(userAgent: request.headers["user-agent"]),
      network: WebPages.network(request, context, store))
    switch outcome {
    case .accepted:
      var response = WebPages.redirect(
        "/account",
        cookie: WebSecurity.setCookie(
          WebSecurity.sessionCookie, sessionToken, maxAge: context.lifetimes.webAbsolute))
      response.add("Set-Cookie", clear)
      return response
    case .accountExists, .otherEmail:
      return try form(request, status: .conflict, message: "You already have an account: sign in to accept.")
    case .invalid: return invalid
    }
  }

  /// Why `password` cannot be a new password, or nil: the one password policy.
  static func passwordProblem(_ password: String, email: String) -> String? {
    guard let address = EmailAddress(email) else { return "Choose a password of at least 12 characters." }
    return PasswordPolicy.problem(password, email: address)
  }

  /// base64url, the alphabet of every token.
  static func tokenByte(_ byte: UInt8) -> Bool {
    (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
      || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
  }
}
