import Edge
import Synchronization
import TestSupport
import Testing

@testable import Accounts
@testable import ClientAPI
@testable import Store

@Suite("Lockout and rate limits")
struct LimitsTests {
  @Test(
    "the lockout schedule: 5 failures lock for 1 minute, doubling to 15",
    arguments: [(1, 0), (4, 0), (5, 60), (6, 120), (7, 240), (8, 480), (9, 900), (10, 900), (60, 900)])
  func schedule(failures: Int, seconds: Int) {
    let until = Lockout.lockedUntil(failures: failures, now: 1000)
    #expect(until == (seconds == 0 ? 0 : 1000 + seconds))
  }

  @Test(
    "a locked email refuses even the right password; others and existing sessions are untouched",
    arguments: Engine.available)
  func lockout(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let hash = f.pages.context.hasher.hash("the right password")
    for email in ["ada@example.test", "bo@example.test"] {
      _ = try f.store.createAccount(
        email: EmailAddress(stringLiteral: email), displayName: email, passwordHash: hash, actor: "test")
    }
    let existing = try f.signedIn("cy@example.test")
    let store = try f.pages.context.store()
    func attempt(_ email: String, _ password: String) throws -> SignInCheck {
      try f.pages.checkPassword(email: email, password: password, store: store)
    }
    for _ in 0..<4 { #expect(try attempt("ADA@example.test", "wrong") == .refused) }
    #expect(
      try attempt("ada@example.test", "the right password").passed, "4 failures do not lock; success resets")
    for _ in 0..<4 { #expect(try attempt("ada@example.test", "wrong") == .refused) }
    #expect(try attempt("ada@example.test", "wrong") == .locked, "the 5th failure locks, and says so")
    #expect(try attempt("ada@example.test", "the right password") == .locked, "locked")
    #expect(try attempt("bo@example.test", "the right password").passed, "another account is not locked")
    #expect(f.call(.get, token: existing).status == .ok, "existing sessions go on")
    // Unknown emails lock the same way (so locking says nothing about existence).
    for _ in 0..<4 { #expect(try attempt("nobody@example.test", "wrong") == .refused) }
    #expect(try attempt("nobody@example.test", "wrong") == .locked)
    #expect(try store.isLocked(email: "nobody@example.test"))
    // Attempts while locked did not extend the 1-minute lock.
    f.clock.advance(60)
    #expect(try attempt("ada@example.test", "the right password").passed)
    #expect(try !store.isLocked(email: "ada@example.test"))
  }

  @Test(
    "a failure while locked does not extend the lock; after it the doubling resumes, capped at 15 minutes",
    arguments: Engine.available, [0, 1, 30])
  func lockoutsEnd(engine: Engine, attemptsWhileLocked: Int) throws {
    let f = try SessionFixture(engine)
    let store = try f.pages.context.store()
    let email: EmailAddress = "tom@example.test"
    for _ in 0..<4 { #expect(try !store.recordSignInFailure(accountID: nil, email: email)) }
    var lock = 60
    for round in 0..<8 {
      #expect(try store.recordSignInFailure(accountID: nil, email: email), "round \(round) locks")
      // Someone keeps trying through the whole lock: it still ends on time.
      for i in 0..<attemptsWhileLocked {
        f.clock.advance(i == 0 ? 1 : 0)
        #expect(try store.recordSignInFailure(accountID: nil, email: email))
      }
      f.clock.advance(lock - 1 - (attemptsWhileLocked > 0 ? 1 : 0))
      #expect(try store.isLocked(email: email), "round \(round): still locked a second before the end")
      f.clock.advance(1)
      #expect(try !store.isLocked(email: email), "round \(round): the \(lock) s lock has ended")
      lock = min(lock * 2, Lockout.longest)
    }
    #expect(lock == Lockout.longest)
  }

  @Test(
    "a browser that signed in before is not held by a stranger's lock of its email; the account's trusted browsers share one lockout",
    arguments: Engine.available)
  func trustedDevice(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let hash = f.pages.context.hasher.hash("the right password")
    let tom = try f.store.createAccount(
      email: "tom@example.test", displayName: "Tom", passwordHash: hash, actor: "test")
    let store = try f.pages.context.store()
    #expect(
      try f.pages.checkPassword(email: "tom@example.test", password: "the right password", store: store)
        .passed)
    let device = try store.trustDevice(account: tom, replacing: nil)
    // A stranger keeps the email locked, attempt after attempt, lock after lock.
    for _ in 0..<9 {
      _ = try f.pages.checkPassword(email: "tom@example.test", password: "guess", store: store)
      f.clock.advance(Lockout.longest)
    }
    _ = try f.pages.checkPassword(email: "tom@example.test", password: "guess", store: store)
    #expect(
      try f.pages.checkPassword(email: "tom@example.test", password: "the right password", store: store)
        == .locked)
    // Tom's own browser signs in all the same.
    #expect(
      try f.pages.checkPassword(
        email: "tom@example.test", password: "the right password", store: store, device: device
      ).passed)
    // Failures from any of the account's trusted browsers count against one budget: two
    // cookies give no more guesses than one.
    f.clock.advance(1)
    let second = try store.trustDevice(account: tom, replacing: nil)
    for i in 0..<Lockout.threshold {
      let result = try f.pages.checkPassword(
        email: "tom@example.test", password: "typo", store: store, device: i % 2 == 0 ? device : second)
      #expect(result == (i < Lockout.threshold - 1 ? .refused : .locked))
    }
    for cookie in [device, second] {
      #expect(
        try f.pages.checkPassword(
          email: "tom@example.test", password: "the right password", store: store, device: cookie) == .locked)
    }
    // A cookie for another account, a forged one or a malformed one is no trust.
    let cy = try f.store.createAccount(
      email: "cy@example.test", displayName: "Cy", passwordHash: hash, actor: "test")
    let other = try store.trustDevice(account: cy, replacing: nil)
    var forged = Array(device)
    forged[forged.count - 10] = forged[forged.count - 10] == "x" ? "y" : "x"
    for cookie in [other, String(forged), "1.2.3", "", String(repeating: "9", count: 300)] {
      #expect(try store.trustedDevice(cookie, email: "tom@example.test") == nil, "\(cookie)")
    }
    // A device stays trusted for 180 days from the sign-in that made its cookie.
    #expect(try store.trustedDevice(device, email: "tom@example.test") != nil)
    f.clock.advance(TrustedDevice.lifetime)
    #expect(try store.trustedDevice(device, email: "tom@example.test") == nil)
  }

  @Test(
    "an account keeps at most five trusted browsers, one place each, and a credential change forgets them all",
    arguments: Engine.available)
  func trustedDeviceList(engine: Engine) throws {
    let f = try SessionFixture(engine)
    let tom = try f.store.createAccount(
      email: "tom@example.test", displayName: "Tom", passwordHash: f.pages.context.hasher.hash("x"),
      actor: "test")
    var cookies: [String] = []
    for _ in 0..<(TrustedDevice.perAccount + 2) {
      f.clock.advance(1)
      cookies.append(try f.store.trustDevice(account: tom, replacing: nil))
    }
    #expect(try f.store.trustedDeviceCount(accountID: tom.id) == TrustedDevice.perAccount)
    #expect(try f.store.trustedDevice(cookies[0], email: "tom@example.test") == nil)
    #expect(try f.store.trustedDevice(cookies[1], email: "tom@example.test") == nil)
    #expect(try f.store.trustedDevice(cookies[2], email: "tom@example.test") != nil)
    // The same browser signing in again takes its own place, not another's.
    f.clock.advance(1)
    let again = try f.store.trustDevice(account: tom, replacing: cookies.last)
    #expect(try f.store.trustedDeviceCount(accountID: tom.id) == TrustedDevice.perAccount)
    #expect(try f.store.trustedDevice(cookies.last, email: "tom@example.test") == nil)
    #expect(try f.store.trustedDevice(cookies[2], email: "tom@example.test") != nil)
    #expect(try f.store.trustedDevice(again, email: "tom@example.test") != nil)
    try f.store.changePassword(
      accountID: tom.id, keeping: "", hash: "new", host: "example.test",
      mail: MailTemplates.message(
        kind: "t", to: "tom@example.test", name: nil, subject: "s", paragraphs: [], reason: "r"))
    #expect(try f.store.trustedDeviceCount(accountID: tom.id) == 0)
    #expect(try f.store.trustedDevice(again, email: "tom@example.test") == nil)
  }

  @Test(
    "an attacker's spellings of a locked email never reach the account",
    arguments: Engine.available,
    [
      "tom@example.test\u{0}x", "\u{0}tom@example.test", "tom@example.test\u{0}", "tom\u{0}@example.test",
      "tom@exаmple.test", "tоm@example.test", "tom@example.test\u{200B}", "\u{FEFF}tom@example.test",
      "ｔｏｍ@example.test", "tom@example.test.", "tom @example.test", "tom@example.test\r\n",
      "tom@example.test\u{7F}", "tom@@example.test", "\"tom\"@example.test", "tom@example.test%00x",
    ])
  func lockedSpellings(engine: Engine, spelling: String) throws {
    let f = try SessionFixture(engine)
    let hash = f.pages.context.hasher.hash("the right password")
    _ = try f.store.createAccount(
      email: "tom@example.test", displayName: "Tom", passwordHash: hash, actor: "test")
    let store = try f.pages.context.store()
    for _ in 0..<5 { _ = try f.pages.checkPassword(email: "tom@example.test", password: "x", store: store) }
    #expect(try store.isLocked(email: "tom@example.test"))
    #expect(try !f.pages.checkPassword(email: spelling, password: "the right password", store: store).passed)
  }

  @Test(
    "the same address however it is typed counts as one: case and white space at the ends",
    arguments: Engine.available,
    [
      "TOM@EXAMPLE.TEST", " tom@example.test", "tom@example.test\u{2003}", "\u{00A0}Tom@Example.Test",
    ])
  func sameAddress(engine: Engine, spelling: String) throws {
    let f = try SessionFixture(engine)
    let store = try f.pages.context.store()
    for _ in 0..<5 { _ = try f.pages.checkPassword(email: spelling, password: "x", store: store) }
    #expect(try store.isLocked(email: "tom@example.test"))
  }

  @Test("token buckets: a burst, then a wait in whole seconds, refilled over time, per address")
  func buckets() {
    let time = Mutex(0.0)
    let limiter = RateLimiter(RateLimit(burst: 3, perMinute: 30), now: { time.withLock { $0 } })
    #expect((0..<3).map { _ in limiter.take("a") } == [nil, nil, nil])
    #expect(limiter.take("a") == 2, "one token every 2 seconds")
    #expect(limiter.take("b") == nil, "another address has its own bucket")
    time.withLock { $0 += 2 }
    #expect(limiter.take("a") == nil)
    #expect(limiter.take("a") == 2)
  }

  @Test("the bucket table is bounded; the least recently seen address is forgotten first, never a new one")
  func bounded() {
    let time = Mutex(0.0)
    let limiter = RateLimiter(
      RateLimit(burst: 1, perMinute: 60), maxAddresses: 2, shards: 1, now: { time.withLock { $0 } })
    #expect(limiter.take("a") == nil)
    #expect(limiter.take("b") == nil)
    #expect(limiter.take("a") == 1, "a is tracked, and now the most recent")
    #expect(limiter.take("c") == nil, "a new address is always counted: b, the least recent, goes")
    #expect(limiter.take("c") == 1)
    #expect(limiter.take("a") == 1, "a stayed")
    #expect(limiter.take("b") == nil, "b was forgotten")
    #expect(limiter.tracked == 2)
  }

  @Test("a flood of distinct addresses keeps the table at its bound in every shard", arguments: [1, 7, 64])
  func flood(shards: Int) {
    let limiter = RateLimiter(
      RateLimit(burst: 2, perMinute: 60), maxAddresses: 1000, shards: shards, now: { 0 })
    for i in 0..<50_000 { _ = limiter.take("198.51.\(i / 256 % 256).\(i % 256)-\(i)") }
    let bound = shards * ((1000 + shards - 1) / shards)
    #expect(limiter.tracked <= bound && limiter.tracked >= bound - shards)
    #expect(limiter.take("203.0.113.1") == nil && limiter.take("203.0.113.1") == nil)
    #expect(limiter.take("203.0.113.1") == 1, "the newest address is counted even when full")
  }

  @Test(
    "what an address counts as: IPv4 itself, IPv6 its /64, IPv4-mapped IPv6 the IPv4 address",
    arguments: [
      ("192.0.2.7", "192.0.2.7"), ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
      ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"), ("2001:DB8:0:0::1", "2001:db8:0:0::/64"),
      ("::1", "0:0:0:0::/64"), ("::ffff:192.0.2.7", "192.0.2.7"), ("not-an-address", "not-an-address"),
      ("fe80::1%eth0", "fe80::1%eth0"),
    ])
  func keys(address: String, key: String) {
    #expect(RateLimiter.key(address) == key)
  }

  @Test("every address in one /64 shares one bucket")
  func samePrefix() {
    let limiter = RateLimiter(RateLimit(burst: 2, perMinute: 60), now: { 0 })
    #expect(limiter.take("2001:db8::1") == nil)
    #expect(limiter.take("2001:db8::2") == nil)
    #expect(limiter.take("2001:db8::ffff:3") != nil)
    #expect(limiter.take("2001:db8:0:1::1") == nil, "the next /64 is another subscriber")
  }

  @Test(
    "the client address: the peer, or behind a trusted proxy the right-most untrusted forwarded entry",
    arguments: [
      ("10.0.0.9:5000", [], "10.0.0.9"),
      ("10.0.0.9:5000", ["1.2.3.4"], "10.0.0.9"),  // not a trusted peer: the header is ignored
      ("127.0.0.1:5000", ["1.2.3.4"], "1.2.3.4"),
      ("127.0.0.1:5000", ["6.6.6.6, 1.2.3.4"], "1.2.3.4"),  // the client cannot choose by prepending
      ("127.0.0.1:5000", ["1.2.3.4, 127.0.0.2"], "1.2.3.4"),  // trusted hops are skipped
      ("127.0.0.1:5000", ["127.0.0.2"], "127.0.0.1"),
      ("[::1]:5000", ["2001:db8::1"], "2001:db8::1"),
      ("127.0.0.1:5000", ["[2001:db8::2]:443"], "2001:db8::2"),
      // Several fields are one list in order (RFC 9110 §5.3): the last field's last entry is nearest.
      ("127.0.0.1:5000", ["6.6.6.6", "1.2.3.4, 127.0.0.2"], "1.2.3.4"),
      ("127.0.0.1:5000", ["6.6.6.6", "127.0.0.2"], "6.6.6.6"),
      ("127.0.0.1:5000", ["5.5.5.5,\t1.2.3.4 ,", ""], "1.2.3.4"),  // whitespace and empty entries
      ("127.0.0.1:5000", [",, ,"], "127.0.0.1"),
    ] as [(String, [String], String)])
  func clientAddress(peer: String, forwarded: [String], expected: String) {
    var request = Request(
      method: .post, target: "/sign-in", headers: forwarded.map { ("X-Forwarded-For", $0) })
    request.client = peer
    let few: Set<String> = ["127.0.0.1", "127.0.0.2", "::1"]
    // A long list is looked up by hash, a short one compared byte by byte: the same answers.
    let many = few.union((1...20).map { "192.0.2.\($0)" })
    for trusted in [few, many] {
      #expect(ClientAddress.of(request, trustedProxies: trusted) == expected)
      let resolved = ClientAddress.resolve(request, trustedProxies: trusted)
      #expect(resolved.address == expected)
      #expect(resolved.peerTrusted == !peer.hasPrefix("10."), "whether the peer itself is a trusted proxy")
    }
  }
}

@Suite("Account deletion and retention")
struct DeletionTests {
  @Test(
    "deletion ends every session at once; personal fields go after the window, the ID stays",
    arguments: Engine.available)
  func deletion(engine: Engine) throws {
    let f = try SessionFixture(engine)
    _ = try f.store.createSchool(name: "Northfield Primary", slug: "northfield", actor: "test")
    let token = try f.signedIn("ada@example.test", schools: [("northfield", .teacher)])
    let (account, _) = try #require(try f.store.account(email: "ada@example.test"))
    try f.store.requestDeletion(accountID: account.id)
    #expect(f.call(.get, token: token).status == .unauthorized)
    #expect(throws: StoreError.self) {
      try f.store.setDisabled(email: "ada@example.test", false, actor: "cli")
    }
    f.clock.advance(29 * 86400)
    #expect(try f.store.eraseDeletedAccounts(window: 30 * 86400) == 0)
    f.clock.advance(86400)
    #expect(try f.store.eraseDeletedAccounts(window: 30 * 86400) == 1)
    #expect(try f.store.account(email: "ada@example.test") == nil)
    let erased = try #require(try f.store.account(id: account.id))
    #expect(erased.displayName.isEmpty && erased.email == "erased-\(account.id)@invalid")
    #expect(try f.store.memberships(accountID: account.id).isEmpty)
    #expect(try f.store.eraseDeletedAccounts(window: 0) == 0, "erased once")
    let actions = try f.store.auditEvents().filter { $0.subject == account.id }.map(\.action)
    #expect(actions.contains("account.deletion_requested") && actions.contains("account.erased"))
  }
}

@Suite("Pruning")
struct PruneTests {
  @Test("handoffs and failure counts a day old are forgotten; recent ones stay", arguments: Engine.available)
  func prune(engine: Engine) throws {
    let (store, clock, _) = try makeStore(engine)
    let account = try store.createAccount(
      email: "ada@example.test", displayName: "Ada", passwordHash: "x", actor: "t")
    _ = try store.createHandoff(
      accountID: account.id, challenge: String(repeating: "c", count: 43),
      state: String(repeating: "s", count: 16),
      platform: "ios", appVersion: "1.4.0", lifetime: 120)
    try store.recordSignInFailure(accountID: nil, email: "old@example.test")
    clock.advance(86400 + 121)
    try store.recordSignInFailure(accountID: nil, email: "new@example.test")
    #expect(try store.pruneExpired() == 2)
    #expect(try store.db.query("SELECT COUNT(*) FROM sign_in_failures").first?.first == .integer(1))
    #expect(try store.pruneExpired() == 0)
  }
}

extension SignInCheck {
  var passed: Bool { if case .passed = self { true } else { false } }
}

extension WebPages {
  /// A check from a browser that presents `device` as its trusted-device cookie (nil: none).
  func checkPassword(email: String, password: String, store: ClientStore, device: String? = nil)
    throws(StoreError) -> SignInCheck
  {
    let headers = device.map { [("Cookie", "\(TrustedDevice.cookie)=\($0)")] } ?? []
    return try context.authenticator.checkPassword(
      email: email, password: password, store: store,
      request: Request(method: .post, target: "/sign-in", headers: headers))
  }
}
