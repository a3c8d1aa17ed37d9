import Deployment
import Edge

#if canImport(Glibc)
  import Glibc
#endif

/// The loops' view of a deployment's upstreams: each `UpstreamSettings` as an `UpstreamEndpoint`,
/// its address resolved and its instance-wide numbers split between the loops.
enum UpstreamEndpoints {
  /// The endpoints for `deployment` served by `loops` event loops, and a line for each upstream
  /// that cannot be reached as configured (a name that does not resolve, certificate authorities
  /// that cannot be read): it is kept, switched off, so its routes answer 503.
  static func make(_ deployment: Deployment, loops: Int) -> (
    endpoints: [UpstreamEndpoint], problems: [String]
  ) {
    var endpoints: [UpstreamEndpoint] = []
    var problems: [String] = []
    for settings in deployment.upstreams.values.sorted(by: { $0.name < $1.name }) {
      var endpoint = UpstreamEndpoint(name: settings.name, address: .unix(path: "/"))
      endpoint.pool = settings.poolLimits(loops: loops)
      endpoint.timeouts = settings.timeouts
      endpoint.response = settings.response
      endpoint.enabled = settings.enabled
      switch settings.target {
      case .unix(let path):
        endpoint.address = .unix(path: path)
      case .http(let host, let port):
        if let address = resolve(host, port: port) {
          endpoint.address = .tcp(address)
        } else {
          endpoint.enabled = false
          problems.append("upstream '\(settings.name)': '\(host)' does not resolve to an address")
        }
      case .https(let host, let port):
        do {
          endpoint.tls = try UpstreamTLS(serverName: settings.serverName ?? host, caFile: settings.caFile)
          if let address = resolve(host, port: port) {
            endpoint.address = .tcp(address)
          } else {
            endpoint.enabled = false
            problems.append("upstream '\(settings.name)': '\(host)' does not resolve to an address")
          }
        } catch {
          endpoint.enabled = false
          problems.append("upstream '\(settings.name)': \(error)")
        }
      }
      endpoints.append(endpoint)
    }
    return (endpoints, problems)
  }

  /// `host` (an IP literal, or a name the system resolves: development only) and `port` as a socket
  /// address: the first the resolver gives.
  static func resolve(_ host: String, port: Int) -> SocketAddress? {
    let literal = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    if let address = SocketAddress(literal) { return address }
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var found: UnsafeMutablePointer<addrinfo>? = nil
    guard getaddrinfo(host, nil, &hints, &found) == 0, let first = found else { return nil }
    defer { freeaddrinfo(found) }
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
    switch first.pointee.ai_family {
    case AF_INET:
      var address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
        $0.pointee.sin_addr
      }
      inet_ntop(AF_INET, &address, &text, socklen_t(text.count))
      return SocketAddress("\(Self.string(text)):\(port)")
    case AF_INET6:
      var address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
        $0.pointee.sin6_addr
      }
      inet_ntop(AF_INET6, &address, &text, socklen_t(text.count))
      return SocketAddress("[\(Self.string(text))]:\(port)")
    default:
      return nil
    }
  }

  /// A NUL-terminated C string's text.
  private static func string(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}
