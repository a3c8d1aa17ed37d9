/// A role in a school.
public enum Role: String, Sendable, CaseIterable {
  case administrator
  case teacher
  case readOnly = "read_only"
}

/// A school.
public struct School: Equatable, Sendable {
  public let id: String
  public let name: String
  public let slug: String
}

/// A live membership: a school and the account's role there.
public struct Membership: Equatable, Sendable {
  public let school: School
  public let role: Role
}

/// A person in a school, with the fewest fields the People screen needs.
public struct Member: Sendable, Equatable {
  public let accountID: String
  public let displayName: String
  public let email: String
  public let role: Role
}
