import Edge

/// `GET /.well-known/band-licence/jwks.json`: the gateway's published public keys (RFC 7517 §5), on
/// the public listener and the admin listener, cacheable for five minutes (a verifier refetches
/// on an unknown `kid`; a new key is published ten minutes before it signs).
public enum JWKSRoute {
  /// The path.
  public static let path = "/.well-known/band-licence/jwks.json"
  /// How long verifiers may keep it.
  public static let maxAge = 300

  /// The route, over the keys `gateway` holds now (answered on the loop: a lock and a few JWKs).
  public static func route(_ gateway: GatewayServices) -> Route {
    Route(.get, path, cacheClass: .linkFile(maxAge: maxAge)) { _ in
      Response(
        status: .ok, headers: [("Content-Type", "application/json")],
        body: .bytes(gateway.keys.jwks(at: gateway.clock())))
    }
  }
}
