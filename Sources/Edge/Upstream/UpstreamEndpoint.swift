/// One upstream as the event loops see it: where it listens, and the numbers each loop's pool and
/// exchanges keep to. The composition builds these from the configuration and hands them over in
/// every `Snapshot`; a loop keeps a pool whose endpoint did not change across a reload.
public struct UpstreamEndpoint: Sendable, Equatable {
  /// Where the upstream listens.
  public enum Address: Sendable, Equatable {
    /// TCP to a numeric address.
    case tcp(SocketAddress)
    /// A Unix-domain socket at this absolute path.
    case unix(path: String)
  }

  /// The name routes send calls to (`UpstreamCall.upstream`).
  public var name: String
  public var address: Address
  /// TLS over the connection, its certificate verified (nil: plain HTTP).
  public var tls: UpstreamTLS?
  /// One loop's share of the pool (`maxConnections` and `queueLength` are per loop here).
  public var pool = UpstreamPoolLimits()
  public var timeouts = UpstreamTimeouts()
  public var response = ResponseLimits()
  /// The operator's switch: off, every call is answered as `UpstreamFault.disabled`.
  public var enabled = true

  /// An endpoint named `name` at `address` (over `tls` when given), switched on, with the default
  /// pool, timeouts and response limits (each settable after).
  public init(name: String, address: Address, tls: UpstreamTLS? = nil) {
    self.name = name
    self.address = address
    self.tls = tls
  }

  /// Whether `other` differs from this one only in its switch: the pool and its connections stay.
  func sameButSwitch(_ other: UpstreamEndpoint) -> Bool {
    var flipped = other
    flipped.enabled = enabled
    return flipped == self
  }
}
