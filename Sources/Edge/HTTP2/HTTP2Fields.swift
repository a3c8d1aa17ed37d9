import CNGHTTP2

/// Header fields laid out for nghttp2: names and values in one buffer (names lower-cased, RFC 9113
/// §8.2.1) and where each lies. Prebuilt answers keep theirs; others are laid out per answer in a
/// reused one.
struct HTTP2Fields: Sendable {
  struct Span: Sendable {
    let name: Int
    let nameLength: Int
    let value: Int
    let valueLength: Int
  }

  private(set) var bytes: [UInt8] = []
  private(set) var spans: [Span] = []

  mutating func removeAll() {
    bytes.removeAll(keepingCapacity: true)
    spans.removeAll(keepingCapacity: true)
  }

  /// Adds a field whose name is already lower case.
  mutating func add(_ name: StaticString, _ value: String) {
    add(name) { $0 += value.utf8 }
  }

  private mutating func add(_ name: StaticString, _ value: (inout [UInt8]) -> Void) {
    let nameStart = bytes.count
    bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    let valueStart = bytes.count
    value(&bytes)
    spans.append(
      .init(
        name: nameStart, nameLength: valueStart - nameStart, value: valueStart,
        valueLength: bytes.count - valueStart))
  }

  /// `:status`, `cache-control` from the cache class, the response's own fields and
  /// `content-length` (not for statuses that forbid content).
  mutating func addHead(of response: Response, cacheClass: CacheClass, contentLength: Int) {
    add(":status") { OutputQueue.appendDecimal(response.status.code, to: &$0) }
    add("cache-control") { $0 += cacheClass.applied(to: response.status).cacheControl.utf8 }
    for (name, value) in response.headers {
      let nameStart = bytes.count
      for c in name.utf8 { bytes.append(ASCII.lower(c)) }
      let valueStart = bytes.count
      bytes += value.utf8
      spans.append(
        .init(
          name: nameStart, nameLength: valueStart - nameStart, value: valueStart,
          valueLength: bytes.count - valueStart))
    }
    if !response.status.forbidsContent {
      add("content-length") { OutputQueue.appendDecimal(contentLength, to: &$0) }
    }
  }

  /// Calls `body` with the pairs of `first` (if any) and then `second`, built in `pairs`.
  static func withPairs(
    _ first: HTTP2Fields?, _ second: HTTP2Fields, into pairs: inout [nghttp2_nv],
    _ body: (UnsafePointer<nghttp2_nv>, Int) -> Int32
  ) -> Int32 {
    func append(_ fields: HTTP2Fields, _ base: UnsafePointer<UInt8>, to pairs: inout [nghttp2_nv]) {
      let base = UnsafeMutablePointer(mutating: base)
      for span in fields.spans {
        pairs.append(
          nghttp2_nv(
            name: base + span.name, value: base + span.value, namelen: span.nameLength,
            valuelen: span.valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
      }
    }
    return second.bytes.withUnsafeBufferPointer { secondBytes in
      (first?.bytes ?? []).withUnsafeBufferPointer { firstBytes in
        if let first, let base = firstBytes.baseAddress { append(first, base, to: &pairs) }
        if let base = secondBytes.baseAddress { append(second, base, to: &pairs) }
        return pairs.withUnsafeBufferPointer { nva in
          guard let start = nva.baseAddress else { return Int32(NGHTTP2_ERR_NOMEM.rawValue) }
          return body(start, nva.count)
        }
      }
    }
  }
}
