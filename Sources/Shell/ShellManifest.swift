import Edge

/// The build's record of every served path: what the server loads and verifies at start, and the
/// release evidence (artifact hashes).
public struct ShellManifest: Codable, Equatable, Sendable {
  /// One encoded sibling of a file.
  public struct Variant: Codable, Equatable, Sendable {
    public var coding: ContentCoding
    public var file: String
    public var size: Int
    public var sha256: String
  }

  /// One served path.
  public struct Entry: Codable, Equatable, Sendable {
    /// The URL path (`/`, `/app.3f9c2a1b.js`).
    public var path: String
    /// The file under the build directory that holds the identity bytes.
    public var file: String
    /// The source file under Public/.
    public var source: String
    public var contentType: String
    /// `immutable` (fingerprinted) or `revalidate` (entry point).
    public var cacheClass: String
    public var size: Int
    public var sha256: String
    public var variants: [Variant]
  }

  public var formatVersion: Int
  public var entries: [Entry]
  /// The service worker's precache list (URL paths), in order.
  public var precache: [String]

  /// The manifest's file name inside a build directory.
  public static let fileName = "shell-manifest.json"
}

extension ShellManifest.Entry {
  /// The route cache class this entry is served with.
  var routeCacheClass: CacheClass? {
    switch cacheClass {
    case "immutable": .immutable
    case "revalidate": .revalidate
    default: nil
    }
  }
}
