/// A member's role in a school, as the assertion's `role` claim names it, lowest first.
public enum CoreRole: String, Sendable, Comparable, CaseIterable {
  /// Reads only.
  case readOnly = "read_only"
  /// Reads, and records attendance.
  case teacher
  /// Everything.
  case administrator

  private var rank: Int {
    switch self {
    case .readOnly: 0
    case .teacher: 1
    case .administrator: 2
    }
  }

  public static func < (a: CoreRole, b: CoreRole) -> Bool { a.rank < b.rank }
}
