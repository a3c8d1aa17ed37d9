import Accounts
import ClientAPI
import Edge
import Store

/// Everything `serve` fixes at start from its flags and the configuration file's `"limits"`.
struct ServeSettings {
  var server = ServerConfiguration()
  var lifetimes = SessionLifetimes()
  var signInLimit = RateLimit(burst: 20, perMinute: 30)
  var exchangeLimit = RateLimit(burst: 20, perMinute: 60)
  var refusalHold = Duration.seconds(1)
  var invitationLimits = InvitationLimits()
  var retentionDays = 30
  var sessionCacheEntries = 4096
  var database = DatabaseSettings()
  var mailInterval = Duration.seconds(1)
  var mailRetry = Duration.seconds(30)
  var mailTimeout = Duration.seconds(30)
}

/// One configurable limit: the flag `--NAME` and the file's `"limits": {"NAME": value}` alike,
/// with one unit, one range, one default and one help line. `LimitTable.all` is the only list:
/// it feeds the flags, the file, `serve --help` and docs/limits.md (`band-edge config limits`).
struct Limit: Sendable {
  enum Unit: Sendable {
    /// A whole number of things.
    case count
    /// A whole number of bytes.
    case bytes
    /// Seconds, fractions allowed (`0.25`), so that tests configure short deadlines.
    case seconds
    /// A whole number of seconds.
    case wholeSeconds
    /// A whole number of days.
    case days

    var word: String {
      switch self {
      case .count: "N"
      case .bytes: "BYTES"
      case .seconds, .wholeSeconds: "S"
      case .days: "DAYS"
      }
    }

    var isWhole: Bool { self != .seconds }
  }

  let name: String
  let unit: Unit
  let range: ClosedRange<Double>
  /// The default, when it depends on the machine (`one per core`); nil: the number itself.
  let defaultNote: String?
  let help: String
  let read: @Sendable (ServeSettings) -> Double
  let write: @Sendable (inout ServeSettings, Double) -> Void

  /// The value `value` would set, or the one-line problem with it.
  func check(_ value: Double) -> Result<Double, UsageError> {
    guard value.isFinite, range.contains(value), !unit.isWhole || value == value.rounded() else {
      let kind =
        switch unit {
        case .seconds: "seconds"
        case .wholeSeconds: "whole seconds"
        case .days: "whole days"
        case .count, .bytes: "a whole number"
        }
      return .failure(
        UsageError(
          "\(name) takes \(kind) from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound)), not \(Self.format(value))"
        ))
    }
    return .success(value)
  }

  /// The value of the flag text `text` (`10`, `0.5`, `1048576`), or the one-line problem with it.
  func parse(_ text: String) -> Result<Double, UsageError> {
    // Plain decimal digits only: no sign, exponent, `inf`, `nan` or hexadecimal.
    let plain = !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") }
    guard plain, let value = Double(text) else {
      return .failure(
        UsageError("--\(name) takes \(unit.isWhole ? "a whole number" : "seconds"), not '\(text)'"))
    }
    return check(value).mapError { UsageError("--" + $0.message) }
  }

  /// `10`, `0.25`, `1048576`.
  static func format(_ value: Double) -> String {
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return String(value)
  }

  /// The default in `settings`, as docs and help show it.
  func defaultText(_ settings: ServeSettings) -> String {
    let number = Self.format(read(settings))
    return defaultNote.map { "\(number): \($0)" } ?? number
  }
}

/// The table of every limit, in the order help and docs list them.
enum LimitTable {
  static let all: [Limit] = [
    count("threads", 1...256, note: "one per core", "event loops") {
      $0.server.threads
    } set: {
      $0.server.threads = $1
    },
    count("pool-threads", 1...1024, note: "cores, at least 2", "worker threads for pooled (database) routes")
    {
      $0.server.poolThreads
    } set: {
      $0.server.poolThreads = $1
    },
    count(
      "pool-queue", 1...1_000_000, "pooled requests that may wait for a worker; one more gets 503 at once"
    ) {
      $0.server.poolQueue
    } set: {
      $0.server.poolQueue = $1
    },
    count(
      "background-threads", 1...1024, note: "cores / 2, at least 1",
      "low-priority (nice 19) threads for password checks"
    ) {
      $0.server.backgroundThreads
    } set: {
      $0.server.backgroundThreads = $1
    },
    count("background-queue", 1...1_000_000, "password checks that may wait; one more gets 503") {
      $0.server.backgroundQueue
    } set: {
      $0.server.backgroundQueue = $1
    },
    seconds("busy-hold", 0...86400, "a 503 for a full queue is held this long before it is sent (0: at once)")
    {
      $0.server.limits.busyHold
    } set: {
      $0.server.limits.busyHold = $1
    },
    seconds("drain-timeout", 0.001...86400, "after SIGTERM, the longest wait for requests in flight") {
      $0.server.drainTimeout
    } set: {
      $0.server.drainTimeout = $1
    },
    seconds("ticket-rotation", 1...86400, "TLS session-ticket keys are replaced this often") {
      $0.server.ticketKeyRotation
    } set: {
      $0.server.ticketKeyRotation = $1
    },

    bytes("max-target-bytes", 64...1_048_576, "longest request-target, else 414") {
      $0.server.limits.maxTargetBytes
    } set: {
      $0.server.limits.maxTargetBytes = $1
    },
    bytes("max-header-bytes", 256...1_048_576, "header section size (trailers too), else 431") {
      $0.server.limits.maxHeaderBytes
    } set: {
      $0.server.limits.maxHeaderBytes = $1
    },
    count("max-header-count", 1...10000, "header field lines (trailers too), else 431") {
      $0.server.limits.maxHeaderCount
    } set: {
      $0.server.limits.maxHeaderCount = $1
    },
    bytes("max-body-bytes", 0...1_073_741_824, "request body size, else 413") {
      $0.server.limits.maxBodyBytes
    } set: {
      $0.server.limits.maxBodyBytes = $1
    },
    bytes("max-chunk-extension-bytes", 0...65536, "extensions on one chunk-size line, else 400") {
      $0.server.limits.maxChunkExtensionBytes
    } set: {
      $0.server.limits.maxChunkExtensionBytes = $1
    },
    bytes(
      "max-buffered-request-bytes", 65536...1_099_511_627_776,
      "request bytes all connections together may hold (bodies being read or waiting for a worker); a new body beyond it gets 503"
    ) {
      $0.server.limits.maxBufferedRequestBytes
    } set: {
      $0.server.limits.maxBufferedRequestBytes = $1
    },
    count("max-connections", 1...1_000_000, "open connections per event loop; one more is closed at once") {
      $0.server.limits.maxConnectionsPerLoop
    } set: {
      $0.server.limits.maxConnectionsPerLoop = $1
    },
    count(
      "h2-max-concurrent-streams", 1...2_147_483_647,
      "HTTP/2 streams open at once per connection (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused"
    ) {
      $0.server.limits.http2MaxConcurrentStreams
    } set: {
      $0.server.limits.http2MaxConcurrentStreams = $1
    },
    bytes(
      "h2-initial-window-bytes", 0...2_147_483_647,
      "HTTP/2 flow-control window of each stream a client opens (SETTINGS_INITIAL_WINDOW_SIZE)"
    ) {
      $0.server.limits.http2InitialWindowBytes
    } set: {
      $0.server.limits.http2InitialWindowBytes = $1
    },
    bytes(
      "h2-max-frame-bytes", 16384...16_777_215, "largest HTTP/2 frame payload taken (SETTINGS_MAX_FRAME_SIZE)"
    ) {
      $0.server.limits.http2MaxFrameBytes
    } set: {
      $0.server.limits.http2MaxFrameBytes = $1
    },
    bytes(
      "h2-header-table-bytes", 0...65536,
      "HPACK dynamic table, each direction (SETTINGS_HEADER_TABLE_SIZE; the encoder never uses more)"
    ) {
      $0.server.limits.http2HeaderTableBytes
    } set: {
      $0.server.limits.http2HeaderTableBytes = $1
    },
    count(
      "h2-max-continuation-frames", 0...8,
      "CONTINUATION frames one header block may take (libnghttp2 stops at 8 itself; the block's bytes are bounded by max-header-bytes); more: GOAWAY ENHANCE_YOUR_CALM"
    ) {
      $0.server.limits.http2MaxContinuationFrames
    } set: {
      $0.server.limits.http2MaxContinuationFrames = $1
    },
    bytes(
      "h2-max-queued-bytes", 65536...1_073_741_824,
      "bytes queued for one HTTP/2 connection's socket before its frames stop being read"
    ) {
      $0.server.limits.http2MaxQueuedBytes
    } set: {
      $0.server.limits.http2MaxQueuedBytes = $1
    },
    count(
      "h2-glitch-burst", 1...1_000_000,
      "HTTP/2 frames that carry no request (RST_STREAM, PING, SETTINGS, PRIORITY, idle WINDOW_UPDATE, empty DATA, invalid) a connection may send at once; then GOAWAY ENHANCE_YOUR_CALM"
    ) {
      $0.server.limits.http2GlitchBurst
    } set: {
      $0.server.limits.http2GlitchBurst = $1
    },
    count("h2-glitches-per-second", 1...1_000_000, "... and regains per second") {
      $0.server.limits.http2GlitchesPerSecond
    } set: {
      $0.server.limits.http2GlitchesPerSecond = $1
    },
    seconds(
      "head-timeout", 0.001...86400, "to receive a request head, from its first byte (or accept); then 408"
    ) {
      $0.server.limits.headTimeout
    } set: {
      $0.server.limits.headTimeout = $1
    },
    seconds("body-timeout", 0.001...86400, "longest pause while receiving a body; then 408") {
      $0.server.limits.bodyTimeout
    } set: {
      $0.server.limits.bodyTimeout = $1
    },
    seconds("idle-timeout", 0.001...86400, "keep-alive wait for the next request") {
      $0.server.limits.idleTimeout
    } set: {
      $0.server.limits.idleTimeout = $1
    },
    seconds("write-timeout", 0.001...86400, "longest pause while a client reads a response") {
      $0.server.limits.writeTimeout
    } set: {
      $0.server.limits.writeTimeout = $1
    },
    seconds("linger-timeout", 0.001...86400, "draining unread input before closing (RFC 9112 §9.6)") {
      $0.server.limits.lingerTimeout
    } set: {
      $0.server.limits.lingerTimeout = $1
    },

    wholeSeconds("web-session-idle", "a web session ends after this long unused") {
      $0.lifetimes.webIdle
    } set: {
      $0.lifetimes.webIdle = $1
    },
    wholeSeconds("web-session-lifetime", "a web session ends after this long in all (the cookie's Max-Age)") {
      $0.lifetimes.webAbsolute
    } set: {
      $0.lifetimes.webAbsolute = $1
    },
    wholeSeconds("native-session-idle", "a native session ends after this long unused") {
      $0.lifetimes.nativeIdle
    } set: {
      $0.lifetimes.nativeIdle = $1
    },
    wholeSeconds("native-session-lifetime", "a native session ends after this long in all") {
      $0.lifetimes.nativeAbsolute
    } set: {
      $0.lifetimes.nativeAbsolute = $1
    },
    Limit(
      name: "sign-in-burst", unit: .count, range: 1...1_000_000, defaultNote: nil,
      help: "sign-in attempts (web and native forms) one client address may make at once; then 429",
      read: { $0.signInLimit.burst }, write: { $0.signInLimit.burst = $1 }),
    Limit(
      name: "sign-in-per-minute", unit: .count, range: 1...1_000_000, defaultNote: nil,
      help: "... and regains per minute", read: { $0.signInLimit.perSecond * 60 },
      write: { $0.signInLimit.perSecond = $1 / 60 }),
    Limit(
      name: "exchange-burst", unit: .count, range: 1...1_000_000, defaultNote: nil,
      help: "native exchanges one client address may make at once; then 429",
      read: { $0.exchangeLimit.burst },
      write: { $0.exchangeLimit.burst = $1 }),
    Limit(
      name: "exchange-per-minute", unit: .count, range: 1...1_000_000, defaultNote: nil,
      help: "... and regains per minute", read: { $0.exchangeLimit.perSecond * 60 },
      write: { $0.exchangeLimit.perSecond = $1 / 60 }),
    seconds("rate-limited-hold", 0...86400, "a 429 is held this long before it is sent (0: at once)") {
      $0.refusalHold
    } set: {
      $0.refusalHold = $1
    },
    count("invitations-per-inviter", 1...1_000_000, "invitations one person may send per hour; then 429") {
      $0.invitationLimits.perInviter
    } set: {
      $0.invitationLimits.perInviter = $1
    },
    count("invitations-per-school", 1...1_000_000, "invitations one school may send per hour; then 429") {
      $0.invitationLimits.perSchool
    } set: {
      $0.invitationLimits.perSchool = $1
    },
    count(
      "invitations-per-address", 1...1_000_000,
      "invitations one email address may receive per hour, from every school together; then 429"
    ) {
      $0.invitationLimits.perAddress
    } set: {
      $0.invitationLimits.perAddress = $1
    },
    Limit(
      name: "retention-days", unit: .days, range: 0...36500, defaultNote: nil,
      help: "deleted accounts' personal fields are erased this many days after deletion",
      read: { Double($0.retentionDays) }, write: { $0.retentionDays = Int($1) }),
    count(
      "session-cache-entries", 0...1_000_000,
      "GET /session answers the loops keep (0: every read goes to the pool)"
    ) {
      $0.sessionCacheEntries
    } set: {
      $0.sessionCacheEntries = $1
    },
    seconds("mail-interval", 0.01...3600, "the outbox is looked at this often for mail to send") {
      $0.mailInterval
    } set: {
      $0.mailInterval = $1
    },
    seconds("mail-retry", 0.01...3600, "first wait after a failed delivery; it doubles, up to an hour") {
      $0.mailRetry
    } set: {
      $0.mailRetry = $1
    },
    seconds("mail-timeout", 1...3600, "longest one SMTP delivery may take, connecting included") {
      $0.mailTimeout
    } set: {
      $0.mailTimeout = $1
    },
    seconds(
      "database-connect-timeout", 1...3600,
      "PostgreSQL: longest wait for a connection (the URI's connect_timeout wins)"
    ) {
      $0.database.connectTimeout
    } set: {
      $0.database.connectTimeout = $1
    },
    seconds(
      "database-statement-timeout", 0.001...3600,
      "PostgreSQL: a statement running longer is cancelled; then 503"
    ) {
      $0.database.statementTimeout
    } set: {
      $0.database.statementTimeout = $1
    },
  ]

  /// The limit called `name`, if any.
  static func named(_ name: String) -> Limit? { byName[name] }

  private static let byName: [String: Limit] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

  /// Applies the file's `"limits"` where no flag said otherwise; one line per problem.
  static func apply(
    file limits: [String: Double], except given: Set<String>, to settings: inout ServeSettings
  )
    -> [String]
  {
    var problems: [String] = []
    for (name, value) in limits.sorted(by: { $0.key < $1.key }) {
      guard let limit = named(name) else {
        problems.append("limits.\(name) is not a limit; see band-edge config limits")
        continue
      }
      switch limit.check(value) {
      case .failure(let problem): problems.append("limits." + problem.message)
      case .success(let checked): if !given.contains(name) { limit.write(&settings, checked) }
      }
    }
    return problems
  }

  /// Problems between limits that are each in range but cannot work together.
  static func crossCheck(_ settings: ServeSettings) -> [String] {
    let limits = settings.server.limits
    var problems: [String] = []
    if limits.maxBodyBytes > limits.maxBufferedRequestBytes {
      problems.append(
        "max-body-bytes (\(limits.maxBodyBytes)) is larger than max-buffered-request-bytes "
          + "(\(limits.maxBufferedRequestBytes)): a body that large could never be accepted")
    }
    return problems
  }

  /// The help lines for every limit: `  --name N   help (default D)`, wrapped at 100 columns.
  static func helpLines(_ defaults: ServeSettings = ServeSettings()) -> String {
    let column = 34
    return all.map { limit in
      let flag = "  --\(limit.name) \(limit.unit.word)"
      var lines: [String] = []
      var line = flag + String(repeating: " ", count: max(1, column - flag.count))
      for word in "\(limit.help) (default \(limit.defaultText(defaults)))".split(separator: " ") {
        if line.count + word.count + 1 > 100, line.count > column {
          lines.append(line)
          line = String(repeating: " ", count: column)
        }
        line += (line.last == " " ? "" : " ") + word
      }
      return (lines + [line]).joined(separator: "\n")
    }.joined(separator: "\n")
  }

  /// The Markdown table docs/limits.md carries (checked by a test against this table).
  static func markdown(_ defaults: ServeSettings = ServeSettings()) -> String {
    let unit: (Limit.Unit) -> String = {
      switch $0 {
      case .count: "count"
      case .bytes: "bytes"
      case .seconds: "seconds"
      case .wholeSeconds: "whole seconds"
      case .days: "days"
      }
    }
    var lines = [
      "| limit (flag `--NAME`, file `\"limits\": {\"NAME\": …}`) | unit | range | default | what it bounds |"
    ]
    lines.append("| --- | --- | --- | --- | --- |")
    for limit in all {
      let range = "\(Limit.format(limit.range.lowerBound))–\(Limit.format(limit.range.upperBound))"
      let shown = limit.defaultNote ?? Limit.format(limit.read(defaults))
      lines.append("| `\(limit.name)` | \(unit(limit.unit)) | \(range) | \(shown) | \(limit.help) |")
    }
    return lines.joined(separator: "\n")
  }

  // MARK: building the table

  /// A limit held as an `Int` in the settings: a count, bytes or whole seconds.
  private static func whole(
    _ unit: Limit.Unit, _ name: String, _ range: ClosedRange<Double>, note: String?, _ help: String,
    get: @escaping @Sendable (ServeSettings) -> Int,
    set: @escaping @Sendable (inout ServeSettings, Int) -> Void
  ) -> Limit {
    Limit(
      name: name, unit: unit, range: range, defaultNote: note, help: help, read: { Double(get($0)) },
      write: { set(&$0, Int($1)) })
  }

  private static func count(
    _ name: String, _ range: ClosedRange<Double>, note: String? = nil, _ help: String,
    get: @escaping @Sendable (ServeSettings) -> Int,
    set: @escaping @Sendable (inout ServeSettings, Int) -> Void
  ) -> Limit { whole(.count, name, range, note: note, help, get: get, set: set) }

  private static func bytes(
    _ name: String, _ range: ClosedRange<Double>, _ help: String,
    get: @escaping @Sendable (ServeSettings) -> Int,
    set: @escaping @Sendable (inout ServeSettings, Int) -> Void
  ) -> Limit { whole(.bytes, name, range, note: nil, help, get: get, set: set) }

  private static func wholeSeconds(
    _ name: String, _ help: String, get: @escaping @Sendable (ServeSettings) -> Int,
    set: @escaping @Sendable (inout ServeSettings, Int) -> Void
  ) -> Limit { whole(.wholeSeconds, name, 1...2_147_483_648, note: nil, help, get: get, set: set) }

  private static func seconds(
    _ name: String, _ range: ClosedRange<Double>, _ help: String,
    get: @escaping @Sendable (ServeSettings) -> Duration,
    set: @escaping @Sendable (inout ServeSettings, Duration) -> Void
  ) -> Limit {
    Limit(
      name: name, unit: .seconds, range: range, defaultNote: nil, help: help,
      read: {
        let (s, attoseconds) = get($0).components
        return Double(s) + Double(attoseconds) / 1e18
      },
      write: { set(&$0, .nanoseconds(Int64(($1 * 1e9).rounded()))) })
  }
}
