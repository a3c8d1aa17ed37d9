/// One number an upstream or a forward route may set: its key, unit, range, default (the value a
/// new `Target` holds) and what it bounds. `GatewayLimits` lists them all; the loader checks the
/// file against them, and `band-edge config limits` prints them for docs/limits.md.
public struct GatewayLimit<Target>: Sendable {
  /// How the number is read and shown.
  public enum Unit: Sendable {
    /// Seconds, fractions allowed.
    case seconds
    /// A whole number of things.
    case count
    /// A whole number of bytes.
    case bytes
  }

  /// The key in the upstream's or the route's object.
  public let key: String
  /// How it is read: seconds, or a whole count or size.
  public let unit: Unit
  /// The values accepted, both ends included.
  public let range: ClosedRange<Double>
  /// What it bounds, one line (the Markdown table's last column).
  public let help: String
  let read: @Sendable (Target) -> Double
  let write: @Sendable (inout Target, Double) -> Void

  /// Why `value` cannot be this setting at `path` (`upstreams.core.connectTimeout`), or nil.
  func problem(_ value: Double, path: String) -> String? {
    let whole = unit != .seconds
    guard !value.isFinite || !range.contains(value) || (whole && value != value.rounded()) else { return nil }
    let (low, high) = (GatewayLimits.format(range.lowerBound), GatewayLimits.format(range.upperBound))
    return switch unit {
    case .seconds: "\(path) must be between \(low) and \(high) seconds"
    case .count: "\(path) must be a whole number between \(low) and \(high)"
    case .bytes: "\(path) must be a whole number of bytes between \(low) and \(high)"
    }
  }
}

/// The numbers of the gateway's configuration, per upstream and per forward route: the one list
/// that the loader checks and docs/limits.md shows (`band-edge config limits`).
public enum GatewayLimits {
  /// An upstream's numbers, in the order docs/limits.md lists them.
  public static let upstream: [GatewayLimit<UpstreamSettings>] = [
    seconds(
      "connectTimeout", 0.05...600,
      "opening a connection to the core (TCP or the Unix socket, and the TLS handshake for https)",
      \.timeouts.connect),
    seconds(
      "firstByteTimeout", 0.05...600,
      "from the request's last byte sent to the first byte of the core's answer", \.timeouts.firstByte),
    seconds(
      "totalTimeout", 0.05...3600,
      "one forwarded exchange, from its start to the answer's last byte; at least connectTimeout and firstByteTimeout",
      \.timeouts.total),
    whole(
      .count, "maxIdlePerLoop", 0...1024,
      "idle connections each event loop keeps open for reuse (0: none); at most maxConnections",
      \.pool.maxIdle),
    whole(
      .count, "maxConnections", 1...100_000,
      "connections to the core from this instance, idle and busy together", \.maxConnections),
    whole(
      .count, "queue", 0...100_000,
      "requests that may wait for a connection while maxConnections are busy, on this instance (shared out among the event loops like maxConnections); one more is refused at once",
      \.pool.queueLength),
    seconds("queueTimeout", 0.001...600, "the longest wait in that queue", \.pool.queueTimeout),
    seconds(
      "idleTimeout", 0.1...3600,
      "an idle connection is closed after this long; keep it shorter than the core's keep-alive timeout",
      \.pool.idleTimeout),
    whole(
      .count, "maxRequestsPerConnection", 1...1_000_000,
      "requests one connection carries before it is closed", \.pool.maxRequestsPerConnection),
    seconds(
      "maxConnectionAge", 1...86400, "a connection this old is closed instead of reused",
      \.pool.maxConnectionAge),
    whole(
      .bytes, "maxResponseHeadBytes", 1024...1_048_576, "the core's status line and header section",
      \.response.maxHeadBytes),
    whole(
      .bytes, "maxResponseBodyBytes", 0...1_073_741_824, "the core's answer body", \.response.maxBodyBytes),
    whole(
      .count, "failuresToOpen", 1...1000,
      "failures in a row (no connection, a timeout) that open the circuit: the core's routes are refused at once",
      \.pool.failuresToOpen),
    seconds(
      "openSeconds", 0.1...3600, "how long an open circuit refuses before one request tries the core again",
      \.pool.openDuration),
  ]

  /// A forward route's numbers.
  public static let route: [GatewayLimit<ForwardRoute>] = [
    whole(
      .bytes, "maxBodyBytes", 0...16_777_216, "the request body forwarded (POST, PUT, PATCH)", \.maxBodyBytes)
  ]

  /// The Markdown tables docs/limits.md carries (checked by a test against this list).
  public static func markdown() -> String {
    table(
      upstream, title: "upstream setting (`\"upstreams\": {\"NAME\": {…}}`)",
      defaults: UpstreamSettings(name: "", target: .unix(path: "/")))
      + "\n\n"
      + table(
        route, title: "forward route setting (`\"forward\": [{…}]`)",
        defaults: ForwardRoute(path: "", methods: [:], upstream: ""))
  }

  private static func table<Target>(_ limits: [GatewayLimit<Target>], title: String, defaults: Target)
    -> String
  {
    var lines = ["| \(title) | unit | range | default | what it bounds |", "| --- | --- | --- | --- | --- |"]
    for limit in limits {
      let unit =
        switch limit.unit {
        case .seconds: "seconds"
        case .count: "count"
        case .bytes: "bytes"
        }
      let range = "\(format(limit.range.lowerBound))–\(format(limit.range.upperBound))"
      let shown = format(limit.read(defaults))
      lines.append("| `\(limit.key)` | \(unit) | \(range) | \(shown) | \(limit.help) |")
    }
    return lines.joined(separator: "\n")
  }

  /// `3600`, `0.05`: whole numbers without a fraction.
  static func format(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
  }

  /// `duration` in seconds, fractions kept.
  static func seconds(_ duration: Duration) -> Double {
    let (s, attoseconds) = duration.components
    return Double(s) + Double(attoseconds) / 1e18
  }

  private static func seconds<Target>(
    _ key: String, _ range: ClosedRange<Double>, _ help: String,
    _ path: WritableKeyPath<Target, Duration> & Sendable
  ) -> GatewayLimit<Target> {
    GatewayLimit(
      key: key, unit: .seconds, range: range, help: help,
      read: { seconds($0[keyPath: path]) },
      write: { $0[keyPath: path] = .nanoseconds(Int64(($1 * 1e9).rounded())) })
  }

  private static func whole<Target>(
    _ unit: GatewayLimit<Target>.Unit, _ key: String, _ range: ClosedRange<Double>, _ help: String,
    _ path: WritableKeyPath<Target, Int> & Sendable
  ) -> GatewayLimit<Target> {
    GatewayLimit(
      key: key, unit: unit, range: range, help: help, read: { Double($0[keyPath: path]) },
      write: { $0[keyPath: path] = Int($1) })
  }
}
