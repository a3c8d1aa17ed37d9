import Testing

@testable import Edge

/// libnghttp2's allocator: small blocks from malloc, a page and more mapped; each kind given back
/// the way it came, contents kept across a resize.
@Suite("HTTP/2 session memory (pure)")
struct HTTP2MemoryTests {
  @Test(
    "blocks of every size hold their bytes, come zeroed when asked, keep them across a resize",
    arguments: [0, 1, 100, 4079, 4080, 4096, 16394, 100_000])
  func blocks(size: Int) throws {
    let zeroed = try #require(HTTP2Memory.allocate(size, zeroed: true))
    #expect(UnsafeRawBufferPointer(start: zeroed, count: size).allSatisfy { $0 == 0 })
    HTTP2Memory.release(zeroed)
    let block = try #require(HTTP2Memory.allocate(size, zeroed: false))
    for i in 0..<size { block.storeBytes(of: UInt8(truncatingIfNeeded: i), toByteOffset: i, as: UInt8.self) }
    for newSize in [size / 2, size * 2 + 5000] {
      let copy = try #require(HTTP2Memory.allocate(size, zeroed: false))
      copy.copyMemory(from: block, byteCount: size)
      let resized = try #require(HTTP2Memory.resize(copy, newSize))
      let kept = min(size, newSize)
      #expect(
        (0..<kept).allSatisfy {
          resized.load(fromByteOffset: $0, as: UInt8.self) == UInt8(truncatingIfNeeded: $0)
        })
      HTTP2Memory.release(resized)
    }
    HTTP2Memory.release(block)
    HTTP2Memory.release(nil)
    #expect(HTTP2Memory.allocate(Int.max - 8, zeroed: false) == nil)
  }
}
