import CNGHTTP2
import Glibc

/// Memory for libnghttp2's sessions (`nghttp2_mem`). A session allocates about 25 KiB as it is made
/// (its frame buffer of 16 KiB, a stream map of 4 KiB, HPACK tables), most of which an idle
/// connection never writes. Blocks of a page or more are mapped from the kernel, so only the pages
/// the library writes become resident. Smaller ones come from malloc, rounded up to a size class
/// and, once freed, kept by the loop's `Recycler` for the next session that asks for that class:
/// the library allocates a few small blocks per stream (the stream, its HEADERS and DATA items)
/// and frees them when the stream closes. Every block carries a header saying which kind it is, and
/// how large.
enum HTTP2Memory {
  /// Blocks from this size (header included) up are mapped.
  static let mappedFrom = 4096
  private static let header = 16
  private static let page = Int(sysconf(Int32(_SC_PAGESIZE)))
  /// Small blocks are malloc'd in multiples of this (header included), up to `classes` of them.
  static let classBytes = 64
  static let classes = 16

  private enum Kind: Int {
    case allocated = 0
    case mapped = 1
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

  /// The allocator, for `nghttp2_session_server_new3` (which copies it); small blocks recycled
  /// through `recycler` when there is one, which the session must keep alive.
  static func allocator(_ recycler: Recycler?) -> nghttp2_mem {
    nghttp2_mem(
      mem_user_data: recycler.map { Unmanaged.passUnretained($0).toOpaque() },
      malloc: { size, user in HTTP2Memory.withRecycler(user) { HTTP2Memory.allocate(size, zeroed: false, $0) }
      },
      free: { block, user in HTTP2Memory.withRecycler(user) { HTTP2Memory.release(block, $0) } },
      calloc: { count, size, user in
        let (total, overflow) = count.multipliedReportingOverflow(by: size)
        return overflow
          ? nil : HTTP2Memory.withRecycler(user) { HTTP2Memory.allocate(total, zeroed: true, $0) }
      },
      realloc: { block, size, user in HTTP2Memory.withRecycler(user) { HTTP2Memory.resize(block, size, $0) } }
    )
  }

  /// Calls `body` with the recycler `user` points at (unretained: its session keeps it), or nil.
  private static func withRecycler<R>(_ user: UnsafeMutableRawPointer?, _ body: (Recycler?) -> R) -> R {
    guard let user else { return body(nil) }
    return Unmanaged<Recycler>.fromOpaque(user)._withUnsafeGuaranteedRef { body($0) }
  }

  /// `size` bytes (zero-filled when `zeroed`: mapped pages always are).
  static func allocate(_ size: Int, zeroed: Bool, _ recycler: Recycler? = nil) -> UnsafeMutableRawPointer? {
    guard size <= Int.max - header - page else { return nil }
    let total = size + header
    let base: UnsafeMutableRawPointer
    let kind: Kind
    let sizeClass = (total + classBytes - 1) / classBytes
    if total >= mappedFrom {
      let length = (total + page - 1) / page * page
      guard let pages = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
        pages != MAP_FAILED
      else { return nil }
      (base, kind) = (pages, .mapped)
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

  /// Gives back a block `allocate` made (a small one to `recycler`, while it has room).
  static func release(_ block: UnsafeMutableRawPointer?, _ recycler: Recycler? = nil) {
    guard let block else { return }
    let base = block - header
    let size = base.load(as: Int.self)
    switch Kind(rawValue: base.load(fromByteOffset: 8, as: Int.self)) {
    case .mapped:
      munmap(base, (size + header + page - 1) / page * page)
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
    grown.copyMemory(from: block, byteCount: min(size, (block - header).load(as: Int.self)))
    release(block, recycler)
    return grown
  }
}
