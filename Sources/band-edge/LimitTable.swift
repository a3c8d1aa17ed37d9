import Accounts
import ClientAPI
import Edge
import Gateway
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
  var gatewayKeysRefresh = GatewayKeys.refreshInterval
  var gatewayAddressLimit = GatewayServices.addressLimit
  var gatewayAccountLimit = GatewayServices.accountLimit
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
    count("threads", 1...256, note: "one per core", "event loops", \.server.threads),
    count(
      "pool-threads", 1...1024, note: "cores, at least 2", "worker threads for pooled (database) routes",
      \.server.poolThreads),
    count(
      "pool-queue", 1...1_000_000, "pooled requests that may wait for a worker; one more gets 503 at once",
      \.server.poolQueue),
    count(
      "background-threads", 1...1024, note: "cores / 2, at least 1",
      "low-priority (nice 19) threads for password checks", \.server.backgroundThreads),
    count(
      "background-queue", 1...1_000_000, "password checks that may wait; one more gets 503",
      \.server.backgroundQueue),
    seconds(
      "busy-hold", 0...86400, "a 503 for a full queue is held this long before it is sent (0: at once)",
      \.server.limits.busyHold),
    seconds(
      "drain-timeout", 0.001...86400, "after SIGTERM, the longest wait for requests in flight",
      \.server.drainTimeout),
    seconds(
      "ticket-rotation", 1...86400, "TLS session-ticket keys are replaced this often",
      \.server.ticketKeyRotation),

    bytes(
      "max-target-bytes", 64...1_048_576, "longest request-target, else 414", \.server.limits.maxTargetBytes),
    bytes(
      "max-header-bytes", 256...1_048_576, "header section size (trailers too), else 431",
      \.server.limits.maxHeaderBytes),
    count(
      "max-header-count", 1...10000, "header field lines (trailers too), else 431",
      \.server.limits.maxHeaderCount),
    bytes("max-body-bytes", 0...1_073_741_824, "request body size, else 413", \.server.limits.maxBodyBytes),
    bytes(
      "max-chunk-extension-bytes", 0...65536, "extensions on one chunk-size line, else 400",
      \.server.limits.maxChunkExtensionBytes),
    bytes(
      "max-buffered-request-bytes", 65536...1_099_511_627_776,
      "request bytes all connections together may hold (bodies being read or waiting for a worker); a new body beyond it gets 503",
      \.server.limits.maxBufferedRequestBytes),
    count(
      "max-connections", 1...1_000_000, "open connections per event loop; one more is closed at once",
      \.server.limits.maxConnectionsPerLoop),
    count(
      "h2-max-concurrent-streams", 1...2_147_483_647,
      "HTTP/2 streams open at once per connection (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused",
      \.server.limits.http2MaxConcurrentStreams),
    bytes(
      "h2-initial-window-bytes", 0...2_147_483_647,
      "HTTP/2 flow-control window of each stream a client opens (SETTINGS_INITIAL_WINDOW_SIZE)",
      \.server.limits.http2InitialWindowBytes),
    bytes(
      "h2-max-frame-bytes", 16384...16_777_215,
      "largest HTTP/2 frame payload taken (SETTINGS_MAX_FRAME_SIZE)", \.server.limits.http2MaxFrameBytes),
    bytes(
      "h2-header-table-bytes", 0...65536,
      "HPACK dynamic table, each direction (SETTINGS_HEADER_TABLE_SIZE; the encoder never uses more)",
      \.server.limits.http2HeaderTableBytes),
    count(
      "h2-max-continuation-frames", 0...8,
      "CONTINUATION frames one header block may take (the block's bytes are bounded by max-header-bytes); more: GOAWAY ENHANCE_YOUR_CALM",
      \.server.limits.http2MaxContinuationFrames),
    bytes(
      "h2-max-queued-bytes", 65536...1_073_741_824,
      "bytes queued for one HTTP/2 connection's socket before its frames stop being read",
      \.server.limits.http2MaxQueuedBytes),
    count(
      "h2-glitch-burst", 1...1_000_000,
      "HTTP/2 frames that carry no request (RST_STREAM, PING, SETTINGS, PRIORITY, idle WINDOW_UPDATE, empty DATA, invalid) a connection may send at once; then GOAWAY ENHANCE_YOUR_CALM",
      \.server.limits.http2GlitchBurst),
    count(
      "h2-glitches-per-second", 1...1_000_000, "... and regains per second",
      \.server.limits.http2GlitchesPerSecond),
    seconds(
      "head-timeout", 0.001...86400, "to receive a request head, from its first byte (or accept); then 408",
      \.server.limits.headTimeout),
    seconds(
      "body-timeout", 0.001...86400, "longest pause while receiving a body; then 408",
      \.server.limits.bodyTimeout),
    seconds(
      "idle-timeout", 0.001...86400, "keep-alive wait for the next request", \.server.limits.idleTimeout),
    seconds(
      "write-timeout", 0.001...86400, "longest pause while a client reads a response",
      \.server.limits.writeTimeout),
    seconds(
      "linger-timeout", 0.001...86400, "draining unread input before closing (RFC 9112 §9.6)",
      \.server.limits.lingerTimeout),

    wholeSeconds("web-session-idle", "a web session ends after this long unused", \.lifetimes.webIdle),
    wholeSeconds(
      "web-session-lifetime", "a web session ends after this long in all (the cookie's Max-Age)",
      \.lifetimes.webAbsolute),
    wholeSeconds(
      "native-session-idle", "a native session ends after this long unused", \.lifetimes.nativeIdle),
    wholeSeconds(
      "native-session-lifetime", "a native session ends after this long in all", \.lifetimes.nativeAbsolute),
    burst(
      "sign-in-burst",
      "sign-in attempts (web and native forms) one client address may make at once; then 429",
      \.signInLimit.burst),
    perMinute("sign-in-per-minute", "... and regains per minute", \.signInLimit.perSecond),
    burst(
      "exchange-burst", "native exchanges one client address may make at once; then 429",
      \.exchangeLimit.burst),
    perMinute("exchange-per-minute", "... and regains per minute", \.exchangeLimit.perSecond),
    burst(
      "gateway-address-burst",
      "forwarded requests one client address (IPv6: its /64) may make at once; then 429",
      \.gatewayAddressLimit.burst),
    perMinute("gateway-address-per-minute", "... and regains per minute", \.gatewayAddressLimit.perSecond),
    burst(
      "gateway-account-burst", "forwarded requests one account may make at once; then 429",
      \.gatewayAccountLimit.burst),
    perMinute("gateway-account-per-minute", "... and regains per minute", \.gatewayAccountLimit.perSecond),
    seconds(
      "rate-limited-hold", 0...86400, "a 429 is held this long before it is sent (0: at once)", \.refusalHold),
    count(
      "invitations-per-inviter", 1...1_000_000, "invitations one person may send per hour; then 429",
      \.invitationLimits.perInviter),
    count(
      "invitations-per-school", 1...1_000_000, "invitations one school may send per hour; then 429",
      \.invitationLimits.perSchool),
    count(
      "invitations-per-address", 1...1_000_000,
      "invitations one email address may receive per hour, from every school together; then 429",
      \.invitationLimits.perAddress),
    days(
      "retention-days", 0...36500,
      "deleted accounts' personal fields are erased this many days after deletion", \.retentionDays),
    count(
      "session-cache-entries", 0...1_000_000,
      "sessions each of the loops' two caches keeps: GET /session answers, forwarded reads' callers (0: every read goes to the pool)",
      \.sessionCacheEntries),
    seconds(
      "mail-interval", 0.01...3600, "the outbox is looked at this often for mail to send", \.mailInterval),
    seconds(
      "mail-retry", 0.01...3600, "first wait after a failed delivery; it doubles, up to an hour", \.mailRetry),
    seconds(
      "mail-timeout", 1...3600, "longest one SMTP delivery may take, connecting included", \.mailTimeout),
    seconds(
      "gateway-keys-refresh", 0.01...3600,
      "the gateway's signing keys are read again this often (and rotated when 30 days old)",
      \.gatewayKeysRefresh),
    seconds(
      "database-connect-timeout", 1...3600,
      "PostgreSQL: longest wait for a connection (the URI's connect_timeout wins)", \.database.connectTimeout),
    seconds(
      "database-statement-timeout", 0.001...3600,
      "PostgreSQL: a statement running longer is cancelled; then 503", \.database.statementTimeout),
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

  /// A limit held as an `Int` in the settings, at `path`: a count, bytes, whole seconds or days.
  private static func whole(
    _ unit: Limit.Unit, _ name: String, _ range: ClosedRange<Double>, note: String?, _ help: String,
    _ path: WritableKeyPath<ServeSettings, Int> & Sendable
  ) -> Limit {
    Limit(
      name: name, unit: unit, range: range, defaultNote: note, help: help,
      read: { Double($0[keyPath: path]) }, write: { $0[keyPath: path] = Int($1) })
  }

  private static func count(
    _ name: String, _ range: ClosedRange<Double>, note: String? = nil, _ help: String,
    _ path: WritableKeyPath<ServeSettings, Int> & Sendable
  ) -> Limit { whole(.count, name, range, note: note, help, path) }

  private static func bytes(
    _ name: String, _ range: ClosedRange<Double>, _ help: String,
    _ path: WritableKeyPath<ServeSettings, Int> & Sendable
  ) -> Limit { whole(.bytes, name, range, note: nil, help, path) }

  private static func wholeSeconds(
    _ name: String, _ help: String, _ path: WritableKeyPath<ServeSettings, Int> & Sendable
  ) -> Limit { whole(.wholeSeconds, name, 1...2_147_483_648, note: nil, help, path) }

  private static func days(
    _ name: String, _ range: ClosedRange<Double>, _ help: String,
    _ path: WritableKeyPath<ServeSettings, Int> & Sendable
  ) -> Limit { whole(.days, name, range, note: nil, help, path) }

  /// A limit held as a `Duration` at `path`; fractions of a second are kept to the nanosecond.
  private static func seconds(
    _ name: String, _ range: ClosedRange<Double>, _ help: String,
    _ path: WritableKeyPath<ServeSettings, Duration> & Sendable
  ) -> Limit {
    Limit(
      name: name, unit: .seconds, range: range, defaultNote: nil, help: help,
      read: {
        let (s, attoseconds) = $0[keyPath: path].components
        return Double(s) + Double(attoseconds) / 1e18
      },
      write: { $0[keyPath: path] = .nanoseconds(Int64(($1 * 1e9).rounded())) })
  }

  /// A rate limit's burst, a count held as a `Double` at `path`.
  private static func burst(
    _ name: String, _ help: String, _ path: WritableKeyPath<ServeSettings, Double> & Sendable
  ) -> Limit {
    Limit(
      name: name, unit: .count, range: 1...1_000_000, defaultNote: nil, help: help,
      read: { $0[keyPath: path] }, write: { $0[keyPath: path] = $1 })
  }

  /// A rate limit's refill, given per minute and held per second at `path`.
  private static func perMinute(
    _ name: String, _ help: String, _ path: WritableKeyPath<ServeSettings, Double> & Sendable
  ) -> Limit {
    Limit(
      name: name, unit: .count, range: 1...1_000_000, defaultNote: nil, help: help,
      read: { $0[keyPath: path] * 60 }, write: { $0[keyPath: path] = $1 / 60 })
  }
}
