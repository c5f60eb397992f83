import Foundation
import Testing
@testable import Lockbox

/// `lockbox get` on a file vault reads the vault file once: the session window's scope (the
/// vault ID in the header) and the credentials open the same bytes. Counted with strace on the
/// real binary, as a user runs it. Format 2 (SQLite) is opened twice, exactly: Lockbox's one open
/// that decides the format (72 bytes read) and SQLite's connection, which cannot adopt that
/// descriptor; the window and the credentials then use the same connection, and the header is
/// not read a third time.
@Suite("Vault file reads")
struct VaultReadTests {
    /// How many times `lockbox ARGUMENTS` opens `vault` (openat calls naming it, in every thread).
    func vaultOpens(_ arguments: [String], vault: String, environment: [String: String], stdin: String = "") throws -> (status: Int32, opens: Int) {
        let folder = try TemporaryFolder()
        let log = folder.file("openat.log").string
        var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]
        // Under scripts/sanitizers.sh the child keeps its report path and suppressions, as in
        // runLockbox (else a suppressed leak at exit turns exit 0 into 1).
        for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"] {
            if let value = ProcessInfo.processInfo.environment[name] { env[name] = value }
        }
        // LeakSanitizer cannot run under ptrace (it stops with an error, exit 1): no leak check here.
        if let options = env["ASAN_OPTIONS"] { env["ASAN_OPTIONS"] = options + ":detect_leaks=0" }
        env.merge(environment) { _, new in new }
        let result = try run("/usr/bin/strace", ["-f", "-qq", "-e", "trace=openat", "-o", log, lockboxBinary.path] + arguments,
                             stdin: stdin, environment: env)
        let lines = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n")
        return (result.status, lines.filter { $0.contains("\"\(vault)\"") }.count)
    }

    @Test("get opens the vault file once (format 1) or twice (format 2: the probe and SQLite), with a key file and through a session window",
          arguments: [(format: 1, opens: 1), (format: 2, opens: 2)])
    func getReadsOnce(format: Int, opens expected: Int) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            Issue.record("strace is not installed: scripts/ensure-deps.sh --test installs it; this test cannot run without it")
            return
        }
        let folder = try TemporaryFolder()
        let runtime = folder.file("run").string
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let vault = folder.file("v.lockbox").string, key = folder.file("k.key").string
        let base = ["LOCKBOX_VAULT": vault, "XDG_CONFIG_HOME": folder.file("config").string, "XDG_RUNTIME_DIR": runtime]
        let withKey = base.merging(["LOCKBOX_KEY_FILE": key]) { a, _ in a }
        #expect(try runLockbox(["init", "--format", "\(format)", "--generate-key-file", key], environment: base).status == 0)
        for index in 0..<20 {
            #expect(try runLockbox(["set", "svc", "acct\(index)"], stdin: Data("secret-\(index)".utf8), environment: withKey).status == 0)
        }
        let withKeyFile = try vaultOpens(["get", "svc", "acct7"], vault: vault, environment: withKey)
        #expect(withKeyFile.status == 0)
        #expect(withKeyFile.opens == expected, "lockbox get with a key file opened the vault \(withKeyFile.opens) times")

        // Through a window opened with a PIN: no credential is given to get.
        #expect(try runLockbox(["pin", "set", "svc", "me", "--hash-cost", "interactive"], stdin: Data("4739\n4739\n".utf8),
                               environment: withKey).status == 0)
        #expect(try runLockbox(["unlock", "--pin", "svc/me"], stdin: Data("4739\n".utf8), environment: withKey).status == 0)
        let throughWindow = try vaultOpens(["get", "svc", "acct7"], vault: vault, environment: base)
        #expect(throughWindow.status == 0)
        #expect(throughWindow.opens == expected, "lockbox get through the window opened the vault \(throughWindow.opens) times")
        _ = try runLockbox(["lock"], environment: base)
    }
}
