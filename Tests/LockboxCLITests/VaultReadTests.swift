import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// `lockbox get` on a file vault reads the vault file once: the session window's scope (the
/// vault ID in the header) and the credentials open the same bytes. Counted with strace on the
/// real binary, as a user runs it. Format 2 (SQLite) too: Lockbox's one open decides the format
/// (72 bytes read) and SQLite's connection takes that descriptor over (SQLiteFileAdoption); the
/// window and the credentials then use the same connection.
@Suite("Vault file reads")
struct VaultReadTests {
    /// How many times `lockbox ARGUMENTS` opens `vault` (openat calls naming it, in every thread).
    func vaultOpens(_ arguments: [String], vault: String, environment: [String: String], stdin: String = "") throws -> (
        status: Int32, opens: Int
    ) {
        let folder = try TemporaryFolder()
        let log = folder.file("openat.log").string
        var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]
        // Under scripts/ci/sanitizers.sh the child keeps its report path and suppressions, as in
        // runLockbox (else a suppressed leak at exit turns exit 0 into 1).
        for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"] {
            if let value = ProcessInfo.processInfo.environment[name] { env[name] = value }
        }
        // LeakSanitizer cannot run under ptrace (it stops with an error, exit 1): no leak check here.
        if let options = env["ASAN_OPTIONS"] { env["ASAN_OPTIONS"] = options + ":detect_leaks=0" }
        env.merge(environment) { _, new in new }
        let result = try run(
            "/usr/bin/strace", ["-f", "-qq", "-e", "trace=openat", "-o", log, lockboxBinary.path] + arguments,
            stdin: stdin, environment: env)
        let lines = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n")
        return (result.status, lines.filter { $0.contains("\"\(vault)\"") }.count)
    }

    @Test(
        "get opens the vault file once (format 1 and 2: SQLite takes over the descriptor Lockbox opened), with a key file and through a session window",
        arguments: [(format: 1, opens: 1), (format: 2, opens: 1)])
    func getReadsOnce(format: Int, opens expected: Int) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            Issue.record("strace is not installed: scripts/ensure-deps.sh --test installs it; this test cannot run without it")
            return
        }
        let folder = try TemporaryFolder()
        let runtime = folder.file("run").string
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let vault = folder.file("v.lockbox").string
        let key = folder.file("k.key").string
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
        #expect(
            try runLockbox(
                ["pin", "set", "svc", "me", "--hash-cost", "interactive"], stdin: Data("4739\n4739\n".utf8),
                environment: withKey
            ).status == 0)
        #expect(try runLockbox(["unlock", "--pin", "svc/me"], stdin: Data("4739\n".utf8), environment: withKey).status == 0)
        let throughWindow = try vaultOpens(["get", "svc", "acct7"], vault: vault, environment: base)
        #expect(throughWindow.status == 0)
        #expect(throughWindow.opens == expected, "lockbox get through the window opened the vault \(throughWindow.opens) times")
        _ = try runLockbox(["lock"], environment: base)
    }

    @Test(
        "a probed format-2 vault is opened once in the library too: SQLite takes the probe's descriptor; a probe dropped unused closes it")
    func probedDescriptorIsTakenOver() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let keyPath = folder.file("vault.key")
        try KeyFile.generate(at: keyPath)
        let key = ItemKey(service: "svc", account: "acct")
        do {
            let created = try SQLiteVaultStore.create(at: path, credentials: [.keyFile(keyPath)], kdf: testKDF)
            try created.set(secret("adopted"), for: key, options: ItemOptions())
        }
        let resolved = VaultFile.resolvedPath(path)
        #expect(descriptors(on: resolved) == 0)

        guard case .format2(let unused) = try VaultFile.probe(at: path) else {
            Issue.record("a format-2 vault was not probed as format 2")
            return
        }
        #expect(descriptors(on: resolved) == 1)
        _ = consume unused
        #expect(descriptors(on: resolved) == 0, "a probe dropped unused must close its descriptor")

        guard case .format2(let file) = try VaultFile.probe(at: path) else {
            Issue.record("a format-2 vault was not probed as format 2")
            return
        }
        let takenOver = SQLiteFileAdoption.takenOverCount(path: file.path)
        let store = try SQLiteVaultStore.open(at: file.path, windowKey: { _ in nil }, credentials: { [.keyFile(keyPath)] }, probed: file)
            .store
        #expect(
            SQLiteFileAdoption.takenOverCount(path: file.path) == takenOver + 1,
            "SQLite must take the probe's descriptor over, not open the vault again")
        #expect(descriptors(on: resolved) == 1)
        #expect(try store.get(key)?.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == "adopted")
        try store.set(secret("written through it"), for: key, options: ItemOptions())
        #expect(
            try SQLiteVaultStore.open(at: path, credentials: [.keyFile(keyPath)]).get(key)?.withUnsafeBytes {
                String(decoding: $0, as: UTF8.self)
            } == "written through it")
    }

    /// How many of this process's descriptors are open on `path`.
    private func descriptors(on path: FilePath) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == path.string }.count
    }
}
