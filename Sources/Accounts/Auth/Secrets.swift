import CArgon2
import COpenSSL
import Edge
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Random identifiers, session tokens and password hashes.
public enum Secrets {
  /// `count` bytes from the OS CSPRNG (OpenSSL RAND_bytes); traps if the generator fails, since
  /// nothing secret may ever be made from less.
  public static func randomBytes(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
    precondition(ok == 1, "the system random generator failed")
    return bytes
  }

  private struct RandomBuffer {
    static let size = 4096
    static let shared = Mutex(RandomBuffer())
    var bytes = [UInt8](repeating: 0, count: size)
    /// Bytes handed out already (all of them at first: the first call fills the buffer).
    var used = size
  }

  /// base64url without padding (RFC 4648 §5), after `prefix` (one string made, not two).
  public static func base64url(_ bytes: [UInt8], prefix: StaticString = "") -> String {
    bytes.withUnsafeBytes { base64url($0, prefix: prefix) }
  }

  /// `base64url` of bytes in memory: the string's storage is written in place, one allocation.
  public static func base64url(_ bytes: UnsafeRawBufferPointer, prefix: StaticString = "") -> String {
    let length = prefix.utf8CodeUnitCount + (bytes.count * 4 + 2) / 3
    return String(unsafeUninitializedCapacity: length) { out in
      var o = 0
      for i in 0..<prefix.utf8CodeUnitCount {
        out[o] = prefix.utf8Start[i]
        o += 1
      }
      func put(_ n: Int) {
        out[o] = alphabet[n & 63]
        o += 1
      }
      var i = 0
      while i + 2 < bytes.count {
        let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
        put(n >> 18)
        put(n >> 12)
        put(n >> 6)
        put(n)
        i += 3
      }
      if bytes.count - i == 2 {
        let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8
        put(n >> 18)
        put(n >> 12)
        put(n >> 6)
      } else if bytes.count - i == 1 {
        let n = Int(bytes[i]) << 16
        put(n >> 18)
        put(n >> 12)
      }
      return o
    }
  }

  /// `prefix` and `count` random bytes in base64url, the bytes taken from a buffer that RAND_bytes
  /// refills 4 KiB at a time: for a value made for every request (a request ID), where a generator
  /// call each would cost more than the rest of the request's checks. Every byte is handed out once,
  /// and no array is made for them.
  public static func randomBase64url(_ count: Int, prefix: StaticString = "") -> String {
    precondition(count <= RandomBuffer.size)
    return RandomBuffer.shared.withLock { buffer in
      if buffer.used + count > RandomBuffer.size {
        let ok = buffer.bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        precondition(ok == 1, "the system random generator failed")
        buffer.used = 0
      }
      defer { buffer.used += count }
      return buffer.bytes.withUnsafeBytes { all in
        base64url(UnsafeRawBufferPointer(rebasing: all[buffer.used..<(buffer.used + count)]), prefix: prefix)
      }
    }
  }

  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  /// A new opaque, random ID with a readable prefix (`acc_`, `sch_`, `ses_`): 128 bits.
  public static func identifier(_ prefix: String) -> String { prefix + "_" + base64url(randomBytes(16)) }

  /// A new session token: 256 random bits, base64url. Only its digest is ever stored.
  public static func token() -> String { base64url(randomBytes(32)) }

  /// SHA-256 of a token's text: what the store keeps and looks up.
  public static func digest(_ token: String) -> [UInt8] {
    var token = token
    return token.withUTF8 { sha256(UnsafeRawBufferPointer($0)) }
  }

  /// SHA-256 of raw bytes.
  public static func digest(bytes: [UInt8]) -> [UInt8] {
    bytes.withUnsafeBytes { sha256($0) }
  }

  // Fetched once: OpenSSL 3 looks the implementation up again on every `SHA256()` call, which cost
  // more than the hash of a token. A fetched EVP_MD is immutable and may be used from any thread.
  nonisolated(unsafe) private static let sha256Method: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

  /// A digest context kept by each thread: `EVP_Digest` allocated and freed one (twice through
  /// OpenSSL's allocator) for every token a loop looked up.
  private final class DigestContext {
    let context: OpaquePointer

    init?() {
      guard let made = EVP_MD_CTX_new() else { return nil }
      context = made
    }

    deinit { EVP_MD_CTX_free(context) }
  }

  private struct NoDigestContext: Error {}

  private static let contexts = ThreadLocal { () throws in
    guard let made = DigestContext() else { throw NoDigestContext() }
    return made
  }

  private static func sha256(_ input: UnsafeRawBufferPointer) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    if let kept = try? contexts.value(), EVP_DigestInit_ex2(kept.context, sha256Method, nil) == 1,
      EVP_DigestUpdate(kept.context, input.baseAddress, input.count) == 1,
      EVP_DigestFinal_ex(kept.context, &out, nil) == 1
    {
      return out
    }
    let ok = EVP_Digest(input.baseAddress, input.count, &out, nil, sha256Method, nil)
    precondition(ok == 1, "SHA-256 failed")
    return out
  }

  /// HMAC-SHA-256 of `message` under `key` (RFC 2104).
  public static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 32
    key.withUnsafeBytes { k in
      message.withUnsafeBytes { m in
        _ = HMAC(EVP_sha256(), k.baseAddress, Int32(key.count), m.baseAddress, m.count, &out, &length)
      }
    }
    return out
  }

  /// Constant-time equality (CRYPTO_memcmp) for secrets compared in memory, such as CSRF tokens.
  public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    return a.withUnsafeBytes { x in
      b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 }
    }
  }
}

/// Argon2id password hashing (libargon2) in the self-describing encoded format, so that stronger
/// parameters can be introduced later and old hashes upgraded at the next sign-in.
public struct PasswordHasher: Sendable {
  /// Iterations.
  public var timeCost: UInt32 = 2
  /// Memory in KiB (OWASP's minimum for Argon2id: 19 MiB).
  public var memoryKiB: UInt32 = 19 * 1024
  /// Lanes.
  public var parallelism: UInt32 = 1

  /// OWASP's parameters.
  public init() {}

  /// An encoded Argon2id hash of `password` with a fresh 16-byte salt.
  public func hash(_ password: String) -> String {
    IdlePriority.run { hashNow(password) }
  }

  private func hashNow(_ password: String) -> String {
    let salt = Secrets.randomBytes(16)
    var encoded = [CChar](repeating: 0, count: 128)
    let pwd = Array(password.utf8)
    let status = pwd.withUnsafeBytes { p in
      salt.withUnsafeBytes { s in
        argon2id_hash_encoded(
          timeCost, memoryKiB, parallelism, p.baseAddress, pwd.count, s.baseAddress, salt.count, 32, &encoded,
          encoded.count)
      }
    }
    precondition(status == ARGON2_OK.rawValue, "argon2id_hash_encoded failed: \(status)")
    return String(decoding: encoded.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// An encoded hash with these parameters, a random salt and a random digest: it matches no
  /// password, yet verifying against it costs exactly one real verification. Made without hashing
  /// (so without touching `memoryKiB` of memory) for the unknown-email path.
  public func decoy() -> String {
    func base64(_ bytes: [UInt8]) -> String {  // Argon2's encoding: standard alphabet, no padding
      Secrets.base64url(bytes).map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 }.reduce(into: "") {
        $0.append($1)
      }
    }
    return "$argon2id$v=19$m=\(memoryKiB),t=\(timeCost),p=\(parallelism)$\(base64(Secrets.randomBytes(16)))$"
      + base64(Secrets.randomBytes(32))
  }

  /// Whether `password` matches `encoded` (false for any malformed hash).
  public func verify(_ password: String, against encoded: String) -> Bool {
    verifyStatus(password, against: encoded) == ARGON2_OK.rawValue
  }

  /// libargon2's answer: `ARGON2_OK`, `ARGON2_VERIFY_MISMATCH` after a full computation, or a
  /// decoding error before any work.
  func verifyStatus(_ password: String, against encoded: String) -> Int32 {
    let pwd = Array(password.utf8)
    return IdlePriority.run {
      pwd.withUnsafeBytes { p in argon2id_verify(encoded, p.baseAddress, pwd.count) }
    }
  }

  /// Whether `encoded` was made with weaker parameters than these (rehash at the next sign-in).
  public func needsRehash(_ encoded: String) -> Bool {
    // $argon2id$v=19$m=19456,t=2,p=1$salt$hash
    let fields = encoded.split(separator: "$")
    guard fields.count == 5, fields[0] == "argon2id" else { return true }
    var m: UInt32 = 0
    var t: UInt32 = 0
    var p: UInt32 = 0
    for pair in fields[2].split(separator: ",") {
      let kv = pair.split(separator: "=")
      guard kv.count == 2, let value = UInt32(kv[1]) else { return true }
      switch kv[0] {
      case "m": m = value
      case "t": t = value
      case "p": p = value
      default: return true
      }
    }
    return m < memoryKiB || t < timeCost || p < parallelism
  }
}

/// Argon2id runs at `SCHED_IDLE` (Linux) where the process may bring a thread back to normal
/// scheduling afterwards: password work then only ever uses time no loop or database reader wants,
/// and no lock is held while it runs at that priority (the database writes before and after run at
/// the thread's usual priority). Coming back needs CAP_SYS_NICE or an RLIMIT_NICE of at least 20
/// (systemd: `LimitNICE=40`); without it hashing runs at the pool's own priority (nice 19).
public enum IdlePriority {
  /// Whether a thread can enter `SCHED_IDLE` and leave it again here; probed once, on a throwaway
  /// thread, so that a failed return strands nothing.
  public static let available: Bool = probe()

  private static let schedIdle: Int32 = 5  // SCHED_IDLE in <linux/sched.h>; not exported to Swift

  private static let probed = Atomic<Int>(0)

  private static func probe() -> Bool {
    var thread = pthread_t()
    let started = pthread_create(
      &thread, nil,
      { _ in
        var idle = sched_param()
        var normal = sched_param()
        let policy = sched_getscheduler(0)
        _ = sched_getparam(0, &normal)
        let ok =
          sched_setscheduler(0, IdlePriority.schedIdle, &idle) == 0
          && sched_setscheduler(0, policy, &normal) == 0
        IdlePriority.probed.store(ok ? 1 : 2, ordering: .releasing)
        return nil
      }, nil)
    guard started == 0 else { return false }
    pthread_join(thread, nil)
    return probed.load(ordering: .acquiring) == 1
  }

  /// Runs `body` at `SCHED_IDLE` when available, then restores the thread's policy.
  package static func run<T>(_ body: () -> T) -> T {
    guard available else { return body() }
    var idle = sched_param()
    var normal = sched_param()
    let policy = sched_getscheduler(0)
    _ = sched_getparam(0, &normal)
    guard sched_setscheduler(0, schedIdle, &idle) == 0 else { return body() }
    defer { _ = sched_setscheduler(0, policy, &normal) }
    return body()
  }
}
