#if canImport(Glibc)
  import Glibc
#endif

/// Immutable bytes shared between threads and written without copying.
// Safe to share unchecked: the buffer is allocated and filled in `init`, never written again,
// and freed only in `deinit`, when no other reference (and so no reader) can exist.
public final class SharedBytes: @unchecked Sendable {
  let base: UnsafeRawPointer
  /// How many bytes there are.
  public let count: Int

  /// A copy of `bytes`.
  public init<C: Collection<UInt8>>(_ bytes: C) {
    count = bytes.count
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Swift.max(count, 1), alignment: 16)
    // Contiguous input is one memcpy; the element-wise path is for other collections only
    // (unspecialised across modules it costs a call per byte).
    let copied: Void? = bytes.withContiguousStorageIfAvailable { source in
      buffer.copyMemory(from: UnsafeRawBufferPointer(source))
    }
    if copied == nil { _ = buffer.initializeMemory(as: UInt8.self, from: bytes) }
    base = UnsafeRawPointer(buffer.baseAddress!)
  }

  deinit { base.deallocate() }

  /// The bytes, for reading.
  public var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

  /// The bytes as an array (a copy).
  public var array: [UInt8] { Array(buffer) }
}

/// A response from a handler. `Cache-Control`, `Date`, `Content-Length` and `Connection` are
/// the writer's: the route's cache class and the connection decide them.
public struct Response: Sendable {
  /// The body of a response.
  public enum Body: Sendable {
    case empty
    case bytes([UInt8])
    case shared(SharedBytes)

    var count: Int {
      switch self {
      case .empty: 0
      case .bytes(let b): b.count
      case .shared(let s): s.count
      }
    }

    /// The bytes (a copy when shared), for in-process callers and tests.
    public var contents: [UInt8] {
      switch self {
      case .empty: []
      case .bytes(let b): b
      case .shared(let s): s.array
      }
    }
  }

  /// The status.
  public var status: Status
  /// Header fields other than the writer's own.
  public private(set) var headers: [(name: String, value: String)]
  /// The content.
  public var body: Body
  /// Set when the whole response was built ahead of time.
  let prebuilt: PrebuiltResponse?
  /// For an answer from a fast path: hold it this long before sending (a tarpit for refused
  /// floods: a client that will not wait gets one answer per connection per hold, and holding
  /// costs the loop nothing but a timer).
  public var holdFor: Duration? = nil
  /// Set when the answer is to come from an upstream (`Response.forward`): the loop sends the call
  /// and answers with what the call makes of the upstream's response.
  public internal(set) var forward: UpstreamCall? = nil
  /// Set on an answer made from an upstream's (or its fault): what the access log says of it.
  public internal(set) var upstream: UpstreamNote? = nil

  /// A response; `headers` must not contain the writer's own fields (checked).
  public init(status: Status, headers: [(name: String, value: String)] = [], body: Body = .empty) {
    self.status = status
    self.headers = []
    self.body = body
    self.prebuilt = nil
    for (name, value) in headers { add(name, value) }
  }

  init(prebuilt: PrebuiltResponse) {
    status = prebuilt.status
    headers = prebuilt.headers
    body = .shared(prebuilt.body)
    self.prebuilt = prebuilt
  }

  /// A plain-text response with a short message (used for every error the engine writes).
  public static func text(_ status: Status, _ message: String, headers: [(name: String, value: String)] = [])
    -> Response
  {
    Response(
      status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers,
      body: .bytes(Array(message.utf8)))
  }

  /// An answer that is to come from an upstream: the loop sends `call` and answers with what it
  /// makes of the result. Where nothing forwards, it is written as it stands: a `502` with no
  /// content, never a made-up success.
  public static func forward(_ call: UpstreamCall) -> Response {
    var response = Response(status: .badGateway)
    response.forward = call
    return response
  }

  /// Adds a header field; the writer's own fields are refused (a programming error).
  public mutating func add(_ name: String, _ value: String) {
    precondition(!Response.writerFields.contains { $0.matches(name) }, "\(name) is set by the writer")
    var (name, value) = (name, value)
    precondition(
      name.withUTF8 { $0.allSatisfy(ASCII.isToken) } && value.withUTF8 { $0.allSatisfy(ASCII.isFieldValue) },
      "invalid header field")
    if headers.capacity == 0 { headers.reserveCapacity(4) }  // not grown one field at a time
    headers.append((name, value))
  }

  /// Adds a field whose name is one of the caller's constants (never a writer's field) and whose
  /// value it has checked byte by byte: `add`'s checks again would cost a forwarded answer more than
  /// the rest of its fields' handling. The checks still run in debug builds.
  package mutating func add(checked name: String, _ value: String) {
    assert(!Response.writerFields.contains { $0.matches(name) }, "\(name) is set by the writer")
    assert(
      name.utf8.allSatisfy(ASCII.isToken) && value.utf8.allSatisfy(ASCII.isFieldValue), "invalid header field"
    )
    if headers.capacity == 0 { headers.reserveCapacity(4) }
    headers.append((name, value))
  }

  /// The value of the first field named `name`.
  public func header(_ name: String) -> String? {
    headers.first { $0.name.lowercased() == name.lowercased() }?.value
  }

  static let writerFields: [FieldName] = [
    "cache-control", "date", "content-length", "connection", "transfer-encoding",
  ]
}

/// A response built once (at load, or when a cache keeps it): its status, header fields and body,
/// with the status line and every header but `Date` and `Connection` as ready bytes beside them.
/// Serving it is a copy of a few bytes and one write.
public final class PrebuiltResponse: Sendable {
  let status: Status
  /// The response's own header fields (not the writer's).
  let headers: [(name: String, value: String)]
  let cacheClass: CacheClass
  /// Status line and header lines (each ending in CRLF), without Date/Connection/blank line.
  let head: SharedBytes
  let body: SharedBytes
  /// The same over HTTP/2: `:status`, `cache-control`, the own fields (names lower-cased) and
  /// `content-length`, encoded as an HPACK block, without `date`.
  let h2Block: HTTP2PrebuiltBlock

  /// Prebuilds `response` as a route of `cacheClass` serves it.
  public init(_ response: Response, cacheClass: CacheClass) {
    status = response.status
    headers = response.headers
    self.cacheClass = cacheClass
    let bodyBytes = response.body.contents
    var head: [UInt8] = []
    OutputQueue.appendHeadLines(
      of: response, cacheClass: cacheClass.applied(to: response.status), contentLength: bodyBytes.count,
      to: &head)
    self.head = SharedBytes(head)
    self.body = SharedBytes(bodyBytes)
    var fields = HTTP2Fields()
    fields.addHead(of: response, cacheClass: cacheClass, contentLength: bodyBytes.count)
    h2Block = HTTP2PrebuiltBlock(fields)
  }

  /// The response, to return from a handler.
  public var response: Response { Response(prebuilt: self) }
}
