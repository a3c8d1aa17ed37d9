/// The gateway's signing keys and when each is published and signs: pure, over a time passed in.
///
/// A key is published (in the JWKS) as soon as it exists, signs from `signsFrom` (its creation
/// plus the policy's activation delay; the store's first key at once), and signs until its
/// successor starts to (`replacedAt`). It leaves the JWKS once `replacedAt` plus the longest
/// assertion lifetime and the allowed skew have passed: by then every assertion it signed has
/// expired.
public struct KeyRing: Sendable {
  /// One key and its times.
  public struct Entry: Sendable {
    /// The key.
    public let key: SigningKey
    /// When it was made, and published.
    public let createdAt: Int
    /// When it starts to sign.
    public let signsFrom: Int
    /// When its successor starts to sign, or nil while it has none.
    public let replacedAt: Int?

    /// An entry with every time given.
    public init(key: SigningKey, createdAt: Int, signsFrom: Int, replacedAt: Int?) {
      self.key = key
      self.createdAt = createdAt
      self.signsFrom = signsFrom
      self.replacedAt = replacedAt
    }
  }

  /// The keys, oldest first (by creation, then `kid`).
  public let entries: [Entry]
  /// The times the ring follows.
  public let policy: KeyPolicy

  /// A ring of `entries` (in any order) under `policy`.
  public init(_ entries: [Entry], policy: KeyPolicy = KeyPolicy()) {
    self.entries = entries.sorted { ($0.createdAt, $0.key.kid) < ($1.createdAt, $1.key.kid) }
    self.policy = policy
  }

  /// The key that signs at `now`: of those whose `signsFrom` has come, the latest to start. Should
  /// none have started (a first key made by an instance whose clock runs ahead), the first to
  /// start; nil only for an empty ring.
  public func signingKey(at now: Int) -> SigningKey? {
    // One pass, no array: this runs for every forwarded request.
    var latestStarted: Entry? = nil
    var earliest: Entry? = nil
    for entry in entries {
      if entry.signsFrom <= now,
        latestStarted.map({ ($0.signsFrom, $0.createdAt) < (entry.signsFrom, entry.createdAt) }) ?? true
      {
        latestStarted = entry
      }
      if earliest.map({ entry.signsFrom < $0.signsFrom }) ?? true { earliest = entry }
    }
    return (latestStarted ?? earliest)?.key
  }

  /// The keys in the JWKS at `now`, oldest first: every key not yet retired. A key is published
  /// from the moment it is in the ring (made and stored), even should this instance's clock say it
  /// was made a moment from now: publishing a key early costs nothing, and the store's first key
  /// may be signing already.
  public func published(at now: Int) -> [Entry] {
    entries.filter { entry in retiresAt(entry).map { now < $0 } ?? true }
  }

  /// When `entry` leaves the JWKS: `policy.retention` after its successor starts to sign.
  public func retiresAt(_ entry: Entry) -> Int? {
    entry.replacedAt.map { $0 + policy.retention }
  }

  /// The key made last: the one no other replaces (keys made in the same second sort by `kid`, so
  /// it need not be the last entry).
  public var newest: Entry? { entries.first { $0.replacedAt == nil } ?? entries.last }

  /// Whether a new key is due at `now`: the ring is empty, or its newest key is at least
  /// `policy.rotationAge` old.
  public func rotationDue(at now: Int) -> Bool {
    guard let newest = entries.last else { return true }
    return now - newest.createdAt >= policy.rotationAge
  }

  /// When a key made at `now` starts to sign: at once for the first key, else after the activation
  /// delay (and never before a key already waiting to sign).
  public func signsFrom(newKeyAt now: Int) -> Int {
    guard !entries.isEmpty else { return now }
    return max(now + policy.activationDelay, entries.map(\.signsFrom).max() ?? now)
  }

  /// The ring after `key` is made at `now` (a rotation): the new key signs from
  /// `signsFrom(newKeyAt:)`, and the keys that had no successor get it as theirs.
  public func adding(_ key: SigningKey, at now: Int) -> KeyRing {
    let start = signsFrom(newKeyAt: now)
    let replaced = entries.map { entry in
      entry.replacedAt != nil
        ? entry
        : Entry(key: entry.key, createdAt: entry.createdAt, signsFrom: entry.signsFrom, replacedAt: start)
    }
    return KeyRing(
      replaced + [Entry(key: key, createdAt: now, signsFrom: start, replacedAt: nil)], policy: policy)
  }
}
