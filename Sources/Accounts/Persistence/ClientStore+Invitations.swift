import Store

/// What inviting someone came to.
public enum InvitationOutcome: Sendable, Equatable {
  /// A new invitation; `token` is for the mail only, and only its digest is kept.
  case created(Invitation, token: String)
  /// The same key and body as before, within a day: the invitation made then, still pending, and no
  /// new mail.
  case replayed(Invitation)
  /// The same key and body as before, but that invitation has since been accepted, withdrawn or
  /// has expired.
  case gone
  /// Over one of the hourly limits (`InvitationLimits`): try again after this many seconds.
  case limited(retryAfter: Int)
  /// The same key with another body.
  case keyReused
  /// The address is already a live member of the school.
  case alreadyMember
}

/// What a change to a member came to.
public enum MemberChange: Sendable, Equatable {
  case done
  /// No live membership of that account in that school.
  case notFound
  /// It would leave the school without an administrator.
  case lastAdministrator
}

/// What accepting an invitation came to.
public enum AcceptOutcome: Sendable, Equatable {
  /// The membership is live (and the email verified); for a new person, their new session too.
  case accepted(Invitation, accountID: String)
  /// The link is unknown, used, withdrawn or expired.
  case invalid
  /// The signed-in account's email is not the invitation's.
  case otherEmail
  /// A new person's form, but an account with that email exists now: they sign in instead.
  case accountExists
}

/// How many invitations may go out per hour: from one inviter, to one school, and to one
/// address across all schools. Each is configurable (`docs/limits.md`).
public struct InvitationLimits: Sendable, Equatable {
  public var perInviter = 20
  public var perSchool = 50
  public var perAddress = 3
  /// The window the limits count over, in seconds.
  public static let window = 3600

  /// The defaults.
  public init() {}
}

extension ClientStore {
  /// How long an invitation link works: 7 days.
  public static let invitationLifetime = 7 * 86400
  /// How long an `Idempotency-Key` names its invitation: a day, then it is a new request.
  public static let idempotencyKeyLifetime = 86400

  // MARK: the caller's standing

  /// The live membership of `accountID` in `schoolID` (nil: not a live member, or no such school).
  public func liveMembership(accountID: String, schoolID: String) throws(StoreError) -> Membership? {
    let rows = try db.query(
      """
      SELECT s.id, s.name, s.slug, m.role FROM memberships m JOIN schools s ON s.id = m.school_id
      WHERE m.account_id = ? AND m.school_id = ? AND m.revoked_at IS NULL
      """, [.text(accountID), .text(schoolID)])
    guard let row = rows.first, case .text(let id) = row[0], case .text(let name) = row[1],
      case .text(let slug) = row[2], case .text(let role) = row[3], let parsed = Role(rawValue: role)
    else { return nil }
    return Membership(school: School(id: id, name: name, slug: slug), role: parsed)
  }

  // MARK: members

  /// The school's live members (accounts not deleted), by name.
  public func members(schoolID: String) throws(StoreError) -> [Member] {
    try db.query(
      """
      SELECT a.id, a.display_name, a.email, m.role FROM memberships m JOIN accounts a ON a.id = m.account_id
      WHERE m.school_id = ? AND m.revoked_at IS NULL AND a.deleted_at IS NULL
      ORDER BY a.display_name, a.id
      """, [.text(schoolID)]
    ).compactMap { row in
      guard case .text(let id) = row[0], case .text(let name) = row[1], case .text(let email) = row[2],
        case .text(let role) = row[3], let parsed = Role(rawValue: role)
      else { return nil }
      return Member(accountID: id, displayName: name, email: email, role: parsed)
    }
  }

  /// Gives `accountID` the role `role` in `schoolID`, unless that leaves no administrator.
  public func setRole(schoolID: String, accountID: String, role: Role, actor: String) throws(StoreError)
    -> MemberChange
  {
    try db.transaction { () throws(StoreError) -> MemberChange in
      guard let current = try liveRole(schoolID, accountID) else { return .notFound }
      if current == role { return .done }
      if current == .administrator, try administrators(schoolID) <= 1 { return .lastAdministrator }
      try db.query(
        "UPDATE memberships SET role = ? WHERE account_id = ? AND school_id = ? AND revoked_at IS NULL",
        [.text(role.rawValue), .text(accountID), .text(schoolID)])
      if current == .administrator {
        try withdrawInvitations(sentBy: accountID, in: schoolID, because: "inviter_demoted")
      }
      try audit(
        actor: actor, action: "membership.role_changed", subject: accountID,
        detail: "\(schoolID) \(role.rawValue)")
      return .done
    }
  }

  /// Revokes `accountID`'s membership of `schoolID` (gone from their next answer, fleet-wide) and
  /// withdraws the invitations they sent there, unless they are its last administrator.
  public func removeMember(schoolID: String, accountID: String, actor: String) throws(StoreError)
    -> MemberChange
  {
    try db.transaction { () throws(StoreError) -> MemberChange in
      guard let current = try liveRole(schoolID, accountID) else { return .notFound }
      if current == .administrator, try administrators(schoolID) <= 1 { return .lastAdministrator }
      try db.query(
        "UPDATE memberships SET revoked_at = ? WHERE account_id = ? AND school_id = ? AND revoked_at IS NULL",
        [.integer(Int64(clock())), .text(accountID), .text(schoolID)])
      try withdrawInvitations(sentBy: accountID, in: schoolID, because: "inviter_removed")
      try audit(actor: actor, action: "membership.revoked", subject: accountID, detail: schoolID)
      return .done
    }
  }

  private func liveRole(_ schoolID: String, _ accountID: String) throws(StoreError) -> Role? {
    let rows = try db.query(
      "SELECT role FROM memberships WHERE account_id = ? AND school_id = ? AND revoked_at IS NULL",
      [.text(accountID), .text(schoolID)])
    guard case .text(let role)? = rows.first?.first else { return nil }
    return Role(rawValue: role)
  }

  /// The school's administrators who can still act (live membership, account enabled and not
  /// deleted). Read inside the change's transaction: on PostgreSQL that is SERIALIZABLE, so two
  /// administrators demoting each other at once cannot both succeed.
  private func administrators(_ schoolID: String) throws(StoreError) -> Int {
    let rows = try db.query(
      """
      SELECT count(*) FROM memberships m JOIN accounts a ON a.id = m.account_id
      WHERE m.school_id = ? AND m.role = 'administrator' AND m.revoked_at IS NULL
        AND a.disabled = 0 AND a.deleted_at IS NULL
      """, [.text(schoolID)])
    guard case .integer(let n)? = rows.first?.first else { return 0 }
    return Int(n)
  }

  // MARK: invitations

  /// Invites `email` to `schoolID` as `role` (inside one transaction, with its mail: `mail` is
  /// given the new invitation and its token and returns the message). With an `idempotencyKey`,
  /// the same key and `requestDigest` from the same actor within a day give the first answer again
  /// while that invitation is pending (`gone` once it is not); the same key with another digest is
  /// `keyReused`. Over one of `limits` it is `limited`. An earlier pending invitation of that
  /// address to that school is withdrawn, so each person has one live link. The invitation keeps
  /// its sender's credential epoch: it is accepted only while the sender is still a live
  /// administrator of the school under the same credentials.
  public func createInvitation(
    schoolID: String, email address: EmailAddress, role: Role, actor: String,
    idempotencyKey: String? = nil, requestDigest: [UInt8] = [], limits: InvitationLimits = InvitationLimits(),
    mail: (Invitation, String) -> MailMessage, host: String
  ) throws(StoreError) -> InvitationOutcome {
    let email = address.normalised
    return try db.transaction { () throws(StoreError) -> InvitationOutcome in
      let now = clock()
      if let idempotencyKey {
        let rows = try db.query(
          """
          SELECT \(Self.invitationColumns), request_digest, accepted_at, revoked_at FROM invitations
          WHERE school_id = ? AND invited_by = ? AND idempotency_key = ? AND created_at > ?
          """,
          [
            .text(schoolID), .text(actor), .text(idempotencyKey),
            .integer(Int64(now - Self.idempotencyKeyLifetime)),
          ])
        if let row = rows.first, let earlier = Self.invitation(row) {
          guard case .blob(let digest) = row[6], digest == requestDigest else { return .keyReused }
          guard row[7] == .null, row[8] == .null, earlier.expiresAt > now else { return .gone }
          return .replayed(earlier)
        }
      }
      let existing = try db.query(
        """
        SELECT 1 FROM memberships m JOIN accounts a ON a.id = m.account_id
        WHERE m.school_id = ? AND a.email = ? AND m.revoked_at IS NULL
        """, [.text(schoolID), .text(email)])
      guard existing.isEmpty else { return .alreadyMember }
      if let wait = try invitationWait(
        schoolID: schoolID, email: email, actor: actor, limits: limits, now: now)
      {
        try audit(actor: actor, action: "invitation.limited", subject: schoolID)
        return .limited(retryAfter: wait)
      }
      let earlier = try db.query(
        """
        SELECT id FROM invitations WHERE school_id = ? AND email = ? AND accepted_at IS NULL
          AND revoked_at IS NULL AND expires_at > ?
        """, [.text(schoolID), .text(email), .integer(Int64(now))])
      for row in earlier {
        guard case .text(let id) = row[0] else { continue }
        try db.query("UPDATE invitations SET revoked_at = ? WHERE id = ?", [.integer(Int64(now)), .text(id)])
        try audit(actor: actor, action: "invitation.revoked", subject: id, detail: "\(schoolID) replaced")
      }
      let token = Secrets.token()
      let invitation = Invitation(
        id: Secrets.identifier("inv"), schoolID: schoolID, email: email, role: role, createdAt: now,
        expiresAt: now + Self.invitationLifetime)
      try db.query(
        """
        INSERT INTO invitations (id, school_id, email, role, invited_by, token_digest, created_at, expires_at,
          idempotency_key, request_digest, inviter_epoch)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [
          .text(invitation.id), .text(schoolID), .text(email), .text(role.rawValue), .text(actor),
          .blob(Secrets.digest(token)), .integer(Int64(now)), .integer(Int64(invitation.expiresAt)),
          idempotencyKey.map { .text($0) } ?? .null, idempotencyKey == nil ? .null : .blob(requestDigest),
          .integer(Int64(try credentialEpoch(accountID: actor))),
        ])
      try audit(
        actor: actor, action: "invitation.created", subject: invitation.id,
        detail: "\(schoolID) \(role.rawValue)")
      try enqueueMail(mail(invitation, token), host: host)
      return .created(invitation, token: token)
    }
  }

  /// Seconds until one more invitation fits under `limits` (from `actor`, to `schoolID`, to
  /// `email`, each counted over the last hour), or nil when it fits now.
  private func invitationWait(
    schoolID: String, email: String, actor: String, limits: InvitationLimits, now: Int
  ) throws(StoreError) -> Int? {
    let since = Int64(now - InvitationLimits.window)
    var wait: Int? = nil
    for (column, value, limit) in [
      ("invited_by", actor, limits.perInviter), ("school_id", schoolID, limits.perSchool),
      ("email", email, limits.perAddress),
    ] {
      let rows = try db.query(
        "SELECT created_at FROM invitations WHERE \(column) = ? AND created_at > ? ORDER BY created_at DESC",
        [.text(value), .integer(since)])
      guard rows.count >= limit else { continue }
      // The one that must leave the window before another fits.
      guard limit > 0, case .integer(let at) = rows[limit - 1][0] else {
        wait = max(wait ?? 0, InvitationLimits.window)
        continue
      }
      wait = max(wait ?? 0, max(1, Int(at) + InvitationLimits.window - now))
    }
    return wait
  }

  /// The school's pending invitations (not accepted, withdrawn or expired), newest first.
  public func pendingInvitations(schoolID: String) throws(StoreError) -> [Invitation] {
    try db.query(
      """
      SELECT \(Self.invitationColumns) FROM invitations
      WHERE school_id = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ?
      ORDER BY created_at DESC, id
      """, [.text(schoolID), .integer(Int64(clock()))]
    ).compactMap(Self.invitation)
  }

  /// Withdraws the pending invitation `id` of `schoolID`; false when there is none (another
  /// school's invitation is not found either).
  public func revokeInvitation(id: String, schoolID: String, actor: String) throws(StoreError) -> Bool {
    try db.transaction { () throws(StoreError) -> Bool in
      try db.query(
        """
        UPDATE invitations SET revoked_at = ? WHERE id = ? AND school_id = ? AND accepted_at IS NULL
          AND revoked_at IS NULL AND expires_at > ?
        """, [.integer(Int64(clock())), .text(id), .text(schoolID), .integer(Int64(clock()))])
      guard db.changes == 1 else { return false }
      try audit(actor: actor, action: "invitation.revoked", subject: id, detail: schoolID)
      return true
    }
  }

  /// The pending invitation `token` names, without using it (to show its page), and its school.
  public func invitation(token: String) throws(StoreError) -> (Invitation, School)? {
    let rows = try db.query(
      """
      SELECT i.id, i.school_id, i.email, i.role, i.created_at, i.expires_at, s.name, s.slug
      FROM invitations i JOIN schools s ON s.id = i.school_id
      WHERE i.token_digest = ? AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > ?
      """, [.blob(Secrets.digest(token)), .integer(Int64(clock()))])
    guard let row = rows.first, let invitation = Self.invitation(row), case .text(let name) = row[6],
      case .text(let slug) = row[7]
    else { return nil }
    return (invitation, School(id: invitation.schoolID, name: name, slug: slug))
  }

  /// An existing account (signed in) accepts the invitation `token` names: its email must be the
  /// invitation's. The link is used, the email verified, the membership granted; audited.
  public func acceptInvitation(token: String, accountID: String) throws(StoreError) -> AcceptOutcome {
    try db.transaction { () throws(StoreError) -> AcceptOutcome in
      guard let (invitation, _) = try invitation(token: token) else { return .invalid }
      guard let account = try account(id: accountID), account.email == invitation.email else {
        return .otherEmail
      }
      guard try senderStillAuthorises(invitation) else { return .invalid }
      try grant(invitation, to: accountID)
      return .accepted(invitation, accountID: accountID)
    }
  }

  /// A new person accepts the invitation `token` names: in one transaction their account is made
  /// (verified: the link proves the address), the membership granted, and a web session started
  /// for `sessionToken`.
  public func acceptInvitation(
    token: String, displayName: String, passwordHash: String, sessionToken: String,
    lifetimes: SessionLifetimes, browser: String? = nil, network: String? = nil
  ) throws(StoreError) -> AcceptOutcome {
    try db.transaction { () throws(StoreError) -> AcceptOutcome in
      guard let (invitation, _) = try invitation(token: token) else { return .invalid }
      guard try db.query("SELECT 1 FROM accounts WHERE email = ?", [.text(invitation.email)]).isEmpty else {
        return .accountExists
      }
      guard let email = EmailAddress(invitation.email), try senderStillAuthorises(invitation) else {
        return .invalid
      }
      let account = try createAccount(
        email: email, displayName: displayName, passwordHash: passwordHash,
        actor: "invitation:\(invitation.id)")
      try grant(invitation, to: account.id)
      let session = try createSession(
        accountID: account.id, kind: .web, platform: nil, appVersion: nil, token: sessionToken,
        lifetimes: lifetimes, browser: browser, network: network)
      try audit(actor: account.id, action: "sign_in.succeeded", subject: session.id, detail: "invitation")
      return .accepted(invitation, accountID: account.id)
    }
  }

  /// Whether the invitation `id`'s sender is still a live administrator of its school under the
  /// credentials they sent it with; if not, the invitation is withdrawn (audited).
  private func senderStillAuthorises(_ invitation: Invitation) throws(StoreError) -> Bool {
    let rows = try db.query(
      """
      SELECT 1 FROM invitations i
      JOIN memberships m ON m.account_id = i.invited_by AND m.school_id = i.school_id
      JOIN accounts a ON a.id = i.invited_by
      WHERE i.id = ? AND m.role = 'administrator' AND m.revoked_at IS NULL AND a.disabled = 0
        AND a.deleted_at IS NULL AND a.credential_epoch = i.inviter_epoch
      """, [.text(invitation.id)])
    guard rows.isEmpty else { return true }
    try db.query(
      "UPDATE invitations SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
      [.integer(Int64(clock())), .text(invitation.id)])
    try audit(
      actor: "system", action: "invitation.revoked", subject: invitation.id,
      detail: "\(invitation.schoolID) inviter_lost_authority")
    return false
  }

  private func grant(_ invitation: Invitation, to accountID: String) throws(StoreError) {
    let now = Int64(clock())
    try db.query(
      "UPDATE invitations SET accepted_at = ? WHERE id = ? AND accepted_at IS NULL AND revoked_at IS NULL",
      [.integer(now), .text(invitation.id)])
    guard db.changes == 1 else { throw StoreError.refused("the invitation was used meanwhile") }
    try markVerified(accountID: accountID)
    try db.query(
      """
      INSERT INTO memberships (account_id, school_id, role, created_at) VALUES (?, ?, ?, ?)
      ON CONFLICT (account_id, school_id) DO UPDATE SET role = excluded.role, revoked_at = NULL
      """, [.text(accountID), .text(invitation.schoolID), .text(invitation.role.rawValue), .integer(now)])
    try audit(
      actor: accountID, action: "invitation.accepted", subject: accountID,
      detail: "\(invitation.id) \(invitation.schoolID) \(invitation.role.rawValue)")
  }

  static let invitationColumns = "id, school_id, email, role, created_at, expires_at"

  package static func invitation(_ row: [DatabaseValue]) -> Invitation? {
    guard case .text(let id) = row[0], case .text(let school) = row[1], case .text(let email) = row[2],
      case .text(let role) = row[3], let parsed = Role(rawValue: role), case .integer(let created) = row[4],
      case .integer(let expires) = row[5]
    else { return nil }
    return Invitation(
      id: id, schoolID: school, email: email, role: parsed, createdAt: Int(created), expiresAt: Int(expires))
  }
}
