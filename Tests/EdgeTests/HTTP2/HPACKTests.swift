import Testing

@testable import Edge

/// HPACK (RFC 7541): the decoder against Appendix C's examples and its errors (§2.4, §4.2, §5.2,
/// §6.1), Huffman coding both ways, the encoder through the decoder; and the session's table of
/// open streams.
@Suite("HPACK and the stream table")
struct HPACKTests {
  static func hex(_ s: String) -> [UInt8] {
    let digits = Array(s.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
  }

  /// The fields `block` decodes to, or nil for a compression error.
  static func decode(_ decoder: inout HPACK.Decoder, _ block: [UInt8]) -> [String]? {
    var fields: [String] = []
    let decoded = block.withUnsafeBytes { bytes in
      do {
        try decoder.decode(bytes) { name, value in
          fields.append(String(decoding: name, as: UTF8.self) + ": " + String(decoding: value, as: UTF8.self))
        }
        return true
      } catch {
        return false
      }
    }
    return decoded ? fields : nil
  }

  @Test(
    "Appendix C's request examples, without and with Huffman coding, decode in turn on one table",
    arguments: [
      [
        "828684410f7777772e6578616d706c652e636f6d",
        "828684be58086e6f2d6361636865",
        "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
      ],
      [
        "828684418cf1e3c2e5f23a6ba0ab90f4ff",
        "828684be5886a8eb10649cbf",
        "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
      ],
    ])
  func appendixC(blocks: [String]) {
    var decoder = HPACK.Decoder(limit: 4096)
    #expect(
      Self.decode(&decoder, Self.hex(blocks[0]))
        == [":method: GET", ":scheme: http", ":path: /", ":authority: www.example.com"])
    #expect(
      Self.decode(&decoder, Self.hex(blocks[1]))
        == [
          ":method: GET", ":scheme: http", ":path: /", ":authority: www.example.com",
          "cache-control: no-cache",
        ])
    #expect(
      Self.decode(&decoder, Self.hex(blocks[2]))
        == [
          ":method: GET", ":scheme: https", ":path: /index.html", ":authority: www.example.com",
          "custom-key: custom-value",
        ])
    #expect(decoder.entryCount == 3)
  }

  @Test(
    "blocks that break HPACK are compression errors",
    arguments: [
      ("80", "index 0 (§6.1)"),
      ("be", "an index past both tables"),
      ("3fe21f", "a size update past the announced 4096 (§6.3)"),
      ("82 20", "a size update after a field (§4.2)"),
      ("ff", "an integer cut short (§5.1)"),
      ("ffffffffffffff01", "an integer too large"),
      ("0003616263", "a literal's value missing"),
      ("000a6162", "a string longer than the block"),
      ("4084ffffffff0161", "Huffman coding with EOS in it (§5.2)"),
      ("0081fe0161", "Huffman padding that is not all ones"),
      ("0082 1fff 0161", "Huffman padding longer than 7 bits"),
    ])
  func errors(block: String, why: String) {
    var decoder = HPACK.Decoder(limit: 4096)
    #expect(Self.decode(&decoder, Self.hex(block)) == nil, "\(why)")
  }

  @Test("a size update evicts, and the table keeps only what fits")
  func sizeUpdate() {
    var decoder = HPACK.Decoder(limit: 4096)
    _ = Self.decode(&decoder, Self.hex("400a637573746f6d2d6b65790c637573746f6d2d76616c7565"))
    #expect(decoder.entryCount == 1)
    #expect(Self.decode(&decoder, Self.hex("20 be")) == nil, "size 0 empties the table: index 62 is gone")
    var again = HPACK.Decoder(limit: 4096)
    _ = Self.decode(&again, Self.hex("400a637573746f6d2d6b65790c637573746f6d2d76616c7565"))
    // 54 bytes (10 + 12 + 32) fit in 60 but two do not: the first is evicted for the second.
    #expect(Self.decode(&again, Self.hex("3f1d 400a637573746f6d2d6b65790c637573746f6d2d76616c7565")) != nil)
    #expect(again.entryCount == 1)
  }

  @Test("Huffman coding round-trips every byte, alone, twice and among others", arguments: [0, 1, 7, 100])
  func huffman(seed: Int) {
    // Every symbol as the last one, before each length of padding.
    for b in 0...255 {
      for text in (1...8).map({ [UInt8](repeating: UInt8(b), count: $0) }) + [[UInt8(seed), UInt8(b)]] {
        var decoded: [UInt8] = []
        #expect(HPACK.huffmanEncode(text).withUnsafeBytes { HPACK.huffmanDecode($0, into: &decoded) })
        #expect(decoded == text)
      }
    }
    var generator = SplitMix(seed: UInt64(seed))
    let bytes = (0..<300).map { _ in UInt8(truncatingIfNeeded: generator.next()) } + Array(0...255)
    let coded = HPACK.huffmanEncode(bytes)
    var decoded: [UInt8] = []
    #expect(coded.withUnsafeBytes { HPACK.huffmanDecode($0, into: &decoded) })
    #expect(decoded == bytes)
  }

  @Test("the encoder's literals and statuses decode to what was encoded")
  func encoder() {
    var fields = HTTP2Fields()
    fields.addHead(
      of: Response(
        status: Status(299, "Custom"), headers: [("X-Custom", "a b"), ("Content-Type", "text/plain")]),
      cacheClass: .private, contentLength: 3)
    var block: [UInt8] = []
    fields.encode(into: &block)
    for status in [200, 204, 206, 304, 400, 404, 500, 503] {
      var one: [UInt8] = []
      HPACK.appendStatus(status, to: &one)
      var decoder = HPACK.Decoder(limit: 4096)
      #expect(Self.decode(&decoder, one) == [":status: \(status)"])
    }
    var decoder = HPACK.Decoder(limit: 0)
    #expect(
      Self.decode(&decoder, block)
        == [
          ":status: 299", "cache-control: no-store", "x-custom: a b", "content-type: text/plain",
          "content-length: 3",
        ])
    #expect(decoder.entryCount == 0, "never indexed")
  }

  @Test("the stream table finds, replaces and removes streams that collide", arguments: [1, 4, 100])
  func streamTable(capacity: Int) {
    var table = StreamTable(capacity: capacity)
    let size = 2 * max(16, capacity)  // at least; a multiple of the table's size collides
    let records = (0..<8).map { HTTP2Stream(id: Int32(1 + 2 * size * $0), bodyLimit: 0) }
    var references = records.map { Unmanaged.passUnretained($0) }
    for (record, reference) in zip(records, references) { table.insert(record.id, reference) }
    for (record, reference) in zip(records, references) {
      #expect(table.find(record.id)?.toOpaque() == reference.toOpaque())
    }
    #expect(table.find(3) == nil)
    // Removing from the middle of a run keeps the ones after it found.
    #expect(table.remove(records[2].id)?.toOpaque() == references[2].toOpaque())
    #expect(table.remove(records[2].id) == nil)
    references[2] = Unmanaged.passUnretained(records[0])
    for (i, record) in records.enumerated() where i != 2 {
      #expect(table.find(record.id)?.toOpaque() == Unmanaged.passUnretained(record).toOpaque())
    }
    for record in records where record.id != records[2].id { #expect(table.remove(record.id) != nil) }
    for record in records { #expect(table.find(record.id) == nil) }
  }
}

/// A small seeded generator (SplitMix64), so that a failure repeats.
struct SplitMix {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
