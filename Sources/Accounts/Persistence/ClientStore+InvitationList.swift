import Store

/// The People page's view of invitations and removals: expired invitations
/// stay listed (as expired) until someone withdraws them, and a removed member is told by mail.
extension ClientStore {
  /// The school's invitations not yet accepted or withdrawn, expired ones included, newest first.
  public func listedInvitations(schoolID: String) throws(StoreError) -> [Invitation] {
    try db.query(
      """
      SELECT \(Self.invitationColumns) FROM invitations
      WHERE school_id = ? AND accepted_at IS NULL AND revoked_at IS NULL
      ORDER BY created_at DESC, id
      """, [.text(schoolID)]
    ).compactMap(Self.invitation)
  }

  /// Withdraws the invitation `id` of `schoolID`, pending or expired; false when there is none
  /// (accepted, withdrawn already, or another school's).
  public func withdrawInvitation(id: String, schoolID: String, actor: String) throws(StoreError) -> Bool {
    try db.transaction { () throws(StoreError) -> Bool in
      try db.query(
        """
        UPDATE invitations SET revoked_at = ? WHERE id = ? AND school_id = ? AND accepted_at IS NULL
          AND revoked_at IS NULL
        """, [.integer(Int64(clock())), .text(id), .text(schoolID)])
      guard db.changes == 1 else { return false }
      try audit(actor: actor, action: "invitation.revoked", subject: id, detail: schoolID)
      return true
    }
  }

  /// `removeMember`, and when it is done, `mail` (built for the removed member) queued in the
  /// same transaction: the person is told if and only if the removal commits.
  public func removeMember(
    schoolID: String, accountID: String, actor: String, host: String, mail: (Account) -> MailMessage?
  ) throws(StoreError) -> MemberChange {
    try db.transaction { () throws(StoreError) -> MemberChange in
      let outcome = try removeMember(schoolID: schoolID, accountID: accountID, actor: actor)
      if outcome == .done, let account = try account(id: accountID), let message = mail(account) {
        try enqueueMail(message, host: host)
      }
      return outcome
    }
  }
}
