/// HPACK (RFC 7541): the request side's decoder with its dynamic table, and the response side's
/// encoder, which never indexes (every field a literal without indexing, its name from the static
/// table where it is there), so the peer's decoder keeps no state of ours and an answer's block can
/// be laid out once and sent as it is.
enum HPACK {
  /// The static table (Appendix A), 1-based: `staticTable[i - 1]`.
  static let staticTable: [(name: StaticString, value: StaticString)] = [
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
    (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
    (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
    ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""),
    ("cache-control", ""), ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""),
    ("content-length", ""), ("content-location", ""), ("content-range", ""), ("content-type", ""),
    ("cookie", ""), ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""),
    ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""),
    ("retry-after", ""), ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""),
    ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
  ]

  /// What breaks a header block: the connection ends with COMPRESSION_ERROR (RFC 7541 §2.4).
  struct CompressionError: Error {}

  // MARK: integers and strings (§5)

  /// Reads an integer with an `prefix`-bit prefix at `at` (advanced); nil when it is cut short or
  /// passes 2^28 (no length or index here comes near it).
  static func integer(_ bytes: UnsafeRawBufferPointer, _ at: inout Int, prefix: Int) -> Int? {
    guard at < bytes.count else { return nil }
    let mask = (1 << prefix) - 1
    var value = Int(bytes[at]) & mask
    at += 1
    guard value == mask else { return value }
    var shift = 0
    while true {
      guard at < bytes.count, shift <= 21 else { return nil }
      let b = Int(bytes[at])
      at += 1
      value += (b & 0x7F) << shift
      shift += 7
      if b & 0x80 == 0 { return value }
    }
  }

  /// Appends `value` with a `prefix`-bit prefix, the first byte's other bits `flags`.
  static func appendInteger(_ value: Int, prefix: Int, flags: UInt8, to out: inout [UInt8]) {
    let mask = (1 << prefix) - 1
    guard value >= mask else {
      out.append(flags | UInt8(value))
      return
    }
    out.append(flags | UInt8(mask))
    var rest = value - mask
    while rest >= 128 {
      out.append(UInt8(rest & 0x7F | 0x80))
      rest >>= 7
    }
    out.append(UInt8(rest))
  }

  /// Appends `field` as a literal without indexing (§6.2.2), its name indexed when the static table
  /// has it; strings as they are (no Huffman coding).
  static func appendLiteral(
    name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]
  ) {
    if let index = staticNameIndex(name) {
      appendInteger(index, prefix: 4, flags: 0, to: &out)
    } else {
      out.append(0)
      appendInteger(name.count, prefix: 7, flags: 0, to: &out)
      out.append(contentsOf: name)
    }
    appendInteger(value.count, prefix: 7, flags: 0, to: &out)
    out.append(contentsOf: value)
  }

  /// `:status` with its value: indexed when the static table holds it (200, 204, 206, 304, 400,
  /// 404, 500), else a literal.
  static func appendStatus(_ code: Int, to out: inout [UInt8]) {
    switch code {
    case 200: out.append(0x88)
    case 204: out.append(0x89)
    case 206: out.append(0x8A)
    case 304: out.append(0x8B)
    case 400: out.append(0x8C)
    case 404: out.append(0x8D)
    case 500: out.append(0x8E)
    default:
      out.append(0x08)  // literal without indexing, name :status (index 8)
      var digits: [UInt8] = []
      OutputQueue.appendDecimal(code, to: &digits)
      appendInteger(digits.count, prefix: 7, flags: 0, to: &out)
      out += digits
    }
  }

  /// The static table's first entry named `name`.
  static func staticNameIndex(_ name: UnsafeBufferPointer<UInt8>) -> Int? {
    for (i, entry) in staticTable.enumerated() where entry.name.utf8CodeUnitCount == name.count {
      if UnsafeBufferPointer(start: entry.name.utf8Start, count: name.count).elementsEqual(name) {
        return i + 1
      }
    }
    return nil
  }

  // MARK: Huffman (§5.2, Appendix B)

  /// Each symbol's code length in bits (Appendix B); the code is canonical (codes of one length
  /// follow in symbol order), so the codes themselves are derived from the lengths.
  private static let codeLengths: [UInt8] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28,
    28, 28,
    28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21,
    22, 23,
    22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22,
    22, 22,
    23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21,
    26, 26,
    28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28,
    27, 27,
    27, 27, 27, 26,
    30,
  ]

  /// The canonical code's decoding tables: per length, the first code and where its symbols start
  /// in `symbols` (sorted by length, then symbol), and how many there are.
  struct HuffmanTable: Sendable {
    var firstCode = [UInt32](repeating: 0, count: 31)
    var start = [Int](repeating: 0, count: 31)
    var count = [Int](repeating: 0, count: 31)
    var symbols: [UInt16] = []
    /// Each byte's code, for tests and the encoder of tests.
    var codes = [UInt32](repeating: 0, count: 257)

    init(lengths: [UInt8]) {
      symbols = (0..<UInt16(lengths.count)).sorted { (lengths[Int($0)], $0) < (lengths[Int($1)], $1) }
      var code: UInt32 = 0
      var previous = Int(lengths[Int(symbols[0])])
      for (i, symbol) in symbols.enumerated() {
        let length = Int(lengths[Int(symbol)])
        if i > 0 {
          code = (code + 1) << (length - previous)
        }
        previous = length
        if count[length] == 0 {
          firstCode[length] = code
          start[length] = i
        }
        count[length] += 1
        codes[Int(symbol)] = code
      }
    }
  }

  static let huffman = HuffmanTable(lengths: codeLengths)

  /// Decodes `bytes` into `out` (appended); nil when the code is broken: EOS decoded, padding longer
  /// than 7 bits or not all ones (§5.2).
  static func huffmanDecode(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) -> Bool {
    huffman.firstCode.withUnsafeBufferPointer { firstCode in
      huffman.count.withUnsafeBufferPointer { count in
        huffman.start.withUnsafeBufferPointer { start in
          huffman.symbols.withUnsafeBufferPointer { symbols in
            var code: UInt32 = 0
            var length = 0
            for byte in bytes {
              for bit in stride(from: 7, through: 0, by: -1) {
                code = code << 1 | UInt32(byte >> UInt8(bit) & 1)
                length += 1
                guard length >= 5 else { continue }
                let offset = Int(code) - Int(firstCode[length])
                if offset >= 0 && offset < count[length] {
                  let symbol = symbols[start[length] + offset]
                  guard symbol < 256 else { return false }  // EOS
                  out.append(UInt8(symbol))
                  code = 0
                  length = 0
                } else if length == 30 {
                  return false
                }
              }
            }
            // What is left must be a prefix of EOS (all ones), shorter than a byte.
            return length < 8 && code == (1 << UInt32(length)) - 1
          }
        }
      }
    }
  }

  /// Huffman-codes `bytes` (for tests: the server never sends Huffman-coded strings).
  static func huffmanEncode(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var bits: UInt64 = 0
    var n = 0
    for b in bytes {
      let length = Int(codeLengths[Int(b)])
      bits = bits << UInt64(length) | UInt64(huffman.codes[Int(b)])
      n += length
      while n >= 8 {
        out.append(UInt8(truncatingIfNeeded: bits >> UInt64(n - 8)))
        n -= 8
      }
    }
    if n > 0 { out.append(UInt8(truncatingIfNeeded: bits << UInt64(8 - n)) | UInt8((1 << (8 - n)) - 1)) }
    return out
  }
}

extension HPACK {
  /// A request side's decoder (§3): its dynamic table, bounded by the size this server announced
  /// (SETTINGS_HEADER_TABLE_SIZE) and by the peer's size updates.
  struct Decoder {
    /// An entry: its name and value in one buffer, split at `nameCount`.
    private struct Entry {
      let bytes: [UInt8]
      let nameCount: Int
      var size: Int { bytes.count + 32 }
    }

    /// Entries oldest first (the newest is index 62).
    private var entries: [Entry] = []
    private var size = 0
    private var maxSize: Int
    /// The bound this server announced: size updates above it are errors.
    let limit: Int
    /// Where Huffman-coded names and values are decoded.
    private var nameScratch: [UInt8] = []
    private var valueScratch: [UInt8] = []

    init(limit: Int) {
      self.limit = limit
      maxSize = limit
    }

    /// How many entries the dynamic table holds (for tests).
    var entryCount: Int { entries.count }

    /// Decodes a whole header block, calling `field` with each field's name and value in order;
    /// throws when the block breaks HPACK (the connection must end with COMPRESSION_ERROR).
    mutating func decode(
      _ block: UnsafeRawBufferPointer,
      _ field: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void
    ) throws(CompressionError) {
      var at = 0
      var fieldsSeen = false
      while at < block.count {
        let first = block[at]
        if first & 0x80 != 0 {
          guard let index = HPACK.integer(block, &at, prefix: 7) else { throw CompressionError() }
          try emitIndexed(index, field)
          fieldsSeen = true
        } else if first & 0xE0 == 0x20 {
          // A dynamic table size update: only before the block's first field (§4.2).
          guard !fieldsSeen, let newSize = HPACK.integer(block, &at, prefix: 5), newSize <= limit else {
            throw CompressionError()
          }
          maxSize = newSize
          evict(toFit: 0)
        } else {
          let indexing = first & 0xC0 == 0x40
          guard let nameIndex = HPACK.integer(block, &at, prefix: indexing ? 6 : 4) else {
            throw CompressionError()
          }
          try literal(block, &at, nameIndex: nameIndex, indexing: indexing, field)
          fieldsSeen = true
        }
      }
    }

    private mutating func literal(
      _ block: UnsafeRawBufferPointer, _ at: inout Int, nameIndex: Int, indexing: Bool,
      _ field: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void
    ) throws(CompressionError) {
      var nameRange: Range<Int>? = nil
      var nameHuffman = false
      if nameIndex == 0 {
        (nameRange, nameHuffman) = try Self.string(block, &at)
      }
      let (valueRange, valueHuffman) = try Self.string(block, &at)
      if valueHuffman {
        valueScratch.removeAll(keepingCapacity: true)
        guard HPACK.huffmanDecode(UnsafeRawBufferPointer(rebasing: block[valueRange]), into: &valueScratch)
        else {
          throw CompressionError()
        }
      }
      func withValue(_ name: UnsafeBufferPointer<UInt8>) {
        if valueHuffman {
          valueScratch.withUnsafeBufferPointer { field(name, $0) }
          if indexing { insert(name, valueScratch) }
        } else {
          let value = UnsafeRawBufferPointer(rebasing: block[valueRange]).assumingMemoryBound(to: UInt8.self)
          field(name, value)
          if indexing { insert(name, value) }
        }
      }
      if let nameRange {
        if nameHuffman {
          nameScratch.removeAll(keepingCapacity: true)
          guard HPACK.huffmanDecode(UnsafeRawBufferPointer(rebasing: block[nameRange]), into: &nameScratch)
          else {
            throw CompressionError()
          }
          let name = nameScratch
          name.withUnsafeBufferPointer { withValue($0) }
        } else {
          withValue(UnsafeRawBufferPointer(rebasing: block[nameRange]).assumingMemoryBound(to: UInt8.self))
        }
      } else if nameIndex <= HPACK.staticTable.count {
        let name = HPACK.staticTable[nameIndex - 1].name
        withValue(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
      } else {
        let i = entries.count - (nameIndex - HPACK.staticTable.count)
        guard i >= 0 else { throw CompressionError() }
        let entry = entries[i]
        entry.bytes.withUnsafeBufferPointer {
          withValue(UnsafeBufferPointer(rebasing: $0[..<entry.nameCount]))
        }
      }
    }

    /// A string literal's bytes in `block` and whether they are Huffman-coded.
    private static func string(_ block: UnsafeRawBufferPointer, _ at: inout Int) throws(CompressionError) -> (
      Range<Int>, Bool
    ) {
      guard at < block.count else { throw CompressionError() }
      let huffman = block[at] & 0x80 != 0
      guard let length = HPACK.integer(block, &at, prefix: 7), length <= block.count - at else {
        throw CompressionError()
      }
      at += length
      return ((at - length)..<at, huffman)
    }

    private func emitIndexed(
      _ index: Int, _ field: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void
    ) throws(CompressionError) {
      guard index > 0 else { throw CompressionError() }
      if index <= HPACK.staticTable.count {
        let (name, value) = HPACK.staticTable[index - 1]
        field(
          UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
          UnsafeBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
        return
      }
      let i = entries.count - (index - HPACK.staticTable.count)
      guard i >= 0 else { throw CompressionError() }
      let entry = entries[i]
      entry.bytes.withUnsafeBufferPointer {
        field(
          UnsafeBufferPointer(rebasing: $0[..<entry.nameCount]),
          UnsafeBufferPointer(rebasing: $0[entry.nameCount...]))
      }
    }

    /// Adds a field to the table (§4.4): older entries are evicted to make room; one larger than the
    /// whole table empties it and is not added.
    private mutating func insert(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) {
      let entrySize = name.count + value.count + 32
      evict(toFit: entrySize)
      guard entrySize <= maxSize else { return }
      var bytes = [UInt8]()
      bytes.reserveCapacity(name.count + value.count)
      bytes.append(contentsOf: name)
      bytes.append(contentsOf: value)
      entries.append(Entry(bytes: bytes, nameCount: name.count))
      size += entrySize
    }

    private mutating func insert(_ name: UnsafeBufferPointer<UInt8>, _ value: [UInt8]) {
      value.withUnsafeBufferPointer { insert(name, $0) }
    }

    private mutating func evict(toFit incoming: Int) {
      var drop = 0
      while drop < entries.count && size + incoming > maxSize {
        size -= entries[drop].size
        drop += 1
      }
      if drop > 0 { entries.removeFirst(drop) }
    }
  }
}
