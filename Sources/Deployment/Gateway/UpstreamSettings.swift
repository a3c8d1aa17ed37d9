import Edge

/// One API core the gateway forwards to: a member of the file's `"upstreams"` object, by name.
/// Every number has a default and a range (`GatewayLimits.upstream`, docs/limits.md); the file
/// writes seconds as numbers (`0.5`), kept here as durations.
public struct UpstreamSettings: Sendable, Equatable {
  /// Where the core listens.
  public enum Target: Sendable, Equatable, CustomStringConvertible {
    /// Plain HTTP: outside development only to a loopback address (127.0.0.0/8 or ::1); `host`
    /// without brackets.
    case http(host: String, port: Int)
    /// A Unix-domain socket at this absolute path.
    case unix(path: String)
    /// HTTPS, its certificate verified; `host` without brackets.
    case https(host: String, port: Int)

    /// The URL as the file would write it (it never holds a secret: user info is refused).
    public var description: String {
      switch self {
      case .http(let host, let port): "http://\(Self.bracketed(host)):\(port)"
      case .unix(let path): "unix:\(path)"
      case .https(let host, let port): "https://\(Self.bracketed(host))" + (port == 443 ? "" : ":\(port)")
      }
    }

    private static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }
  }

  /// `[a-z0-9][a-z0-9-]{0,62}`: the key in `"upstreams"`, and the audience of the assertions the
  /// gateway signs for this core.
  public var name: String
  /// `"url"`: `http://HOST:PORT`, `https://HOST[:PORT]` or `unix:/absolute/path`.
  public var target: Target
  /// `"caFile"` (https only): the PEM certificate authorities the core's certificate must chain
  /// to; nil: the system's.
  public var caFile: String? = nil
  /// `"serverName"` (https only): the name sent (SNI) and verified, when not the URL's host.
  public var serverName: String? = nil
  /// `"connectTimeout"` (`connect`): opening a connection, the TLS handshake included;
  /// `"firstByteTimeout"` (`firstByte`): from the request's last byte sent to the answer's first
  /// byte; `"totalTimeout"` (`total`): one forwarded exchange from start to the answer's last byte.
  public var timeouts = UpstreamTimeouts()
  /// `"maxConnections"`: connections to this core from this instance, idle and busy together
  /// (`poolLimits(loops:)` shares them out among the event loops).
  public var maxConnections = 128
  /// What each event loop's pool works within, from the file: `"maxIdlePerLoop"` (`maxIdle`);
  /// `"queue"` (`queueLength`: per instance, shared out like `maxConnections`); `"queueTimeout"`; `"idleTimeout"` (it must be shorter than the
  /// core's own keep-alive timeout, or the core may close a connection as a request is sent on it);
  /// `"maxRequestsPerConnection"`; `"maxConnectionAge"`; `"failuresToOpen"`; `"openSeconds"`
  /// (`openDuration`). Its `maxConnections` is not read: see `maxConnections`.
  public var pool = UpstreamPoolLimits()
  /// `"maxResponseHeadBytes"` (`maxHeadBytes`): the core's status line and header section;
  /// `"maxResponseBodyBytes"` (`maxBodyBytes`): the core's answer body.
  public var response = ResponseLimits()
  /// `"enabled"`: the core's kill switch; off, none of its routes is forwarded.
  public var enabled = true

  /// A core named `name` at `target`, every other setting its default.
  public init(name: String, target: Target) {
    self.name = name
    self.target = target
  }

  /// What the pool of each of `loops` event loops works within: `pool`, with an equal share of
  /// `maxConnections` and of the queue (rounded down; at least one connection, so that no loop is
  /// left without, and at least one place in a queue that was not 0). With fewer connections than
  /// loops, the instance may open one per loop.
  public func poolLimits(loops: Int) -> UpstreamPoolLimits {
    let loops = max(1, loops)
    var limits = pool
    limits.maxConnections = max(1, maxConnections / loops)
    limits.queueLength = pool.queueLength == 0 ? 0 : max(1, pool.queueLength / loops)
    return limits
  }

  /// The keys an upstream's object may hold.
  static let keys: Set<String> = Set(
    ["url", "caFile", "serverName", "enabled"] + GatewayLimits.upstream.map(\.key))
}
