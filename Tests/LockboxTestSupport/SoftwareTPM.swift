import Foundation
import LockboxTPM
import SystemPackage
import Testing

/// A private `swtpm socket --tpm2` for one test: its own state folder and loopback ports, so
/// tests can run in parallel, lock their TPM out, or restart it on the same state (as a reboot
/// keeps a real TPM's non-volatile memory) without disturbing each other.
///
/// Started already up (`--flags startup-clear`), like a TPM after boot; stopped when released.
final class SoftwareTPM: @unchecked Sendable {
    /// Whether the TPM tests can run here. Under `CI=true` or `LOCKBOX_REQUIRE_TPM_TESTS=1` they
    /// run regardless, so a missing swtpm fails them instead of skipping them.
    static let available: Bool = {
        let environment = ProcessInfo.processInfo.environment
        if environment["CI"] == "true" || environment["LOCKBOX_REQUIRE_TPM_TESTS"] == "1" { return true }
        return executable("swtpm") != nil
    }()

    /// Why TPM tests are disabled when they are.
    static let unavailableReason: Comment =
        "swtpm is not installed (apt-get install swtpm swtpm-tools tpm2-tools); set CI=true to make this a failure"

    let state: TemporaryFolder
    private(set) var port = 0
    private var process: Process?

    /// The TCTI string for this TPM.
    var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    init() throws {
        state = try TemporaryFolder()
        try start()
    }

    deinit { stop() }

    /// Starts swtpm on the state folder (two free consecutive ports: tpm2-tss's swtpm TCTI
    /// expects the control channel on the next one up).
    func start() throws {
        guard let swtpm = Self.executable("swtpm") else {
            throw SoftwareTPMError("swtpm is not installed (scripts/ensure-deps.sh --test installs it)")
        }
        for _ in 0..<10 {
            let candidate = Int.random(in: 10_000..<30_000) * 2
            guard Self.portIsFree(candidate), Self.portIsFree(candidate + 1) else { continue }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: swtpm)
            process.arguments = [
                "socket", "--tpm2", "--tpmstate", "dir=\(state.path.string)",
                "--server", "type=tcp,port=\(candidate),bindaddr=127.0.0.1",
                "--ctrl", "type=tcp,port=\(candidate + 1),bindaddr=127.0.0.1",
                "--flags", "not-need-init,startup-clear",
            ]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            for _ in 0..<100 where process.isRunning {
                if Self.canConnect(candidate) {
                    self.process = process
                    port = candidate
                    return
                }
                usleep(20_000)
            }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        throw SoftwareTPMError("swtpm did not start")
    }

    /// Stops swtpm with SIGKILL: a power loss, no `TPM2_Shutdown`. (Not SIGTERM: a child started
    /// from a test thread inherits libdispatch's blocked signals, and swtpm never sees it.)
    func stop() {
        guard let process else { return }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        self.process = nil
    }

    /// Stops swtpm and starts it again on the same state: the TPM's non-volatile memory (the
    /// dictionary-attack counter among it) survives, as over a reboot.
    func restart() throws {
        stop()
        try start()
    }

    /// Runs a tpm2-tools command against this TPM (tests only: the product uses ESAPI).
    @discardableResult
    func tools(_ tool: String, _ arguments: [String]) throws -> String {
        guard let path = Self.executable(tool) else { throw SoftwareTPMError("\(tool) is not installed (apt-get install tpm2-tools)") }
        let (status, output) = try runTool(path, arguments, environment: ["TPM2TOOLS_TCTI": tcti, "PATH": "/usr/bin:/bin"])
        guard status == 0 else {
            throw SoftwareTPMError("\(tool) \(arguments.joined(separator: " ")) exited with \(status)")
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Sets the TPM's dictionary-attack parameters (its lockout auth is empty).
    func setDictionaryAttack(maxTries: UInt32, recoveryTime: UInt32, lockoutRecovery: UInt32 = 0) throws {
        let connection = try TPMConnection(tcti: tcti)
        try connection.setDictionaryAttackParameters(
            maxTries: maxTries, recoveryTime: recoveryTime, lockoutRecovery: lockoutRecovery)
    }

    /// The TPM's dictionary-attack state now.
    func dictionaryAttack() throws -> TPMDictionaryAttack {
        try TPMDictionaryAttack(reading: TPMConnection(tcti: tcti))
    }

    static func executable(_ name: String) -> String? {
        ["/usr/bin", "/usr/local/bin", "/bin"].map { "\($0)/\(name)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private static func portIsFree(_ port: Int) -> Bool { withLoopbackSocket(port, bind) }

    private static func canConnect(_ port: Int) -> Bool { withLoopbackSocket(port, connect) }

    /// `call` (bind or connect) on a new TCP socket with 127.0.0.1:`port`; whether it succeeded.
    private static func withLoopbackSocket(
        _ port: Int, _ call: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32
    ) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

/// A TPM that accepts connections and never answers: two consecutive loopback ports (the swtpm
/// TCTI's command channel and, one up, its control channel) that listen, so the kernel completes
/// every connection, but are never read or written. Closed when released.
final class SilentTPMEndpoint: @unchecked Sendable {
    private var sockets: [Int32] = []
    private(set) var port = 0

    /// The TCTI string for it.
    var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    init() throws {
        for _ in 0..<20 {
            let candidate = Int.random(in: 10_000..<30_000) * 2
            guard let command = Self.listen(candidate) else { continue }
            guard let control = Self.listen(candidate + 1) else {
                close(command)
                continue
            }
            sockets = [command, control]
            port = candidate
            return
        }
        throw SoftwareTPMError("no two free consecutive loopback ports")
    }

    deinit { stop() }

    /// Stops listening, which resets the connections the kernel accepted for it: whoever waits
    /// on them gets an error.
    func stop() {
        for socket in sockets { close(socket) }
        sockets = []
    }

    /// A socket listening on 127.0.0.1:`port`, or `nil`.
    private static func listen(_ port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = SoftwareTPM.loopback(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound, Glibc.listen(fd, 64) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}

/// Runs `path` with `arguments` (and `environment`, else ours); its exit status and standard
/// output, standard error discarded.
func runTool(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (Int32, Data) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, data)
}

struct SoftwareTPMError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The TPM failure `body` threw, or `nil` (recording an issue) if it threw none.
func tpmFailure<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) -> TPMError.Failure? {
    do {
        _ = try body()
        Issue.record("expected a TPM error, but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as TPMError {
        return error.failure
    } catch {
        Issue.record("expected a TPMError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
