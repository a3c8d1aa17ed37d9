import Edge

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  fuzzHTTP1Parser(UnsafeRawBufferPointer(start: data, count: size))
  return 0
}
