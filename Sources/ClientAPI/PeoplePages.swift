import Edge
import LinkAssoc

/// A school's "People" page (`/schools/{schoolId}/people`), for its administrators: the members
/// with their roles (changed or removed here), the pending invitations (withdrawn here) and a form
/// to invite someone. Access goes through `SchoolAccess` as the API's does, and every change
/// writes the same audit event as the API's. Every route is private (`no-store`) and pooled; every
/// POST needs a same-origin `Origin` (or `Referer`) and the CSRF token, and answers `303`.
public struct PeoplePages: Sendable {
  let context: ClientContext

  /// The pages over `context`.
  public init(_ context: ClientContext) { self.context = context }

  public var routes: [Route] {
    [
      Route(.get, "/schools/:schoolId/people", cacheClass: .private, execution: .pooled) { request in
        context.guardedPage { try page(request) }
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
        "<a href=\"/schools/\(HTMLPage.escape(school.id))/people\">People at \(HTMLPage.escape(school.name))</a>"
      }.joined(separator: " · ") + "</p>\n"
  }

  // MARK: the page

  /// The sentences a change's redirect may ask the page to show (`?done=`): a fixed list, so that
  /// nothing from the URL is ever written on the page.
  static let notices = [
    "invited": "Invitation sent.", "role": "Role changed.", "removed": "Removed from the school.",
    "revoked": "Invitation withdrawn.",
  ]

  func page(_ request: Request, status: Status = .ok, message: String? = nil, notice: String? = nil)
    throws(StoreError) -> Response
  {
    let store = try context.store()
    let schoolID = request.parameters["schoolId"] ?? ""
    guard let signed = try context.signed(Credential(request), store) else {
      return WebPages.redirect(
        "/sign-in?return=" + Self.escapeQuery("/schools/\(schoolID)/people"))
    }
    let membership: Membership
    switch try SchoolAccess.check(
      store, accountID: signed.account.id, schoolID: schoolID, need: .administrator)
    {
    case .notFound: return notFound
    case .forbidden: return forbidden
    case .granted(let found): membership = found
    }
    let school = membership.school
    let base = "/schools/\(HTMLPage.escape(school.id))"
    let csrf = WebSecurity.csrfToken(binding: signed.token)
    let done = request.query.flatMap { WebSecurity.fields(Array($0.utf8)) }?["done"].flatMap {
      Self.notices[$0]
    }
    var page = HTMLPage(title: "People at \(school.name)")
    page.html("<h1>People at ")
    page.text(school.name)
    page.html("</h1>\n")
    page.alert(message)
    if let note = notice ?? done {
      page.html("<p role=\"status\">")
      page.text(note)
      page.html("</p>\n")
    }
    page.html("<h2>Members</h2>\n<table>\n<thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Email</th>")
    page.html("<th scope=\"col\">Role</th><th scope=\"col\">Action</th></tr></thead>\n<tbody>\n")
    for (i, member) in try store.members(schoolID: school.id).enumerated() {
      let id = HTMLPage.escape(member.accountID)
      page.html("<tr><td>")
      page.text(member.displayName)
      page.html("</td><td>")
      page.text(member.email)
      page.html("</td><td><form method=\"post\" action=\"\(base)/people/role\">")
      page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">")
      page.html("<input type=\"hidden\" name=\"account\" value=\"\(id)\">")
      page.html("<select id=\"role-\(i)\" name=\"role\" aria-label=\"Role of ")
      page.text(member.displayName)
      page.html("\">\(Self.roleOptions(selected: member.role))</select> ")
      page.html("<button class=\"button small\" type=\"submit\" aria-label=\"Change the role of ")
      page.text(member.displayName)
      page.html("\">Change</button></form></td><td>")
      page.html("<form method=\"post\" action=\"\(base)/people/remove\">")
      page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">")
      page.html("<input type=\"hidden\" name=\"account\" value=\"\(id)\">")
      page.html("<button class=\"button danger small\" type=\"submit\" aria-label=\"Remove ")
      page.text(member.displayName)
      page.html(" from the school\">Remove</button></form></td></tr>\n")
    }
    page.html("</tbody>\n</table>\n<h2>Invitations waiting for an answer</h2>\n")
    let pending = try store.pendingInvitations(schoolID: school.id)
    if pending.isEmpty {
      page.html("<p>No invitations are waiting.</p>\n")
    } else {
      page.html("<table>\n<thead><tr><th scope=\"col\">Email</th><th scope=\"col\">Role</th>")
      page.html(
        "<th scope=\"col\">Link works until</th><th scope=\"col\">Action</th></tr></thead>\n<tbody>\n")
      for invitation in pending {
        page.html("<tr><td>")
        page.text(invitation.email)
        page.html("</td><td>\(invitation.role.label)</td><td>")
        page.html("<time datetime=\"\(Timestamp.iso8601(invitation.expiresAt))\">")
        page.text(Timestamp.readable(invitation.expiresAt))
        page.html("</time></td><td><form method=\"post\" action=\"\(base)/invitations/revoke\">")
        page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">")
        page.html("<input type=\"hidden\" name=\"invitation\" value=\"\(HTMLPage.escape(invitation.id))\">")
        page.html(
          "<button class=\"button danger small\" type=\"submit\" aria-label=\"Withdraw the invitation to ")
        page.text(invitation.email)
        page.html("\">Withdraw</button></form></td></tr>\n")
      }
      page.html("</tbody>\n</table>\n")
    }
    page.html("<h2>Invite someone</h2>\n")
    page.html("<form class=\"form\" method=\"post\" action=\"\(base)/invitations\">\n")
    page.html("<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">\n")
    page.html("<label for=\"invite-email\">Email</label>\n")
    page.html(
      "<input id=\"invite-email\" name=\"email\" type=\"text\" inputmode=\"email\" autocomplete=\"off\" "
        + "autocapitalize=\"none\" spellcheck=\"false\" required maxlength=\"254\">\n")
    page.html("<label for=\"invite-role\">Role</label>\n")
    page.html("<select id=\"invite-role\" name=\"role\">\(Self.roleOptions(selected: .teacher))</select>\n")
    page.html("<button class=\"button\" type=\"submit\">Send invitation</button>\n</form>\n")
    page.html("<p><a href=\"/account\">Back to your account</a></p>\n")
    return page.response(status, context: context)
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
    guard let signed = try context.signed(Credential(request), store) else {
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
    switch try store.removeMember(
      schoolID: membership.school.id, accountID: form["account"] ?? "", actor: signed.account.id)
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
        request, status: .badRequest, message: "Enter the email address of the person to invite.")
    }
    guard let role = form["role"].flatMap(Role.init(rawValue:)) else {
      return try page(request, status: .badRequest, message: "Choose a role.")
    }
    let store = try context.store()
    switch try context.invite(email, as: role, to: membership.school, by: signed.account, in: store) {
    case .created, .replayed, .keyReused, .gone: return back(membership, "invited")
    case .alreadyMember:
      return try page(request, status: .conflict, message: "That person is already a member of this school.")
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
      try store.revokeInvitation(
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
