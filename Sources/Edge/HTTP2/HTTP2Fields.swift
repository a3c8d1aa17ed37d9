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

  /// How many fields there are.
  var count: Int { spans.count }

  /// Calls `body` with the fields' pairs, laid out at `pairs` (room for `count`), for the library
  /// to copy.
  func withPairs(
    into pairs: UnsafeMutablePointer<nghttp2_nv>, _ body: (UnsafePointer<nghttp2_nv>, Int) -> Int32
  ) -> Int32 {
    bytes.withUnsafeBufferPointer { bytes in
      guard let base = bytes.baseAddress.map({ UnsafeMutablePointer(mutating: $0) }) else {
        return Int32(NGHTTP2_ERR_NOMEM.rawValue)
      }
      for (i, span) in spans.enumerated() {
        pairs[i] = nghttp2_nv(
          name: base + span.name, value: base + span.value, namelen: span.nameLength,
          valuelen: span.valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
      }
      return body(pairs, spans.count)
    }
  }
}

/// A prebuilt answer's fields laid out once for the life of the answer, in memory that never moves,
/// so that nghttp2 takes them without copying a byte (`NGHTTP2_NV_FLAG_NO_COPY_NAME |
/// NO_COPY_VALUE`): the pairs of its fields, then HSTS for TLS listeners. Whoever submits them keeps
/// the answer alive until its HEADERS frame is written.
///
/// `@unchecked Sendable`, and why that holds: `storage` and `pairs` are written only in `init` and
/// only read afterwards (by any loop's thread), and freed in `deinit`, when nothing refers to them.
final class HTTP2PrebuiltFields: @unchecked Sendable {
  private let storage: UnsafeMutableRawBufferPointer
  /// The fields' pairs, then `strict-transport-security`.
  let pairs: UnsafeMutablePointer<nghttp2_nv>
  /// How many pairs there are without HSTS.
  let count: Int

  /// Without copying: the library must not lower-case or copy what is already lower case and kept.
  static let flags = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
  static let hstsName: StaticString = "strict-transport-security"
  static let hstsValue: StaticString = "max-age=63072000; includeSubDomains"

  init(_ fields: HTTP2Fields) {
    let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(fields.bytes.count, 1), alignment: 1)
    fields.bytes.withUnsafeBytes { storage.copyMemory(from: $0) }
    self.storage = storage
    count = fields.spans.count
    pairs = .allocate(capacity: count + 1)
    let base = storage.baseAddress!.assumingMemoryBound(to: UInt8.self)
    for (i, span) in fields.spans.enumerated() {
      (pairs + i).initialize(
        to: nghttp2_nv(
          name: base + span.name, value: base + span.value, namelen: span.nameLength,
          valuelen: span.valueLength, flags: Self.flags))
    }
    (pairs + count).initialize(
      to: nghttp2_nv(
        name: UnsafeMutablePointer(mutating: Self.hstsName.utf8Start),
        value: UnsafeMutablePointer(
          mutating: Self.hstsValue.utf8Start), namelen: Self.hstsName.utf8CodeUnitCount,
        valuelen: Self.hstsValue.utf8CodeUnitCount, flags: Self.flags))
  }

  deinit {
    pairs.deinitialize(count: count + 1)
    pairs.deallocate()
    storage.deallocate()
  }
}
