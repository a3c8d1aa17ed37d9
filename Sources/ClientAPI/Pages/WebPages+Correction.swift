import Accounts
import Deployment
import Edge
import Store

/// Corrections on `/account`: the display name, the password (the current
/// one required, every other session ends) and the email (a link to the new address confirms it
/// from a signed-in session of the account; the old address is told when it is asked for and when
/// it takes effect, with a way back; nothing changes until the link is followed).
extension WebPages {
  var correctionRoutes: [Route] {
    let limited: @Sendable (Request) -> Response? = { request in
      context.limited(request, by: context.signInLimiter, refusal: tooMany)
    }
    return [
      // The forms on /account post to /account itself (`form` names which), so that a refusal is
      // shown at the page's own address: reloading it never re-sends a form from a stale URL.
      // Only the forms that check a password spend the sign-in allowance.
      Route(
        .post, "/account", cacheClass: .private, execution: .background,
        fastPath: { request in
          let form = WebSecurity.form(request)?["form"]
          return form == "password" || form == "email" ? limited(request) : nil
        }
      ) { request in
        guarded {
          switch WebSecurity.form(request)?["form"] {
          case "name": try rename(request)
          case "password": try changePassword(request)
          case "email": try changeEmail(request)
          case "sign-out-device": try revoke(request)
          case "sign-out-others": try revokeOthers(request)
          default: try accountPage(request, status: .badRequest)
          }
        }
      },
      Route(.post, "/account/name", cacheClass: .private, execution: .pooled) { request in
        guarded { try rename(request) }
      },
      Route(.post, "/account/password", cacheClass: .private, execution: .background, fastPath: limited) {
        request in guarded { try changePassword(request) }
      },
      Route(.post, "/account/email", cacheClass: .private, execution: .background, fastPath: limited) {
        request in guarded { try changeEmail(request) }
      },
      Route(.get, LinkFlow.emailChange.path, cacheClass: .private, execution: .pooled) { request in
        guarded { try emailConfirmPage(request) }
      },
      Route(.post, LinkFlow.emailChange.path, cacheClass: .private, execution: .pooled) { request in
        guarded { try confirmEmail(request) }
      },
      Route(.get, "/account/email/confirmed", cacheClass: .private, fixed: emailConfirmedPage),
      Route(.post, "/account/email/cancel", cacheClass: .private, execution: .pooled) { request in
        guarded { try cancelEmailChange(request) }
      },
      Route(.get, LinkFlow.emailRestore.path, cacheClass: .private, execution: .pooled) { request in
        guarded { try emailRestorePage(request) }
      },
      Route(.post, LinkFlow.emailRestore.path, cacheClass: .private, execution: .pooled, fastPath: limited) {
        request in guarded { try restoreEmail(request) }
      },
    ]
  }

  /// What `/account?changed=..` says after a correction.
  static let changeNotices: [String: String] = [
    "name": "Your name has been changed.",
    "password": "Your password has been changed, and every other device has been signed out.",
    "email": "We have sent a link to your new address. Your email address changes when you follow it.",
    "email-cancelled":
      "The change of your email address has been cancelled; the link sent for it no longer works.",
    "session": "That device has been signed out.",
    "others": "Every other device has been signed out.",
  ]

  /// Answers a correction form: `handle` with the signed-in person behind it and the store, or the
  /// answer to send instead (signed out: to sign in; a foreign or expired form: the refusal).
  func signedForm(
    _ request: Request, _ handle: (Signed, ClientStore) throws(StoreError) -> Response
  ) throws(StoreError) -> Response {
    let store = try context.store()
    guard let signed = try context.authenticator.signed(request, store) else {
      return refusal(request, binding: nil, signedOut: true) ?? Self.redirect("/sign-in")
    }
    if let refusal = refusal(request, binding: signed.token) { return refusal }
    return try handle(signed, store)
  }

  func rename(_ request: Request) throws(StoreError) -> Response {
    try signedForm(request) { signed, store throws(StoreError) in
      guard let name = AccountRules.displayName(WebSecurity.form(request)?["name"] ?? "") else {
        return try refuse(request, "name", AccountRules.nameProblem)
      }
      try store.rename(accountID: signed.account.id, to: name)
      return Self.redirect("/account?changed=name")
    }
  }

  func changePassword(_ request: Request) throws(StoreError) -> Response {
    try signedForm(request) { signed, store throws(StoreError) in
      let form = WebSecurity.form(request) ?? [:]
      let current = form["current-password"] ?? ""
      let new = form["new-password"] ?? ""
      guard let email = EmailAddress(signed.account.email) else {
        return try accountPage(
          request, status: .badRequest, message: "Your account cannot change its password.")
      }
      guard !current.isEmpty, current.utf8.count <= Self.maxPasswordBytes else {
        return try refuse(request, "current-password", "Enter your current password.")
      }
      // The policy first: a refused new password costs no Argon2id and counts no failure.
      if let problem = PasswordPolicy.problem(new, email: email) {
        return try refuse(request, "new-password", problem)
      }
      if let refusal = try wrongCurrentPassword(request, signed, current, store) { return refusal }
      try store.changePassword(
        accountID: signed.account.id, keeping: signed.session.id, hash: context.hasher.hash(new),
        host: WebSecurity.host(of: context.deployment.origin),
        mail: passwordChangedMail(signed.account, email: email, everywhere: false))
      return Self.redirect("/account?changed=password")
    }
  }

  /// The account page again when `current` is not the signed-in person's password (checked with
  /// the lockout, as at sign-in), else nil.
  func wrongCurrentPassword(
    _ request: Request, _ signed: Signed, _ current: String, _ store: ClientStore,
    field: String = "current-password"
  ) throws(StoreError) -> Response? {
    switch try context.authenticator.checkPassword(
      email: signed.account.email, password: current, store: store, request: request)
    {
    case .passed: return nil
    case .refused: return try refuse(request, field, "Your current password is not right. Try again.")
    case .locked: return try refuse(request, field, Self.lockedMessage)
    }
  }

  /// `/account` again (400) with `message` next to the input `field` of the form that was sent.
  func refuse(_ request: Request, _ field: String, _ message: String) throws(StoreError) -> Response {
    try accountPage(request, status: .badRequest, errors: FieldErrors(field, message))
  }

  func changeEmail(_ request: Request) throws(StoreError) -> Response {
    try signedForm(request) { signed, store throws(StoreError) in
      let form = WebSecurity.form(request) ?? [:]
      let typed = form["new-email"] ?? ""
      let current = form["email-password"] ?? ""
      guard typed.utf8.count <= Self.maxEmailBytes, let newEmail = EmailAddress(typed) else {
        return try refuse(request, "new-email", "Enter the new email address.")
      }
      guard newEmail.normalised != signed.account.email, let oldEmail = EmailAddress(signed.account.email)
      else {
        return try refuse(request, "new-email", "That is already your email address.")
      }
      guard !current.isEmpty, current.utf8.count <= Self.maxPasswordBytes else {
        return try refuse(request, "email-password", "Enter your current password.")
      }
      if let refusal = try wrongCurrentPassword(request, signed, current, store, field: "email-password") {
        return refusal
      }
      let account = signed.account
      // The same answer whether or not another account has the address: that account's
      // owner is told instead.
      try store.requestEmailChange(
        account: account, to: newEmail, host: WebSecurity.host(of: context.deployment.origin),
        confirm: { token in
          MailTemplates.message(
            kind: "email_change", to: newEmail, name: account.displayName,
            subject: "Confirm your new Band Licence email address",
            paragraphs: [
              "You asked to use this address for your Band Licence account. Follow the link to confirm it, "
                + "signed in to your account. It works once, for the next 24 hours; until then your account keeps "
                + "its old address."
            ],
            link: ("Confirm this address", context.link(LinkFlow.emailChange.path + "?token=" + token)),
            reason:
              "You got this email because someone signed in to Band Licence asked to use this address. "
              + "If it was not you, ignore it: nothing changes.")
        },
        inUse: MailTemplates.addressInUse(to: newEmail, link: context.link("/account/recover")),
        notice: MailTemplates.message(
          kind: "email_change_notice", to: oldEmail, name: account.displayName,
          subject: "Your Band Licence email address is changing",
          paragraphs: [
            "Someone signed in to your Band Licence account asked to change its email address to "
              + newEmail.normalised + ". It changes only when the link sent there is followed by someone "
              + "signed in to your account.",
            "If that was you, there is nothing more to do. If it was not, sign in, cancel the change on your "
              + "account page, and change your password: that signs out every other device.",
          ],
          link: ("Go to your account", context.link("/account")),
          reason: "You got this email because it is the address of this Band Licence account."))
      return Self.redirect("/account?changed=email")
    }
  }

  /// `POST /account/email/cancel`: the signed-in person withdraws their pending email change.
  func cancelEmailChange(_ request: Request) throws(StoreError) -> Response {
    try signedForm(request) { signed, store throws(StoreError) in
      _ = try store.cancelEmailChange(accountID: signed.account.id)
      return Self.redirect("/account?changed=email-cancelled")
    }
  }

  /// The pending email change on `/account`, with its cancel button (empty when there is none).
  func pendingEmailChange(_ account: Account, csrf: String, store: ClientStore) throws(StoreError) -> String {
    guard let pending = try store.pendingEmailChange(accountID: account.id) else { return "" }
    return
      "<div class=\"notice\" role=\"status\" id=\"pending-email\">\n<p>A change of your email address to <strong>"
      + HTMLText.escape(pending.email) + "</strong> is waiting for its link to be followed (until "
      + time(pending.expiresAt) + ").</p>\n"
      + "<form method=\"post\" action=\"/account/email/cancel\">\n"
      + "<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">\n"
      + "<button class=\"button\" type=\"submit\">Cancel this change</button>\n</form>\n</div>\n"
  }

  /// `GET /account/email/confirm`: with `?token=`, lands the link (`land`); else, to the account's
  /// own signed-in session, asks to confirm the address the cookie's link names; to anyone else,
  /// to sign in first (the link alone changes nothing).
  func emailConfirmPage(_ request: Request) throws(StoreError) -> Response {
    let flow = LinkFlow.emailChange
    let store = try context.store()
    if let landed = try land(request, flow, store) { return landed }
    guard let token = flow.cookieToken(request),
      let record = try store.peekToken(token, purpose: flow.purpose),
      let account = try store.account(id: record.accountID), !account.disabled
    else { return linkExpired(flow) }
    let signed = try context.authenticator.signed(request, store)
    guard let signed, signed.account.id == account.id else {
      var page = HTMLPage(title: "Sign in to confirm your new email address")
      page.html("<h1>Sign in to confirm your new email address</h1>\n")
      if let signed {
        page.html("<p>This link is for another account than the one you are signed in to (")
        page.text(signed.account.email)
        page.html("). Sign out, then sign in to the account whose address is changing.</p>\n")
        page.html("<form method=\"post\" action=\"/sign-out\">\n")
        page.html(
          "<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: signed.token))\">\n")
        page.html("<button class=\"button\" type=\"submit\">Sign out</button>\n</form>\n")
        return page.response(.forbidden, context: context)
      }
      page.html("<p>For your safety, a new address is confirmed only from your own account. Sign in with ")
      page.html("your current email address and password, and you will come back here.</p>\n")
      page.html(
        "<p><a class=\"button\" href=\"/sign-in?return=%2Faccount%2Femail%2Fconfirm\">Sign in</a></p>\n")
      return page.response(.ok, context: context)
    }
    return linkPage(flow, token: token, title: "Confirm your new email address", button: "Use this address") {
      page in
      page.html("<p>Use <strong>")
      page.text(record.email)
      page.html("</strong> for your Band Licence account instead of ")
      page.text(account.email)
      page.html("?</p>\n")
    }
  }

  func confirmEmail(_ request: Request) throws(StoreError) -> Response {
    let flow = LinkFlow.emailChange
    let token = flow.cookieToken(request)
    if let refusal = refusal(request, binding: token) { return refusal }
    guard let token else { return linkExpired(flow) }
    let store = try context.store()
    guard let signed = try context.authenticator.signed(request, store) else {
      return Self.redirect("/account/email/confirm")
    }
    let outcome = try store.confirmEmailChange(
      token, accountID: signed.account.id, host: WebSecurity.host(of: context.deployment.origin)
    ) { account, old, back in
      MailTemplates.message(
        kind: "email_changed", to: old, name: account.displayName,
        subject: "Your Band Licence email address was changed",
        paragraphs: [
          "The email address of your Band Licence account is no longer this one: it was changed just now. "
            + "Sign-in and mail now use the new address.",
          "If that was you, there is nothing more to do. If it was not, follow the link: it gives this address "
            + "its account back, signs out every device and lets you choose a new password. It works once, "
            + "for the next 7 days.",
        ],
        link: ("Take my account back", context.link(LinkFlow.emailRestore.path + "?token=" + back)),
        reason: "You got this email because this was the address of a Band Licence account until now.")
    }
    switch outcome {
    case .done: return Self.redirect("/account/email/confirmed", cookie: flow.setCookie(nil))
    case .expired: return linkExpired(flow)
    case .otherAccount: return Self.redirect("/account/email/confirm")
    case .addressTaken:
      return linkConflict(
        flow, "Address in use",
        "Another account started using that address meanwhile, so your email address has not changed.",
        next: ("/account", "Go to your account"))
    }
  }

  /// `GET /account/email/restore`: lands the old address's link, then asks before taking the
  /// account back (a mail client's link preview must not do it).
  func emailRestorePage(_ request: Request) throws(StoreError) -> Response {
    let flow = LinkFlow.emailRestore
    let store = try context.store()
    if let landed = try land(request, flow, store) { return landed }
    guard let token = flow.cookieToken(request),
      let record = try store.peekToken(token, purpose: flow.purpose)
    else { return linkExpired(flow) }
    return linkPage(flow, token: token, title: "Take your account back", button: "Take my account back") {
      page in
      page.html("<p>This makes <strong>")
      page.text(record.email)
      page.html(
        "</strong> the address of your Band Licence account again, signs out every device signed in to it, ")
      page.html("cancels every link sent for it, and asks you to choose a new password.</p>\n")
    }
  }

  /// `POST /account/email/restore`: the address is the account's again and its password nobody's;
  /// the person goes straight on to choose a new one (the reset form, its link in its cookie).
  func restoreEmail(_ request: Request) throws(StoreError) -> Response {
    let flow = LinkFlow.emailRestore
    let token = flow.cookieToken(request)
    if let refusal = refusal(request, binding: token) { return refusal }
    guard let token else { return linkExpired(flow) }
    let recovery: String
    switch try context.store().restoreEmail(token, unknownHash: context.services.decoyHash) {
    case .restored(_, let token): recovery = token
    case .expired: return linkExpired(flow)
    case .superseded:
      return linkConflict(
        flow, "Use the earlier link",
        "Your account's address was changed more than once. Use the link in the earliest message, sent to the "
          + "address the account had first.",
        next: ("/account/recover", "Recover your account"))
    case .addressTaken:
      return linkConflict(
        flow, "Address in use",
        "Another account uses this address now, so it cannot be given back. Ask your school\u{2019}s administrator.",
        next: ("/sign-in", "Go to sign in"))
    }
    // Signed out here too; the reset form holds the new recovery link in its own cookie.
    var response = Self.redirect(LinkFlow.reset.path, cookie: LinkFlow.reset.setCookie(recovery))
    response.add("Set-Cookie", flow.setCookie(nil))
    response.add("Set-Cookie", WebSecurity.setCookie(WebSecurity.sessionCookie, "", maxAge: 0))
    return response
  }

  /// A link's page (200): `title` as its heading, what `explain` writes, then the one-button form
  /// that posts to the flow's path, its CSRF token bound to the link's.
  func linkPage(
    _ flow: LinkFlow, token: String, title: String, button: String, explain: (inout HTMLPage) -> Void
  ) -> Response {
    var page = HTMLPage(title: title)
    page.heading(title)
    explain(&page)
    page.html("<form class=\"form\" method=\"post\" action=\"\(flow.path)\">\n")
    page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: token))\">\n")
    page.html("<button class=\"button\" type=\"submit\">\(button)</button>\n</form>\n")
    return page.response(.ok, context: context)
  }

  /// 409 for a link that cannot do what it says (its cookie cleared), with the way on.
  func linkConflict(_ flow: LinkFlow, _ title: String, _ message: String, next: (String, String)) -> Response
  {
    var page = HTMLPage.problem(Status(409, "Conflict"), title, message, context: context, next: next)
    page.add("Set-Cookie", flow.setCookie(nil))
    return page
  }

  var emailConfirmedPage: Response {
    var page = HTMLPage(title: "Email address changed")
    page.html("<h1>Your email address has been changed</h1>\n")
    page.html("<p>Sign in with your new address from now on.</p>\n")
    page.html("<p><a class=\"button\" href=\"/account\">Go to your account</a></p>\n")
    return page.response(.ok, context: context)
  }

  /// The correction forms on `/account`, each with `csrf`, posting to `/account` (`form` names
  /// which); `errors` and `typed` (the non-secret fields of a refused form) fill them again.
  static func correctionForms(
    _ account: Account, csrf: String, errors: FieldErrors = FieldErrors(), typed: [String: String] = [:]
  ) -> String {
    let hidden = "<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">\n"
    func form(_ name: String) -> String {
      "<form class=\"form\" method=\"post\" action=\"/account\">\n" + hidden
        + "<input type=\"hidden\" name=\"form\" value=\"\(name)\">\n"
    }
    let current = "type=\"password\" autocomplete=\"current-password\" required"
    return "<h2>Change your name</h2>\n" + form("name")
      + HTMLPage.field(
        "name", label: "Name", attributes: "type=\"text\" autocomplete=\"name\" required maxlength=\"100\"",
        value: typed["name"] ?? account.displayName, errors: errors)
      + "<button class=\"button\" type=\"submit\">Save name</button>\n</form>\n"
      + "<h2>Change your password</h2>\n" + form("password")
      + HTMLPage.field("current-password", label: "Current password", attributes: current, errors: errors)
      + newPasswordField(label: "New password", id: "new-password", errors: errors)
      + "<button class=\"button\" type=\"submit\">Change password</button>\n</form>\n"
      + "<h2>Change your email address</h2>\n"
      + "<p>We send a link to the new address; your address changes when you follow it.</p>\n"
      + form("email")
      + HTMLPage.field(
        "new-email", label: "New email address",
        attributes: "type=\"text\" inputmode=\"email\" autocomplete=\"email\" autocapitalize=\"none\" "
          + "spellcheck=\"false\" required maxlength=\"254\"", value: typed["new-email"], errors: errors)
      + HTMLPage.field("email-password", label: "Current password", attributes: current, errors: errors)
      + "<button class=\"button\" type=\"submit\">Send a confirmation link</button>\n</form>\n"
  }
}
