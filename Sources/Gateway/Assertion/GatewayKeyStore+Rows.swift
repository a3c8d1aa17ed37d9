import Accounts
import Store

extension GatewayKeyStore {
  /// The key of one `gateway_keys` row, opened and checked against its kid and public key.
  func entry(_ row: [DatabaseValue]) throws(StoreError) -> KeyRing.Entry {
    guard row.count == 6, let kid = row[0].text, let sealed = row[1].blob, let x = row[2].text,
      let createdAt = row[3].int, let signsFrom = row[4].int
    else { throw StoreError.failed("a gateway key row is damaged") }
    guard let privateKey = kek.open(sealed, kid: kid) else {
      throw StoreError.failed(
        "the gateway key \(kid) does not open with this key-encryption key: the KEK file is not the one "
          + "the keys were sealed under, or the row was altered")
    }
    let key: SigningKey
    do { key = try SigningKey(privateKey: privateKey) } catch {
      throw StoreError.failed("the gateway key \(kid) is damaged: \(error)")
    }
    guard key.kid == kid, Secrets.base64url(key.publicKey) == x else {
      throw StoreError.failed("the gateway key \(kid) does not match its public key")
    }
    return KeyRing.Entry(key: key, createdAt: createdAt, signsFrom: signsFrom, replacedAt: row[5].int)
  }

  /// Makes a new key at `now` and writes it into `ring`'s store (inside the caller's exclusive
  /// transaction): the keys without a successor get the new key's start as theirs.
  func add(to ring: KeyRing, now: Int, actor: String) throws(StoreError) -> KeyRing {
    let key: SigningKey
    let sealed: [UInt8]?
    do {
      key = try SigningKey.generate()
      sealed = kek.seal(try key.privateKey(), kid: key.kid)
    } catch {
      throw StoreError.failed("a gateway key could not be made: \(error)")
    }
    guard let sealed else { throw StoreError.failed("a gateway key could not be sealed") }
    let next = ring.adding(key, at: now)
    let signsFrom = ring.signsFrom(newKeyAt: now)
    let replaced = ring.entries.filter { $0.replacedAt == nil }.map(\.key.kid)
    try store.db.query(
      "UPDATE gateway_keys SET replaced_at = ? WHERE replaced_at IS NULL", [.integer(Int64(signsFrom))])
    try store.db.query(
      "INSERT INTO gateway_keys (kid, sealed, public_x, created_at, signs_from) VALUES (?, ?, ?, ?, ?)",
      [
        .text(key.kid), .blob(sealed), .text(Secrets.base64url(key.publicKey)), .integer(Int64(now)),
        .integer(Int64(signsFrom)),
      ])
    try store.audit(
      actor: actor, action: ring.entries.isEmpty ? "gateway.key_created" : "gateway.key_rotated",
      subject: key.kid,
      detail: "signs from \(signsFrom)"
        + (replaced.isEmpty ? "" : "; replaces \(replaced.joined(separator: ", "))"))
    return next
  }

  /// `ring` without the keys retired from the JWKS before `now`, deleted from the store too.
  func removeRetired(from ring: KeyRing, now: Int, actor: String) throws(StoreError) -> KeyRing {
    var kept: [KeyRing.Entry] = []
    for entry in ring.entries {
      guard let retires = ring.retiresAt(entry), retires <= now else {
        kept.append(entry)
        continue
      }
      try store.db.query("DELETE FROM gateway_keys WHERE kid = ?", [.text(entry.key.kid)])
      try store.audit(actor: actor, action: "gateway.key_removed", subject: entry.key.kid)
    }
    return KeyRing(kept, policy: ring.policy)
  }
}
