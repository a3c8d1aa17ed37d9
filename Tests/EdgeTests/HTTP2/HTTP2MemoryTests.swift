import Glibc
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

  @Test(
    "a recycler hands a freed small block to the next allocation of its class, zeroed when asked, and keeps at most its limit",
    arguments: [0, 1, 47, 48, 100, 1000, 1008])
  func recycled(size: Int) throws {
    let recycler = HTTP2Memory.Recycler(kept: 2)
    let sizeClass = (size + 16 + HTTP2Memory.classBytes - 1) / HTTP2Memory.classBytes
    let first = try #require(HTTP2Memory.allocate(size, zeroed: false, recycler))
    UnsafeMutableRawBufferPointer(start: first, count: size).initializeMemory(as: UInt8.self, repeating: 0xAB)
    HTTP2Memory.release(first, recycler)
    #expect(recycler.count(sizeClass) == 1)
    // Any size of the same class takes it back, and a zeroed one comes zeroed.
    let again = try #require(HTTP2Memory.allocate(size, zeroed: true, recycler))
    #expect(again == first)
    #expect(recycler.count(sizeClass) == 0)
    #expect(UnsafeRawBufferPointer(start: again, count: size).allSatisfy { $0 == 0 })
    let blocks =
      try (0..<4).map { _ in try #require(HTTP2Memory.allocate(size, zeroed: false, recycler)) } + [again]
    for block in blocks { HTTP2Memory.release(block, recycler) }
    #expect(recycler.count(sizeClass) == 2, "the rest went back to malloc")
    // A block grown past its class, and one made without a recycler, are given back alike.
    let grown = try #require(
      HTTP2Memory.resize(HTTP2Memory.allocate(size, zeroed: false, recycler), 5000, recycler))
    HTTP2Memory.release(grown, recycler)
    let plain = try #require(HTTP2Memory.allocate(size, zeroed: false))
    HTTP2Memory.release(plain, recycler)
    #expect(recycler.count(sizeClass) == 2)
  }

  @Test("blocks of a page or more are mapped, never recycled; blocks past the classes come from malloc alone")
  func unrecycled() throws {
    let recycler = HTTP2Memory.Recycler()
    for size in [HTTP2Memory.classes * HTTP2Memory.classBytes, 4080, 20_000] {
      let block = try #require(HTTP2Memory.allocate(size, zeroed: true, recycler))
      HTTP2Memory.release(block, recycler)
    }
    #expect((0...HTTP2Memory.classes).allSatisfy { recycler.count($0) == 0 })
  }

  @Test("a mapped block holds no resident page until the library writes to it (its size is kept aside)")
  func mappedUntouched() throws {
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    for size in [4096, 16394] {
      let block = try #require(HTTP2Memory.allocate(size, zeroed: true))
      #expect(UInt(bitPattern: block) % UInt(page) == 0)
      let pages = (size + page - 1) / page
      var resident = [UInt8](repeating: 0, count: pages)
      #expect(mincore(block, pages * page, &resident) == 0)
      #expect(resident.allSatisfy { $0 & 1 == 0 }, "\(size): nothing written, nothing resident")
      block.storeBytes(of: 1, toByteOffset: size - 1, as: UInt8.self)
      #expect(mincore(block, pages * page, &resident) == 0)
      #expect(resident.filter { $0 & 1 == 1 }.count == 1, "\(size): the page written")
      HTTP2Memory.release(block)
    }
  }
}
