/// An invitation to a school (never its token).
public struct Invitation: Sendable, Equatable {
  public let id: String
  public let schoolID: String
  public let email: String
  public let role: Role
  public let createdAt: Int
  public let expiresAt: Int
}
