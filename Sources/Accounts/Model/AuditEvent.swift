/// One audit event: who did what to whom, never a secret.
public struct AuditEvent: Equatable, Sendable {
  public let at: Int
  public let actor: String?
  public let action: String
  public let subject: String?
  public let detail: String?
}
