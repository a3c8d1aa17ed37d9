/// How a route's responses may be cached. Every route declares one; the writer sets
/// `Cache-Control` from it, so no handler can forget or override it.
public enum CacheClass: Sendable, Hashable {
  /// A fingerprinted asset: `public, max-age=31536000, immutable`.
  case immutable
  /// An entry point (HTML, service worker, manifest): `no-cache`, always revalidated.
  case revalidate
  /// A verified-link file: `public, max-age=N`, short so that a kill switch propagates.
  case linkFile(maxAge: Int)
  /// Anything about a person, a school or a session, and every error: `no-store`.
  case `private`

  /// The `Cache-Control` value for this class.
  public var cacheControl: String {
    switch self {
    case .immutable: "public, max-age=31536000, immutable"
    case .revalidate: "no-cache"
    case .linkFile(let maxAge): "public, max-age=\(maxAge)"
    case .private: "no-store"
    }
  }

  /// The class that applies to a response of `status` from a route of this class:
  /// errors are never stored (RFC 9111 §3 leaves that to us; we say no-store).
  public func applied(to status: Status) -> CacheClass {
    status.code >= 400 ? .private : self
  }
}

/// Where a route's handler runs.
public enum Execution: Sendable, Hashable {
  /// On the event loop: must not block (prebuilt bytes, link files, health).
  case inline
  /// On the bounded worker pool (database); the answer returns to the loop.
  case pooled
  /// On the separate low-priority pool for CPU-heavy work (password hashing), so that a flood of
  /// it never delays the loops or the database reads on the main pool.
  case background
}
