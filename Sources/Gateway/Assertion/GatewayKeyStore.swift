import Accounts
import Store

/// The gateway's signing keys in the store (`gateway_keys`), each private key sealed under the
/// key-encryption key. Every instance of a fleet reads the same rows, so all sign with the same key
/// and publish the same JWKS. Keys are made under an exclusive lock of their own
/// (`ExclusiveLock.gatewayKeys`: PostgreSQL's transaction-scoped advisory lock, SQLite's one
/// writer), checked again once it is held, so however many instances start or rotate at the same
/// moment, one key is made. Every key made is audited (`gateway.key_created` for a store's first,
/// `gateway.key_rotated` after), never with its material.
public struct GatewayKeyStore {
  let store: ClientStore
  let kek: KeyEncryptionKey
  /// The times the keys follow.
  public let policy: KeyPolicy

  /// The keys of `store`, sealed under `kek`.
  public init(store: ClientStore, kek: KeyEncryptionKey, policy: KeyPolicy = KeyPolicy()) {
    self.store = store
    self.kek = kek
    self.policy = policy
  }

  /// Every key in the store, opened. Fails when a key does not open under this KEK (another KEK
  /// file, or a row altered or moved) or does not match its public key.
  public func ring() throws(StoreError) -> KeyRing {
    let rows = try store.db.query(
      "SELECT kid, sealed, public_x, created_at, signs_from, replaced_at FROM gateway_keys ORDER BY created_at, kid"
    )
    var entries: [KeyRing.Entry] = []
    for row in rows { entries.append(try entry(row)) }
    return KeyRing(entries, policy: policy)
  }

  /// The keys, with the store's first made now if it has none (it signs at once): what `serve`
  /// runs at start. Made exactly once, however many instances start together.
  public func ensureFirstKey(now: Int) throws(StoreError) -> KeyRing {
    let ring = try ring()
    guard ring.entries.isEmpty else { return ring }
    return try store.db.exclusiveTransaction(.gatewayKeys) { () throws(StoreError) -> KeyRing in
      let ring = try self.ring()
      guard ring.entries.isEmpty else { return ring }
      return try add(to: ring, now: now, actor: "start")
    }
  }

  /// Makes a new key now (`band-edge admin keys rotate`): published at once, signing after the
  /// policy's activation delay, the current key replaced then. Keys retired from the JWKS before
  /// now are deleted in the same transaction.
  public func rotate(now: Int, actor: String) throws(StoreError) -> KeyRing {
    try store.db.exclusiveTransaction(.gatewayKeys) { () throws(StoreError) -> KeyRing in
      try add(to: try removeRetired(from: try ring(), now: now, actor: actor), now: now, actor: actor)
    }
  }

  /// Rotates when the newest key is `policy.rotationAge` old (or there is none), deciding under
  /// the lock, so a fleet that asks together rotates once. Returns the keys, rotated or not.
  public func rotateIfDue(now: Int, actor: String) throws(StoreError) -> KeyRing {
    try store.db.exclusiveTransaction(.gatewayKeys) { () throws(StoreError) -> KeyRing in
      let ring = try ring()
      guard ring.rotationDue(at: now) else { return ring }
      return try add(to: try removeRetired(from: ring, now: now, actor: actor), now: now, actor: actor)
    }
  }
}
