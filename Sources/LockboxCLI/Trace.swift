import FoundationEssentials
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `--verbose` (anywhere on the command line) or `LOCKBOX_LOG=debug`: what `lockbox` decides and
/// does — which store and why, which settings file, vault path, which credential kinds, which
/// item address, how long each step took — as `lockbox: [debug]` lines on standard error.
///
/// Never logged: secrets, passphrases, PINs, tokens (nor their lengths), and the command line's
/// values (a secret typed as an argument by mistake must not be copied into a log). Item
/// addresses (service, account), paths, store choices and error descriptions are logged: none of
/// them is a secret.
enum Trace {
    private static let on = Atomic<Bool>(false)
    private static let start = ContinuousClock.now

    /// Whether tracing is on.
    static var enabled: Bool { on.load(ordering: .relaxed) }

    /// Turns tracing on for `--verbose` or `LOCKBOX_LOG=debug`, and returns the arguments
    /// without `--verbose` (before a `--`), which no subcommand declares.
    static func configure(_ arguments: [String], environment: [String: String]) -> [String] {
        _ = start  // the clock starts here, not at the first line
        let end = arguments.firstIndex(of: "--") ?? arguments.endIndex
        let flagged = arguments[..<end].contains("--verbose")
        if flagged || environment["LOCKBOX_LOG"]?.lowercased() == "debug" { on.store(true, ordering: .relaxed) }
        guard flagged else { return arguments }
        return arguments[..<end].filter { $0 != "--verbose" } + arguments[end...]
    }

    /// Writes one line when tracing is on; `message` is not evaluated otherwise.
    static func log(_ message: @autoclosure () -> String) {
        guard enabled else { return }
        let elapsed = ContinuousClock.now - start
        let milliseconds = max(0, Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        var line =
            "lockbox: [debug] " + Console.rightAligned(Console.decimal(milliseconds, places: 2), width: 8) + " ms  " + message() + "\n"
        line.withUTF8 { bytes in _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
    }
}
