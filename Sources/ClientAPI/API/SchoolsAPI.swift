import Accounts
import Deployment
import Edge
import Store

/// The first school-scoped endpoints (docs/client-api-v1.openapi.json): a school's
/// members and invitations, for its administrators. Every route resolves the caller through
/// `SchoolAccess`; all are private (`no-store`) and pooled. Changes write the same audit events as
/// the People page's.
public struct SchoolsAPI: Sendable {
  let context: ClientContext

  /// Longest request body accepted.
  static let maxBodyBytes = 4096

  /// The endpoints over `context`.
  public init(_ context: ClientContext) { self.context = context }

  static let prefix = "/api/client/v1/schools/:schoolId"
  static let members = prefix + "/members"
  static let member = prefix + "/members/:accountId"
  static let invitations = prefix + "/invitations"
  static let invitation = prefix + "/invitations/:id"

  /// The path patterns `routes` answers, known without a context: the composition checks before
  /// it has one (`config check`) that no forward route of the gateway overlaps them.
  public static let patterns = [members, member, invitations, invitation]

  public var routes: [Route] {
    [
      Route(.get, Self.members, cacheClass: .private, execution: .pooled) { request in
        scoped(request, mutating: false) { _, membership, store in
          let members = try store.members(schoolID: membership.school.id)
          return JSONBody.response(.ok, .object(["members": .array(members.map(Self.json))]))
        }
      },
      Route(
        .patch, Self.member, cacheClass: .private, execution: .pooled,
        body: Self.jsonBody
      ) {
        request in
        // The request's own faults first: a malformed body is 400 whoever sends it.
        switch Self.roleChange(request) {
        case .failure(let refusal): return refusal.response
        case .success(let role):
          return scoped(request, mutating: true) { signed, membership, store in
            try setRole(request, role, signed, membership, store)
          }
        }
      },
      Route(.delete, Self.member, cacheClass: .private, execution: .pooled) {
        request in
        scoped(request, mutating: true) { signed, membership, store in
          let id = request.parameters["accountId"] ?? ""
          switch try store.removeMember(
            schoolID: membership.school.id, accountID: id, actor: signed.account.id)
          {
          case .done: return Response(status: .noContent)
          case .notFound: return Self.noMember
          case .lastAdministrator: return Self.lastAdministrator
          }
        }
      },
      Route(.get, Self.invitations, cacheClass: .private, execution: .pooled) { request in
        scoped(request, mutating: false) { _, membership, store in
          let pending = try store.pendingInvitations(schoolID: membership.school.id)
          return JSONBody.response(.ok, .object(["invitations": .array(pending.map(Self.json))]))
        }
      },
      Route(
        .post, Self.invitations, cacheClass: .private, execution: .pooled, body: Self.jsonBody
      ) {
        request in
        switch Self.invitationRequest(request) {
        case .failure(let refusal): return refusal.response
        case .success(let (key, email, role)):
          return scoped(request, mutating: true) { signed, membership, store in
            try invite(request, key, email, role, signed, membership, store)
          }
        }
      },
      Route(.delete, Self.invitation, cacheClass: .private, execution: .pooled) { request in
        scoped(request, mutating: true) { signed, membership, store in
          let id = request.parameters["id"] ?? ""
          guard try store.revokeInvitation(id: id, schoolID: membership.school.id, actor: signed.account.id)
          else {
            return JSONBody.error(
              .notFound, "not_found", "This school has no pending invitation with that ID.")
          }
          return Response(status: .noContent)
        }
      },
    ]
  }

  /// Runs `body` for a live administrator of `{schoolId}`: the session's answers first (401, 426,
  /// 403 `cross_origin` for a cookie-authenticated change from elsewhere), then 404 for a school the
  /// caller is not a live member of and 403 for a member who is not its administrator.
  func scoped(
    _ request: Request, mutating: Bool, _ body: (Signed, Membership, ClientStore) throws -> Response
  ) -> Response {
    context.authenticator.authenticated(request, unsafe: mutating) { signed, store, _ in
      let schoolID = request.parameters["schoolId"] ?? ""
      switch try SchoolAccess.check(
        store, accountID: signed.account.id, schoolID: schoolID, need: .administrator)
      {
      case .notFound:
        return JSONBody.error(.notFound, "not_found", "You are not a member of a school with that ID.")
      case .forbidden:
        return JSONBody.error(
          .forbidden, "forbidden", "Only the school's administrators can manage its people.")
      case .granted(let membership): return try body(signed, membership, store)
      }
    }
  }

  // MARK: operations

  /// The role a `PATCH .../members/{accountId}` asks for, or its refusal (413, 400; `jsonBody` has
  /// answered 415).
  static func roleChange(_ request: Request) -> Result<Role, Refused> {
    if let refusal = JSONBody.pastLimit(request, jsonBody) { return .failure(Refused(refusal)) }
    let parsed = JSONBody.parse(request.body)
    if let refusal = parsed.refusal { return .failure(Refused(refusal)) }
    guard case .object(let body)? = parsed.value, body.count == 1,
      case .string(let name)? = body["role"], let role = Role(rawValue: name)
    else {
      return .failure(
        Refused(
          JSONBody.error(
            .badRequest, "invalid_request",
            "The body must be a JSON object with role: administrator, teacher or read_only.")))
    }
    return .success(role)
  }

  func setRole(
    _ request: Request, _ role: Role, _ signed: Signed, _ membership: Membership, _ store: ClientStore
  ) throws -> Response {
    let id = request.parameters["accountId"] ?? ""
    let school = membership.school.id
    switch try store.setRole(schoolID: school, accountID: id, role: role, actor: signed.account.id) {
    case .notFound: return Self.noMember
    case .lastAdministrator: return Self.lastAdministrator
    case .done:
      guard let member = try store.members(schoolID: school).first(where: { $0.accountID == id }) else {
        return Self.noMember
      }
      return JSONBody.response(.ok, Self.json(member))
    }
  }

  /// The key, address and role of a `POST .../invitations`, or its refusal (413, 400; `jsonBody`
  /// has answered 415).
  static func invitationRequest(_ request: Request) -> Result<(String, EmailAddress, Role), Refused> {
    if let refusal = JSONBody.pastLimit(request, jsonBody) { return .failure(Refused(refusal)) }
    guard let key = IdempotencyKey(of: request)?.description else {
      return .failure(
        Refused(
          JSONBody.error(
            .badRequest, "idempotency_key_required",
            "Send one Idempotency-Key header (1 to 255 visible ASCII characters) with every invitation.")))
    }
    let parsed = JSONBody.parse(request.body)
    if let refusal = parsed.refusal { return .failure(Refused(refusal)) }
    guard case .object(let body)? = parsed.value, body.count == 2,
      case .string(let typed)? = body["email"], case .string(let name)? = body["role"],
      let role = Role(rawValue: name)
    else {
      return .failure(
        Refused(
          JSONBody.error(
            .badRequest, "invalid_request",
            "The body must be a JSON object with email and role (administrator, teacher or read_only).")))
    }
    guard typed.utf8.count <= WebPages.maxEmailBytes, let email = EmailAddress(typed) else {
      return .failure(
        Refused(JSONBody.error(.badRequest, "invalid_email", "That is not an email address we can send to.")))
    }
    return .success((key, email, role))
  }

  func invite(
    _ request: Request, _ key: String, _ email: EmailAddress, _ role: Role, _ signed: Signed,
    _ membership: Membership, _ store: ClientStore
  ) throws -> Response {
    let outcome = try context.invite(
      email, as: role, to: membership.school, by: signed.account, in: store,
      idempotencyKey: key, requestDigest: Secrets.digest(bytes: request.body))
    switch outcome {
    case .created(let invitation, _), .replayed(let invitation):
      return JSONBody.response(.created, Self.json(invitation))
    case .keyReused:
      return JSONBody.error(
        .unprocessableContent, "idempotency_key_reused",
        "This Idempotency-Key was used with another request. Use a new key for a new invitation.")
    case .alreadyMember:
      return JSONBody.error(.conflict, "already_member", "That person is already a member of this school.")
    case .gone:
      return JSONBody.error(
        Status(410, "Gone"), "invitation_gone",
        "The invitation this Idempotency-Key made has since been accepted, withdrawn or has expired. "
          + "Use a new key to invite again.")
    case .limited(let wait):
      var response = JSONBody.error(
        .tooManyRequests, "too_many_invitations",
        "Too many invitations have been sent in the last hour. Try again in \(wait) seconds.")
      response.add("Retry-After", String(wait))
      return response
    }
  }

  // MARK: answers

  static let noMember = JSONBody.error(
    .notFound, "not_found", "This school has no member with that account ID.")

  static let lastAdministrator = JSONBody.error(
    .conflict, "last_administrator",
    "A school needs at least one administrator. Make someone else an administrator first.")

  /// The body of the school endpoints that take one, judged by the dispatcher on the head (and
  /// while a body of unknown length is read), before the handler runs: JSON, at most `maxBodyBytes`
  /// (the size held once more by the handlers, see `JSONBody.pastLimit`).
  static let jsonBody = BodyPolicy.json(
    maxBytes: maxBodyBytes,
    tooLarge: JSONBody.error(.contentTooLarge, "request_too_large", "The request body is too large."),
    unsupported: JSONBody.error(
      .unsupportedMediaType, "unsupported_media_type", "Send the body as application/json."))

  /// A member: exactly `accountId`, `displayName`, `email`, `role`.
  static func json(_ member: Member) -> JSONValue {
    .object([
      "accountId": .string(member.accountID), "displayName": .string(member.displayName),
      "email": .string(member.email), "role": .string(member.role.rawValue),
    ])
  }

  /// An invitation: its ID, address, role and end (never its token).
  static func json(_ invitation: Invitation) -> JSONValue {
    .object([
      "id": .string(invitation.id), "email": .string(invitation.email),
      "role": .string(invitation.role.rawValue),
      "expiresAt": .string(Timestamp.iso8601(invitation.expiresAt)),
    ])
  }
}

extension Status {
  /// RFC 9110 §15.5.10.
  static let conflict = Status(409, "Conflict")
  /// RFC 9110 §15.5.21.
  static let unprocessableContent = Status(422, "Unprocessable Content")
}

extension ClientContext {
  /// Invites `email` to `school` as `role` on behalf of `inviter` (an administrator there, as
  /// `SchoolAccess` found): the invitation, its audit event and its mail in one transaction. The
  /// API and the People page both invite through here.
  func invite(
    _ email: EmailAddress, as role: Role, to school: School, by inviter: Account, in store: ClientStore,
    idempotencyKey: String? = nil, requestDigest: [UInt8] = []
  ) throws(StoreError) -> InvitationOutcome {
    try store.createInvitation(
      schoolID: school.id, email: email, role: role, actor: inviter.id, idempotencyKey: idempotencyKey,
      requestDigest: requestDigest, limits: invitationLimits,
      mail: { invitation, token in
        MailTemplates.message(
          kind: "invitation", to: email, name: nil,
          subject: "You are invited to \(school.name) on Band Licence",
          paragraphs: [
            "\(MailTemplates.safeName(inviter.displayName) ?? "An administrator of \(school.name)") has invited you "
              + "to join \(school.name) on Band Licence as \(role.label.lowercased()).",
            "The link works once, for 7 days.",
          ],
          link: ("Accept the invitation", link("/invitations/accept?token=\(token)")),
          reason:
            "You got this message because someone at \(school.name) invited this address. If you did not expect it, you can ignore it: nothing happens unless you follow the link."
        )
      }, host: WebSecurity.host(of: deployment.origin))
  }
}
