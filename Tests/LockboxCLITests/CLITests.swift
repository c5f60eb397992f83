import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxCLI
@testable import LockboxTestSupport

/// End to end through the real `lockbox` binary: stdin in, stdout, stderr and exit codes out.
@Suite("lockbox CLI")
struct CLITests {
    let fixture: CLIFixture
    var folder: TemporaryFolder { fixture.folder }
    var vault: String { fixture.vault }
    var key: String { fixture.key }

    init() throws { fixture = try CLIFixture() }

    private func lockbox(_ arguments: [String], stdin: String = "", redirect: String? = nil) throws -> ProcessResult {
        try fixture.run(arguments, stdin: stdin, redirect: redirect)
    }

    private func withKey(_ arguments: [String]) -> [String] { fixture.withKey(arguments) }

    /// The (service, account) pairs `list --json` shows.
    private func addresses(_ arguments: [String] = []) throws -> [String] {
        let result = try lockbox(withKey(["list", "--json"] + arguments))
        #expect(result.status == 0, "\(result.stderr)")
        return (result.jsonArray ?? []).map { "\($0["service"] ?? "")/\($0["account"] ?? "")" }.sorted()
    }

    @Test("init, set, get, list, delete and wipe with a key file")
    func keyFileLifecycle() throws {
        var result = try lockbox(["init", "--vault", vault, "--generate-key-file", key])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: vault) && FileManager.default.fileExists(atPath: key))

        result = try lockbox(withKey(["set", "com.example.api", "alice", "--kind", "token"]), stdin: "tok-alice\n")
        #expect(result.status == 0, "\(result.stderr)")
        result = try lockbox(withKey(["set", "com.example.api", "bob"]), stdin: "tok-bob")
        #expect(result.status == 0, "\(result.stderr)")
        result = try lockbox(withKey(["set", "other", "carol", "--raw"]), stdin: "with-newline\n")
        #expect(result.status == 0, "\(result.stderr)")

        result = try lockbox(withKey(["get", "com.example.api", "alice"]))
        #expect(result.status == 0)
        #expect(result.stdoutString == "tok-alice", "the secret alone, no newline when stdout is not a terminal")
        #expect(result.stderr.isEmpty)
        #expect(try lockbox(withKey(["get", "other", "carol"])).stdoutString == "with-newline\n")

        result = try lockbox(withKey(["list", "--json"]))
        #expect(result.status == 0)
        let listed = try JSONSerialization.jsonObject(with: result.stdout) as? [[String: Any]]
        #expect(listed?.count == 3)
        #expect(listed?.first?["kind"] as? String == "token")
        for secret in ["tok-alice", "tok-bob", "with-newline"] { #expect(!result.stdoutString.contains(secret)) }
        #expect(try addresses(["--service", "other"]) == ["other/carol"])
        result = try lockbox(withKey(["list", "--service", "other"]))
        #expect(result.status == 0 && !result.stdoutString.contains("with-newline"), "the table shows no secret either")

        result = try lockbox(withKey(["delete", "com.example.api", "bob"]))
        #expect(result.status == 0)
        result = try lockbox(withKey(["delete", "com.example.api", "bob"]))
        #expect(result.status == 2 && result.errorCode == .itemNotFound)

        result = try lockbox(withKey(["wipe", "--service", "com.example.api"]))
        #expect(result.status == 13 && result.errorCode == .notConfirmed, "no terminal and no --yes: refuse")
        #expect(try addresses() == ["com.example.api/alice", "other/carol"], "nothing was wiped")
        result = try lockbox(withKey(["wipe", "--service", "com.example.api", "--yes"]))
        #expect(result.status == 0)
        #expect(try addresses() == ["other/carol"])
        result = try lockbox(withKey(["wipe", "--all", "--yes"]))
        #expect(result.status == 0)
        #expect(try addresses() == [])
    }

    @Test("--version alone, answered before the argument parser, prints what the parser prints for it")
    func versionBeforeTheParser() throws {
        let alone = try lockbox(["--version"])
        #expect(alone.status == 0)
        #expect(alone.stdoutString == LockboxCommand.version + "\n")
        #expect(alone.stderr.isEmpty)
        // `--verbose --version` is not the fast path: the parser answers it.
        let parsed = try lockbox(["--verbose", "--version"])
        #expect(parsed.status == alone.status)
        #expect(parsed.stdoutString == alone.stdoutString)
        #expect(LockboxCommand.configuration.version == LockboxCommand.version)
    }

    @Test("passphrase from --passphrase-fd: init, use, wrong passphrase, passwd")
    func passphraseLifecycle() throws {
        let passFile = folder.file("pass").string
        let newPassFile = folder.file("newpass").string
        let wrongFile = folder.file("wrong").string
        try "correct horse battery\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        try "new staple\n".write(toFile: newPassFile, atomically: true, encoding: .utf8)
        try "wrong\n".write(toFile: wrongFile, atomically: true, encoding: .utf8)
        let fd3 = "3<'\(passFile)'"

        var result = try lockbox(["init", "--vault", vault, "--passphrase-fd", "3", "--kdf", "interactive"], redirect: fd3)
        #expect(result.status == 0, "\(result.stderr)")
        result = try lockbox(["set", "--vault", vault, "--passphrase-fd", "3", "svc", "acct"], stdin: "s3cr3t-value", redirect: fd3)
        #expect(result.status == 0, "\(result.stderr)")
        result = try lockbox(["get", "--vault", vault, "--passphrase-fd", "3", "svc", "acct"], redirect: fd3)
        #expect(result.stdoutString == "s3cr3t-value")

        result = try lockbox(["get", "--vault", vault, "--passphrase-fd", "3", "svc", "acct"], redirect: "3<'\(wrongFile)'")
        #expect(result.status == 5)
        #expect(result.errorCode == .wrongCredential)
        #expect(result.stdout.isEmpty)

        result = try lockbox(
            ["passwd", "--vault", vault, "--passphrase-fd", "3", "--new-passphrase-fd", "4", "--kdf", "interactive"],
            redirect: "\(fd3) 4<'\(newPassFile)'")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try lockbox(["get", "--vault", vault, "--passphrase-fd", "3", "svc", "acct"], redirect: fd3).status == 5)
        result = try lockbox(["get", "--vault", vault, "--passphrase-fd", "3", "svc", "acct"], redirect: "3<'\(newPassFile)'")
        #expect(result.stdoutString == "s3cr3t-value")

        // No credential, no window and no terminal: "locked", not a hang.
        result = try lockbox(["get", "--vault", vault, "svc", "acct"])
        #expect(result.status == 40 && result.errorCode == .reauthenticationRequired)
    }

    @Test("each failure has its own exit code and a message that never contains the secret")
    func exitCodes() throws {
        var missing = try lockbox(["get", "--vault", vault, "--key-file", key, "s", "a"])
        #expect(missing.status == 3 && missing.errorCode == .vaultNotFound)
        // Format 1: the bit flip below lands in its sealed body (format 2's sweep is in SQLiteVaultStoreTests).
        #expect(try lockbox(["init", "--format", "1", "--vault", vault, "--generate-key-file", key]).status == 0)
        #expect(try lockbox(["init", "--vault", vault, "--key-file", key]).status == 4)  // exists
        #expect(try lockbox(withKey(["set", "s", "a"]), stdin: "TOPSECRET-123").status == 0)
        missing = try lockbox(withKey(["get", "s", "missing"]))
        #expect(missing.status == 2 && missing.errorCode == .itemNotFound)
        #expect(try lockbox(withKey(["set", "s", "a"]), stdin: "").status == 64)  // empty secret
        #expect(try lockbox(withKey(["set", "", "a"]), stdin: "x").status == 64)  // empty service
        #expect(try lockbox(["frobnicate"]).status == 64)
        #expect(try lockbox(withKey(["wipe"])).status == 64)
        var badFd = try lockbox(["get", "--vault", vault, "--passphrase-fd", "9", "s", "a"])
        #expect(badFd.status == 64 && badFd.errorCode == .noInput)
        badFd = try lockbox(["set", "--vault", vault, "--passphrase-fd", "0", "s", "a"], stdin: "x")
        #expect(badFd.status == 64 && badFd.errorCode == nil, "an argument error, before anything is read")
        #expect(try lockbox(withKey(["get", "s", "a"])).stdoutString == "TOPSECRET-123", "nothing was stored")

        let otherKey = folder.file("other.key").string
        try KeyFile.generate(at: FilePath(otherKey))
        var result = try lockbox(["get", "--vault", vault, "--key-file", otherKey, "s", "a"])
        #expect(result.status == 5 && result.errorCode == .wrongCredential)

        chmod(key, 0o644)
        result = try lockbox(withKey(["get", "s", "a"]))
        #expect(result.status == 8 && result.errorCode == .insecurePermissions)
        chmod(key, 0o600)

        chmod(vault, 0o644)
        #expect(try lockbox(withKey(["get", "s", "a"])).status == 8)
        chmod(vault, 0o600)

        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: vault)))
        let original = bytes
        bytes[bytes.count - 5] ^= 0x40
        try Data(bytes).write(to: URL(fileURLWithPath: vault))
        chmod(vault, 0o600)
        result = try lockbox(withKey(["get", "s", "a"]))
        #expect(result.status == 6)
        #expect(result.errorCode == .corruptVault)

        try Data(original.prefix(40)).write(to: URL(fileURLWithPath: vault))
        #expect(try lockbox(withKey(["get", "s", "a"])).status == 6)

        var future = original
        future[8] = 9
        let headerLength = Int(future[12]) | Int(future[13]) << 8
        let checksum = future.withUnsafeBytes { Sodium.blake2b(UnsafeRawBufferPointer(rebasing: $0[0..<headerLength - 32])) }
        future.replaceSubrange(headerLength - 32..<headerLength, with: checksum)
        try Data(future).write(to: URL(fileURLWithPath: vault))
        result = try lockbox(withKey(["get", "s", "a"]))
        #expect(result.status == 7)
        #expect(result.errorCode == .unsupportedFormatVersion)

        try Data(original).write(to: URL(fileURLWithPath: vault))
        #expect(try lockbox(withKey(["get", "s", "a"])).stdoutString == "TOPSECRET-123")
    }

    @Test("secrets never appear in arguments, errors or listings")
    func noLeaks() throws {
        #expect(try lockbox(["init", "--vault", vault, "--generate-key-file", key]).status == 0)
        #expect(try lockbox(withKey(["set", "svc", "acct"]), stdin: "LEAK-CANARY-42").status == 0)
        var outputs: [ProcessResult] = []
        outputs.append(try lockbox(withKey(["list"])))
        outputs.append(try lockbox(withKey(["list", "--json"])))
        outputs.append(try lockbox(withKey(["get", "svc", "other"])))
        outputs.append(try lockbox(withKey(["set", "svc", "acct", "--attribute", "bad"]), stdin: "LEAK-CANARY-42"))
        outputs.append(try lockbox(withKey(["slot", "list"])))
        for output in outputs {
            #expect(!output.stdoutString.contains("LEAK-CANARY"))
            #expect(!output.stderr.contains("LEAK-CANARY"))
        }
        // The most verbose trace (--verbose, LOCKBOX_LOG=debug) shows what happens, never a secret.
        let passFile = folder.file("canary-pass").string
        try "PASS-CANARY-77\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        #expect(
            try lockbox(
                withKey(["slot", "add-passphrase", "--new-passphrase-fd", "3", "--kdf", "interactive", "--verbose"]),
                redirect: "3<'\(passFile)'"
            ).status == 0)
        var traces: [ProcessResult] = [
            try lockbox(withKey(["set", "svc", "acct2", "--verbose"]), stdin: "LEAK-CANARY-43"),
            try lockbox(withKey(["get", "svc", "acct", "--verbose"])),
            try lockbox(["get", "svc", "acct", "--vault", vault, "--passphrase-fd", "3", "--verbose"], redirect: "3<'\(passFile)'"),
            try lockbox(withKey(["list", "--json", "--verbose"])),
            try lockbox(withKey(["delete", "svc", "acct2", "--verbose"])),
            try lockbox(withKey(["get", "svc", "acct2", "--verbose"])),
        ]
        #expect(traces[1].stdoutString == "LEAK-CANARY-42" && traces[2].stdoutString == "LEAK-CANARY-42")
        #expect(traces[5].status == 2)
        for trace in traces {
            #expect(trace.stderr.contains("lockbox: [debug]"), "the trace is on")
            #expect(!trace.stderr.contains("CANARY"), "\(trace.stderr)")
        }
        traces[1].stdout = Data()
        traces[2].stdout = Data()
        #expect(traces.allSatisfy { !$0.stdoutString.contains("CANARY") })
        #expect(traces[2].stderr.contains("passphrase from file descriptor 3") && traces[2].stderr.contains("opened: key slot(s) 1 of 2"))

        // A secret typed as an argument anyway is refused (usage error) and not repeated.
        let misuses: [[String]] = [
            withKey(["set", "svc", "acct", "LEAK-CANARY-42"]),
            withKey(["set", "svc", "acct", "--passphrase=LEAK-CANARY-42"]),
            withKey(["get", "svc", "acct", "--secret", "LEAK-CANARY-42"]),
            ["--backend", "LEAK-CANARY-42", "get", "svc", "acct"],
            withKey(["pin", "set", "kids", "max", "LEAK-CANARY-42"]),
            // Secrets that look like options: unknown long options, grouped short ones (which
            // argument-parser would read as -h and answer with help), and after `--`.
            withKey(["set", "svc", "acct", "--LEAK-CANARY-42"]),
            withKey(["set", "svc", "acct", "-LEAK-CANARY-42"]),
            withKey(["set", "svc", "acct", "-hLEAK-CANARY-42"]),
            withKey(["set", "svc", "acct"]) + ["--", "--LEAK-CANARY-42"],
        ]
        for arguments in misuses {
            let result = try lockbox(arguments)
            #expect(result.status == 64, "\(arguments.count) arguments: usage error")
            #expect(!result.stderr.contains("LEAK-CANARY") && !result.stdoutString.contains("LEAK-CANARY"), "\(result.stderr)")
        }
        let refused = try lockbox(withKey(["set", "svc", "acct", "LEAK-CANARY-42"]))
        #expect(refused.stderr.contains("'<not shown>'"), "the argument's place is marked, its value not shown")
        #expect(try lockbox(withKey(["get", "svc", "acct"])).stdoutString == "LEAK-CANARY-42", "the stored value is unchanged")
        // Known names still show: a mistyped option gets its suggestion; a known option keeps its
        // name while its value is hidden.
        #expect(
            try lockbox(withKey(["set", "svc", "acct", "--passphrase", "x"])).stderr.contains("'--passphrase-fd'"),
            "argument-parser's suggestion names the option")
        let kdf = try lockbox(withKey(["get", "svc", "acct", "--kdf=LEAK-CANARY-42"]))
        #expect(kdf.status == 64 && kdf.stderr.contains("'--kdf'") && !kdf.stderr.contains("LEAK-CANARY"))
        // There is no option that takes a secret value.
        let help = try lockbox(["set", "--help"]).stdoutString + (try lockbox(["init", "--help"])).stdoutString
        #expect(!help.contains("--passphrase ") && !help.contains("--secret"))
    }

    @Test("--store names the store (before or after the command); --backend, its old name, still works but is not shown")
    func storeOptionAndItsOldName() throws {
        #expect(try lockbox(["init", "--vault", vault, "--generate-key-file", key]).status == 0)
        #expect(try lockbox(withKey(["set", "s", "a"]), stdin: "v").status == 0)
        // Without a session bus the Secret Service is out of reach (exit 20): which store ran shows.
        let noBus = ["XDG_RUNTIME_DIR": folder.path.string]
        for name in ["--store", "--backend"] {
            for arguments in [withKey(["get", "s", "a", name, "file"]), [name, "file"] + withKey(["get", "s", "a"])] {
                let result = try fixture.run(arguments, environment: noBus)
                #expect(result.status == 0 && result.stdoutString == "v", "\(arguments): \(result.stderr)")
            }
            for arguments in [withKey(["get", "s", "a", name, "secret-service"]), [name, "secret-service"] + withKey(["get", "s", "a"])] {
                let result = try fixture.run(arguments, environment: noBus)
                #expect(result.status == 20 && result.errorCode == .noSessionBus, "\(arguments): \(result.stderr)")
            }
        }
        // The same for the variables: LOCKBOX_STORE, and LOCKBOX_BACKEND when it is not set.
        var result = try fixture.run(withKey(["get", "s", "a"]), environment: noBus.merging(["LOCKBOX_STORE": "secret-service"]) { $1 })
        #expect(result.status == 20, "\(result.stderr)")
        result = try fixture.run(withKey(["get", "s", "a"]), environment: noBus.merging(["LOCKBOX_BACKEND": "secret-service"]) { $1 })
        #expect(result.status == 20, "\(result.stderr)")
        result = try fixture.run(withKey(["get", "s", "a"]), environment: ["LOCKBOX_STORE": "file", "LOCKBOX_BACKEND": "secret-service"])
        #expect(result.status == 0, "LOCKBOX_STORE wins: \(result.stderr)")
        result = try fixture.run(withKey(["get", "s", "a"]), environment: ["LOCKBOX_STORE": "bogus"])
        #expect(result.status == 64 && result.errorCode == .invalidArgument, "\(result.stderr)")
        // Both spellings naming different stores is a usage error; naming the same one is not.
        #expect(try lockbox(withKey(["get", "s", "a", "--store", "file", "--backend", "secret-service"])).status == 64)
        #expect(try lockbox(withKey(["get", "s", "a", "--store", "file", "--backend", "file"])).stdoutString == "v")
        // Help shows --store only (with the other vault options, under --help-all).
        let help = try lockbox(["get", "--help-all"]).stdoutString
        #expect(help.contains("--store <store>") && !help.contains("--backend"))
    }

    @Test("rotate-key and key slots through the CLI")
    func rotateAndSlots() throws {
        let passFile = folder.file("pass").string
        try "slot pass\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        #expect(try lockbox(["init", "--vault", vault, "--generate-key-file", key]).status == 0)
        #expect(try lockbox(withKey(["set", "s", "a"]), stdin: "kept").status == 0)
        var result = try lockbox(
            withKey(["slot", "add-passphrase", "--new-passphrase-fd", "3", "--kdf", "interactive"]),
            redirect: "3<'\(passFile)'")
        #expect(result.status == 0, "\(result.stderr)")
        result = try lockbox(withKey(["slot", "list", "--json"]))
        #expect(result.jsonArray?.map { "\($0["index"] ?? ""):\($0["kind"] ?? "")" } == ["0:key-file", "1:passphrase"])
        #expect(result.jsonArray?.map { $0["openedThisHandle"] as? Bool } == [true, false])
        result = try lockbox(withKey(["rotate-key"]))
        #expect(result.status == 12 && result.errorCode == .keySlotRefused, "a slot without its credential must not be silently dropped")
        result = try lockbox(withKey(["rotate-key", "--passphrase-fd", "3"]), redirect: "3<'\(passFile)'")
        #expect(result.status == 0, "\(result.stderr)")
        result = try lockbox(["get", "--vault", vault, "--passphrase-fd", "3", "s", "a"], redirect: "3<'\(passFile)'")
        #expect(result.stdoutString == "kept")
        #expect(try lockbox(withKey(["slot", "remove", "1", "--yes"])).status == 0)
        #expect(try lockbox(withKey(["slot", "remove", "0"])).status == 12)
        #expect(try lockbox(withKey(["get", "s", "a"])).stdoutString == "kept")
    }

    @Test("LOCKBOX_VAULT and LOCKBOX_KEY_FILE name the vault and key; XDG_DATA_HOME sets the default")
    func environment() throws {
        var result = try runLockbox(["init", "--generate-key-file", key], environment: ["XDG_DATA_HOME": folder.path.string])
        #expect(result.status == 0, "\(result.stderr)")
        let defaultVault = folder.file("lockbox/vault.lockbox")
        #expect(defaultVault.exists())
        #expect(try defaultVault.removingLastComponent().stat().permissions.rawValue & 0o777 == 0o700)
        result = try runLockbox(
            ["set", "s", "a"], stdin: Data("v".utf8),
            environment: ["LOCKBOX_VAULT": defaultVault.string, "LOCKBOX_KEY_FILE": key])
        #expect(result.status == 0, "\(result.stderr)")
        result = try runLockbox(["get", "s", "a"], environment: ["XDG_DATA_HOME": folder.path.string, "LOCKBOX_KEY_FILE": key])
        #expect(result.stdoutString == "v")
    }

    @Test("processes writing at once lose no update: 4 x 15 sets on format 1, 8 x 25 on format 2", arguments: [1, 2])
    func concurrentProcesses(format: Int) async throws {
        #expect(try lockbox(["init", "--vault", vault, "--generate-key-file", key, "--format", "\(format)"]).status == 0)
        let (writers, itemsEach) = format == 2 ? (8, 25) : (4, 15)
        let arguments = withKey([])
        let statuses = await withTaskGroup(of: [Int32].self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var statuses: [Int32] = []
                    for item in 0..<itemsEach {
                        let result = try? runLockbox(
                            ["set", "race", "w\(writer)-i\(item)"] + arguments,
                            stdin: Data("value-\(writer)-\(item)".utf8))
                        statuses.append(result?.status ?? -1)
                    }
                    return statuses
                }
            }
            var all: [Int32] = []
            for await statuses in group { all += statuses }
            return all
        }
        #expect(statuses.count == writers * itemsEach)
        #expect(statuses.allSatisfy { $0 == 0 })
        let store: any SecretStore =
            format == 2
            ? try SQLiteVaultStore.open(at: FilePath(vault), credentials: [.keyFile(FilePath(key))])
            : try EncryptedFileStore.open(at: FilePath(vault), credential: .keyFile(FilePath(key)))
        let items = try store.list(service: "race")
        #expect(items.count == writers * itemsEach)
        #expect(
            try await Vault(store: store).string(service: "race", account: "w\(writers - 1)-i\(itemsEach - 1)")
                == "value-\(writers - 1)-\(itemsEach - 1)")
    }
}
