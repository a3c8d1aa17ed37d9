import CBrotli
import COpenSSL
import CZlib

/// Digests and compression through the system libraries (OpenSSL, libbrotli, zlib).
public enum Codecs {
  /// SHA-256 of `bytes`, as 64 lower-case hex digits.
  public static func sha256Hex(_ bytes: [UInt8]) -> String {
    var digest = [UInt8](repeating: 0, count: 32)
    bytes.withUnsafeBufferPointer { input in
      _ = SHA256(input.baseAddress, input.count, &digest)
    }
    return hex(digest)
  }

  static func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
      out.append(digits[Int(b >> 4)])
      out.append(digits[Int(b & 15)])
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Brotli at quality 11 (the largest window libbrotli picks by default).
  public static func brotli(_ input: [UInt8]) -> [UInt8]? {
    var size = BrotliEncoderMaxCompressedSize(input.count)
    if size == 0 { size = input.count + 1024 }
    var output = [UInt8](repeating: 0, count: size)
    let ok = input.withUnsafeBufferPointer { source in
      BrotliEncoderCompress(
        11, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, input.count, source.baseAddress, &size, &output)
    }
    guard ok == BROTLI_TRUE else { return nil }
    return Array(output.prefix(size))
  }

  /// gzip at level 9 with zlib's own header: no name, mtime 0, so the output is byte-stable.
  public static func gzip(_ input: [UInt8]) -> [UInt8]? {
    var stream = z_stream()
    // windowBits 15 + 16 selects the gzip wrapper; deflateInit2 is a macro, so call its function.
    guard
      deflateInit2_(
        &stream, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY, zlibVersion(),
        Int32(MemoryLayout<z_stream>.size)) == Z_OK
    else { return nil }
    defer { deflateEnd(&stream) }
    var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(input.count))) + 64)
    var input = input
    let status = input.withUnsafeMutableBufferPointer { source in
      output.withUnsafeMutableBufferPointer { target in
        stream.next_in = source.baseAddress
        stream.avail_in = UInt32(source.count)
        stream.next_out = target.baseAddress
        stream.avail_out = UInt32(target.count)
        return deflate(&stream, Z_FINISH)
      }
    }
    guard status == Z_STREAM_END else { return nil }
    return Array(output.prefix(Int(stream.total_out)))
  }
}
