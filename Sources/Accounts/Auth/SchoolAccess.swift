import Store

/// The one access check of every school-scoped endpoint and page (`/api/client/v1/schools/{schoolId}/`
/// and the People pages): the caller's live membership and role in `{schoolId}`, read from the
/// store in the same request, never a school ID or role the client merely sends.
///
/// A school's administrators manage its people; the member and invitation lists name colleagues'
/// email addresses, so they are the administrators' too (the fewest fields a screen needs: teachers
/// and read-only members have no People screen). Every route that uses this today needs
/// `.administrator`; `.member` is there for the school-scoped reads that will follow; the gateway's forwarded routes ask
/// for `.atLeast` the route's role for the method.
package struct SchoolAccess {
  /// What a route needs of the caller.
  package enum Need {
    /// Any live member.
    case member
    /// A live administrator of that school.
    case administrator
    /// A live member whose role there is `role` or above (`read_only` < `teacher` <
    /// `administrator`): what a forwarded route asks for a method.
    case atLeast(Role)
  }

  /// What the check came to.
  package enum Outcome: Equatable {
    /// The caller may go on, as `membership` (the school and their role there).
    case granted(Membership)
    /// Not a live member of that school (or no such school): 404, whatever their role elsewhere,
    /// so that a school's IDs tell outsiders nothing.
    case notFound
    /// A member without the role the action needs: 403.
    case forbidden
  }

  /// Whether `accountID` may act in `schoolID` with `need`, by the membership the store holds now.
  package static func check(_ store: ClientStore, accountID: String, schoolID: String, need: Need)
    throws(StoreError)
    -> Outcome
  {
    decide(try store.liveMembership(accountID: accountID, schoolID: schoolID), need: need)
  }

  /// The same check on memberships already read in this request's store read (a session view's:
  /// the gateway's, on the loop from its cache too).
  package static func check(_ memberships: [Membership], schoolID: String, need: Need) -> Outcome {
    decide(memberships.first { $0.school.id == schoolID }, need: need)
  }

  /// The rule itself, on the caller's live membership in the school (nil: none).
  private static func decide(_ membership: Membership?, need: Need) -> Outcome {
    guard let membership else { return .notFound }
    switch need {
    case .member: return .granted(membership)
    case .administrator: return membership.role == .administrator ? .granted(membership) : .forbidden
    case .atLeast(let least): return rank(membership.role) >= rank(least) ? .granted(membership) : .forbidden
    }
  }

  /// A role's place in `read_only` < `teacher` < `administrator`.
  private static func rank(_ role: Role) -> Int {
    switch role {
    case .readOnly: 0
    case .teacher: 1
    case .administrator: 2
    }
  }
}
