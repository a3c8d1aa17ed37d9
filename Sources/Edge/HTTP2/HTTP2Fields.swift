/// Header fields of an answer: names and values in one buffer (names lower-cased, RFC 9113 §8.2.1)
/// and where each lies, to be encoded as an HPACK block.
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

  /// Appends the fields as an HPACK block (literals without indexing, RFC 7541 §6.2.2; `:status`
  /// indexed when the static table has it).
  func encode(into out: inout [UInt8]) {
    bytes.withUnsafeBufferPointer { bytes in
      for span in spans {
        let name = UnsafeBufferPointer(rebasing: bytes[span.name..<(span.name + span.nameLength)])
        let value = UnsafeBufferPointer(rebasing: bytes[span.value..<(span.value + span.valueLength)])
        if span.nameLength == 7, name.elementsEqual(":status".utf8), let code = HTTP2Session.decimal(value) {
          HPACK.appendStatus(code, to: &out)
        } else {
          HPACK.appendLiteral(name: name, value: value, to: &out)
        }
      }
    }
  }
}

/// A prebuilt answer's header block, encoded once for the life of the answer (HPACK literals that
/// never index, so the same bytes serve every connection): without `date`, which each answer
/// appends, and a second time with HSTS for TLS listeners.
struct HTTP2PrebuiltBlock: Sendable {
  let plain: [UInt8]
  let withHSTS: [UInt8]

  static let hstsName: StaticString = "strict-transport-security"
  static let hstsValue: StaticString = "max-age=63072000; includeSubDomains"

  init(_ fields: HTTP2Fields) {
    var block: [UInt8] = []
    fields.encode(into: &block)
    plain = block
    HPACK.appendLiteral(
      name: UnsafeBufferPointer(start: Self.hstsName.utf8Start, count: Self.hstsName.utf8CodeUnitCount),
      value: UnsafeBufferPointer(start: Self.hstsValue.utf8Start, count: Self.hstsValue.utf8CodeUnitCount),
      to: &block)
    withHSTS = block
  }
}
