import Accounts
import Deployment
import Edge
import Store

/// Where a single-use link lands: `GET path?token=..` checks the link and moves its
/// token out of the URL at once — a `303` to `path` that leaves it in an HttpOnly cookie — so
/// that the address bar, the history and every later request's `Referer` never hold it. The form
/// at `path` then posts with the cookie, and its CSRF token is bound to the link's token.
///
/// Why a cookie and a redirect rather than a page whose form posts the token: the page at the
/// token's URL must send no referrer, and a form on a `no-referrer` page posts with
/// `Origin: null` (Fetch §3.1), which the same-origin check refuses; and that page would leave the
/// token in the address bar and history until the person submits. The cookie is `__Host-` (so no
/// sibling host can plant one; the prefix requires `Path=/`), lives 15 minutes at most, and is
/// `SameSite=Lax`: a link opened from a webmail site is a cross-site navigation whose redirect a
/// `Strict` cookie would not follow, and `Lax` already keeps it off every cross-site POST.
struct LinkFlow: Sendable {
  let purpose: TokenPurpose
  let cookie: String
  /// The page the link opens.
  var path: String { purpose.path }

  /// `/account/reset`: a recovery link.
  static let reset = LinkFlow(purpose: .recovery, cookie: "__Host-bl_reset")
  /// `/account/set-password`: an operator made the account and mailed this link.
  static let setPassword = LinkFlow(
    purpose: .setPassword, cookie: "__Host-bl_set_password")
  /// `/account/email/confirm`: a link to a new address.
  static let emailChange = LinkFlow(
    purpose: .emailChange, cookie: "__Host-bl_email_change")
  /// `/account/email/restore`: the old address's way back after an email change.
  static let emailRestore = LinkFlow(
    purpose: .emailRevert, cookie: "__Host-bl_email_restore")

  /// The longest the cookie lives, in seconds.
  static let cookieLifetime = 15 * 60

  /// The link's token in the request's query, if it has one of a sane length.
  static func queryToken(_ request: Request) -> String? {
    guard let token = request.query.flatMap({ WebSecurity.fields(Array($0.utf8)) })?["token"],
      !token.isEmpty, token.utf8.count <= 128
    else { return nil }
    return token
  }

  /// The link's token in this flow's cookie.
  func cookieToken(_ request: Request) -> String? {
    guard let token = WebSecurity.cookie(cookie, in: request), token.utf8.count <= 128 else { return nil }
    return token
  }

  /// `Set-Cookie` for `token` (nil: deletes the cookie).
  func setCookie(_ token: String?, lifetime: Int = LinkFlow.cookieLifetime) -> String {
    WebSecurity.setCookie(cookie, token ?? "", maxAge: token == nil ? 0 : lifetime)
  }
}

extension WebPages {
  var recoveryRoutes: [Route] {
    let limited: @Sendable (Request) -> Response? = { request in
      context.limited(request, by: context.signInLimiter, refusal: tooMany)
    }
    return [
      Route(.get, "/account/recover", cacheClass: .private, execution: .pooled) { request in
        recoverForm(request, status: .ok)
      },
      Route(.post, "/account/recover", cacheClass: .private, execution: .pooled, fastPath: limited) {
        request in guarded { try recover(request) }
      },
      Route(.get, "/account/recover/sent", cacheClass: .private, fixed: recoverySentPage),
      Route(.get, LinkFlow.reset.path, cacheClass: .private, execution: .pooled) { request in
        guarded { try passwordLinkPage(request, .reset) }
      },
      Route(.post, LinkFlow.reset.path, cacheClass: .private, execution: .background, fastPath: limited) {
        request in guarded { try setPasswordByLink(request, .reset) }
      },
      Route(.get, LinkFlow.reset.path + "/done", cacheClass: .private, fixed: passwordDonePage(.reset)),
      Route(.get, LinkFlow.setPassword.path, cacheClass: .private, execution: .pooled) { request in
        guarded { try passwordLinkPage(request, .setPassword) }
      },
      Route(
        .post, LinkFlow.setPassword.path, cacheClass: .private, execution: .background, fastPath: limited
      ) { request in guarded { try setPasswordByLink(request, .setPassword) } },
      Route(
        .get, LinkFlow.setPassword.path + "/done", cacheClass: .private, fixed: passwordDonePage(.setPassword)
      ),
    ]
  }

  // MARK: asking for a link

  func recoverForm(
    _ request: Request, status: Status, errors: FieldErrors = FieldErrors(), email: String = ""
  ) -> Response {
    let (binding, headers) = Self.csrfBinding(request)
    var page = HTMLPage(title: "Forgot your password?")
    page.html("<h1>Forgot your password?</h1>\n")
    page.summary(errors)
    page.html("<p>Enter the email address you sign in with. If it belongs to an account, we will send ")
    page.html("it a link to choose a new password. The link works once, for 30 minutes.</p>\n")
    page.html("<form class=\"form\" method=\"post\" action=\"/account/recover\">\n")
    page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: binding))\">\n")
    page.html(
      HTMLPage.field(
        "email", label: "Email",
        attributes: "type=\"text\" inputmode=\"email\" autocomplete=\"username\" autocapitalize=\"none\" "
          + "spellcheck=\"false\" required maxlength=\"254\"", value: email, errors: errors))
    page.html("<button class=\"button\" type=\"submit\">Send me a link</button>\n</form>\n")
    page.html("<p><a href=\"/sign-in\">Back to sign in</a></p>\n")
    return page.response(status, context: context, headers: headers)
  }

  /// `POST /account/recover`: the same `303` whether or not the address is an account's, over its
  /// limit or not; the store does the same transaction either way (`requestRecovery`).
  func recover(_ request: Request) throws(StoreError) -> Response {
    if let refusal = refusal(request, binding: WebSecurity.cookie(WebSecurity.csrfCookie, in: request)) {
      return refusal
    }
    let typed = WebSecurity.form(request)?["email"] ?? ""
    guard typed.utf8.count <= Self.maxEmailBytes, let email = EmailAddress(typed) else {
      return recoverForm(
        request, status: .badRequest,
        errors: FieldErrors("email", "Enter the email address you sign in with."),
        email: Self.retyped(request, ["email"])["email"] ?? "")
    }
    let store = try context.store()
    _ = try store.requestRecovery(email: email, host: WebSecurity.host(of: context.deployment.origin)) {
      account, token in
      MailTemplates.message(
        kind: "recovery", to: email, name: account.displayName, subject: "Choose a new Band Licence password",
        paragraphs: [
          "Someone asked to recover the Band Licence account for this address. "
            + "Follow the link to choose a new password. It works once, for the next 30 minutes."
        ],
        link: ("Choose a new password", context.link(LinkFlow.reset.path + "?token=" + token)),
        reason:
          "You got this email because someone asked for it on the Band Licence sign-in page. "
          + "If it was not you, ignore it: your password stays as it is.")
    }
    return Self.redirect("/account/recover/sent")
  }

  var recoverySentPage: Response {
    var page = HTMLPage(title: "Check your email")
    page.html("<h1>Check your email</h1>\n<p>If an account uses that address, we have sent it a link to ")
    page.html("choose a new password. The link works once, for 30 minutes.</p>\n")
    page.html("<p>Nothing arrived after a few minutes? Check your spam folder, or ")
    page.html("<a href=\"/account/recover\">ask for another link</a>.</p>\n")
    page.html("<p><a href=\"/sign-in\">Back to sign in</a></p>\n")
    return page.response(.ok, context: context)
  }

  // MARK: following a link

  /// `GET` of a link's path: with `?token=`, checks the link and moves the token into the flow's
  /// cookie (`LinkFlow`); without, the form for the token in the cookie.
  func passwordLinkPage(_ request: Request, _ flow: LinkFlow) throws(StoreError) -> Response {
    let store = try context.store()
    if let landed = try land(request, flow, store) { return landed }
    guard let token = flow.cookieToken(request),
      let account = try store.accountForLink(token, purpose: flow.purpose)
    else { return linkExpired(flow) }
    return passwordForm(flow, token: token, email: account.email, status: .ok)
  }

  /// The answer to `GET path?token=..`: a `303` to the bare path with the token in the flow's
  /// cookie, or the expired page; nil when the URL has no token. No referrer leaves this page.
  func land(_ request: Request, _ flow: LinkFlow, _ store: ClientStore) throws(StoreError) -> Response? {
    guard request.query != nil else { return nil }
    guard let token = LinkFlow.queryToken(request),
      let record = try store.peekToken(token, purpose: flow.purpose)
    else { return linkExpired(flow) }
    let lifetime = max(1, min(LinkFlow.cookieLifetime, record.expiresAt - context.clock()))
    return Response(
      status: .seeOther,
      headers: [("Location", flow.path), ("Set-Cookie", flow.setCookie(token, lifetime: lifetime))]
        + HTMLPage.headers(referrerPolicy: "no-referrer"))
  }

  func passwordForm(
    _ flow: LinkFlow, token: String, email: String, status: Status, errors: FieldErrors = FieldErrors()
  ) -> Response {
    let first = flow.purpose == .setPassword
    var page = HTMLPage(title: first ? "Choose your password" : "Choose a new password")
    page.html(first ? "<h1>Choose your password</h1>\n" : "<h1>Choose a new password</h1>\n")
    page.summary(errors)
    page.html("<form class=\"form\" method=\"post\" action=\"\(flow.path)\">\n")
    page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: token))\">\n")
    page.html("<label for=\"email\">Email</label>\n")
    page.html("<input id=\"email\" name=\"email\" type=\"text\" autocomplete=\"username\" readonly value=\"")
    page.text(email)
    page.html("\">\n")
    page.html(Self.newPasswordField(label: first ? "Password" : "New password", errors: errors))
    page.html("<button class=\"button\" type=\"submit\">")
    page.html(first ? "Set my password" : "Change my password")
    page.html("</button>\n</form>\n")
    return page.response(status, context: context)
  }

  /// A new-password input with the policy's hint (and its refusal, if `errors` has one).
  static func newPasswordField(label: String, id: String = "password", errors: FieldErrors = FieldErrors())
    -> String
  {
    HTMLPage.field(
      id, label: label,
      attributes: "type=\"password\" autocomplete=\"new-password\" required "
        + "minlength=\"\(PasswordPolicy.minimumCharacters)\"",
      hint: "At least \(PasswordPolicy.minimumCharacters) characters. "
        + "A short phrase of a few words is easy to remember and hard to guess.", errors: errors)
  }

  /// `POST` of a link's path: the new password, checked against the policy, set in one
  /// transaction with everything a reset implies (`ClientStore.setPassword(viaLink:)`).
  func setPasswordByLink(_ request: Request, _ flow: LinkFlow) throws(StoreError) -> Response {
    let token = flow.cookieToken(request)
    if let refusal = refusal(request, binding: token) { return refusal }
    let store = try context.store()
    guard let token, let account = try store.accountForLink(token, purpose: flow.purpose),
      let email = EmailAddress(account.email)
    else { return linkExpired(flow) }
    let password = WebSecurity.form(request)?["password"] ?? ""
    if let problem = PasswordPolicy.problem(password, email: email) {
      return passwordForm(
        flow, token: token, email: account.email, status: .badRequest,
        errors: FieldErrors("password", problem))
    }
    let hash = context.hasher.hash(password)
    let outcome = try store.setPassword(
      viaLink: token, purpose: flow.purpose, hash: hash, host: WebSecurity.host(of: context.deployment.origin)
    ) { account in passwordChangedMail(account, email: email, everywhere: true) }
    guard case .done = outcome else { return linkExpired(flow) }
    var response = Self.redirect(
      flow.path + "/done", cookie: WebSecurity.setCookie(WebSecurity.sessionCookie, "", maxAge: 0))
    response.add("Set-Cookie", flow.setCookie(nil))
    return response
  }

  /// The mail that tells an account its password changed (`everywhere`: every session ended, else
  /// every other one).
  func passwordChangedMail(_ account: Account, email: EmailAddress, everywhere: Bool) -> MailMessage {
    MailTemplates.message(
      kind: "password_changed", to: email, name: account.displayName,
      subject: "Your Band Licence password was changed",
      paragraphs: [
        "The password of your Band Licence account has just been changed, and "
          + (everywhere ? "every device" : "every other device") + " signed in to it has been signed out.",
        "If that was you, there is nothing more to do. If it was not, choose a new password now with "
          + "\u{201C}Forgot your password?\u{201D} on the sign-in page, and tell your school\u{2019}s administrator.",
      ],
      link: ("Sign in", context.link("/sign-in")),
      reason: "You got this email because the password of the Band Licence account for this address changed.")
  }

  func linkExpired(_ flow: LinkFlow) -> Response {
    let (message, next): (String, (String, String)) =
      switch flow.purpose {
      case .recovery:
        (
          "This link has expired or has been used already. Ask for a new one: links work once, for 30 minutes.",
          ("/account/recover", "Ask for a new link")
        )
      case .setPassword:
        (
          "This link has expired or has been used already. Ask the person who made your account to send a new one, "
            + "or use \u{201C}Forgot your password?\u{201D} on the sign-in page.",
          ("/account/recover", "Ask for a new link")
        )
      case .emailChange:
        (
          "This link has expired or has been used already. Change your email address again from your account page.",
          ("/account", "Go to your account")
        )
      case .emailRevert:
        (
          "This link has expired or has been used already. If you cannot sign in, use "
            + "\u{201C}Forgot your password?\u{201D} on the sign-in page, or ask your school\u{2019}s administrator.",
          ("/account/recover", "Recover your account")
        )
      }
    var page = HTMLPage.problemPage("Link expired", message, next: next).response(
      Status(410, "Gone"), context: context, referrerPolicy: "no-referrer")
    page.add("Set-Cookie", flow.setCookie(nil))
    return page
  }

  func passwordDonePage(_ flow: LinkFlow) -> Response {
    let first = flow.purpose == .setPassword
    var page = HTMLPage(title: first ? "Password set" : "Password changed")
    page.html(first ? "<h1>Your password is set</h1>\n" : "<h1>Your password has been changed</h1>\n")
    page.html(
      first
        ? "<p>Sign in with your email address and your new password.</p>\n"
        : "<p>You have been signed out everywhere. Sign in with your new password.</p>\n")
    page.html("<p><a class=\"button\" href=\"/sign-in\">Sign in</a></p>\n")
    return page.response(.ok, context: context)
  }
}
