/// Read assertions already signed, reused until shortly before they expire: one Ed25519 signature
/// costs tens of microseconds, more than a proxied read should, and a session's reads in one school
/// all carry the same claims but for the times.
///
/// Bound to one thread (a pool worker: `GatewayServices` keeps one per thread): each owns its own
/// cache and nothing else touches it, so it
/// needs no lock (it is not `Sendable`, and the compiler keeps it on its thread). Bounded: past
/// `capacity` entries the oldest signed goes first. The time is passed in, so tests move it by hand.
///
/// An entry is found only under everything its token says (`Key`): a changed role, another
/// session (a new sign-in), another school, upstream or signing key (`kid`) finds nothing and gets
/// a new signature. A revoked session never reaches the cache: the gateway authenticates every
/// request before asking it.
public final class ReadAssertionCache {
  /// What a cached token was signed for: every claim but the times, and the key that signed it.
  public struct Key: Hashable, Sendable {
    /// `iss`.
    public var issuer: String
    /// `aud`.
    public var audience: String
    /// `sub`, `sid`, `school`, `role`, `chn`, `av`.
    public var caller: Caller
    /// The signing key's ID.
    public var kid: String

    /// A key with every part given.
    public init(issuer: String, audience: String, caller: Caller, kid: String) {
      self.issuer = issuer
      self.audience = audience
      self.caller = caller
      self.kid = kid
    }

    /// Hashes the session and the school only: they all but single out an entry, and equality
    /// still compares every part. (Hashing all nine strings cost more than the rest of the lookup.)
    public func hash(into hasher: inout Hasher) {
      hasher.combine(caller.session)
      hasher.combine(caller.school)
    }
  }

  private struct Entry {
    let token: String
    let issuedAt: Int
    let expiresAt: Int
    let serial: UInt64
  }

  /// The most entries kept.
  public let capacity: Int
  /// Seconds before its `exp` at which a token stops being handed out (the upstream must still
  /// receive it alive, whatever the queueing and clock skew between the two).
  public let margin: Int

  private var entries: [Key: Entry] = [:]
  /// Keys in the order they were signed; a key signed again leaves a stale record behind (its
  /// serial no longer matches), dropped when the oldest is evicted or the list is compacted.
  private var order: [(key: Key, serial: UInt64)] = []
  private var head = 0
  private var serial: UInt64 = 0

  /// A cache of at most `capacity` tokens (at least 1), each handed out until `margin` seconds
  /// before it expires.
  public init(capacity: Int = 4096, margin: Int = 10) {
    self.capacity = max(1, capacity)
    self.margin = max(0, margin)
  }

  /// How many tokens are kept.
  public var count: Int { entries.count }

  /// How many records the eviction order holds, stale ones included: at most twice the capacity.
  var orderRecords: Int { order.count }

  /// The token kept for `key`, when it was issued no later than `now` and `now` is more than
  /// `margin` seconds before its expiry; a token past that is forgotten.
  public func token(for key: Key, now: Int) -> String? {
    guard let entry = entries[key] else { return nil }
    guard entry.issuedAt <= now, now < entry.expiresAt - margin else {
      entries[key] = nil
      return nil
    }
    return entry.token
  }

  /// Keeps `token`, signed for `key` with these times, in place of any earlier one; evicts the
  /// oldest signed when the cache is over its capacity.
  public func keep(_ token: String, for key: Key, issuedAt: Int, expiresAt: Int) {
    serial &+= 1
    entries[key] = Entry(token: token, issuedAt: issuedAt, expiresAt: expiresAt, serial: serial)
    order.append((key, serial))
    while entries.count > capacity { evictOldest() }
    if order.count > 2 * capacity { compact() }
  }

  private func evictOldest() {
    while head < order.count {
      let (key, recorded) = order[head]
      head += 1
      if entries[key]?.serial == recorded {
        entries[key] = nil
        return
      }
    }
  }

  /// Drops the records already consumed and those of keys signed again or forgotten since.
  private func compact() {
    order = order[head...].filter { entries[$0.key]?.serial == $0.serial }
    head = 0
  }
}

@available(*, unavailable, message: "a read-assertion cache belongs to one event loop")
extension ReadAssertionCache: Sendable {}
