import Foundation
import Synchronization
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// The attacks with real processes: the release CLI in namespaces an unprivileged user can make.
@Suite("Hardening: PIN lockout attacks through the CLI", .serialized)
struct LockoutCLIAttackTests {
    let folder: TemporaryFolder
    let environment: [String: String]

    init() throws {
        folder = try TemporaryFolder()
        let runtime = folder.file("run").string
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        environment = try cliVaultWithKeyFile(in: folder).merging(["XDG_RUNTIME_DIR": runtime]) { _, new in new }
    }

    private func lockedOutProfile() throws {
        let set = try runLockbox(
            ["pin", "set", "kids", "max", "--hash-cost", "interactive", "--lockout-delays", "3600"],
            stdin: Data("4739\n4739\n".utf8), environment: environment)
        #expect(set.status == 0, "\(set.stderr)")
        #expect(
            try runLockbox(
                ["pin", "verify", "kids", "max", "--hash-cost", "interactive"], stdin: Data("9999\n".utf8),
                environment: environment
            ).status == 30)
    }

    private func expectStillLockedOut() throws {
        let status = try runLockbox(["pin", "status", "kids", "max", "--json"], environment: environment).jsonObject
        #expect(status?["failures"] as? Int == 1 && status?["lockedUntil"] is String, "\(status ?? [:])")
    }

    @Test("unshare -Ur -T --boottime 7200: a verifier in a shifted time namespace is still locked out (exit 31)")
    func timeNamespace() throws {
        try lockedOutProfile()
        guard try attackCanRun("unshare -Ur -T --boottime 7200 true", what: "a user + time namespace") else { return }
        let result = try runBash(
            "unshare -Ur -T --boottime 7200 \"$L\" pin verify kids max --hash-cost interactive",
            stdin: Data("4739\n".utf8), environment: environment)
        #expect(result.status == 31, "\(result.stderr)")
        try expectStillLockedOut()
    }

    @Test("a faked /proc/sys/kernel/random/boot_id (unshare -Urm), also with the wall clock 2 h ahead (faketime), is still locked out")
    func fakedBootID() throws {
        try lockedOutProfile()
        let fake = folder.file("boot_id").string
        try "00000000-0000-4000-8000-000000000000\n".write(toFile: fake, atomically: true, encoding: .utf8)
        let fakeBoot = "unshare -Urm sh -c 'mount --bind \"$0\" /proc/sys/kernel/random/boot_id && exec \"$@\"' '\(fake)'"
        guard
            try attackCanRun(
                "\(fakeBoot) sh -c 'test \"$(cat /proc/sys/kernel/random/boot_id)\" = 00000000-0000-4000-8000-000000000000'",
                what: "a faked boot ID in a user + mount namespace")
        else { return }
        var result = try runBash(
            "\(fakeBoot) \"$L\" pin verify kids max --hash-cost interactive",
            stdin: Data("4739\n".utf8), environment: environment)
        #expect(result.status == 31, "faked boot ID: \(result.stderr)")
        // Someone who may set the wall clock (root, or timedated's polkit rule for a desktop user)
        // combines both: libfaketime moves the wall clock of that one process.
        if runningUnderSanitizer {
            // libfaketime preloaded into a sanitized binary hangs in the sanitizer's start-up; the
            // unsanitized suite of the same scripts/test.sh run covers this step.
            FileHandle.standardError.write(
                Data("NOT TESTED under a sanitizer: faked boot ID with faketime (libfaketime hangs sanitized binaries)\n".utf8))
            return
        }
        guard try attackCanRun("DONT_FAKE_MONOTONIC=1 faketime -f +2h true", what: "a wall clock set 2 h ahead (faketime)") else { return }
        result = try runBash(
            "\(fakeBoot) env DONT_FAKE_MONOTONIC=1 faketime -f +2h \"$L\" pin verify kids max --hash-cost interactive",
            stdin: Data("4739\n".utf8), environment: environment)
        #expect(result.status == 31, "faked boot ID and wall clock 2 h ahead: \(result.stderr)")
        try expectStillLockedOut()
    }

    @Test("8 parallel verifiers, each with its own XDG_RUNTIME_DIR and HOME: at most the free tries evaluated, every one counted")
    func parallelVerifiersInDifferentEnvironments() async throws {
        let set = try runLockbox(
            ["pin", "set", "kids", "max", "--hash-cost", "interactive"], stdin: Data("4739\n4739\n".utf8),
            environment: environment)
        #expect(set.status == 0, "\(set.stderr)")
        let freeTries = LockoutPolicy.default.freeTries
        var environments: [[String: String]] = []
        for index in 0..<8 {
            let own = folder.file("env\(index)").string
            try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            var environment = self.environment
            environment["XDG_RUNTIME_DIR"] = index % 2 == 0 ? own : nil
            environment["HOME"] = own
            environments.append(environment)
        }
        let statuses = await withTaskGroup(of: Int32.self) { group in
            for environment in environments {
                group.addTask {
                    (try? runLockbox(
                        ["pin", "verify", "kids", "max", "--hash-cost", "interactive"], stdin: Data("9999\n".utf8),
                        environment: environment))?.status ?? -1
                }
            }
            var all: [Int32] = []
            for await status in group { all.append(status) }
            return all.sorted()
        }
        let evaluated = statuses.filter { $0 == 30 }.count
        #expect(evaluated == freeTries, "\(statuses)")
        #expect(statuses.filter { $0 == 31 }.count == 8 - freeTries, "\(statuses)")
        let status = try runLockbox(["pin", "status", "kids", "max", "--json"], environment: environment).jsonObject
        #expect(status?["failures"] as? Int == evaluated, "\(status ?? [:])")
    }
}

/// Output and documentation: what the CLI prints and what the documents promise.
@Suite("Hardening: output and documentation")
struct OutputAndDocumentationRegressionTests {
    let folder: TemporaryFolder
    let environment: [String: String]

    init() throws {
        folder = try TemporaryFolder()
        environment = try cliVaultWithKeyFile(in: folder, format: 1)  // edits the format-1 file itself
    }

    private func store() throws -> EncryptedFileStore {
        try EncryptedFileStore.open(at: folder.file("v.lockbox"), credential: .keyFile(folder.file("k.key")))
    }

    /// Decrypts the vault's payload, lets `edit` change bytes in place (same length), and seals
    /// it again under the same header: a vault as a writer other than Lockbox could make it.
    private func editPayload(_ edit: (inout [UInt8]) -> Void) throws {
        let path = folder.file("v.lockbox")
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path.string)))
        let (header, headerLength) = try bytes.withUnsafeBytes { try VaultHeader.parse($0) }
        let dataKey = try store().windowMaterial().dataKey
        let plaintext = try #require(VaultBodyCodec.decrypt(bytes, header: header, headerLength: headerLength, dataKey: dataKey))
        var payload = plaintext.withUnsafeBytes { Array($0) }
        edit(&payload)
        let sealed = payload.withUnsafeBytes {
            Sodium.seal($0, additionalData: Array(bytes[0..<headerLength]), nonce: header.bodyNonce, key: dataKey)
        }
        bytes = Array(bytes[0..<headerLength]) + sealed
        try Data(bytes).write(to: URL(fileURLWithPath: path.string))
    }

    private func payloadContains(_ text: String) throws -> Bool {
        var found = false
        try editPayload { payload in found = payload.indices.contains { payload[$0...].starts(with: Array(text.utf8)) } }
        return found
    }

    @Test("list escapes newlines and terminal escape sequences in names and labels; --json stays exact")
    func listEscapesControlCharacters() throws {
        let service = "evil\u{1B}]0;pwned\u{07}\u{1B}[2J"
        let account = "line1\nline2\u{9B}31m"
        #expect(
            try runLockbox(["set", service, account, "--label", "tab\there\r"], stdin: Data("x".utf8), environment: environment).status == 0
        )
        let table = try runLockbox(["list"], environment: environment)
        #expect(table.status == 0, "\(table.stderr)")
        #expect(
            !table.stdoutString.unicodeScalars.contains { $0.properties.generalCategory == .control && $0 != "\n" }, "\(table.stdoutString)"
        )
        #expect(table.stdoutString.split(separator: "\n").count == 2, "one header line, one item line: \(table.stdoutString)")
        #expect(
            table.stdoutString.contains("evil\\u{1B}]0;pwned\\u{7}\\u{1B}[2J") && table.stdoutString.contains("line1\\nline2\\u{9B}31m"))
        let json = try runLockbox(["list", "--json"], environment: environment)
        let items = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [[String: Any]])
        #expect(items.first?["service"] as? String == service && items.first?["account"] as? String == account)
    }

    @Test("a reader that closes the pipe early gets exit 74 with no message; an oversized secret names the real 16 MiB limit")
    func brokenPipeAndSecretLimit() throws {
        let big = String(repeating: "s", count: 1 << 20)
        #expect(try runLockbox(["set", "s", "a"], stdin: Data(big.utf8), environment: environment).status == 0)
        // The reader has exited before lockbox writes: every write meets a closed pipe.
        var result = try runBash("\"$L\" get s a | (exec 0<&-; sleep 1); exit ${PIPESTATUS[0]}", environment: environment)
        #expect(result.status == 74 && result.stderr.isEmpty, "get: \(result.status) \(result.stderr)")
        result = try runBash("\"$L\" list --json | (exec 0<&-; sleep 1); exit ${PIPESTATUS[0]}", environment: environment)
        #expect(result.status == 74 && result.stderr.isEmpty, "list: \(result.status) \(result.stderr)")
        result = try runBash("\"$L\" list > /dev/full", environment: environment)
        #expect(result.status == 74, "a full disk is an I/O error too: \(result.stderr)")
        result = try runBash("head -c 100000000 /dev/zero | \"$L\" set s big", environment: environment)
        #expect(
            result.status == 64 && result.errorCode == .invalidArgument && result.stderr.contains("\(ItemLimits.maxSecretBytes)"),
            "\(result.stderr)")
        #expect(!result.stderr.contains("\(ItemLimits.maxSecretBytes + 2)"))
    }

    @Test("README's 'N free tries' is what the default lockout does: N wrong tries evaluated, the Nth starts the delay")
    func freeTriesMatchTheReadme() throws {
        let readme = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("README.md"), encoding: .utf8)
        let match = try #require(readme.firstMatch(of: /(\d+) free tries/), "README states the free tries")
        let stated = try #require(Int(match.output.1))
        #expect(stated == LockoutPolicy.default.freeTries)
        let guardian = PinGuard(store: MemoryStore(), hashParameters: cheapHash, clock: TestClock(), lockDirectory: folder.file("locks"))
        let profile = PinProfile(service: "kids", name: "max")
        try guardian.set(profile, pin: pin("4739"))
        for failure in 1..<stated {
            #expect(outcome { try guardian.verify(profile, pin: pin("0000")) } == "wrong(\(failure))", "try \(failure) is free")
        }
        #expect(
            outcome { try guardian.verify(profile, pin: pin("0000")) } == "wrong(\(stated),locked)", "try \(stated) is the last free one")
        #expect(outcome { try guardian.verify(profile, pin: pin("4739")) }.hasPrefix("lockedOut"), "try \(stated + 1) waits")
    }

    @Test("lockbox, lockbox pin, lockbox slot and lockbox token without a subcommand print usage and exit 64; --help exits 0")
    func noSubcommand() throws {
        for arguments in [[], ["pin"], ["slot"], ["token"]] {
            let result = try runLockbox(arguments, environment: environment)
            #expect(result.status == 64 && result.stderr.contains("Usage"), "\(arguments): \(result.status) \(result.stderr)")
            #expect(try runLockbox(arguments + ["--help"], environment: environment).status == 0)
        }
    }

    @Test("FORMAT.md §7.1: lockbox.access other than fresh-authentication (even 'always') is corrupt (exit 6)")
    func accessValueOtherThanFreshAuthentication() throws {
        #expect(
            try runLockbox(
                ["set", "s", "a", "--attribute", "LOCKBOX.access=always"], stdin: Data("x".utf8),
                environment: environment
            ).status == 0)
        try editPayload { payload in
            for index in payload.indices where payload[index...].starts(with: Array("LOCKBOX.access".utf8)) {
                payload.replaceSubrange(index..<index + 7, with: Array("lockbox".utf8))
            }
        }
        let result = try runLockbox(["get", "s", "a"], environment: environment)
        #expect(result.status == 6 && result.errorCode == .corruptVault, "\(result.status) \(result.stderr)")
    }

    @Test("FORMAT.md §7.1: unknown lockbox.* attributes are not shown to callers, and survive a rewrite of the vault")
    func unknownReservedAttributesHidden() throws {
        #expect(
            try runLockbox(
                ["set", "s", "a", "--attribute", "LOCKBOX.future=1", "--attribute", "env=prod"], stdin: Data("x".utf8),
                environment: environment
            ).status == 0)
        try editPayload { payload in
            for index in payload.indices where payload[index...].starts(with: Array("LOCKBOX.future".utf8)) {
                payload.replaceSubrange(index..<index + 7, with: Array("lockbox".utf8))
            }
        }
        let list = try runLockbox(["list", "--json"], environment: environment)
        #expect(list.status == 0 && !list.stdoutString.contains("future") && list.stdoutString.contains("prod"), "\(list.stdoutString)")
        #expect(try store().metadata(ItemKey(service: "s", account: "a"))?.attributes == ["env": "prod"])
        #expect(try runLockbox(["set", "s", "b"], stdin: Data("y".utf8), environment: environment).status == 0)
        #expect(try payloadContains("lockbox.future"), "kept when another item was written")
    }

    @Test("FORMAT.md §8 check 12: a body length whose sum with the header overflows 64 bits reports 'truncated: expected H+B bytes'")
    func overflowingBodyLength() throws {
        let path = folder.file("v.lockbox")
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path.string)))
        let headerLength = Int(bytes[12]) | Int(bytes[13]) << 8
        bytes.replaceSubrange(headerLength - 40..<headerLength - 32, with: [UInt8](repeating: 0xFF, count: 8))
        let checksum = bytes.withUnsafeBytes { Sodium.blake2b(UnsafeRawBufferPointer(rebasing: $0[0..<headerLength - 32])) }
        bytes.replaceSubrange(headerLength - 32..<headerLength, with: checksum)
        try Data(bytes).write(to: URL(fileURLWithPath: path.string))
        let expected = UInt128(headerLength) + UInt128(UInt64.max)
        let result = try runLockbox(["list"], environment: environment)
        // The declared length (past UInt64) is reported exactly, not wrapped around.
        #expect(result.status == 6 && result.errorCode == .corruptVault && result.stderr.contains("\(expected)"), "\(result.stderr)")
    }
}
