import Accounts
import Edge

/// `/favicon.ico` under its stable name: browsers ask for it unprompted, outside any page. The
/// shell's fingerprinted icon is served there too, revalidated (the fingerprinted name is the one
/// that is cached for a year).
public enum Favicon {
  /// The route serving the icon file at `path` (read now, at snapshot time), or nil if unreadable.
  public static func route(file path: String) -> Route? {
    guard let bytes = ZoneRules.readFile(path), !bytes.isEmpty else { return nil }
    return Route(
      .get, "/favicon.ico", cacheClass: .revalidate,
      fixed: Response(
        status: .ok, headers: [("Content-Type", "image/x-icon"), ("X-Content-Type-Options", "nosniff")],
        body: .bytes(bytes)))
  }
}
