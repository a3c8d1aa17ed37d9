import CNGHTTP2
import Glibc

/// Memory for libnghttp2's sessions (`nghttp2_mem`). A session allocates about 25 KiB as it is made
/// (its frame buffer of 16 KiB, a stream map of 4 KiB, HPACK tables), most of which an idle
/// connection never writes. Blocks of a page or more are mapped from the kernel, so only the pages
/// the library writes become resident; smaller ones come from malloc. Every block carries a header
/// saying which, and how large it is.
enum HTTP2Memory {
  /// Blocks from this size (header included) up are mapped.
  static let mappedFrom = 4096
  private static let header = 16
  private static let page = Int(sysconf(Int32(_SC_PAGESIZE)))

  /// The allocator, for `nghttp2_session_server_new3` (which copies it).
  static var allocator: nghttp2_mem {
    nghttp2_mem(
      mem_user_data: nil, malloc: { size, _ in HTTP2Memory.allocate(size, zeroed: false) },
      free: { block, _ in HTTP2Memory.release(block) },
      calloc: { count, size, _ in
        let (total, overflow) = count.multipliedReportingOverflow(by: size)
        return overflow ? nil : HTTP2Memory.allocate(total, zeroed: true)
      },
      realloc: { block, size, _ in HTTP2Memory.resize(block, size) })
  }

  /// `size` bytes (zero-filled when `zeroed`: mapped pages always are).
  static func allocate(_ size: Int, zeroed: Bool) -> UnsafeMutableRawPointer? {
    guard size <= Int.max - header - page else { return nil }
    let total = size + header
    let base: UnsafeMutableRawPointer
    let mapped = total >= mappedFrom
    if mapped {
      let length = (total + page - 1) / page * page
      guard let pages = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
        pages != MAP_FAILED
      else { return nil }
      base = pages
    } else {
      guard let block = zeroed ? calloc(1, total) : malloc(total) else { return nil }
      base = block
    }
    base.storeBytes(of: size, as: Int.self)
    base.storeBytes(of: mapped ? 1 : 0, toByteOffset: 8, as: Int.self)
    return base + header
  }

  /// Gives back a block `allocate` made.
  static func release(_ block: UnsafeMutableRawPointer?) {
    guard let block else { return }
    let base = block - header
    let size = base.load(as: Int.self)
    if base.load(fromByteOffset: 8, as: Int.self) == 1 {
      munmap(base, (size + header + page - 1) / page * page)
    } else {
      free(base)
    }
  }

  /// The block's bytes in a block of `size` (the library grows its buffers this way, rarely).
  static func resize(_ block: UnsafeMutableRawPointer?, _ size: Int) -> UnsafeMutableRawPointer? {
    guard let block else { return allocate(size, zeroed: false) }
    guard let grown = allocate(size, zeroed: false) else { return nil }
    grown.copyMemory(from: block, byteCount: min(size, (block - header).load(as: Int.self)))
    release(block)
    return grown
  }
}
