import Edge
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// How much one client address may try: a bucket of `burst` attempts that refills at `perSecond`.
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
///
/// The buckets are split into shards by a hash of the address (seeded per process, so nobody can
/// aim at one shard), each behind its own lock: loops contend only when two of them touch the
/// same shard at the same instant. A shard is a bounded table that forgets its least recently seen
/// address in O(1) when a new one arrives, so every address is always counted. Shards by address
/// rather than by loop: one client's connections land on different loops (SO_REUSEPORT hashes
/// the port too), and per-loop buckets would give it the burst once per loop. IPv6 clients count
/// per /64, the block one subscriber holds, so rotating addresses inside it buys nothing.
public final class RateLimiter: Sendable {
  private final class Shard: Sendable {
    package let table: Mutex<BucketTable>
    package init(capacity: Int) { table = Mutex(BucketTable(capacity: capacity)) }
  }

  private let shards: [Shard]
  package let limit: RateLimit
  package let now: @Sendable () -> Double
  /// Instances sharing the limit (each applies 1/N of it; 1 alone).
  private let fleetSize = Atomic<Int>(1)

  /// Buckets of `limit` for at most about `maxAddresses` addresses in all, in `shards` shards; `now`
  /// is monotonic seconds (injectable for tests).
  public init(
    _ limit: RateLimit, maxAddresses: Int = 100_000, shards: Int = 64,
    now: @escaping @Sendable () -> Double = RateLimiter.monotonic
  ) {
    self.limit = limit
    self.now = now
    let count = max(1, shards)
    let perShard = max(1, (maxAddresses + count - 1) / count)
    self.shards = (0..<count).map { _ in Shard(capacity: perShard) }
  }

  /// Shares the limit among `instances` live instances behind one balancer: each allows 1/N of
  /// the rate and of the burst (rounded up, at least 1), so one address spread over the fleet
  /// gets about the configured rate in all, decided on each loop without asking the database.
  public func share(among instances: Int) {
    fleetSize.store(max(1, instances), ordering: .relaxed)
  }

  /// The limit this instance applies now: its share of the fleet's.
  package var applied: RateLimit {
    let n = Double(fleetSize.load(ordering: .relaxed))
    guard n > 1 else { return limit }
    var share = limit
    share.burst = max(1, (limit.burst / n).rounded(.up))
    share.perSecond = limit.perSecond / n
    return share
  }

  /// Takes one attempt for `address`: nil when allowed, else the whole seconds until one is.
  public func take(_ address: String) -> Int? {
    let key = BucketKey(Self.key(address))
    let t = now()
    let limit = applied
    let shard = shards[Int(UInt(bitPattern: key.hash) % UInt(shards.count))]
    return shard.table.withLock { table in
      table.update(key, now: t, full: limit.burst) { bucket in
        bucket.tokens = min(limit.burst, bucket.tokens + (t - bucket.updated) * limit.perSecond)
        bucket.updated = t
        guard bucket.tokens < 1 else {
          bucket.tokens -= 1
          return nil
        }
        return max(1, Int(((1 - bucket.tokens) / limit.perSecond).rounded(.up)))
      }
    }
  }

  /// Addresses tracked now, over every shard (for tests and metrics).
  public var tracked: Int { shards.reduce(0) { total, shard in total + shard.table.withLock { $0.count } } }

  /// What an address counts as: an IPv4 address as it is; an IPv6 address as its /64 (an
  /// IPv4-mapped one as the IPv4 address); anything else as it is.
  package static func key(_ address: String) -> String {
    var text = address
    guard text.withUTF8({ $0.contains(UInt8(ascii: ":")) }) else { return address }
    var raw = in6_addr()
    guard inet_pton(AF_INET6, address, &raw) == 1 else { return address }
    var bytes = withUnsafeBytes(of: &raw) { Array($0) }
    if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
      return bytes[12..<16].map { String($0) }.joined(separator: ".")
    }
    for i in 8..<16 { bytes[i] = 0 }
    func group(_ i: Int) -> String { String(UInt16(bytes[2 * i]) << 8 | UInt16(bytes[2 * i + 1]), radix: 16) }
    return (0..<4).map(group).joined(separator: ":") + "::/64"
  }

  /// CLOCK_MONOTONIC in seconds.
  @Sendable public static func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
  }
}

/// A token bucket.
struct Bucket {
  package var tokens: Double
  var updated: Double
}

/// At most `capacity` buckets by key, the least recently seen forgotten first: a dictionary into
/// slots threaded on a doubly linked list (most recent at the head), so a lookup, a move to the
/// front and an eviction are each O(1).
/// A table's key with its hash (the process's seeded `hashValue`) made once: it picks the shard and
/// then the slot, and a string is hashed once per attempt, not twice.
struct BucketKey: Hashable {
  let text: String
  let hash: Int

  init(_ text: String) {
    self.text = text
    hash = text.hashValue
  }

  static func == (a: BucketKey, b: BucketKey) -> Bool { a.hash == b.hash && a.text == b.text }

  func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}

struct BucketTable {
  private var slots: [BucketKey: Int32] = [:]
  private var keys: [BucketKey] = []
  private var buckets: [Bucket] = []
  private var previous: [Int32] = []
  private var next: [Int32] = []
  private var head: Int32 = -1
  private var tail: Int32 = -1
  package let capacity: Int

  package init(capacity: Int) { self.capacity = max(1, capacity) }

  package var count: Int { slots.count }

  /// Runs `body` on the bucket of `key` (a full one if `key` is new, made room for by forgetting
  /// the least recently seen), and marks it the most recently seen.
  package mutating func update<T>(_ key: BucketKey, now: Double, full: Double, _ body: (inout Bucket) -> T)
    -> T
  {
    let slot: Int32
    if let found = slots[key] {
      slot = found
      unlink(slot)
    } else if slots.count < capacity {
      slot = Int32(keys.count)
      keys.append(key)
      buckets.append(Bucket(tokens: full, updated: now))
      previous.append(-1)
      next.append(-1)
      slots[key] = slot
    } else {
      slot = tail
      unlink(slot)
      slots[keys[Int(slot)]] = nil
      keys[Int(slot)] = key
      buckets[Int(slot)] = Bucket(tokens: full, updated: now)
      slots[key] = slot
    }
    pushFront(slot)
    return body(&buckets[Int(slot)])
  }

  private mutating func unlink(_ slot: Int32) {
    let (p, n) = (previous[Int(slot)], next[Int(slot)])
    if p >= 0 { next[Int(p)] = n } else { head = n }
    if n >= 0 { previous[Int(n)] = p } else { tail = p }
    previous[Int(slot)] = -1
    next[Int(slot)] = -1
  }

  private mutating func pushFront(_ slot: Int32) {
    next[Int(slot)] = head
    if head >= 0 { previous[Int(head)] = slot }
    head = slot
    if tail < 0 { tail = slot }
  }
}

/// The address rate limits count: the socket peer,
/// unless the peer is a trusted proxy, in which case the right-most `X-Forwarded-For` entry that
/// is not itself a trusted proxy.
public enum ClientAddress {
  public static func of(_ request: Request, trustedProxies: Set<String>) -> String {
    resolve(request, trustedProxies: trustedProxies).address
  }

  /// The address (`of`), and whether the socket peer is a trusted proxy.
  public static func resolve(_ request: Request, trustedProxies: Set<String>) -> (
    address: String, peerTrusted: Bool
  ) {
    var client = request.client
    let peer = client.withUTF8 { host($0) }
    guard trustedProxies.contains(peer) else { return (peer, false) }
    // Bytes, not characters: this runs on the loop for every forwarded request. The entries are
    // read from the last (the nearest hop), over the fields from the last.
    var found: String? = nil
    request.headers.forEachValueFromLast(forwardedFor) { value in
      var end = value.endIndex
      while end > value.startIndex {
        var start = end
        while start > value.startIndex, value[start - 1] != UInt8(ascii: ",") { start -= 1 }
        var entry = value[start..<end]
        let blank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        if entry.contains(where: blank) { entry = ArraySlice(entry.filter { !blank($0) }) }
        let address = host(entry)
        if !address.isEmpty && !trustedProxies.contains(address) {
          found = address
          return false
        }
        end = start - 1
      }
      return true
    }
    return (found ?? peer, true)
  }

  private static let forwardedFor: FieldName = "x-forwarded-for"

  /// The host of `1.2.3.4:5`, `[::1]:5`, `::1` or `1.2.3.4`.
  private static func host<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> String {
    if bytes.first == UInt8(ascii: "["), let close = bytes.firstIndex(of: UInt8(ascii: "]")) {
      return String(decoding: bytes[bytes.index(after: bytes.startIndex)..<close], as: UTF8.self)
    }
    guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
      !bytes[bytes.index(after: colon)...].contains(UInt8(ascii: ":"))
    else { return String(decoding: bytes, as: UTF8.self) }
    return String(decoding: bytes[..<colon], as: UTF8.self)
  }
}
