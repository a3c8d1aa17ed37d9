// The whole program is this global's initializer: in an ordinary build a global of main.swift is
// top-level code, run in order at start. build/fuzz's --sanitize=fuzzer, which SwiftPM also
// applies to the tools it builds for plugins, compiles every executable with -parse-as-library
// and links libFuzzer's main, which calls the stub below: there the tool links and never runs
// (the fuzz build plans it but builds nothing of ClientAPI). No top-level statement, no @main.
let finished: Void = EmbedTool.run()

@_cdecl("LLVMFuzzerTestOneInput")
func neverFuzzed(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { 0 }
