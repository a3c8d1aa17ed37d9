import Store
import TestSupport
import Testing

@testable import Accounts
@testable import Gateway

@Suite("The gateway's keys in the store, on every engine")
struct GatewayKeyStoreTests {
  static let kek = try? KeyEncryptionKey(bytes: Secrets.randomBytes(32))

  static func keys(_ store: ClientStore) throws -> GatewayKeyStore {
    GatewayKeyStore(store: store, kek: try #require(kek))
  }

  static func actions(_ store: ClientStore) throws -> [String] {
    try store.auditEvents().map(\.action).filter { $0.hasPrefix("gateway.") }
  }

  @Test("the first key is made once, however many instances start together", arguments: Engine.available)
  func firstKeyOnce(engine: Engine) throws {
    let location = try engine.location()
    let kek = try #require(Self.kek)
    let kids = together(4) { _ -> [String]? in
      guard let database = try? location.open(),
        let store = try? ClientStore(database: database, clock: { 1000 })
      else { return nil }
      return try? GatewayKeyStore(store: store, kek: kek).ensureFirstKey(now: 1000).entries.map(\.key.kid)
    }
    #expect(kids.count == 4 && !kids.contains(nil))
    let made = try #require(kids.first ?? nil)
    #expect(made.count == 1 && kids.allSatisfy { $0 == made })
    let store = try ClientStore(database: try location.open(), clock: { 1000 })
    #expect(try Self.actions(store) == ["gateway.key_created"])
    let ring = try Self.keys(store).ensureFirstKey(now: 2000)
    #expect(ring.entries.map(\.key.kid) == made)
    #expect(ring.signingKey(at: 1000)?.kid == ring.entries.first?.key.kid, "the first key signs at once")
  }

  @Test(
    "a key is stored sealed: neither the row nor the audit holds the private key", arguments: Engine.available
  )
  func sealedAtRest(engine: Engine) throws {
    let (store, clock, _) = try makeStore(engine)
    let ring = try Self.keys(store).ensureFirstKey(now: clock.read())
    let key = try #require(ring.entries.first?.key)
    let secret = try key.privateKey()
    let row = try #require(
      try store.db.query("SELECT sealed, public_x FROM gateway_keys WHERE kid = ?", [.text(key.kid)]).first)
    let sealed = try #require(row[0].blob)
    #expect(sealed.count == 12 + 32 + 16)
    #expect(!sealed.indices.contains { sealed[$0...].starts(with: secret.prefix(8)) })
    #expect(row[1].text == Secrets.base64url(key.publicKey))
    let audit = try store.auditEvents().map { "\($0.subject ?? "") \($0.detail ?? "")" }.joined()
    #expect(!audit.contains(Secrets.base64url(secret)) && audit.contains(key.kid))
  }

  @Test("another KEK, or a sealed key moved to another row, fails and says why", arguments: Engine.available)
  func wrongKEK(engine: Engine) throws {
    let (store, clock, _) = try makeStore(engine)
    let keys = try Self.keys(store)
    _ = try keys.ensureFirstKey(now: clock.read())
    let other = GatewayKeyStore(store: store, kek: try KeyEncryptionKey(bytes: Secrets.randomBytes(32)))
    #expect {
      try other.ring()
    } throws: {
      "\($0)".contains("does not open with this key-encryption key: the KEK file is not the one")
    }
    #expect {
      try other.ensureFirstKey(now: clock.read())
    } throws: { "\($0)".contains("does not open") }
    _ = try keys.rotate(now: clock.read(), actor: "cli")
    try store.db.query(
      "UPDATE gateway_keys SET sealed = (SELECT sealed FROM gateway_keys ORDER BY signs_from DESC LIMIT 1)")
    #expect { try keys.ring() } throws: { "\($0)".contains("does not open") }
  }

  @Test(
    "a rotation keeps the old key published until its assertions have expired", arguments: Engine.available)
  func rotation(engine: Engine) throws {
    let (store, clock, _) = try makeStore(engine)
    let keys = try Self.keys(store)
    let t = clock.read()
    let first = try #require(try keys.ensureFirstKey(now: t).entries.first?.key.kid)
    _ = try keys.rotate(now: t + 1000, actor: "cli")
    let ring = try keys.ring()
    let second = try #require(ring.entries.last?.key.kid)
    #expect(ring.entries.map(\.key.kid) == [first, second])
    #expect(
      ring.entries.map(\.signsFrom) == [t, t + 1600] && ring.entries.map(\.replacedAt) == [t + 1600, nil])
    #expect(ring.signingKey(at: t + 1599)?.kid == first && ring.signingKey(at: t + 1600)?.kid == second)
    #expect(ring.published(at: t + 1664).map(\.key.kid) == [first, second])
    #expect(ring.published(at: t + 1665).map(\.key.kid) == [second])
    #expect(try Self.actions(store) == ["gateway.key_created", "gateway.key_rotated"])
    #expect(try store.auditEvents().last?.detail == "signs from \(t + 1600); replaces \(first)")
    // A later rotation deletes the key retired meanwhile.
    let later = try keys.rotate(now: t + 5000, actor: "cli")
    #expect(later.entries.count == 2 && later.entries.first?.key.kid == second)
    #expect(try keys.ring().entries.map(\.key.kid) == later.entries.map(\.key.kid))
    #expect(
      try Self.actions(store) == [
        "gateway.key_created", "gateway.key_rotated", "gateway.key_removed", "gateway.key_rotated",
      ])
  }

  @Test(
    "a due rotation happens once across instances; one not due changes nothing", arguments: Engine.available)
  func rotateIfDue(engine: Engine) throws {
    let (store, clock, location) = try makeStore(engine)
    let t = clock.read()
    _ = try Self.keys(store).ensureFirstKey(now: t)
    #expect(try Self.keys(store).rotateIfDue(now: t + 86_400, actor: "schedule").entries.count == 1)
    let kek = try #require(Self.kek)
    let due = t + 30 * 86_400
    let counts = together(3) { _ -> Int? in
      guard let database = try? location.open(),
        let store = try? ClientStore(database: database, clock: { due })
      else { return nil }
      return try? GatewayKeyStore(store: store, kek: kek).rotateIfDue(now: due, actor: "schedule").entries
        .count
    }
    #expect(counts == [2, 2, 2])
    #expect(try Self.actions(store) == ["gateway.key_created", "gateway.key_rotated"])
  }
}
