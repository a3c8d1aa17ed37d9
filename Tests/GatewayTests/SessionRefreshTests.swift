import Edge
import EdgeTesting
import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import Gateway

/// A busy session's forwarded reads stay on the loop past its last-seen resolution: the first one
/// after it queues the session to be read again off the loop, which writes its last-seen time.
@Suite("Session refresh")
struct SessionRefreshTests {
  /// (idle lifetime, seconds from last seen to expiry) → (answerable for, read again after).
  static let times: [(idle: Int, expiresIn: Int, valid: Int, refresh: Int)] = [
    (30 * 86400, 86400, 120, 60),  // the usual native session: two resolutions, one
    (90, 86400, 90, 60),  // an idle end before the second resolution bounds it
    (45, 86400, 45, 45),  // an idle end before the first: never past it
    (30 * 86400, 100, 100, 60),  // the session's end
    (30 * 86400, 30, 30, 30),
  ]

  @Test(
    "a view answers until its end, its idle end or two resolutions, read again after one", arguments: times)
  func viewTimes(_ idle: Int, _ expiresIn: Int, _ valid: Int, _ refresh: Int) throws {
    var lifetimes = SessionLifetimes()
    lifetimes.nativeIdle = idle
    let services = ClientServices(
      database: try Engine.sqlite.location(), lifetimes: lifetimes, clock: { 1_000 })
    let session = SessionRecord(
      id: "ses_a", accountID: "acc_a", kind: .native, platform: "ios", appVersion: "2.3.0", createdAt: 0,
      lastSeenAt: 1_000, expiresAt: 1_000 + expiresIn, revokedAt: nil, revokedReason: nil)
    let times = services.viewTimes(session)
    #expect(times.validUntil == 1_000 + valid && times.refreshAt == 1_000 + refresh)
  }

  /// The teacher's session's last-seen time in the store.
  static func lastSeen(_ fixture: GatewayFixture) throws -> Int? {
    try fixture.store.sessions(.accountID(fixture.accounts[.teacher] ?? "")).first?.lastSeenAt
  }

  /// Waits (a bounded while) until the refresher has read and kept `count` batches in all.
  static func awaitBatches(_ fixture: GatewayFixture, _ count: Int) -> Bool {
    for _ in 0..<500 {
      if fixture.services.refresher.batchesRead >= count { return true }
      usleep(10_000)
    }
    return false
  }

  @Test("past the resolution a read is still answered on the loop, and the session's last-seen time moves")
  func refreshedOffTheLoop() throws {
    let fixture = try GatewayFixture(.sqlite)
    let created = try #require(try Self.lastSeen(fixture))
    let client = fixture.client()
    let token = try #require(fixture.tokens[.teacher])
    let read = client.request(
      .get, fixture.path("/students"), headers: [("Authorization", "Bearer \(token)")])
    // The first read goes to the pool (nothing cached yet); the next stays on the loop.
    #expect(client.respond(to: read).status.code == 200)
    #expect(client.decidedOnTheLoop(read))
    // A minute on: still on the loop (before, the pool read it again and wrote the last-seen time).
    fixture.clock.advance(61)
    #expect(client.decidedOnTheLoop(read))
    #expect(Self.awaitBatches(fixture, 1))
    #expect(try Self.lastSeen(fixture) == created + 61)
    #expect(client.respond(to: read).status.code == 200)
    // Another minute: read again from the new last-seen time.
    fixture.clock.advance(61)
    #expect(client.decidedOnTheLoop(read))
    #expect(Self.awaitBatches(fixture, 2))
    #expect(try Self.lastSeen(fixture) == created + 122)
  }

  @Test("a session revoked once its refresh is queued is refused on its next request, whichever comes first")
  func revokedMeanwhile() throws {
    let fixture = try GatewayFixture(.sqlite)
    let client = fixture.client()
    let token = try #require(fixture.tokens[.teacher])
    let read = client.request(
      .get, fixture.path("/students"), headers: [("Authorization", "Bearer \(token)")])
    #expect(client.respond(to: read).status.code == 200)
    fixture.clock.advance(61)
    #expect(client.decidedOnTheLoop(read))  // queues the refresh
    let session = try #require(try fixture.store.sessions(.accountID(fixture.accounts[.teacher] ?? "")).first)
    try fixture.store.revokeSession(id: session.id, reason: "test", actor: "test")
    #expect(!client.decidedOnTheLoop(read))
    #expect(client.respond(to: read).status.code == 401)
  }
}
