/// A person who signs in.
public struct Account: Equatable, Sendable {
  public let id: String
  public let email: String
  public let displayName: String
  public let disabled: Bool

  package init(id: String, email: String, displayName: String, disabled: Bool) {
    self.id = id
    self.email = email
    self.displayName = displayName
    self.disabled = disabled
  }
}
