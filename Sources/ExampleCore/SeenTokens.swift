import Synchronization

/// The `jti`s of the write assertions accepted, each kept until the assertion could no longer pass
/// the lifetime check: a write assertion copied from a log replays nothing.
public final class SeenTokens: Sendable {
  private let kept = Mutex<[String: Int]>([:])

  /// An empty record.
  public init() {}

  /// Records `jti` until `keptUntil` and says whether it is new at `now`; forgets those past their
  /// time first.
  public func firstUse(_ jti: String, keptUntil: Int, now: Int) -> Bool {
    kept.withLock { kept in
      kept = kept.filter { $0.value >= now }
      guard kept[jti] == nil else { return false }
      kept[jti] = keptUntil
      return true
    }
  }
}
