import Accounts
import Edge
import Store
import Synchronization

/// What the gateway keeps as long as the process, across reloads: the signing keys as last read
/// from the store, each pool worker's read-assertion cache, the rate limiters, and the audit
/// events of accepted mutations waiting to be written.
public final class GatewayServices: Sendable {
  /// Requests per client address (IPv6 per /64) to forwarded routes.
  public static let addressLimit = RateLimit(burst: 120, perMinute: 600)
  /// Requests per account to forwarded routes, whichever address they come from.
  public static let accountLimit = RateLimit(burst: 60, perMinute: 300)

  private let ring: Mutex<KeyRing>
  /// One cache per thread that signs (the pool's workers): a `ReadAssertionCache` is not
  /// `Sendable` and takes no lock, so each worker owns its own and no other thread touches it.
  let readCaches = ThreadLocal<ReadAssertionCache> { ReadAssertionCache() }
  let addressLimiter: RateLimiter
  let accountLimiter: RateLimiter
  let audits = AuditQueue()
  /// Seconds since 1970 (the assertions' `iat`, the ring's times).
  let clock: @Sendable () -> Int

  /// Services over `ring` (loaded from the store with `GatewayKeyStore`), limiting forwarded
  /// requests to `addressLimit` per client address and `accountLimit` per account.
  public init(
    ring: KeyRing, addressLimit: RateLimit = GatewayServices.addressLimit,
    accountLimit: RateLimit = GatewayServices.accountLimit, clock: @escaping @Sendable () -> Int
  ) {
    self.ring = Mutex(ring)
    addressLimiter = RateLimiter(addressLimit)
    accountLimiter = RateLimiter(accountLimit)
    self.clock = clock
  }

  /// The keys now (what signs, what the JWKS publishes).
  public var keys: KeyRing { ring.withLock { $0 } }

  /// Replaces the keys with `next`, read again from the store (at a reload, after a rotation).
  public func replace(_ next: KeyRing) { ring.withLock { $0 = next } }

  /// Writes the audit events of accepted forwarded mutations still waiting (the composition's
  /// periodic writer and the end of a drain; forwarded requests write them too).
  public func writeAudits(to store: ClientStore) { audits.write(to: store) }

  /// The limiters, for the fleet heartbeat to share their limits among the instances.
  public var limiters: [RateLimiter] { [addressLimiter, accountLimiter] }

  /// The seconds to wait when `address` or `account` is over its limit, else nil.
  func limited(address: String, account: String) -> Int? {
    addressLimiter.take(address) ?? accountLimiter.take(account)
  }

  /// A new request ID: `req_` and 16 random base64url characters (96 bits).
  static func requestID() -> String { Secrets.randomBase64url(12, prefix: "req_") }
}
