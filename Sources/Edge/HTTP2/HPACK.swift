import Glibc

/// HPACK (RFC 7541): the request side's decoder with its dynamic table, and the response side's
/// encoder, which never indexes (every field a literal without indexing, its name from the static
/// table where it is there), so the peer's decoder keeps no state of ours and an answer's block can
/// be laid out once and sent as it is.
enum HPACK {
  /// How many entries the static table has (Appendix A).
  static let staticCount = 61

  /// The static table's entry `index` (1 to 61): a switch over constants, so a lookup costs no
  /// array access.
  static func staticEntry(_ index: Int) -> (name: StaticString, value: StaticString) {
    switch index {
    case 1: (":authority", "")
    case 2: (":method", "GET")
    case 3: (":method", "POST")
    case 4: (":path", "/")
    case 5: (":path", "/index.html")
    case 6: (":scheme", "http")
    case 7: (":scheme", "https")
    case 8: (":status", "200")
    case 9: (":status", "204")
    case 10: (":status", "206")
    case 11: (":status", "304")
    case 12: (":status", "400")
    case 13: (":status", "404")
    case 14: (":status", "500")
    case 15: ("accept-charset", "")
    case 16: ("accept-encoding", "gzip, deflate")
    case 17: ("accept-language", "")
    case 18: ("accept-ranges", "")
    case 19: ("accept", "")
    case 20: ("access-control-allow-origin", "")
    case 21: ("age", "")
    case 22: ("allow", "")
    case 23: ("authorization", "")
    case 24: ("cache-control", "")
    case 25: ("content-disposition", "")
    case 26: ("content-encoding", "")
    case 27: ("content-language", "")
    case 28: ("content-length", "")
    case 29: ("content-location", "")
    case 30: ("content-range", "")
    case 31: ("content-type", "")
    case 32: ("cookie", "")
    case 33: ("date", "")
    case 34: ("etag", "")
    case 35: ("expect", "")
    case 36: ("expires", "")
    case 37: ("from", "")
    case 38: ("host", "")
    case 39: ("if-match", "")
    case 40: ("if-modified-since", "")
    case 41: ("if-none-match", "")
    case 42: ("if-range", "")
    case 43: ("if-unmodified-since", "")
    case 44: ("last-modified", "")
    case 45: ("link", "")
    case 46: ("location", "")
    case 47: ("max-forwards", "")
    case 48: ("proxy-authenticate", "")
    case 49: ("proxy-authorization", "")
    case 50: ("range", "")
    case 51: ("referer", "")
    case 52: ("refresh", "")
    case 53: ("retry-after", "")
    case 54: ("server", "")
    case 55: ("set-cookie", "")
    case 56: ("strict-transport-security", "")
    case 57: ("transfer-encoding", "")
    case 58: ("user-agent", "")
    case 59: ("vary", "")
    case 60: ("via", "")
    case 61: ("www-authenticate", "")
    default: ("", "")
    }
  }

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
    for i in 1...staticCount {
      let entry = staticEntry(i).name
      if entry.utf8CodeUnitCount == name.count
        && UnsafeBufferPointer(start: entry.utf8Start, count: name.count).elementsEqual(name)
      {
        return i
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
  /// in `symbols` (sorted by length, then symbol), and how many there are; and for every byte, the
  /// symbol whose code of 8 bits or fewer begins it (most of what requests carry), as
  /// `symbol << 4 | length`, 0 for none.
  struct HuffmanTable: Sendable {
    var firstCode = [UInt32](repeating: 0, count: 31)
    var start = [Int](repeating: 0, count: 31)
    var count = [Int](repeating: 0, count: 31)
    var symbols: [UInt16] = []
    var short = [UInt16](repeating: 0, count: 256)
    /// Each byte's code, for the encoder of tests.
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
        if length <= 8 {
          let first = Int(code) << (8 - length)
          for byte in first..<(first + (1 << (8 - length))) { short[byte] = symbol << 4 | UInt16(length) }
        }
      }
    }
  }

  static let huffman = HuffmanTable(lengths: codeLengths)

  /// Decodes `bytes` into `out` (appended); false when the code is broken: EOS decoded, padding
  /// longer than 7 bits or not all ones (§5.2). Codes of 8 bits or fewer take one lookup; longer
  /// ones are found length by length.
  static func huffmanDecode(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) -> Bool {
    huffman.short.withUnsafeBufferPointer { short in
      var bits: UInt64 = 0
      var held = 0
      var at = 0
      while true {
        while held < 30 && at < bytes.count {
          bits = bits &<< 8 | UInt64(bytes[at])
          held += 8
          at += 1
        }
        guard held > 0 else { return true }
        // The next 8 bits; past the end, padded with ones (a prefix of EOS).
        let peek =
          held >= 8
          ? Int(truncatingIfNeeded: bits >> UInt64(held - 8)) & 0xFF
          : Int(truncatingIfNeeded: bits << UInt64(8 - held)) & 0xFF | ((1 << (8 - held)) - 1)
        let found = short[peek]
        if found != 0 && Int(found & 0xF) <= held {
          out.append(UInt8(truncatingIfNeeded: found >> 4))
          held -= Int(found & 0xF)
          continue
        }
        guard held >= 8 else {
          // What is left must be a prefix of EOS (all ones), shorter than a byte.
          let mask: UInt64 = (1 << UInt64(held)) - 1
          return bits & mask == mask
        }
        guard let (symbol, length) = longCode(bits, held), symbol < 256 else { return false }
        out.append(UInt8(symbol))
        held -= length
      }
    }
  }

  /// The code of 9 to 30 bits that begins the `held` bits at the bottom of `bits`, if any.
  private static func longCode(_ bits: UInt64, _ held: Int) -> (UInt16, Int)? {
    guard held >= 9 else { return nil }
    for length in 9...min(30, held) {
      let code = Int(truncatingIfNeeded: bits >> UInt64(held - length)) & ((1 << length) - 1)
      let offset = code - Int(huffman.firstCode[length])
      if offset >= 0 && offset < huffman.count[length] {
        return (huffman.symbols[huffman.start[length] + offset], length)
      }
    }
    return nil
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
  ///
  /// The table's fields lie in one buffer, oldest first, each entry's place in a ring of slots; a
  /// lookup hands out pointers into it (no array copied, nothing counted). The buffer is made at the
  /// first field indexed, and grows as needed up to twice the table's size.
  final class Decoder {
    /// Where an entry's name and value lie in `storage`.
    private struct Slot {
      var offset: Int32
      var nameCount: Int32
      var valueCount: Int32
    }

    private var storage: UnsafeMutablePointer<UInt8>? = nil
    private var storageCapacity = 0
    /// Where the next entry goes in `storage`; the oldest entry's bytes start at its slot's offset.
    private var storageEnd = 0
    /// Made with the buffer, at the first field indexed.
    private var slots: UnsafeMutablePointer<Slot>! = nil
    private let slotCapacity: Int
    /// The oldest entry's slot, and how many entries there are (the newest is index 62).
    private var oldest = 0
    private(set) var entryCount = 0
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
      // Every entry costs 32 bytes besides its name and value (§4.1).
      slotCapacity = limit / 32 + 1
    }

    deinit {
      storage?.deallocate()
      slots?.deallocate()
    }

    /// The bytes the table's buffer holds room for (for tests).
    var storageBytes: Int { storageCapacity }

    /// Decodes a whole header block, calling `field` with each field's name and value in order;
    /// throws when the block breaks HPACK (the connection must end with COMPRESSION_ERROR).
    func decode(
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

    private func literal(
      _ block: UnsafeRawBufferPointer, _ at: inout Int, nameIndex: Int, indexing: Bool,
      _ field: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void
    ) throws(CompressionError) {
      var nameRange: Range<Int>? = nil
      var nameHuffman = false
      if nameIndex == 0 {
        (nameRange, nameHuffman) = try Self.string(block, &at)
      }
      let (valueRange, valueHuffman) = try Self.string(block, &at)
      var value = UnsafeRawBufferPointer(rebasing: block[valueRange]).assumingMemoryBound(to: UInt8.self)
      if valueHuffman {
        valueScratch.removeAll(keepingCapacity: true)
        guard HPACK.huffmanDecode(UnsafeRawBufferPointer(value), into: &valueScratch) else {
          throw CompressionError()
        }
      }
      var name: UnsafeBufferPointer<UInt8>
      if let nameRange {
        name = UnsafeRawBufferPointer(rebasing: block[nameRange]).assumingMemoryBound(to: UInt8.self)
        if nameHuffman {
          nameScratch.removeAll(keepingCapacity: true)
          guard HPACK.huffmanDecode(UnsafeRawBufferPointer(name), into: &nameScratch) else {
            throw CompressionError()
          }
        }
      } else if nameIndex <= HPACK.staticCount {
        let entry = HPACK.staticEntry(nameIndex).name
        name = UnsafeBufferPointer(start: entry.utf8Start, count: entry.utf8CodeUnitCount)
      } else {
        guard let entry = entry(nameIndex) else { throw CompressionError() }
        name = entry.name
      }
      // The scratch buffers are read in place while the field is handed on and indexed; an entry's
      // name is copied before the table can move.
      nameScratch.withUnsafeBufferPointer { decodedName in
        valueScratch.withUnsafeBufferPointer { decodedValue in
          if nameHuffman { name = decodedName }
          if valueHuffman { value = decodedValue }
          field(name, value)
          if indexing { insert(name, value) }
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

    /// The dynamic table's entry at `index` (62 and up), its bytes in place.
    private func entry(_ index: Int) -> (name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>)?
    {
      let back = index - HPACK.staticCount
      guard back >= 1 && back <= entryCount, let storage else { return nil }
      let slot = slots[(oldest + entryCount - back) % slotCapacity]
      let start = storage + Int(slot.offset)
      return (
        UnsafeBufferPointer(start: start, count: Int(slot.nameCount)),
        UnsafeBufferPointer(start: start + Int(slot.nameCount), count: Int(slot.valueCount))
      )
    }

    private func emitIndexed(
      _ index: Int, _ field: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void
    ) throws(CompressionError) {
      guard index > 0 else { throw CompressionError() }
      if index <= HPACK.staticCount {
        let (name, value) = HPACK.staticEntry(index)
        field(
          UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
          UnsafeBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
        return
      }
      guard let entry = entry(index) else { throw CompressionError() }
      field(entry.name, entry.value)
    }

    /// Adds a field to the table (§4.4): older entries are evicted to make room; one larger than the
    /// whole table empties it and is not added.
    private func insert(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) {
      let entrySize = name.count + value.count + 32
      // The name may lie in the table itself (an indexed name): it is kept before anything moves.
      let nameCopy = [UInt8](name)
      evict(toFit: entrySize)
      guard entrySize <= maxSize else { return }
      let bytes = name.count + value.count
      room(for: bytes)
      guard let storage else { return }
      nameCopy.withUnsafeBufferPointer {
        (storage + storageEnd).update(from: $0.baseAddress!, count: $0.count)
      }
      if let base = value.baseAddress {
        (storage + storageEnd + name.count).update(from: base, count: value.count)
      }
      slots[(oldest + entryCount) % slotCapacity] = Slot(
        offset: Int32(storageEnd), nameCount: Int32(name.count), valueCount: Int32(value.count))
      entryCount += 1
      storageEnd += bytes
      size += entrySize
    }

    /// Makes room for `bytes` more at `storageEnd`: the live entries moved to the front, or the
    /// buffer grown.
    private func room(for bytes: Int) {
      if storageEnd + bytes <= storageCapacity { return }
      let liveStart = entryCount > 0 ? Int(slots[oldest].offset) : storageEnd
      let live = storageEnd - liveStart
      if let storage, live + bytes <= storageCapacity {
        if liveStart > 0 {
          memmove(storage, storage + liveStart, live)  // the two may overlap
          for i in 0..<entryCount { slots[(oldest + i) % slotCapacity].offset -= Int32(liveStart) }
        }
        storageEnd = live
        return
      }
      if slots == nil { slots = .allocate(capacity: slotCapacity) }
      let capacity = max(256, 2 * (live + bytes))
      let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
      if let storage {
        grown.update(from: storage + liveStart, count: live)
        storage.deallocate()
        for i in 0..<entryCount { slots[(oldest + i) % slotCapacity].offset -= Int32(liveStart) }
      }
      storage = grown
      storageCapacity = capacity
      storageEnd = live
    }

    private func evict(toFit incoming: Int) {
      while entryCount > 0 && size + incoming > maxSize {
        let slot = slots[oldest]
        size -= Int(slot.nameCount + slot.valueCount) + 32
        oldest = (oldest + 1) % slotCapacity
        entryCount -= 1
      }
      if entryCount == 0 { storageEnd = 0 }
    }
  }
}
