import Accounts
import Deployment
import Edge
import Store

/// The browser's sign-in and account pages:
/// `GET/POST /sign-in`, `POST /sign-out`, `GET /account` and `POST /account/sessions/revoke`.
/// Every route is private (`no-store`) and pooled: they read the store and hash passwords.
/// Every POST needs a same-origin `Origin` (or `Referer`) and the CSRF token, and answers `303`.
public struct WebPages: Sendable {
  let context: ClientContext
  /// The deployment's display time zone (`timezone`), for times on the account page.
  let zone: ZoneRules

  /// Longest email (RFC 5321 path limit) and password accepted.
  static let maxEmailBytes = 254
  static let maxPasswordBytes = 1024

  /// The pages over `context`.
  public init(_ context: ClientContext) {
    self.context = context
    zone = ZoneRules.load(context.deployment.timezone)
  }

  public var routes: [Route] {
    [
      Route(.get, "/sign-in", cacheClass: .private, execution: .pooled) { request in
        guarded { try signInPage(request) }
      },
      Route(
        .post, "/sign-in", cacheClass: .private, execution: .background,
        fastPath: { request in
          let refused = context.limited(request, by: context.signInLimiter, refusal: tooMany)
          if refused != nil { Metrics.signIn(.web, .rateLimited) }
          return refused
        }
      ) { request in guarded { try signIn(request) } },
      Route(.post, "/sign-out", cacheClass: .private, execution: .pooled) { request in
        guarded { try signOut(request) }
      },
      Route(.get, "/account", cacheClass: .private, execution: .pooled) { request in
        guarded { try accountPage(request) }
      },
      Route(.get, "/account/delete", cacheClass: .private, execution: .pooled) { request in
        guarded { try deletionPage(request) }
      },
      Route(
        .post, "/account/delete", cacheClass: .private, execution: .background,
        fastPath: { request in context.limited(request, by: context.signInLimiter, refusal: tooMany) }
      ) { request in guarded { try delete(request) } },
      Route(.get, "/account/deleted", cacheClass: .private, fixed: deletedPage),
      Route(.post, "/account/sessions/revoke", cacheClass: .private, execution: .pooled) { request in
        guarded { try revoke(request) }
      },
      Route(.post, "/account/sessions/revoke-others", cacheClass: .private, execution: .pooled) { request in
        guarded { try revokeOthers(request) }
      },
    ] + recoveryRoutes + correctionRoutes
  }

  // MARK: sign in

  func signInPage(_ request: Request) throws(StoreError) -> Response {
    let store = try context.store()
    let back = Self.returnPath(request.query.flatMap { WebSecurity.fields(Array($0.utf8)) }?["return"])
    if try context.authenticator.signed(request, store) != nil {
      return Self.redirect(back ?? "/account")
    }
    return signInForm(request, status: .ok, message: nil, returnTo: back)
  }

  /// The form, with a CSRF token bound to the visitor's `__Host-bl_csrf` cookie (set now if absent);
  /// `email` is what the person typed last time (shown again, escaped), `returnTo` the same-origin
  /// path to go on to once signed in, `message` the alert (`failureMessage`, `lockedMessage`, ...).
  func signInForm(
    _ request: Request, status: Status, message: String?, email: String = "", returnTo: String? = nil,
    errors: FieldErrors = FieldErrors()
  ) -> Response {
    let (binding, headers) = Self.csrfBinding(request)
    var page = HTMLPage(title: "Sign in")
    page.html("<h1>Sign in</h1>\n")
    page.summary(errors)
    page.alert(message)
    if errors.isEmpty, message == nil,
      request.query.flatMap({ WebSecurity.fields(Array($0.utf8)) })?["signed-out"] == "1"
    {
      page.html(
        "<p class=\"notice\" role=\"status\">You have signed out of Band Licence in this browser.</p>\n")
    }
    page.html("<form class=\"form\" method=\"post\" action=\"/sign-in\">\n")
    page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: binding))\">\n")
    if let returnTo {
      page.html("<input type=\"hidden\" name=\"return\" value=\"\(HTMLText.escape(returnTo))\">\n")
    }
    page.html(Self.credentialFields(email: email, errors: errors))
    page.html("<button class=\"button\" type=\"submit\">Sign in</button>\n</form>\n")
    page.html("<p><a href=\"/account/recover\">Forgot your password?</a></p>\n")
    return page.response(status, context: context, headers: headers)
  }

  func signIn(_ request: Request) throws(StoreError) -> Response {
    if let refusal = refusal(request, binding: WebSecurity.cookie(WebSecurity.csrfCookie, in: request)) {
      Metrics.signIn(.web, .refused)
      return refusal
    }
    let form = WebSecurity.form(request) ?? [:]
    let email = form["email"] ?? ""
    let password = form["password"] ?? ""
    let back = Self.returnPath(form["return"])
    // What the person typed is shown again only if it is an email address (never a password typed
    // into the wrong field, never control characters).
    let typed = Self.redisplayed(email)
    guard !email.isEmpty, !password.isEmpty, email.utf8.count <= Self.maxEmailBytes,
      password.utf8.count <= Self.maxPasswordBytes
    else {
      Metrics.signIn(.web, .refused)
      return signInForm(
        request, status: .badRequest, message: nil, email: typed, returnTo: back,
        errors: Self.missingCredentials(email: email, password: password))
    }
    let store = try context.store()
    let account: Account
    let upgradedHash: String?
    switch try context.authenticator.checkPassword(
      email: email, password: password, store: store, request: request)
    {
    case .passed(let found, let hash): (account, upgradedHash) = (found, hash)
    case .refused:
      Metrics.signIn(.web, .badCredentials)
      return signInForm(
        request, status: .badRequest, message: nil, email: typed, returnTo: back,
        errors: FieldErrors("email", Self.failureMessage))
    case .locked:
      Metrics.signIn(.web, .locked)
      return signInForm(
        request, status: .badRequest, message: nil, email: typed, returnTo: back,
        errors: FieldErrors("email", Self.lockedMessage))
    }
    let token = Secrets.token()
    _ = try store.signIn(
      accountID: account.id, token: token, replacing: Credential(request).token, upgradedHash: upgradedHash,
      lifetimes: context.lifetimes, browser: BrowserLabel.summary(userAgent: request.headers["user-agent"]),
      network: Self.network(request, context, store))
    Metrics.signIn(.web, .ok)
    var redirect = Self.redirect(
      back ?? "/",
      cookie: WebSecurity.setCookie(WebSecurity.sessionCookie, token, maxAge: context.lifetimes.webAbsolute))
    redirect.add("Set-Cookie", try context.authenticator.trustBrowser(account, request, store))
    return redirect
  }

  /// The signed-out visitor's CSRF binding: their `__Host-bl_csrf` cookie, or a new one (and the
  /// header that sets it).
  static func csrfBinding(_ request: Request) -> (String, [(name: String, value: String)]) {
    if let existing = WebSecurity.cookie(WebSecurity.csrfCookie, in: request) { return (existing, []) }
    let binding = Secrets.token()
    return (binding, [("Set-Cookie", WebSecurity.setCookie(WebSecurity.csrfCookie, binding, maxAge: 86400))])
  }

  /// The email and password inputs of every sign-in form, the email filled with `email` (escaped).
  /// `type=text` with `inputmode=email` and `autocomplete=username`, styled like the other fields:
  /// `type=email` would let each browser judge (and rewrite: trimmed, IDN domains punycoded)
  /// addresses before the server's one normalisation sees them, and block some real ones; the
  /// server refuses what is not an address with the same answer as a wrong password.
  static func credentialFields(email: String, errors: FieldErrors = FieldErrors()) -> String {
    HTMLPage.field(
      "email", label: "Email",
      attributes: "type=\"text\" inputmode=\"email\" autocomplete=\"username\" autocapitalize=\"none\" "
        + "spellcheck=\"false\" required maxlength=\"254\"", value: email, errors: errors)
      + HTMLPage.field(
        "password", label: "Password",
        attributes: "type=\"password\" autocomplete=\"current-password\" required",
        errors: errors)
  }

  /// The refusal of a sign-in form with an empty (or oversized) field: each field says what it needs.
  static func missingCredentials(email: String, password: String) -> FieldErrors {
    var errors = FieldErrors()
    if email.isEmpty || email.utf8.count > maxEmailBytes { errors.add("email", "Enter your email address.") }
    if password.isEmpty || password.utf8.count > maxPasswordBytes {
      errors.add("password", "Enter your password.")
    }
    return errors
  }

  /// The one sentence for every failed sign-in: it never says whether the email exists.
  static let failureMessage =
    "That email address and password do not match an account that can sign in. Check them and try again."

  /// The sentence while an email is locked after repeated failures: the same for every email,
  /// known or not, so that it tells nobody whether an account exists.
  static let lockedMessage = "Too many attempts: wait a few minutes and try again."

  /// What a form shows again of a typed email: its normalised form when it is an address at all,
  /// else nothing (people type passwords into the email field; that must never be shown back).
  static func redisplayed(_ typed: String) -> String { EmailAddress(typed)?.normalised ?? "" }

  /// `text` when it is a same-origin path to send a person to after sign-in, else nil: starts with
  /// one `/` (not `//` or `/\`, which browsers read as another host), printable ASCII only (no
  /// scheme can follow a leading `/`; no control characters, which browsers strip; no `\`).
  static func returnPath(_ text: String?) -> String? {
    guard let text, text.utf8.count <= 2048, text.hasPrefix("/") else { return nil }
    let bytes = Array(text.utf8)
    guard bytes.count == 1 || (bytes[1] != UInt8(ascii: "/") && bytes[1] != UInt8(ascii: "\\")),
      bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") })
    else { return nil }
    // RFC 3986 §3.3/§3.4: what is neither pchar, "/", "?" nor a percent-escape is escaped, so the
    // `Location` field is a valid URI reference (`"`, `<`, `>`, `{`, `|`, ...).
    let allowed = Set("-._~!$&'()*+,;=:@/?%#".utf8)
    var out = ""
    for byte in bytes {
      let alphanumeric =
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
      if alphanumeric || allowed.contains(byte) {
        out.unicodeScalars.append(Unicode.Scalar(byte))
      } else {
        out += "%" + String(byte, radix: 16, uppercase: true)
      }
    }
    return out
  }

  // MARK: sign out, account, revoke

  func signOut(_ request: Request) throws(StoreError) -> Response {
    let store = try context.store()
    guard let signed = try context.authenticator.signed(request, store) else {
      if let refusal = refusal(request, binding: nil, signedOut: true) { return refusal }
      return Self.redirect(
        "/sign-in", cookie: WebSecurity.setCookie(WebSecurity.sessionCookie, "", maxAge: 0))
    }
    if let refusal = refusal(request, binding: signed.token) { return refusal }
    try store.revokeSession(id: signed.session.id, reason: "signed_out", actor: signed.account.id)
    // A form may ask to go on somewhere (the invitation page's "Sign out and continue"); else the
    // sign-in page says that this browser is signed out.
    let next = Self.returnPath(WebSecurity.form(request)?["return"]) ?? "/sign-in?signed-out=1"
    return Self.redirect(next, cookie: WebSecurity.setCookie(WebSecurity.sessionCookie, "", maxAge: 0))
  }

  /// `/account`, with `message` as an alert, `errors` by the fields of a refused correction (what
  /// was typed in its non-secret fields shown again) or, after a correction, its notice.
  func accountPage(
    _ request: Request, status: Status = .ok, message: String? = nil, errors: FieldErrors = FieldErrors()
  ) throws(StoreError) -> Response {
    let store = try context.store()
    guard let signed = try context.authenticator.signed(request, store) else {
      return Self.redirect("/sign-in?return=%2Faccount")
    }
    let account = signed.account
    let csrf = WebSecurity.csrfToken(binding: signed.token)
    var page = HTMLPage(title: "Your account")
    page.html("<h1>Your account</h1>\n")
    page.summary(errors)
    page.alert(message)
    let changed = request.query.flatMap { WebSecurity.fields(Array($0.utf8)) }?["changed"]
    if message == nil, errors.isEmpty, let notice = changed.flatMap({ Self.changeNotices[$0] }) {
      page.html("<p class=\"notice\" role=\"status\">\(notice)</p>\n")
    }
    page.html("<dl class=\"details\">\n<dt>Name</dt><dd>")
    page.text(account.displayName)
    page.html("</dd>\n<dt>Email</dt><dd>")
    page.text(account.email)
    page.html("</dd>\n</dl>\n<h2>Schools and roles</h2>\n")
    let memberships = try store.memberships(accountID: account.id)
    if memberships.isEmpty {
      page.html("<p>You are not a member of any school yet.</p>\n")
    } else {
      page.html(
        "<table>\n<thead><tr><th scope=\"col\">School</th><th scope=\"col\">Role</th></tr></thead>\n<tbody>\n"
      )
      for membership in memberships {
        page.html("<tr><td>")
        page.text(membership.school.name)
        page.html("</td><td>\(membership.role.label)</td></tr>\n")
      }
      page.html("</tbody>\n</table>\n")
      page.html(PeoplePages.peopleLinks(memberships))
    }
    try sessionsSection(&page, request, signed, csrf: csrf, store: store)
    page.html(try pendingEmailChange(account, csrf: csrf, store: store))
    let typed = errors.isEmpty ? [:] : Self.retyped(request, ["name", "new-email"])
    page.html(Self.correctionForms(account, csrf: csrf, errors: errors, typed: typed))
    page.html("<form method=\"post\" action=\"/sign-out\">\n")
    page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">\n")
    page.html("<button class=\"button\" type=\"submit\">Sign out</button>\n</form>\n")
    page.html(
      "<p><a href=\"/\">Back to Band Licence</a> · <a href=\"/account/delete\">Delete my account</a></p>\n")
    return page.response(status, context: context)
  }

  /// `/account`'s "Where you are signed in": each session told apart, with its sign-out button, and
  /// "Sign out of all other devices" when there are others.
  func sessionsSection(
    _ page: inout HTMLPage, _ request: Request, _ signed: Signed, csrf: String, store: ClientStore
  ) throws(StoreError) {
    page.html(
      "<h2>Where you are signed in</h2>\n<table class=\"rows\">\n<thead><tr><th scope=\"col\">Device</th>")
    page.html(
      "<th scope=\"col\">Signed in</th><th scope=\"col\">Last used</th><th scope=\"col\">Where</th>"
        + "<th scope=\"col\">Action</th></tr></thead>\n<tbody>\n")
    let sessions = try store.sessions(.accountID(signed.account.id))
    let here = Self.network(request, context, store)
    for session in sessions {
      let current = session.id == signed.session.id
      let name = Self.deviceName(session) + (current ? " (this browser)" : "")
      page.html("<tr><td>")
      page.text(name)
      page.html("</td><td data-label=\"Signed in\">\(time(session.createdAt))</td>")
      page.html("<td data-label=\"Last used\">\(time(session.lastSeenAt))</td><td data-label=\"Where\">")
      page.html(Self.whereLabel(session, here: here))
      page.html("</td><td>")
      page.html("<form method=\"post\" action=\"/account\">")
      page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">")
      page.html("<input type=\"hidden\" name=\"form\" value=\"sign-out-device\">")
      page.html("<input type=\"hidden\" name=\"session\" value=\"\(HTMLText.escape(session.id))\">")
      // One word for one action: a device is signed out, wherever it is listed.
      page.html("<button class=\"button danger small\" type=\"submit\" aria-label=\"Sign out: ")
      page.text(name)
      page.html("\">Sign out</button></form>")
      page.html("</td></tr>\n")
    }
    page.html("</tbody>\n</table>\n<p class=\"zone\">Times are in ")
    page.text(zone.name)
    page.html(" time.</p>\n")
    if sessions.count > 1 {
      page.html("<form method=\"post\" action=\"/account\">\n")
      page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">\n")
      page.html("<input type=\"hidden\" name=\"form\" value=\"sign-out-others\">\n")
      page.html(
        "<button class=\"button danger\" type=\"submit\">Sign out of all other devices</button>\n</form>\n")
    }
  }

  func revoke(_ request: Request) throws(StoreError) -> Response {
    try signedForm(request) { signed, store throws(StoreError) in
      let id = WebSecurity.form(request)?["session"] ?? ""
      guard try store.revokeOwnSession(id: id, accountID: signed.account.id, reason: "revoked_by_owner")
      else {
        return try accountPage(
          request, status: .notFound,
          message: "That device is no longer signed in; it may have ended already.")
      }
      if id == signed.session.id {
        return Self.redirect(
          "/sign-in?signed-out=1", cookie: WebSecurity.setCookie(WebSecurity.sessionCookie, "", maxAge: 0))
      }
      return Self.redirect("/account?changed=session")
    }
  }

  /// `POST /account/sessions/revoke-others`: every session of the account but this browser's ends.
  func revokeOthers(_ request: Request) throws(StoreError) -> Response {
    try signedForm(request) { signed, store throws(StoreError) in
      try store.revokeOtherSessions(
        accountID: signed.account.id, keeping: signed.session.id,
        keepingDevice: WebSecurity.cookie(TrustedDevice.cookie, in: request), reason: "revoked_by_owner")
      return Self.redirect("/account?changed=others")
    }
  }

  // MARK: deletion

  func deletionPage(_ request: Request, status: Status = .ok, message: String? = nil) throws(StoreError)
    -> Response
  {
    let store = try context.store()
    guard let signed = try context.authenticator.signed(request, store) else {
      return Self.redirect("/sign-in?return=%2Faccount%2Fdelete")
    }
    var page = HTMLPage(title: "Delete your account")
    page.html("<h1>Delete your account</h1>\n")
    page.summary(message.map { FieldErrors("password", $0) } ?? FieldErrors())
    page.html("<p>Deleting your account signs you out everywhere at once and removes you from every school. ")
    page.html("Your name and email address are erased after the retention period; records of what happened ")
    page.html("keep only an anonymous ID. This cannot be undone.</p>\n")
    page.html("<form class=\"form\" method=\"post\" action=\"/account/delete\">\n")
    page.html(
      "<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: signed.token))\">\n")
    page.html(
      HTMLPage.field(
        "password", label: "Your password, to confirm",
        attributes: "type=\"password\" autocomplete=\"current-password\" required",
        errors: message.map { FieldErrors("password", $0) } ?? FieldErrors()))
    page.html("<button class=\"button danger\" type=\"submit\">Delete my account</button>\n</form>\n")
    page.html("<p><a href=\"/account\">Keep my account</a></p>\n")
    return page.response(status, context: context)
  }

  func delete(_ request: Request) throws(StoreError) -> Response {
    try signedForm(request) { signed, store throws(StoreError) in
      let password = WebSecurity.form(request)?["password"] ?? ""
      guard !password.isEmpty, password.utf8.count <= Self.maxPasswordBytes else {
        return try deletionPage(request, status: .badRequest, message: "Enter your password.")
      }
      switch try context.authenticator.checkPassword(
        email: signed.account.email, password: password, store: store, request: request)
      {
      case .passed: break
      case .refused:
        return try deletionPage(
          request, status: .badRequest, message: "That password is not right. Try again.")
      case .locked: return try deletionPage(request, status: .badRequest, message: Self.lockedMessage)
      }
      let sole = try store.requestDeletion(accountID: signed.account.id)
      guard sole.isEmpty else { return try soleAdministratorPage(request, sole) }
      return Self.redirect(
        "/account/deleted", cookie: WebSecurity.setCookie(WebSecurity.sessionCookie, "", maxAge: 0))
    }
  }

  /// 409: the account is the only administrator of `schools`, so it cannot be deleted yet; the page
  /// says to hand the role over first, with a link to each school's People page.
  func soleAdministratorPage(_ request: Request, _ schools: [School]) throws(StoreError) -> Response {
    var page = HTMLPage(title: "Hand over your schools first")
    page.html("<h1>Hand over your schools first</h1>\n")
    page.html("<p class=\"alert\" role=\"alert\">You are the only administrator of ")
    page.html(schools.map { "<strong>" + HTMLText.escape($0.name) + "</strong>" }.joined(separator: ", "))
    page.html(". A school needs at least one administrator, so your account has not been deleted.</p>\n")
    page.html(
      "<p>Make someone else an administrator on the People page, then delete your account.</p>\n<ul>\n")
    for school in schools {
      page.html("<li><a href=\"/schools/\(HTMLText.escape(school.id))/people\">People at ")
      page.text(school.name)
      page.html("</a></li>\n")
    }
    page.html("</ul>\n<p><a href=\"/account\">Keep my account</a></p>\n")
    return page.response(Status(409, "Conflict"), context: context)
  }

  var deletedPage: Response {
    var page = HTMLPage(title: "Account deleted")
    page.html("<h1>Your account has been deleted</h1>\n<p>You have been signed out everywhere. ")
    page.html("Thank you for using Band Licence.</p>\n<p><a href=\"/\">Back to the start page</a></p>\n")
    return page.response(.ok, context: context)
  }

  // MARK: helpers

  /// The non-secret `fields` of a refused form, to fill it again: bounded, no control characters.
  static func retyped(_ request: Request, _ fields: [String]) -> [String: String] {
    guard let form = WebSecurity.form(request) else { return [:] }
    var out: [String: String] = [:]
    for field in fields {
      guard let value = form[field], value.utf8.count <= 512,
        !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
      else { continue }
      out[field] = value
    }
    return out
  }

  /// The 403/415 for a POST that is not provably from our own page (`ClientContext.formRefusal`).
  func refusal(_ request: Request, binding: String?, signedOut: Bool = false) -> Response? {
    context.formRefusal(request, binding: binding, signedOut: signedOut)
  }

  /// The page for an address over its sign-in limit (sent from the loop, before any password work).
  func tooMany(_ wait: Int) -> Response { context.tooManySignIns(wait) }

  func guarded(_ body: () throws -> Response) -> Response { context.guardedPage(body) }

  /// `<time>` of `instant` in the deployment's zone, labelled with the zone's abbreviation.
  func time(_ instant: Int) -> String {
    "<time datetime=\"\(Timestamp.iso8601(instant))\">\(HTMLText.escape(zone.readable(instant)))</time>"
  }

  static func redirect(_ location: String, cookie: String? = nil) -> Response {
    var response = Response(status: .seeOther, headers: [("Location", location)] + HTMLPage.securityHeaders)
    if let cookie { response.add("Set-Cookie", cookie) }
    return response
  }

  /// The network hint of the request's client address (`ClientStore.networkHint`).
  static func network(_ request: Request, _ context: ClientContext, _ store: ClientStore) -> String? {
    context.network(request, store)
  }

  /// Where a session was last used, as roughly as the account page says it: from the network this
  /// request comes from, or another one (never an address). Kept when the session is marked seen
  /// (at most once a minute), else where it was signed in.
  static func whereLabel(_ session: SessionRecord, here: String?) -> String {
    guard let network = session.network else { return "Not recorded" }
    return network == here ? "Last used from this network" : "Last used from another network"
  }

  /// How the account page names a session: the app and its version, or the browser and system
  /// the store kept for a web session (`browser`, see `BrowserLabel`), else "Web browser".
  static func deviceName(_ session: SessionRecord) -> String {
    guard session.kind == .native else {
      guard let label = session.browser, !label.isEmpty else { return "Web browser" }
      return label
    }
    let platform =
      session.platform == "ios" ? "iPhone or iPad app" : session.platform == "android" ? "Android app" : "App"
    return session.appVersion.map { "\(platform) \($0)" } ?? platform
  }
}
