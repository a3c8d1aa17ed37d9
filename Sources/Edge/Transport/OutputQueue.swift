#if canImport(Glibc)
  import Glibc
#endif

/// What a response says about the connection (RFC 9112 §9.3).
enum ConnectionHeader {
  /// HTTP/1.1 keeping the connection: nothing to say.
  case none
  /// `Connection: close`: this is the last response.
  case close
  /// `Connection: keep-alive`: an HTTP/1.0 client asked to keep the connection.
  case keepAlive
}

/// Bytes waiting to be written to one connection, as the segments of one `writev`.
///
/// Small pieces are copied into one growing array; large shared bodies are referenced, never
/// copied. Owned by one connection on one loop thread.
struct OutputQueue {
  enum Segment {
    case inline(start: Int, end: Int)
    case shared(SharedBytes, start: Int, end: Int)

    var length: Int {
      switch self {
      case .inline(let s, let e), .shared(_, let s, let e): e - s
      }
    }
  }

  /// Shared bodies up to this size are copied instead of referenced (one iovec instead of two).
  static let copyThreshold = 2048
  /// The most segments one writev call takes.
  static let maxSegmentsPerWrite = 64

  private(set) var bytes: [UInt8] = []
  private var segments: [Segment] = []
  private var first = 0
  /// Bytes not yet written.
  private(set) var pending = 0

  /// Whether everything has been written.
  var isEmpty: Bool { pending == 0 }

  mutating func append<S: Sequence<UInt8>>(_ piece: S) {
    let start = bytes.count
    bytes.append(contentsOf: piece)
    extendInline(from: start)
  }

  mutating func append(static piece: StaticString) {
    let start = bytes.count
    bytes.append(static: piece)
    extendInline(from: start)
  }

  mutating func append(_ piece: UnsafeRawBufferPointer) {
    let start = bytes.count
    bytes.append(contentsOf: piece.assumingMemoryBound(to: UInt8.self))
    extendInline(from: start)
  }

  private mutating func extendInline(from start: Int) {
    let end = bytes.count
    guard end > start else { return }
    pending += end - start
    if segments.count > first, case .inline(let s, let e) = segments[segments.count - 1], e == start {
      segments[segments.count - 1] = .inline(start: s, end: end)
    } else {
      segments.append(.inline(start: start, end: end))
    }
  }

  mutating func append(_ shared: SharedBytes) {
    append(shared, from: 0, count: shared.count)
  }

  /// `count` bytes of `shared` from `start`: referenced, not copied, unless they are few.
  mutating func append(_ shared: SharedBytes, from start: Int, count: Int) {
    guard count > 0 else { return }
    if count <= Self.copyThreshold {
      append(UnsafeRawBufferPointer(rebasing: shared.buffer[start..<(start + count)]))
    } else {
      segments.append(.shared(shared, start: start, end: start + count))
      pending += count
    }
  }

  /// Drops the first `written` bytes after a write.
  mutating func consume(_ written: Int) {
    var left = written
    pending -= written
    while left > 0 && first < segments.count {
      switch segments[first] {
      case .inline(let s, let e):
        if e - s <= left {
          left -= e - s
          first += 1
        } else {
          segments[first] = .inline(start: s + left, end: e)
          left = 0
        }
      case .shared(let shared, let s, let e):
        if e - s <= left {
          left -= e - s
          first += 1
        } else {
          segments[first] = .shared(shared, start: s + left, end: e)
          left = 0
        }
      }
    }
    if first == segments.count {
      segments.removeAll(keepingCapacity: true)
      first = 0
      bytes.removeAll(keepingCapacity: bytes.capacity <= 65536)
    }
  }

  /// Calls `body` with up to `maxSegmentsPerWrite` iovecs covering the pending bytes in order,
  /// leaving out the first `skipping` of them (bytes already handed on but not yet consumed).
  func withIOVecs<R>(skipping: Int = 0, _ body: (UnsafeBufferPointer<iovec>) -> R) -> R {
    var index = first
    var skip = skipping
    while skip > 0 && index < segments.count {
      let length = segments[index].length
      guard length <= skip else { break }
      skip -= length
      index += 1
    }
    let n = min(segments.count - index, Self.maxSegmentsPerWrite)
    return bytes.withUnsafeBytes { inline in
      withUnsafeTemporaryAllocation(of: iovec.self, capacity: max(n, 1)) { vectors in
        for k in 0..<n {
          let offset = k == 0 ? skip : 0
          switch segments[index + k] {
          case .inline(let s, let e):
            vectors[k] = iovec(
              iov_base: UnsafeMutableRawPointer(mutating: inline.baseAddress! + s + offset),
              iov_len: e - s - offset)
          case .shared(let shared, let s, let e):
            vectors[k] = iovec(
              iov_base: UnsafeMutableRawPointer(mutating: shared.base + s + offset), iov_len: e - s - offset)
          }
        }
        return body(UnsafeBufferPointer(rebasing: vectors[0..<n]))
      }
    }
  }

  /// The pending bytes as one array (tests and diagnostics).
  var contents: [UInt8] {
    var out: [UInt8] = []
    for segment in segments[first...] {
      switch segment {
      case .inline(let s, let e): out += bytes[s..<e]
      case .shared(let shared, let s, let e): out += shared.buffer[s..<e]
      }
    }
    return out
  }

  // MARK: encoding

  /// Appends `response` as a route of `cacheClass` answers it; returns the bytes it occupies.
  @discardableResult
  mutating func append(
    _ response: Response, cacheClass: CacheClass, headOnly: Bool, connection: ConnectionHeader, date: [UInt8],
    hsts: Bool = false
  ) -> Int {
    let before = pending
    // The head and the fields that close it in one write, each piece in place.
    let start = bytes.count
    let tail = date.count + Self.tailBound
    if let prebuilt = response.prebuilt {
      assert(prebuilt.cacheClass == cacheClass, "a prebuilt response is served by a route of its own class")
      bytes.append(bound: prebuilt.head.count + tail) { out in
        out.put(prebuilt.head.buffer)
        Self.putTail(date: date, hsts: hsts, connection: connection, to: &out)
      }
    } else {
      Self.appendHeadLines(
        of: response, cacheClass: cacheClass.applied(to: response.status), contentLength: response.body.count,
        to: &bytes, extra: tail
      ) { out in Self.putTail(date: date, hsts: hsts, connection: connection, to: &out) }
    }
    extendInline(from: start)
    if !headOnly && !response.status.forbidsContent {
      switch response.body {
      case .empty: break
      case .bytes(let b): append(b)
      case .shared(let s): append(s)
      }
    }
    return pending - before
  }

  /// Status line, Cache-Control, the response's own fields and Content-Length, each with CRLF.
  static func appendHeadLines(
    of response: Response, cacheClass: CacheClass, contentLength: Int, to head: inout [UInt8], extra: Int = 0,
    then tail: (inout BoundedWriter) -> Void = { _ in }
  ) {
    // One bound for all of it (the fixed text is under 96 bytes), then each piece in place.
    let cacheControl = cacheClass.cacheControl
    var bound = extra + 96 + 2 * BoundedWriter.maxDecimalBytes + response.status.reason.utf8.count
    bound += cacheControl.utf8.count
    for (name, value) in response.headers { bound += name.utf8.count + value.utf8.count + 4 }
    head.append(bound: bound) { out in
      out.put(static: "HTTP/1.1 ")
      out.put(decimal: response.status.code)
      out.put(ASCII.sp)
      out.put(utf8: response.status.reason)
      out.put(static: "\r\nCache-Control: ")
      out.put(utf8: cacheControl)
      out.put(static: "\r\n")
      for (name, value) in response.headers {
        out.put(utf8: name)
        out.put(static: ": ")
        out.put(utf8: value)
        out.put(static: "\r\n")
      }
      // RFC 9110 §8.6: no Content-Length on 1xx and 204; on 304 it would describe another response.
      if !response.status.forbidsContent {
        out.put(static: "Content-Length: ")
        out.put(decimal: contentLength)
        out.put(static: "\r\n")
      }
      tail(&out)
    }
  }

  /// The most bytes `putTail` writes besides the date line.
  static let tailBound = 96

  /// The fields the connection decides, then the blank line that ends the head.
  private static func putTail(
    date: [UInt8], hsts: Bool, connection: ConnectionHeader, to out: inout BoundedWriter
  ) {
    out.put(date)
    // RFC 6797: two years, subdomains too, on every response of a TLS connection.
    if hsts { out.put(static: "Strict-Transport-Security: max-age=63072000; includeSubDomains\r\n") }
    switch connection {
    case .none: break
    case .close: out.put(static: "Connection: close\r\n")
    case .keepAlive: out.put(static: "Connection: keep-alive\r\n")
    }
    out.put(static: "\r\n")
  }

  static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
    guard value >= 10 else {
      out.append(UInt8(48 + value))
      return
    }
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for 24 digits
    var v = value
    var n = 0
    withUnsafeMutableBytes(of: &digits) { d in
      while v > 0 {
        n += 1
        d[24 - n] = UInt8(48 + v % 10)
        v /= 10
      }
      out.append(
        contentsOf: UnsafeRawBufferPointer(rebasing: d[(24 - n)...]).assumingMemoryBound(to: UInt8.self))
    }
  }
}
