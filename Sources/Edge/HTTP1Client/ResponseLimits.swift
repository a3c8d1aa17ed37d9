/// The bounds `HTTP1ResponseParser` enforces on one upstream response, checked while its bytes
/// arrive, never after. Crossing any of them is an error like any other: 502, and the connection
/// to the upstream is closed.
public struct ResponseLimits: Sendable, Equatable {
  /// Bytes of the head: status line, field lines and the empty line that ends them, CRLFs
  /// included (default 16 KiB). Interim (1xx) responses before the final one draw on the same
  /// allowance, and so does the trailer section.
  public var maxHeadBytes: Int
  /// Field lines of the head, trailer lines included (default 100).
  public var maxFieldCount: Int
  /// Bytes of the body (default 8 MiB). A chunked body counts as sent: chunk sizes, extensions,
  /// line endings and trailers count with the data. A larger Content-Length is refused as soon as
  /// the head is read.
  public var maxBodyBytes: Int
  /// Bytes of the extensions on one chunk-size line (default 256); extensions are checked and
  /// dropped (RFC 9112 §7.1.1).
  public var maxChunkExtensionBytes: Int

  /// The defaults, with any bound given replaced.
  public init(
    maxHeadBytes: Int = 16 * 1024, maxFieldCount: Int = 100, maxBodyBytes: Int = 8 * 1024 * 1024,
    maxChunkExtensionBytes: Int = 256
  ) {
    self.maxHeadBytes = maxHeadBytes
    self.maxFieldCount = maxFieldCount
    self.maxBodyBytes = maxBodyBytes
    self.maxChunkExtensionBytes = maxChunkExtensionBytes
  }
}
