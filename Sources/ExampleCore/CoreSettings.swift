import Deployment
import Edge

/// What `band-edge example-core` runs with; the defaults match `config/development.json` (the
/// upstream `core` at 127.0.0.1:8081) and `build/run`'s band-edge on 127.0.0.1:8080.
public struct CoreSettings: Equatable, Sendable {
  /// Where to listen: loopback only.
  public var listen = SocketAddress.v4(host: "127.0.0.1", port: 8081)
  /// band-edge's JWKS.
  public var jwks = "http://127.0.0.1:8080/.well-known/band-licence/jwks.json"
  /// The `iss` accepted: band-edge's origin.
  public var issuer = "http://127.0.0.1:8080"
  /// The `aud` accepted: this core's upstream name in band-edge's configuration.
  public var audience = "core"

  /// The defaults.
  public init() {}

  /// What is wrong with these settings, one line each (none: they can be used).
  public var problems: [String] {
    var problems: [String] = []
    if !listen.isLoopback { problems.append("the example core listens on a loopback address only") }
    if !(jwks.hasPrefix("http://") || jwks.hasPrefix("https://")) {
      problems.append("the JWKS address is an http:// or https:// URL")
    }
    if issuer.isEmpty || audience.isEmpty { problems.append("the issuer and the audience cannot be empty") }
    return problems
  }

  /// Why the example core must not run, or nil: it is for development only, so `environment` (the
  /// `BAND_LICENCE_ENV` variable) and the configuration file's `"environment"` (`config`, its
  /// bytes, when one is named) must each be `development` or not given. Anything else — staging,
  /// production, a typo, a file that cannot be read — refuses.
  public static func refusal(environment: String?, config: [UInt8]?, configName: String) -> String? {
    if let environment, !environment.isEmpty, environment != "development" {
      return "the example core is for development only; BAND_LICENCE_ENV is \(environment)"
    }
    guard let config else { return nil }
    guard case .object(let members)? = try? JSONValue.parse(config) else {
      return "\(configName) is not a JSON object, so its environment is unknown"
    }
    switch members["environment"] {
    case nil, .string("development")?: return nil
    case .string(let named)?:
      return "the example core is for development only; \(configName) says \(named)"
    default: return "\(configName)'s environment is not a string"
    }
  }

  /// The server these settings describe, listening already; `log` gets its lines.
  public func server(log: @escaping @Sendable (String) -> Void) throws(SystemError) -> CoreServer {
    let keys = KeySet(fetch: JWKSClient.fetcher(jwks), log: log)
    let verifier = AssertionVerifier(issuer: issuer, audience: audience, keys: keys)
    return try CoreServer(listen: listen, service: CoreService(verifier: verifier), log: log)
  }
}
