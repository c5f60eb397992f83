import LockboxFuzzing

// The libFuzzer harness for Lockbox's parsers: `LockboxFuzzer TARGET [libFuzzer options] CORPUS...`
// runs libFuzzer on one of LockboxFuzzing's entry points. Only scripts/ci/fuzz.sh builds it for real
// (with -sanitize=fuzzer,address and -D LOCKBOX_FUZZ, so libFuzzer's driver is linked in); an
// ordinary `swift build` compiles it to a binary that explains that and exits 64.
#if canImport(Glibc)
    import Glibc
#endif

/// The targets, by the names scripts/ci/fuzz.sh and Fuzz/corpus use.
let targets: [String: @Sendable (UnsafeRawBufferPointer) -> Void] = [
    "vault-file": FuzzingEntryPoints.vaultFile,
    "vault-payload": FuzzingEntryPoints.vaultPayload,
    "vault-row": FuzzingEntryPoints.vaultRow,
    "vault-database": FuzzingEntryPoints.vaultDatabase,
    "settings": FuzzingEntryPoints.settings,
    "pin-record": FuzzingEntryPoints.pinRecord,
    "session-window": FuzzingEntryPoints.sessionWindow,
    "key-file": FuzzingEntryPoints.keyFile,
    "token-response": FuzzingEntryPoints.tokenResponse,
    "token-record": FuzzingEntryPoints.tokenRecord,
    "dbus-message": FuzzingEntryPoints.dbusMessage,
]

func fail(_ message: String) -> Never {
    let line = Array("LockboxFuzzer: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(64)
}

let arguments = CommandLine.arguments
guard arguments.count >= 2, let chosen = targets[arguments[1]] else {
    fail("usage: LockboxFuzzer TARGET [libFuzzer options] [CORPUS...]; TARGET is one of: \(targets.keys.sorted().joined(separator: " "))")
}

#if LOCKBOX_FUZZ
    /// libFuzzer's driver (compiler-rt's FuzzerDriver.cpp), linked by -sanitize=fuzzer.
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    /// The chosen entry point, read by the C callback (which cannot capture).
    nonisolated(unsafe) var entryPoint: (UnsafeRawBufferPointer) -> Void = chosen

    // libFuzzer reads its options from argv; the target name is ours, so it is dropped.
    var argc = CommandLine.argc - 1
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    argv?[1] = argv?[0]
    argv = argv.map { $0 + 1 }
    exit(
        LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            entryPoint(UnsafeRawBufferPointer(start: data, count: size))
            return 0
        })
#else
    _ = chosen
    fail("this build has no fuzzer; build and run it with scripts/ci/fuzz.sh")
#endif
