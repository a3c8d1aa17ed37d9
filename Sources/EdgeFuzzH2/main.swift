import Edge

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSession(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  fuzzHTTP2Session(UnsafeRawBufferPointer(start: data, count: size))
  return 0
}
