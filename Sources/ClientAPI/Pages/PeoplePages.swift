import Accounts
import Deployment
import Edge
import Store

/// A school's "People" page (`/schools/{schoolId}/people`), for its administrators: the members
/// with their roles (changed or removed here), the pending invitations (withdrawn here) and a form
/// to invite someone. Access goes through `SchoolAccess` as the API's does, and every change
/// writes the same audit event as the API's. Every route is private (`no-store`) and pooled; every
/// POST needs a same-origin `Origin` (or `Referer`) and the CSRF token, and answers `303`.
public struct PeoplePages: Sendable {
  let context: ClientContext
  /// The deployment's display time zone (`timezone`), for the invitations' times.
  let zone: ZoneRules

  /// The pages over `context`.
  public init(_ context: ClientContext) {
    self.context = context
    zone = ZoneRules.load(context.deployment.timezone)
  }

  public var routes: [Route] {
    [
      Route(.get, "/schools/:schoolId/people", cacheClass: .private, execution: .pooled) { request in
        context.guardedPage { try page(request) }
      },
      // Every form of the page posts to the page's own address (`action` names which), so that a
      // refusal is shown there and a reload never re-sends a form from another URL.
      Route(.post, "/schools/:schoolId/people", cacheClass: .private, execution: .pooled) { request in
        context.guardedPage {
          switch WebSecurity.form(request)?["action"] {
          case "role": try change(request, setRole)
          case "remove": try change(request, remove)
          case "invite": try change(request, invite)
          case "withdraw": try change(request, revoke)
          default:
            try change(request) { request, _, _, _ throws(StoreError) in
              try page(request, status: .badRequest)
            }
          }
        }
      },
      Route(.get, "/schools/:schoolId/people/remove", cacheClass: .private, execution: .pooled) { request in
        context.guardedPage { try confirmRemoval(request) }
      },
      Route(.post, "/schools/:schoolId/people/role", cacheClass: .private, execution: .pooled) { request in
        context.guardedPage { try change(request, setRole) }
      },
      Route(.post, "/schools/:schoolId/people/remove", cacheClass: .private, execution: .pooled) { request in
        context.guardedPage { try change(request, remove) }
      },
      Route(.post, "/schools/:schoolId/invitations", cacheClass: .private, execution: .pooled) { request in
        context.guardedPage { try change(request, invite) }
      },
      Route(.post, "/schools/:schoolId/invitations/revoke", cacheClass: .private, execution: .pooled) {
        request in
        context.guardedPage { try change(request, revoke) }
      },
    ]
  }

  /// The links to the People page of each school in `memberships` where the person is an
  /// administrator, as a paragraph of markup for `/account` (empty when there is none).
  public static func peopleLinks(_ memberships: [Membership]) -> String {
    let schools = memberships.filter { $0.role == .administrator }.map(\.school)
    guard !schools.isEmpty else { return "" }
    return "<p>Manage people: "
      + schools.map { school in
        "<a href=\"/schools/\(HTMLText.escape(school.id))/people\">People at \(HTMLText.escape(school.name))</a>"
      }.joined(separator: " · ") + "</p>\n"
  }

  // MARK: the page

  /// The sentences a change's redirect may ask the page to show (`?done=`): a fixed list, so that
  /// nothing from the URL is ever written on the page.
  static let notices: [String: String] = {
    var notices = [
      "invited": "Invitation sent.", "role": "Role changed.", "removed": "Removed from the school.",
      "revoked": "Invitation withdrawn.",
    ]
    for role in Role.allCases {
      notices["replaced-" + role.rawValue] =
        "Invitation sent. It replaces the earlier invitation to that address (as "
        + role.label.lowercased() + "), whose link no longer works."
    }
    return notices
  }()

  /// Answers a request to the school's people pages: `handle` with the signed-in administrator
  /// of the request's school, their membership and the store, or the answer to send instead.
  func administrator(
    _ request: Request, _ handle: (Signed, Membership, ClientStore) throws(StoreError) -> Response
  ) throws(StoreError) -> Response {
    let store = try context.store()
    let schoolID = request.parameters["schoolId"] ?? ""
    guard let signed = try context.authenticator.signed(request, store) else {
      return WebPages.redirect("/sign-in?return=" + Self.escapeQuery("/schools/\(schoolID)/people"))
    }
    switch try SchoolAccess.check(
      store, accountID: signed.account.id, schoolID: schoolID, need: .administrator)
    {
    case .notFound: return notFound
    case .forbidden: return forbidden
    case .granted(let membership): return try handle(signed, membership, store)
    }
  }

  /// The page; `message` as an alert, `errors` by the invite form's fields (what was typed in
  /// them shown again), `notice` as a status line.
  func page(
    _ request: Request, status: Status = .ok, message: String? = nil, notice: String? = nil,
    errors: FieldErrors = FieldErrors()
  ) throws(StoreError) -> Response {
    try administrator(request) { signed, membership, store throws(StoreError) in
      let school = membership.school
      let base = "/schools/\(HTMLText.escape(school.id))"
      let csrf = WebSecurity.csrfToken(binding: signed.token)
      let done = request.query.flatMap { WebSecurity.fields(Array($0.utf8)) }?["done"].flatMap {
        Self.notices[$0]
      }
      func form(_ action: String) -> String {
        "<form method=\"post\" action=\"\(base)/people\"><input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">"
          + "<input type=\"hidden\" name=\"action\" value=\"\(action)\">"
      }
      var page = HTMLPage(title: "People at \(school.name)")
      page.heading("People at \(school.name)")
      page.summary(errors)
      page.alert(message)
      if let note = notice ?? done {
        page.html("<p role=\"status\">")
        page.text(note)
        page.html("</p>\n")
      }
      page.html("<h2>Members</h2>\n<table class=\"rows\">\n<thead><tr><th scope=\"col\">Name</th>")
      page.html(
        "<th scope=\"col\">Email</th><th scope=\"col\">Role</th><th scope=\"col\">Action</th></tr></thead>\n")
      page.html("<tbody>\n")
      for (i, member) in try store.members(schoolID: school.id).enumerated() {
        let id = HTMLText.escape(member.accountID)
        page.html("<tr><td>")
        page.text(member.displayName)
        page.html("</td><td>")
        page.text(member.email)
        page.html("</td><td>" + form("role"))
        page.html("<input type=\"hidden\" name=\"account\" value=\"\(id)\">")
        page.html("<select id=\"role-\(i)\" name=\"role\" aria-label=\"Role of ")
        page.text(member.displayName)
        page.html("\">\(Self.roleOptions(selected: member.role))</select> ")
        page.html("<button class=\"button small\" type=\"submit\" aria-label=\"Change the role of ")
        page.text(member.displayName)
        page.html("\">Change</button></form></td><td>")
        // Removing asks first (`confirmRemoval`): this form only opens that page.
        page.html("<form method=\"get\" action=\"\(base)/people/remove\">")
        page.html("<input type=\"hidden\" name=\"account\" value=\"\(id)\">")
        page.html("<button class=\"button danger small\" type=\"submit\" aria-label=\"Remove ")
        page.text(member.displayName)
        page.html(" from the school\">Remove</button></form></td></tr>\n")
      }
      page.html("</tbody>\n</table>\n<h2>Invitations</h2>\n")
      try invitationsSection(&page, schoolID: school.id, store: store, form: form)
      inviteForm(&page, request, base: base, csrf: csrf, errors: errors)
      page.html("<p><a href=\"/account\">Back to your account</a></p>\n")
      return page.response(status, context: context)
    }
  }

  /// The People page's "Invite someone" form; after a refusal, what was typed and the chosen role.
  func inviteForm(_ page: inout HTMLPage, _ request: Request, base: String, csrf: String, errors: FieldErrors)
  {
    let typed = errors.isEmpty ? [:] : WebPages.retyped(request, ["email"])
    page.html("<h2>Invite someone</h2>\n")
    page.html("<form class=\"form\" method=\"post\" action=\"\(base)/people\">\n")
    page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">\n")
    page.html("<input type=\"hidden\" name=\"action\" value=\"invite\">\n")
    page.html(
      HTMLPage.field(
        "invite-email", name: "email", label: "Email",
        attributes: "type=\"text\" inputmode=\"email\" autocomplete=\"off\" autocapitalize=\"none\" "
          + "spellcheck=\"false\" required maxlength=\"254\"",
        value: typed["email"],
        hint:
          "Inviting an address that already has a waiting invitation replaces that invitation and its role.",
        errors: errors))
    let role = errors.isEmpty ? nil : WebSecurity.form(request)?["role"].flatMap(Role.init(rawValue:))
    page.html(
      HTMLPage.field(
        "invite-role", name: "role", label: "Role", attributes: "", errors: errors,
        options: Self.roleOptions(selected: role ?? .teacher)))
    page.html("<button class=\"button\" type=\"submit\">Send invitation</button>\n</form>\n")
  }

  /// The People page's invitations: waiting and expired ones (until withdrawn), each with its
  /// Withdraw button (`form` opens a change's form).
  func invitationsSection(
    _ page: inout HTMLPage, schoolID: String, store: ClientStore, form: (String) -> String
  ) throws(StoreError) {
    let listed = try store.listedInvitations(schoolID: schoolID)
    if listed.isEmpty {
      page.html("<p>No invitations are waiting.</p>\n")
    } else {
      let now = context.clock()
      page.html("<table class=\"rows\">\n<thead><tr><th scope=\"col\">Email</th><th scope=\"col\">Role</th>")
      page.html("<th scope=\"col\">Status</th><th scope=\"col\">Action</th></tr></thead>\n<tbody>\n")
      for invitation in listed {
        let expired = invitation.expiresAt <= now
        page.html("<tr><td>")
        page.text(invitation.email)
        page.html("</td><td>\(invitation.role.label)</td><td>")
        page.html(expired ? "<strong>Expired</strong> on " : "Waiting; the link works until ")
        page.html("<time datetime=\"\(Timestamp.iso8601(invitation.expiresAt))\">")
        page.text(zone.readable(invitation.expiresAt))
        page.html("</time></td><td>" + form("withdraw"))
        page.html("<input type=\"hidden\" name=\"invitation\" value=\"\(HTMLText.escape(invitation.id))\">")
        page.html(
          "<button class=\"button danger small\" type=\"submit\" aria-label=\"Withdraw the invitation to ")
        page.text(invitation.email)
        page.html("\">Withdraw</button></form></td></tr>\n")
      }
      page.html("</tbody>\n</table>\n<p class=\"zone\">Times are in ")
      page.text(zone.name)
      page.html(" time.</p>\n")
    }
  }

  /// `GET .../people/remove?account=`: names the person and asks before removing them.
  func confirmRemoval(_ request: Request) throws(StoreError) -> Response {
    try administrator(request) { signed, membership, store throws(StoreError) in
      let accountID = request.query.flatMap { WebSecurity.fields(Array($0.utf8)) }?["account"] ?? ""
      let school = membership.school
      guard let member = try store.members(schoolID: school.id).first(where: { $0.accountID == accountID })
      else {
        return HTMLPage.problem(
          .notFound, "Not a member", Self.noMember, context: context,
          next: ("/schools/\(school.id)/people", "Back to the people"))
      }
      let base = "/schools/\(HTMLText.escape(school.id))"
      var page = HTMLPage(title: "Remove \(member.displayName)?")
      page.html("<h1>Remove ")
      page.text(member.displayName)
      page.html(" from ")
      page.text(school.name)
      page.html("?</h1>\n<p>")
      page.text(member.displayName)
      page.html(" (")
      page.text(member.email)
      page.html(") loses access to ")
      page.text(school.name)
      page.html(
        " at once, on every device. We will email them to say so. You can invite them again later.</p>\n")
      page.html("<form method=\"post\" action=\"\(base)/people\">\n")
      page.html(
        "<input type=\"hidden\" name=\"csrf\" value=\"\(WebSecurity.csrfToken(binding: signed.token))\">\n")
      page.html("<input type=\"hidden\" name=\"action\" value=\"remove\">\n")
      page.html("<input type=\"hidden\" name=\"account\" value=\"\(HTMLText.escape(member.accountID))\">\n")
      page.html("<p class=\"actions\"><button class=\"button danger\" type=\"submit\">Remove ")
      page.text(member.displayName)
      page.html("</button> <a href=\"\(base)/people\">Keep ")
      page.text(member.displayName)
      page.html(" and go back</a></p>\n</form>\n")
      return page.response(.ok, context: context)
    }
  }

  static func roleOptions(selected: Role) -> String {
    Role.allCases.map { role in
      "<option value=\"\(role.rawValue)\"\(role == selected ? " selected" : "")>\(role.label)</option>"
    }.joined()
  }

  var notFound: Response {
    HTMLPage.problem(
      .notFound, "School not found", "You are not a member of a school with that address.", context: context,
      next: ("/account", "Go to your account"))
  }

  var forbidden: Response {
    HTMLPage.problem(
      .forbidden, "Only administrators", "Only the school's administrators can manage its people.",
      context: context, next: ("/account", "Go to your account"))
  }

  // MARK: changes

  /// Checks a change's form (same origin, CSRF bound to the session) and the caller's standing,
  /// then runs `body` with the form's fields.
  func change(
    _ request: Request,
    _ body: (Request, Signed, Membership, [String: String]) throws(StoreError) -> Response
  ) throws(StoreError) -> Response {
    let store = try context.store()
    guard let signed = try context.authenticator.signed(request, store) else {
      return context.formRefusal(request, binding: nil, signedOut: true) ?? WebPages.redirect("/sign-in")
    }
    if let refusal = context.formRefusal(request, binding: signed.token) { return refusal }
    let schoolID = request.parameters["schoolId"] ?? ""
    switch try SchoolAccess.check(
      store, accountID: signed.account.id, schoolID: schoolID, need: .administrator)
    {
    case .notFound: return notFound
    case .forbidden: return forbidden
    case .granted(let membership):
      return try body(request, signed, membership, WebSecurity.form(request) ?? [:])
    }
  }

  func back(_ membership: Membership, _ done: String) -> Response {
    WebPages.redirect("/schools/\(membership.school.id)/people?done=\(done)")
  }

  func setRole(_ request: Request, _ signed: Signed, _ membership: Membership, _ form: [String: String])
    throws(StoreError) -> Response
  {
    guard let role = form["role"].flatMap(Role.init(rawValue:)) else {
      return try page(request, status: .badRequest, message: "Choose a role.")
    }
    let store = try context.store()
    switch try store.setRole(
      schoolID: membership.school.id, accountID: form["account"] ?? "", role: role, actor: signed.account.id)
    {
    case .done: return back(membership, "role")
    case .notFound: return try page(request, status: .notFound, message: Self.noMember)
    case .lastAdministrator: return try page(request, status: .conflict, message: Self.lastAdministrator)
    }
  }

  func remove(_ request: Request, _ signed: Signed, _ membership: Membership, _ form: [String: String])
    throws(StoreError) -> Response
  {
    let store = try context.store()
    let school = membership.school
    let remover = signed.account.displayName
    switch try store.removeMember(
      schoolID: school.id, accountID: form["account"] ?? "", actor: signed.account.id,
      host: WebSecurity.host(of: context.deployment.origin),
      mail: { account in
        EmailAddress(account.email).map { email in
          MailTemplates.message(
            kind: "membership_removed", to: email, name: account.displayName,
            subject: "You have been removed from \(school.name) on Band Licence",
            paragraphs: [
              "\(remover), an administrator of \(school.name), has removed you from the school on Band Licence. "
                + "You no longer see its lessons or people, on any device.",
              "Your Band Licence account itself stays as it is. If you think this is a mistake, ask the "
                + "school's administrator to invite you again.",
            ],
            link: ("Go to your account", context.link("/account")),
            reason: "You got this email because you were a member of \(school.name) on Band Licence.")
        }
      })
    {
    case .done: return back(membership, "removed")
    case .notFound: return try page(request, status: .notFound, message: Self.noMember)
    case .lastAdministrator: return try page(request, status: .conflict, message: Self.lastAdministrator)
    }
  }

  func invite(_ request: Request, _ signed: Signed, _ membership: Membership, _ form: [String: String])
    throws(StoreError) -> Response
  {
    let typed = form["email"] ?? ""
    guard typed.utf8.count <= WebPages.maxEmailBytes, let email = EmailAddress(typed) else {
      return try page(
        request, status: .badRequest,
        errors: FieldErrors("invite-email", "Enter the email address of the person to invite."))
    }
    guard let role = form["role"].flatMap(Role.init(rawValue:)) else {
      return try page(request, status: .badRequest, errors: FieldErrors("invite-role", "Choose a role."))
    }
    let store = try context.store()
    // A waiting invitation to the address is replaced (`createInvitation`): the notice says so.
    let now = context.clock()
    let earlier = try store.pendingInvitations(schoolID: membership.school.id).first {
      $0.email == email.normalised && $0.expiresAt > now
    }
    switch try context.invite(email, as: role, to: membership.school, by: signed.account, in: store) {
    case .created, .replayed, .keyReused, .gone:
      return back(membership, earlier.map { "replaced-" + $0.role.rawValue } ?? "invited")
    case .alreadyMember:
      return try page(
        request, status: .conflict,
        errors: FieldErrors("invite-email", "That person is already a member of this school."))
    case .limited(let wait):
      var response = try page(
        request, status: .tooManyRequests,
        message: "Too many invitations have been sent in the last hour. Try again in \(Self.minutes(wait)).")
      response.add("Retry-After", String(wait))
      return response
    }
  }

  func revoke(_ request: Request, _ signed: Signed, _ membership: Membership, _ form: [String: String])
    throws(StoreError) -> Response
  {
    let store = try context.store()
    guard
      try store.withdrawInvitation(
        id: form["invitation"] ?? "", schoolID: membership.school.id, actor: signed.account.id)
    else {
      return try page(
        request, status: .notFound,
        message: "That invitation is no longer waiting; it may have been answered.")
    }
    return back(membership, "revoked")
  }

  /// `seconds` as a person reads it: "1 minute", "12 minutes".
  static func minutes(_ seconds: Int) -> String {
    let n = max(1, (seconds + 59) / 60)
    return n == 1 ? "1 minute" : "\(n) minutes"
  }

  static let noMember = "That person is no longer a member of this school."
  static let lastAdministrator =
    "A school needs at least one administrator. Make someone else an administrator first."

  /// `path` percent-escaped for a query value.
  static func escapeQuery(_ path: String) -> String {
    var out = ""
    for byte in path.utf8 {
      let plain =
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        || "-._~".utf8.contains(byte)
      if plain {
        out.unicodeScalars.append(Unicode.Scalar(byte))
      } else {
        out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
      }
    }
    return out
  }
}
