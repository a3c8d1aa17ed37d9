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
  /// `"connectTimeout"`: opening a connection, the TLS handshake included.
  public var connectTimeout = Duration.seconds(1)
  /// `"firstByteTimeout"`: from the request's last byte sent to the answer's first byte.
  public var firstByteTimeout = Duration.seconds(15)
  /// `"totalTimeout"`: one forwarded exchange from start to the answer's last byte.
  public var totalTimeout = Duration.seconds(30)
  /// `"maxIdlePerLoop"`: idle connections each event loop keeps for reuse.
  public var maxIdlePerLoop = 32
  /// `"maxConnections"`: connections to this core from this instance, idle and busy together.
  public var maxConnections = 128
  /// `"queue"`: requests that may wait for a connection while all are busy.
  public var queue = 256
  /// `"queueTimeout"`: the longest wait in that queue.
  public var queueTimeout = Duration.seconds(1)
  /// `"idleTimeout"`: an idle connection is closed after this long; it must be shorter than the
  /// core's own keep-alive timeout, or the core may close one as a request is sent on it.
  public var idleTimeout = Duration.seconds(30)
  /// `"maxRequestsPerConnection"`: requests one connection carries before it is closed.
  public var maxRequestsPerConnection = 1000
  /// `"maxConnectionAge"`: a connection this old is not reused.
  public var maxConnectionAge = Duration.seconds(3600)
  /// `"maxResponseHeadBytes"`: the core's status line and header section.
  public var maxResponseHeadBytes = 16 * 1024
  /// `"maxResponseBodyBytes"`: the core's answer body.
  public var maxResponseBodyBytes = 8 * 1024 * 1024
  /// `"failuresToOpen"`: failures in a row that open the circuit.
  public var failuresToOpen = 5
  /// `"openSeconds"`: how long an open circuit refuses before the core is tried again.
  public var openDuration = Duration.seconds(5)
  /// `"enabled"`: the core's kill switch; off, none of its routes is forwarded.
  public var enabled = true

  /// A core named `name` at `target`, every other setting its default.
  public init(name: String, target: Target) {
    self.name = name
    self.target = target
  }

  /// The keys an upstream's object may hold.
  static let keys: Set<String> = Set(
    ["url", "caFile", "serverName", "enabled"] + GatewayLimits.upstream.map(\.key))
}
