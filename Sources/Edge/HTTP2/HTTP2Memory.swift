import CNGHTTP2
import Glibc
import Synchronization

/// Memory for libnghttp2's sessions (`nghttp2_mem`). A session allocates about 25 KiB as it is made
/// (its frame buffer of 16 KiB, a stream map of 4 KiB, HPACK tables), most of which an idle
/// connection never writes. Blocks of a page or more are mapped from the kernel, so only the pages
/// the library writes become resident: their sizes are kept aside (`mappedSizes`), not in the
/// mapping, so that a stream map no stream was put in holds no page at all. Smaller ones come from
/// malloc, rounded up to a size class and, once freed, kept by the loop's `Recycler` for the next
/// session that asks for that class: the library allocates a few small blocks per stream (the
/// stream, its HEADERS and DATA items) and frees them when the stream closes. Each of those carries
/// a header saying which kind it is, and how large.
enum HTTP2Memory {
  /// Blocks from this size (header included) up are mapped.
  static let mappedFrom = 4096
  private static let header = 16
  private static let page = Int(sysconf(Int32(_SC_PAGESIZE)))
  /// Small blocks are malloc'd in multiples of this (header included), up to `classes` of them.
  static let classBytes = 64
  static let classes = 16

  /// What a malloc'd block is (mapped blocks carry no header).
  private enum Kind: Int {
    case allocated = 0
    /// Of a size class (its bytes `classBytes` times the class): a recycler may keep it.
    case classed = 2
  }

  /// Freed small blocks, by size class, for the sessions of one event loop: only that loop's thread
  /// allocates and frees through it (a session is made, used and ended on its connection's loop),
  /// so it takes no lock. At most `kept` blocks of each class are kept; the rest go back to malloc.
  /// h2o's per-thread recycling allocators (`h2o_mem_recycle_t`) are the model.
  final class Recycler {
    /// How many blocks of one class are kept.
    let kept: Int
    private let heads = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(
      capacity: HTTP2Memory.classes + 1)
    private let counts = UnsafeMutablePointer<Int>.allocate(capacity: HTTP2Memory.classes + 1)

    init(kept: Int = 128) {
      self.kept = kept
      heads.initialize(repeating: nil, count: HTTP2Memory.classes + 1)
      counts.initialize(repeating: 0, count: HTTP2Memory.classes + 1)
    }

    deinit {
      for sizeClass in 0...HTTP2Memory.classes {
        while let block = take(sizeClass) { free(block) }
      }
      heads.deallocate()
      counts.deallocate()
    }

    /// How many blocks of `sizeClass` it keeps now (for tests).
    func count(_ sizeClass: Int) -> Int { counts[sizeClass] }

    /// A kept block of `sizeClass` (its base, header included), if there is one.
    func take(_ sizeClass: Int) -> UnsafeMutableRawPointer? {
      guard let block = heads[sizeClass] else { return nil }
      heads[sizeClass] = block.load(as: UnsafeMutableRawPointer?.self)
      counts[sizeClass] -= 1
      return block
    }

    /// Keeps `block` (a base of `sizeClass`); false when that class is full.
    func keep(_ block: UnsafeMutableRawPointer, _ sizeClass: Int) -> Bool {
      guard counts[sizeClass] < kept else { return false }
      block.storeBytes(of: heads[sizeClass], as: UnsafeMutableRawPointer?.self)
      heads[sizeClass] = block
      counts[sizeClass] += 1
      return true
    }
  }

  /// The size of libnghttp2's frame buffer (`NGHTTP2_FRAMEBUF_CHUNKLEN`: a frame header, a pad
  /// length byte and the largest payload), which holds only the frame being written.
  static let frameBufferSize = 9 + 1 + 16_384

  /// One session's memory: its loop's recycler, and the frame buffer the library made with the
  /// session (told apart by its size among what the session allocated as it was made), whose pages
  /// an idle connection gives back (`releaseFrameBuffer`). Used on the session's thread only. The
  /// library calls into it for every block, so it is read without reference counting.
  final class Arena {
    /// A constant of a referenced instance: lent to each call, not retained.
    private let recycler: Recycler?
    /// Blocks of `frameBufferSize` are recorded while the session is being made.
    private var recording = true
    private var frameBuffer: UnsafeMutableRawPointer?

    init(recycler: Recycler?) { self.recycler = recycler }

    /// The session is made: a later block of that size (a large frame being read) is not its
    /// frame buffer.
    func made() { recording = false }

    /// Gives the frame buffer's pages back to the kernel (they come back zeroed when next written).
    /// Only while nothing is being written: what it held was sent, and the next frame is packed
    /// from its start.
    func releaseFrameBuffer() {
      if let frameBuffer {
        madvise(frameBuffer, HTTP2Memory.pages(HTTP2Memory.frameBufferSize), MADV_DONTNEED)
      }
    }

    /// How many of the frame buffer's pages are resident, as `mincore` reports them (for tests).
    var frameBufferPagesResident: Int {
      guard let frameBuffer else { return 0 }
      let length = HTTP2Memory.pages(HTTP2Memory.frameBufferSize)
      var vector = [UInt8](repeating: 0, count: length / HTTP2Memory.page)
      guard mincore(frameBuffer, length, &vector) == 0 else { return 0 }
      return vector.filter { $0 & 1 == 1 }.count
    }

    fileprivate func allocate(_ size: Int, zeroed: Bool) -> UnsafeMutableRawPointer? {
      let block = HTTP2Memory.allocate(size, zeroed: zeroed, recycler)
      if recording && size == HTTP2Memory.frameBufferSize && frameBuffer == nil { frameBuffer = block }
      return block
    }

    fileprivate func release(_ block: UnsafeMutableRawPointer?) {
      if block == frameBuffer { frameBuffer = nil }
      HTTP2Memory.release(block, recycler)
    }

    fileprivate func resize(_ block: UnsafeMutableRawPointer?, _ size: Int) -> UnsafeMutableRawPointer? {
      // The library makes its buffers by resizing nothing.
      guard let block else { return allocate(size, zeroed: false) }
      // A frame buffer moved is no longer known as one (its pages are then never released).
      if block == frameBuffer { frameBuffer = nil }
      return HTTP2Memory.resize(block, size, recycler)
    }
  }

  /// `size` rounded up to whole pages.
  fileprivate static func pages(_ size: Int) -> Int { (size + page - 1) / page * page }

  /// The allocator, for `nghttp2_session_server_new3` (which copies it), through `arena`, which
  /// the session must keep alive.
  static func allocator(_ arena: Arena) -> nghttp2_mem {
    nghttp2_mem(
      mem_user_data: Unmanaged.passUnretained(arena).toOpaque(),
      malloc: { size, user in
        HTTP2Memory.arena(user)?._withUnsafeGuaranteedRef { $0.allocate(size, zeroed: false) }
      },
      free: { block, user in
        guard let arena = HTTP2Memory.arena(user) else { return HTTP2Memory.release(block) }
        arena._withUnsafeGuaranteedRef { $0.release(block) }
      },
      calloc: { count, size, user in
        let (total, overflow) = count.multipliedReportingOverflow(by: size)
        return overflow
          ? nil : HTTP2Memory.arena(user)?._withUnsafeGuaranteedRef { $0.allocate(total, zeroed: true) }
      },
      realloc: { block, size, user in
        HTTP2Memory.arena(user)?._withUnsafeGuaranteedRef { $0.resize(block, size) }
      })
  }

  /// The arena `user` points at, unretained (its session keeps it).
  private static func arena(_ user: UnsafeMutableRawPointer?) -> Unmanaged<Arena>? {
    user.map { Unmanaged<Arena>.fromOpaque($0) }
  }

  /// The size asked for each mapped block, by its address (a session has two or three: made with
  /// it, given back when it ends).
  private static let mappedSizes = Mutex<[UInt: Int]>([:])

  /// How many mapped blocks are out (for tests).
  static var mappedCount: Int { mappedSizes.withLock { $0.count } }

  /// `size` bytes (zero-filled when `zeroed`: mapped pages always are).
  static func allocate(_ size: Int, zeroed: Bool, _ recycler: Recycler? = nil) -> UnsafeMutableRawPointer? {
    guard size <= Int.max - header - page else { return nil }
    let total = size + header
    let base: UnsafeMutableRawPointer
    let kind: Kind
    let sizeClass = (total + classBytes - 1) / classBytes
    if total >= mappedFrom {
      let length = pages(size)
      guard let pages = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
        pages != MAP_FAILED
      else { return nil }
      mappedSizes.withLock { $0[UInt(bitPattern: pages)] = size }
      return pages
    } else if sizeClass <= classes {
      if let kept = recycler?.take(sizeClass) {
        base = kept
        if zeroed { (base + header).initializeMemory(as: UInt8.self, repeating: 0, count: size) }
      } else {
        guard let block = zeroed ? calloc(1, sizeClass * classBytes) : malloc(sizeClass * classBytes) else {
          return nil
        }
        base = block
      }
      kind = .classed
    } else {
      guard let block = zeroed ? calloc(1, total) : malloc(total) else { return nil }
      (base, kind) = (block, .allocated)
    }
    base.storeBytes(of: size, as: Int.self)
    base.storeBytes(of: kind.rawValue, toByteOffset: 8, as: Int.self)
    return base + header
  }

  /// The size asked for the mapped block at `block`, if it is one (nil for the rest).
  private static func mappedSize(_ block: UnsafeMutableRawPointer) -> Int? {
    // Mapped blocks start on a page, so on a multiple of 4,096 whatever the page size (a mask: no
    // division on the way to every free); a malloc'd one that happens to is not in the table.
    guard UInt(bitPattern: block) & 4095 == 0 else { return nil }
    return mappedSizes.withLock { $0[UInt(bitPattern: block)] }
  }

  /// Gives back a block `allocate` made (a small one to `recycler`, while it has room).
  static func release(_ block: UnsafeMutableRawPointer?, _ recycler: Recycler? = nil) {
    guard let block else { return }
    if let size = mappedSize(block) {
      mappedSizes.withLock { _ = $0.removeValue(forKey: UInt(bitPattern: block)) }
      munmap(block, pages(size))
      return
    }
    let base = block - header
    let size = base.load(as: Int.self)
    switch Kind(rawValue: base.load(fromByteOffset: 8, as: Int.self)) {
    case .classed:
      let sizeClass = (size + header + classBytes - 1) / classBytes
      if let recycler, recycler.keep(base, sizeClass) { return }
      free(base)
    case .allocated, nil:
      free(base)
    }
  }

  /// The block's bytes in a block of `size` (the library grows its buffers this way, rarely).
  static func resize(_ block: UnsafeMutableRawPointer?, _ size: Int, _ recycler: Recycler? = nil)
    -> UnsafeMutableRawPointer?
  {
    guard let block else { return allocate(size, zeroed: false, recycler) }
    guard let grown = allocate(size, zeroed: false, recycler) else { return nil }
    let old = mappedSize(block) ?? (block - header).load(as: Int.self)
    grown.copyMemory(from: block, byteCount: min(size, old))
    release(block, recycler)
    return grown
  }
}
