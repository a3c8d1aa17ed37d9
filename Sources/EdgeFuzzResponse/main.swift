import Edge

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  fuzzHTTP1ResponseParser(UnsafeRawBufferPointer(start: data, count: size))
  return 0
}
