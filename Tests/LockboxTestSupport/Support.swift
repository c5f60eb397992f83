import Foundation
import SystemPackage
import Testing

@testable import Lockbox

/// A fresh folder under the system temp directory, removed when released.
final class TemporaryFolder: @unchecked Sendable {
    let path: FilePath

    init() throws {
        var template = Array((NSTemporaryDirectory() + "/lockbox-test-XXXXXX").utf8CString)
        guard let created = mkdtemp(&template) else { throw Errno(rawValue: errno) }
        path = FilePath(String(cString: created))
    }

    deinit { try? FileManager.default.removeItem(atPath: path.string) }

    func file(_ name: String) -> FilePath { path.appending(name) }
}

/// Cheap Argon2id parameters so tests that exercise passphrase slots stay fast.
let testKDF: KDFParameters = {
    do { return try KDFParameters(opsLimit: 1, memoryLimitBytes: 8 * 1024) } catch { fatalError("bad test KDF") }
}()

func secret(_ string: String) -> SecretBytes { SecretBytes(utf8: string) }

/// A vault with a generated key file in a fresh folder.
struct KeyFileVault {
    let folder: TemporaryFolder
    let vaultPath: FilePath
    let keyPath: FilePath
    let store: EncryptedFileStore

    init(passphrase: String? = nil) throws {
        folder = try TemporaryFolder()
        vaultPath = folder.file("vault.lockbox")
        keyPath = folder.file("vault.key")
        try KeyFile.generate(at: keyPath)
        var credentials: [VaultCredential] = [.keyFile(keyPath)]
        if let passphrase { credentials.append(.passphrase(secret(passphrase))) }
        store = try EncryptedFileStore.create(at: vaultPath, credentials: credentials, kdf: testKDF)
    }

    func reopen() throws -> EncryptedFileStore {
        try EncryptedFileStore.open(at: vaultPath, credential: .keyFile(keyPath))
    }

    func bytes() throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: vaultPath.string)))
    }

    /// Overwrites the vault file in place, keeping mode 0600.
    func write(_ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: vaultPath.string))
        chmod(vaultPath.string, 0o600)
    }
}

/// Asserts that `body` throws exactly `expected`.
func expectError<T>(_ expected: LockboxError, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) {
    do {
        _ = try body()
        Issue.record("expected \(expected), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as LockboxError {
        #expect(error == expected, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(expected), got \(error)", sourceLocation: sourceLocation)
    }
}

/// The `LockboxError` thrown by `body`, or `nil` (recording an issue) if it did not throw one.
func caughtError<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) -> LockboxError? {
    do {
        _ = try body()
        Issue.record("expected an error, but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as LockboxError {
        return error
    } catch {
        Issue.record("expected a LockboxError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// ``caughtError(sourceLocation:_:)`` for async code.
func caughtError<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T) async -> LockboxError? {
    do {
        _ = try await body()
        Issue.record("expected an error, but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as LockboxError {
        return error
    } catch {
        Issue.record("expected a LockboxError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

// MARK: Running the real `lockbox` binary

struct ProcessResult {
    var status: Int32
    var stdout: Data
    var stderr: String
    var stdoutString: String { String(decoding: stdout, as: UTF8.self) }
}

/// The executable `name` the build put beside the test product (`swift build --build-tests`, in
/// whichever configuration: the test command's or a debug build's), or, when it is not found
/// there, `.build/debug/name` under the working directory.
func builtExecutable(_ name: String) -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        Bundle.main.bundleURL,
        Bundle.main.bundleURL.deletingLastPathComponent(),
    ]
    for folder in candidates {
        let url = folder.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/" + name)
}

/// The `lockbox` executable built beside the test bundle.
let lockboxBinary = builtExecutable("lockbox")

/// Runs `lockbox` with `arguments`, feeding `stdin`, with a clean environment (plus `environment`).
/// `shellRedirect`, if given, runs through /bin/sh so the test can open extra descriptors
/// (e.g. `3<file`) the way a user's shell would.
func runLockbox(
    _ arguments: [String], stdin: Data = Data(), environment: [String: String] = [:], shellRedirect: String? = nil
) throws -> ProcessResult {
    if let shellRedirect {
        let quoted = ([lockboxBinary.path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        return try runProcess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", quoted.joined(separator: " ") + " " + shellRedirect],
            stdin: stdin, environment: environment)
    }
    return try runProcess(lockboxBinary, arguments, stdin: stdin, environment: environment)
}

/// Runs `executable` with `arguments`, feeding `stdin`, with a clean environment (plus `environment`).
func runProcess(_ executable: URL, _ arguments: [String], stdin: Data = Data(), environment: [String: String] = [:]) throws -> ProcessResult
{
    let process = Process()
    var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]
    // Under scripts/ci/sanitizers.sh the children are sanitized too: they keep its report path and
    // suppressions (else a suppressed leak at exit would turn a usage error's 64 into 1).
    for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"] {
        if let value = ProcessInfo.processInfo.environment[name] { env[name] = value }
    }
    env.merge(environment) { _, new in new }
    process.environment = env
    process.executableURL = executable
    process.arguments = arguments
    return try runProcess(process, stdin: stdin)
}

/// The tests' one process runner: starts `process` with pipes for its standard streams, writes
/// `stdin` and reads standard error on threads of their own while this thread reads standard
/// output, then waits for the exit. A child that fills one pipe while Lockbox's tests wait on
/// another (a long error output, or input larger than a pipe holds) cannot deadlock it.
func runProcess(_ process: Process, stdin: Data = Data()) throws -> ProcessResult {
    let input = Pipe()
    let output = Pipe()
    let errors = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    _ = ignoreBrokenPipes
    try process.run()
    let group = DispatchGroup()
    let errorBox = DataBox()
    DispatchQueue.global().async(group: group) {
        try? input.fileHandleForWriting.write(contentsOf: stdin)
        try? input.fileHandleForWriting.close()
    }
    DispatchQueue.global().async(group: group) {
        errorBox.data = errors.fileHandleForReading.readDataToEndOfFile()
    }
    let out = output.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, stdout: out, stderr: String(decoding: errorBox.data, as: UTF8.self))
}

/// Bytes a runner thread fills in before the group it belongs to is waited on.
final class DataBox: @unchecked Sendable {
    var data = Data()
}

/// A child that exits before reading all its input must fail the test, not kill the runner.
let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

/// Every damaged copy of `bytes` the corruption sweeps try: each truncation (0 up to one byte
/// short), one trailing byte added, and each position with one bit flipped (bit `position % 8`,
/// so every bit index is exercised across the file). `position` is the damaged byte, or the
/// length kept for a truncation.
func everyCorruption(of bytes: [UInt8]) -> [(what: String, position: Int, bytes: [UInt8])] {
    var out: [(what: String, position: Int, bytes: [UInt8])] = (0..<bytes.count).map {
        ("truncated to \($0) bytes", $0, Array(bytes[0..<$0]))
    }
    out.append(("one trailing byte", bytes.count, bytes + [0]))
    for position in 0..<bytes.count {
        var damaged = bytes
        damaged[position] ^= UInt8(1) << UInt8(position % 8)
        out.append(("bit \(position % 8) of byte \(position) flipped", position, damaged))
    }
    return out
}

/// Whether a test's prerequisite (root, a tool) is met. Where it is not, the test says so on
/// standard error and, under CI=true (CI runs as root with every tool installed), fails: a test
/// never passes silently without running.
func prerequisiteMet(_ met: Bool, _ what: String) -> Bool {
    if !met { notTested(what, because: "its prerequisite is missing here", requiredInCI: true) }
    return met
}

/// Reports a check that did not run: on standard error, and as a failure under CI=true when
/// `requiredInCI`.
func notTested(_ what: String, because reason: String, requiredInCI: Bool) {
    let note = "\(what) (\(reason))"
    if requiredInCI && ProcessInfo.processInfo.environment["CI"] == "true" {
        Issue.record("CI=true requires this to be tested: \(note)")
    } else {
        FileHandle.standardError.write(Data("NOT TESTED: \(note)\n".utf8))
    }
}

/// An OAuth token response as a server sends it: `access` for `expiresIn` seconds, with
/// `refresh` as its refresh token (none if `nil`).
func oauth(_ access: String, expiresIn: Int = 3600, refresh: String? = "rt") -> Data {
    var object: [String: Any] = ["access_token": access, "token_type": "Bearer", "expires_in": expiresIn, "scope": "read write"]
    if let refresh { object["refresh_token"] = refresh }
    return (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
}

/// Whether this process runs under ThreadSanitizer or AddressSanitizer (their runtimes export
/// these symbols).
let runningUnderSanitizer: Bool = [String](["__tsan_init", "__asan_init"]).contains { name in
    dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) != nil
}
