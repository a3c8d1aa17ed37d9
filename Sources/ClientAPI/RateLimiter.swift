import Edge
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// How much one client address may try (client-api-v1.md, "Credentials, lockout, rate limits").
public struct RateLimit: Sendable, Equatable {
  /// Attempts allowed at once.
  public var burst: Double
  /// Attempts regained per second.
  public var perSecond: Double

  public init(burst: Double, perMinute: Double) {
    self.burst = burst
    self.perSecond = perMinute / 60
  }
}

/// Token buckets per client address, checked on the event loop before any password work: over
/// the limit the answer is `429` at once and the request never reaches the pool.
public final class RateLimiter: Sendable {
  struct Bucket {
    var tokens: Double
    var updated: Double
  }

  private let buckets = Mutex<[String: Bucket]>([:])
  let limit: RateLimit
  /// Most addresses tracked; beyond it, buckets that have refilled are forgotten first.
  let maxAddresses: Int
  let now: @Sendable () -> Double

  /// Buckets of `limit`; `now` is monotonic seconds (injectable for tests).
  public init(
    _ limit: RateLimit, maxAddresses: Int = 100_000,
    now: @escaping @Sendable () -> Double = RateLimiter.monotonic
  ) {
    self.limit = limit
    self.maxAddresses = maxAddresses
    self.now = now
  }

  /// Takes one attempt for `address`: nil when allowed, else the whole seconds until one is.
  public func take(_ address: String) -> Int? {
    let t = now()
    return buckets.withLock { buckets in
      var bucket = buckets[address] ?? Bucket(tokens: limit.burst, updated: t)
      bucket.tokens = min(limit.burst, bucket.tokens + (t - bucket.updated) * limit.perSecond)
      bucket.updated = t
      let wait: Int?
      if bucket.tokens >= 1 {
        bucket.tokens -= 1
        wait = nil
      } else {
        wait = max(1, Int(((1 - bucket.tokens) / limit.perSecond).rounded(.up)))
      }
      if buckets[address] == nil && buckets.count >= maxAddresses {
        // Forget addresses whose buckets are full again: they are as if never seen.
        buckets = buckets.filter { $0.value.tokens + (t - $0.value.updated) * limit.perSecond < limit.burst }
      }
      if buckets[address] != nil || buckets.count < maxAddresses { buckets[address] = bucket }
      return wait
    }
  }

  /// CLOCK_MONOTONIC in seconds.
  @Sendable public static func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
  }
}

/// The address rate limits count (client-api-v1.md, "Lifetimes and clocks"): the socket peer,
/// unless the peer is a trusted proxy, in which case the right-most `X-Forwarded-For` entry that
/// is not itself a trusted proxy.
public enum ClientAddress {
  public static func of(_ request: Request, trustedProxies: Set<String>) -> String {
    let peer = host(request.client)
    guard trustedProxies.contains(peer), let forwarded = request.headers.combined("x-forwarded-for") else {
      return peer
    }
    for entry in forwarded.split(separator: ",").reversed() {
      let address = host(String(entry.filter { $0 != " " && $0 != "\t" }))
      if !address.isEmpty && !trustedProxies.contains(address) { return address }
    }
    return peer
  }

  /// The host of `1.2.3.4:5`, `[::1]:5`, `::1` or `1.2.3.4`.
  static func host(_ text: String) -> String {
    if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
      return String(text[text.index(after: text.startIndex)..<close])
    }
    let colons = text.filter { $0 == ":" }.count
    if colons == 1, let colon = text.firstIndex(of: ":") { return String(text[..<colon]) }
    return text
  }
}
