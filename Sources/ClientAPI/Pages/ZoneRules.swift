import Accounts
import Edge

#if canImport(Glibc)
  import Glibc
#endif

/// A time zone's rules for showing times on server-rendered pages, without Foundation: the
/// transitions of a TZif file (RFC 8536) and, beyond the last of them, its footer's POSIX TZ rule
/// (RFC 8536 §3.3). Loaded once per snapshot; looking up an instant is a binary search.
struct ZoneRules: Sendable, Equatable {
  /// One local time type (RFC 8536 §3.2, `ttinfo`).
  struct LocalType: Sendable, Equatable {
    /// Seconds east of UTC.
    let offset: Int
    let abbreviation: String
  }

  /// The IANA name, shown as the label (`Europe/London`).
  let name: String
  /// UTC instants at which `types[i]` begins, ascending.
  let transitions: [Int]
  let types: [LocalType]
  /// The type before the first transition.
  let initial: LocalType
  /// The rule after the last transition (nil: the last type stays).
  let rule: PosixRule?

  /// Zones that work without tzdata installed (the default must always load).
  static let builtIn: [String: String] = ["Europe/London": "GMT0BST,M3.5.0/1,M10.5.0", "UTC": "UTC0"]

  /// The rules of `name` from `/usr/share/zoneinfo`, else from the built-in rule; UTC when neither
  /// exists (the loader has already refused names it cannot resolve).
  static func load(_ name: String) -> ZoneRules {
    if let bytes = readFile("/usr/share/zoneinfo/" + name), let rules = parse(tzif: bytes, name: name) {
      return rules
    }
    if let text = builtIn[name], let rule = PosixRule(text) { return ZoneRules(name: name, rule: rule) }
    return ZoneRules(name: "UTC", rule: PosixRule("UTC0"))
  }

  /// Rules from a POSIX TZ rule alone.
  init(name: String, rule: PosixRule?) {
    self.name = name
    transitions = []
    types = []
    initial =
      rule.map { LocalType(offset: $0.standardOffset, abbreviation: $0.standard) }
      ?? LocalType(offset: 0, abbreviation: "UTC")
    self.rule = rule
  }

  init(name: String, transitions: [Int], types: [LocalType], initial: LocalType, rule: PosixRule?) {
    self.name = name
    self.transitions = transitions
    self.types = types
    self.initial = initial
    self.rule = rule
  }

  /// The local time type in force at `instant` (epoch seconds).
  func type(at instant: Int) -> LocalType {
    if let last = transitions.last, instant >= last, let rule { return rule.type(at: instant) }
    if transitions.isEmpty { return rule?.type(at: instant) ?? initial }
    var low = 0
    var high = transitions.count  // first transition after instant
    while low < high {
      let mid = (low + high) / 2
      if transitions[mid] <= instant { low = mid + 1 } else { high = mid }
    }
    return low == 0 ? initial : types[low - 1]
  }

  /// `30 Nov 2026, 10:20 GMT`: the date and time at `instant` in this zone, with its abbreviation.
  func readable(_ instant: Int) -> String {
    let local = type(at: instant)
    let t = Civil.time(epochSeconds: instant + local.offset)
    return
      "\(t.day) \(Civil.monthNames[t.month - 1]) \(t.year), \(Civil.two(t.hour)):\(Civil.two(t.minute)) \(local.abbreviation)"
  }

  // MARK: TZif

  /// The rules in a TZif file of version 2 or later (its 64-bit block and footer), or nil.
  static func parse(tzif bytes: [UInt8], name: String) -> ZoneRules? {
    var reader = ByteReader(bytes: bytes)
    // RFC 8536 §3.1: the version 1 header and block come first; skip them.
    guard let v1 = reader.header(), v1.version >= 2, reader.skip(v1.blockSize(timeBytes: 4)),
      let header = reader.header()
    else { return nil }
    var transitions: [Int] = []
    for _ in 0..<header.timecnt {
      guard let t = reader.integer(8) else { return nil }
      transitions.append(t)
    }
    var indices: [Int] = []
    for _ in 0..<header.timecnt {
      guard let i = reader.integer(1, signed: false) else { return nil }
      indices.append(i)
    }
    var raw: [(offset: Int, index: Int)] = []
    for _ in 0..<header.typecnt {
      guard let offset = reader.integer(4), reader.integer(1) != nil,
        let index = reader.integer(1, signed: false)
      else { return nil }
      raw.append((offset, index))
    }
    guard let characters = reader.take(header.charcnt).map(Array.init),
      reader.skip(header.leapcnt * 12 + header.isstdcnt + header.isutcnt)
    else { return nil }
    func abbreviation(_ start: Int) -> String {
      guard start < characters.count else { return "" }
      return String(decoding: characters[start...].prefix { $0 != 0 }, as: UTF8.self)
    }
    let types = raw.map { LocalType(offset: $0.offset, abbreviation: abbreviation($0.index)) }
    guard !types.isEmpty, indices.allSatisfy({ $0 < types.count }) else { return nil }
    // RFC 8536 §3.3: the footer is a newline, a POSIX TZ string (may be empty), a newline.
    var rule: PosixRule? = nil
    if let rest = reader.take(reader.remaining).map(Array.init), rest.first == 0x0A,
      let end = rest.dropFirst().firstIndex(of: 0x0A)
    {
      let text = String(decoding: rest[1..<end], as: UTF8.self)
      if !text.isEmpty {
        guard let parsed = PosixRule(text) else { return nil }
        rule = parsed
      }
    }
    return ZoneRules(
      name: name, transitions: transitions, types: indices.map { types[$0] }, initial: types[0], rule: rule)
  }

  static func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16384)
    while out.count < 1 << 20 {
      let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { break }
      out += chunk[0..<n]
    }
    return out
  }
}

/// Big-endian reads over a TZif file.
private struct ByteReader {
  let bytes: [UInt8]
  var at = 0
  var remaining: Int { bytes.count - at }

  struct Header {
    let version: Int
    let isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt: Int
    func blockSize(timeBytes: Int) -> Int {
      timecnt * timeBytes + timecnt + typecnt * 6 + charcnt + leapcnt * (timeBytes + 4) + isstdcnt + isutcnt
    }
  }

  mutating func header() -> Header? {
    guard let magic = take(4), magic.elementsEqual("TZif".utf8), let version = take(1), skip(15) else {
      return nil
    }
    var counts: [Int] = []
    for _ in 0..<6 {
      guard let n = integer(4, signed: false), n < 1 << 20 else { return nil }
      counts.append(n)
    }
    let v = version[version.startIndex] == 0 ? 1 : Int(version[version.startIndex]) - 0x30
    return Header(
      version: v, isutcnt: counts[0], isstdcnt: counts[1], leapcnt: counts[2], timecnt: counts[3],
      typecnt: counts[4], charcnt: counts[5])
  }

  mutating func take(_ n: Int) -> ArraySlice<UInt8>? {
    guard n >= 0, n <= remaining else { return nil }
    defer { at += n }
    return bytes[at..<at + n]
  }

  mutating func skip(_ n: Int) -> Bool { take(n) != nil }

  mutating func integer(_ n: Int, signed: Bool = true) -> Int? {
    guard let slice = take(n) else { return nil }
    var value: UInt64 = 0
    for byte in slice { value = value << 8 | UInt64(byte) }
    guard signed, n < 8 else { return signed ? Int(Int64(bitPattern: value)) : Int(value) }
    let bits = UInt64(n * 8)
    return value & (1 << (bits - 1)) != 0 ? Int(value) - (1 << Int(bits)) : Int(value)
  }
}
