import Synchronization

/// The writes' idempotency keys (draft-ietf-httpapi-idempotency-key-header): under the caller,
/// the school, the route and the key, the fingerprint of the first request and, once answered,
/// its answer. In memory: the example core forgets them when it stops.
public final class IdempotencyLedger: Sendable {
  /// Where a key is recorded: `(sub, school, route, idk)`.
  public struct Key: Hashable, Sendable {
    /// `sub`.
    public var subject: String
    /// `school`.
    public var school: String
    /// The route's name (`attendance`).
    public var route: String
    /// `idk`.
    public var key: String
  }

  /// What a write finds under its key.
  public enum Claim: Equatable, Sendable {
    /// A new key, now in flight: do the write, then `finish`.
    case proceed
    /// The same request was answered: send this again.
    case replay(CoreResponse)
    /// The same request is still being answered (409).
    case inFlight
    /// The key was used for another request (422).
    case mismatch
  }

  private enum Entry {
    case inFlight(fingerprint: [UInt8])
    case answered(fingerprint: [UInt8], CoreResponse)
  }

  private let entries = Mutex<[Key: Entry]>([:])

  /// No keys yet.
  public init() {}

  /// Claims `key` for a request whose fingerprint is `fingerprint`.
  public func begin(_ key: Key, fingerprint: [UInt8]) -> Claim {
    entries.withLock { entries in
      switch entries[key] {
      case nil:
        entries[key] = .inFlight(fingerprint: fingerprint)
        return .proceed
      case .inFlight(let first): return first == fingerprint ? .inFlight : .mismatch
      case .answered(let first, let response): return first == fingerprint ? .replay(response) : .mismatch
      }
    }
  }

  /// Records `response` as the answer of the request that claimed `key`.
  public func finish(_ key: Key, response: CoreResponse) {
    entries.withLock { entries in
      guard case .inFlight(let fingerprint)? = entries[key] else { return }
      entries[key] = .answered(fingerprint: fingerprint, response)
    }
  }
}
