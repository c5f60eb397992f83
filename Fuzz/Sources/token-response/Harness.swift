@_spi(Fuzzing) import Lockbox

/// libFuzzer's entry point: one input, FuzzingEntryPoints.tokenResponse. Built with
/// -sanitize=fuzzer,address -parse-as-library by scripts/fuzz.sh.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzingEntryPoints.tokenResponse(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
