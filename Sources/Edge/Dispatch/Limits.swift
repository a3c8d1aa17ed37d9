/// Every bound the engine enforces, in one value. Defaults are documented in docs/limits.md.
///
/// Sizes are enforced while parsing, never after: a request that crosses a bound is answered
/// (414, 431, 413) as soon as the crossing byte arrives.
public struct Limits: Sendable, Equatable {
  /// Longest request-target accepted (RFC 9112 §3: at least 8000 octets recommended); longer gets 414.
  public var maxTargetBytes: Int = 8192
  /// Bytes of all header field lines together (trailers count too); more gets 431.
  public var maxHeaderBytes: Int = 16384
  /// Number of header field lines (trailers count too); more gets 431.
  public var maxHeaderCount: Int = 100
  /// Bytes of a request body; more gets 413. A chunked body counts as sent: chunk sizes,
  /// extensions, line endings and trailers count with the data.
  public var maxBodyBytes: Int = 1 << 20
  /// Bytes of the extensions on one chunk-size line (RFC 9112 §7.1.1); more gets 400. No client
  /// this server knows sends any; the bound keeps framing from outweighing data.
  public var maxChunkExtensionBytes: Int = 256
  /// Request bytes all connections of the process together may hold while bodies are read and
  /// handled; a body that would go past it gets 503 at once. Heads are bounded per connection
  /// instead (`maxHeadBytes`).
  public var maxBufferedRequestBytes: Int = 64 << 20
  /// Open connections one event loop keeps; one more is accepted and closed at once.
  public var maxConnectionsPerLoop: Int = 8192
  /// Time from a request's first byte (or from accept) to the end of its head (slowloris bound).
  public var headTimeout: Duration = .seconds(10)
  /// Longest pause between two reads of a request body.
  public var bodyTimeout: Duration = .seconds(10)
  /// Longest wait for the next request on a kept-alive connection.
  public var idleTimeout: Duration = .seconds(60)
  /// Longest pause in writing a response to a client that does not read.
  public var writeTimeout: Duration = .seconds(30)
  /// After the last response on a closing connection: how long unread input is drained before
  /// the socket closes, so that the client receives the response instead of a reset (RFC 9112 §9.6).
  public var lingerTimeout: Duration = .seconds(2)
  /// How long a 503 for a full pool queue is held before it is sent (zero: at once).
  public var busyHold: Duration = .seconds(1)

  // HTTP/2 (RFC 9113): what the server announces in SETTINGS, and its own bounds.
  /// Streams one HTTP/2 connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS); one
  /// more is refused (RST_STREAM REFUSED_STREAM).
  public var http2MaxConcurrentStreams: Int = 100
  /// Flow-control window of each stream the client opens (SETTINGS_INITIAL_WINDOW_SIZE): how much
  /// of a request body it may send before the server has read it.
  public var http2InitialWindowBytes: Int = 65535
  /// Largest frame payload the server accepts (SETTINGS_MAX_FRAME_SIZE).
  public var http2MaxFrameBytes: Int = 16384
  /// HPACK dynamic table of each direction (SETTINGS_HEADER_TABLE_SIZE for the client's headers;
  /// the most the server's encoder uses, whatever the client announces).
  public var http2HeaderTableBytes: Int = 4096
  /// CONTINUATION frames one header block may take; one more ends the connection (GOAWAY
  /// ENHANCE_YOUR_CALM). A header block's bytes are also bounded by `maxHeaderBytes`.
  public var http2MaxContinuationFrames: Int = 8
  /// Bytes queued for one HTTP/2 connection's socket before its frames stop being read (a client
  /// that does not read its answers is not given more work).
  public var http2MaxQueuedBytes: Int = 1 << 20
  /// Frames that cost work but carry no request (RST_STREAM, PING, SETTINGS, PRIORITY, idle
  /// WINDOW_UPDATE, empty DATA, invalid frames) one connection may send at once ...
  public var http2GlitchBurst: Int = 400
  /// ... and regains per second; past the budget: GOAWAY ENHANCE_YOUR_CALM.
  public var http2GlitchesPerSecond: Int = 100

  /// The defaults.
  public init() {}

  /// Longest request line: the target plus room for a method, two spaces, a version and CRLF.
  public var maxRequestLineBytes: Int { maxTargetBytes + 64 }

  /// Bytes a head may occupy: empty lines before it, its request line, its field lines.
  public var maxHeadBytes: Int { 2 * maxRequestLineBytes + maxHeaderBytes }

  /// Raw bytes one request may occupy before it completes (head plus framed body).
  public var maxMessageBytes: Int { maxHeadBytes + maxBodyBytes }
}
