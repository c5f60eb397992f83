import Foundation
import Synchronization
import SystemPackage
import Testing
@testable import Lockbox

// Regression tests for the holes an adversarial pass found (issue 13). Each test feeds the bad
// input and asserts the outcome: exit code and state after.

/// A clock whose wall time, boot ID and boot clock an attacker moves independently.
final class AttackerClock: PinClock {
    private let instant = Mutex(PinInstant(wall: Date(timeIntervalSince1970: 1_800_000_000), bootID: "boot-1", sinceBoot: 1000))

    func now() -> PinInstant { instant.withLock { $0 } }

    func move(_ change: (inout PinInstant) -> Void) { instant.withLock { change(&$0) } }
}

/// Runs `script` with bash (for `$'\xff'` arguments and namespace wrappers), `$L` naming the
/// lockbox binary, in the environment ``runLockbox(_:stdin:environment:shellRedirect:)`` gives.
func runBash(_ script: String, stdin: Data = Data(), environment: [String: String] = [:]) throws -> ProcessResult {
    let process = Process()
    var env = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": NSTemporaryDirectory(), "L": lockboxBinary.path]
    for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"] {
        if let value = ProcessInfo.processInfo.environment[name] { env[name] = value }
    }
    env.merge(environment) { _, new in new }
    process.environment = env
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = ["-c", script]
    let input = Pipe(), output = Pipe(), errors = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    _ = ignoreBrokenPipes
    try process.run()
    try? input.fileHandleForWriting.write(contentsOf: stdin)
    try? input.fileHandleForWriting.close()
    let out = output.fileHandleForReading.readDataToEndOfFile()
    let err = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, stdout: out, stderr: String(decoding: err, as: UTF8.self))
}

/// Whether a namespace-based attack can be tried here. Where it cannot, the test says so on
/// standard error and, under CI=true, fails: it never passes silently.
func attackCanRun(_ probe: String, what: String) throws -> Bool {
    let result = try runBash(probe)
    if result.status == 0 { return true }
    notTested(what, because: "`\(probe)` exited \(result.status): \(result.stderr)", requiredInCI: true)
    return false
}

@Suite("Issue 13: the lockout clock under attack")
struct LockoutClockAttackTests {
    let clock = AttackerClock()
    let guardian: PinGuard
    let folder: TemporaryFolder
    let profile = PinProfile(service: "kids", name: "max")

    init() throws {
        folder = try TemporaryFolder()
        guardian = PinGuard(store: MemoryStore(), hashParameters: cheapHash, clock: clock, lockDirectory: folder.file("locks"))
        try guardian.set(profile, pin: pin("4739"), lockout: LockoutPolicy(delays: [3600]))
        #expect(outcome { try guardian.verify(profile, pin: pin("0000")) } == "wrong(1,locked)")
    }

    @Test("a boot clock shifted forward for one process (time namespace) does not end the lockout")
    func shiftedBootClock() throws {
        clock.move {
            $0.sinceBoot += 7200
            $0.wall += 1
        }
        #expect(outcome { try guardian.verify(profile, pin: pin("4739")) } == "lockedOut(3599)")
        #expect(try guardian.status(profile).lockedUntil != nil)
    }

    @Test("a faked boot ID with the wall clock set forward does not end the lockout: the boot clock did not restart")
    func fakedBootID() throws {
        clock.move {
            $0.bootID = "faked"
            $0.sinceBoot += 1
            $0.wall += 7200
        }
        #expect(outcome { try guardian.verify(profile, pin: pin("4739")) } == "lockedOut(3599)")
        clock.move { $0.sinceBoot += 3599 }
        #expect(outcome { try guardian.verify(profile, pin: pin("4739")) } == "ok")
    }

    @Test("a real reboot (new boot ID, boot clock restarted) hands the lockout to the wall clock")
    func realReboot() throws {
        clock.move {
            $0.bootID = "boot-2"
            $0.sinceBoot = 5
            $0.wall += 1800
        }
        #expect(outcome { try guardian.verify(profile, pin: pin("4739")) } == "lockedOut(1800)")
        clock.move { $0.wall += 1800 }
        #expect(outcome { try guardian.verify(profile, pin: pin("4739")) } == "ok")
    }
}

/// The attacks with real processes: the release CLI in namespaces an unprivileged user can make.
@Suite("Issue 13: PIN lockout attacks through the CLI", .serialized)
struct LockoutCLIAttackTests {
    let folder: TemporaryFolder
    let environment: [String: String]

    init() throws {
        folder = try TemporaryFolder()
        let runtime = folder.file("run").string
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        environment = ["LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("k.key").string,
                       "XDG_CONFIG_HOME": folder.file("config").string, "XDG_RUNTIME_DIR": runtime]
        let created = try runLockbox(["init", "--generate-key-file", folder.file("k.key").string], environment: environment)
        #expect(created.status == 0, "\(created.stderr)")
    }

    private func lockedOutProfile() throws {
        let set = try runLockbox(["pin", "set", "kids", "max", "--hash-cost", "interactive", "--lockout-delays", "3600"],
                                 stdin: Data("4739\n4739\n".utf8), environment: environment)
        #expect(set.status == 0, "\(set.stderr)")
        #expect(try runLockbox(["pin", "verify", "kids", "max", "--hash-cost", "interactive"], stdin: Data("9999\n".utf8),
                               environment: environment).status == 30)
    }

    private func expectStillLockedOut() throws {
        let status = try runLockbox(["pin", "status", "kids", "max", "--json"], environment: environment)
        #expect(status.stdoutString.contains("\"failures\" : 1") && status.stdoutString.contains("lockedUntil"), "\(status.stdoutString)")
    }

    @Test("unshare -Ur -T --boottime 7200: a verifier in a shifted time namespace is still locked out (exit 31)")
    func timeNamespace() throws {
        try lockedOutProfile()
        guard try attackCanRun("unshare -Ur -T --boottime 7200 true", what: "a user + time namespace") else { return }
        let result = try runBash("unshare -Ur -T --boottime 7200 \"$L\" pin verify kids max --hash-cost interactive",
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
        guard try attackCanRun("\(fakeBoot) sh -c 'test \"$(cat /proc/sys/kernel/random/boot_id)\" = 00000000-0000-4000-8000-000000000000'",
                               what: "a faked boot ID in a user + mount namespace") else { return }
        var result = try runBash("\(fakeBoot) \"$L\" pin verify kids max --hash-cost interactive",
                                 stdin: Data("4739\n".utf8), environment: environment)
        #expect(result.status == 31, "faked boot ID: \(result.stderr)")
        // Someone who may set the wall clock (root, or timedated's polkit rule for a desktop user)
        // combines both: libfaketime moves the wall clock of that one process.
        guard try attackCanRun("DONT_FAKE_MONOTONIC=1 faketime -f +2h true", what: "a wall clock set 2 h ahead (faketime)") else { return }
        result = try runBash("\(fakeBoot) env DONT_FAKE_MONOTONIC=1 faketime -f +2h \"$L\" pin verify kids max --hash-cost interactive",
                             stdin: Data("4739\n".utf8), environment: environment)
        #expect(result.status == 31, "faked boot ID and wall clock 2 h ahead: \(result.stderr)")
        try expectStillLockedOut()
    }

    @Test("8 parallel verifiers, each with its own XDG_RUNTIME_DIR and HOME: at most the free tries evaluated, every one counted")
    func parallelVerifiersInDifferentEnvironments() async throws {
        let set = try runLockbox(["pin", "set", "kids", "max", "--hash-cost", "interactive"], stdin: Data("4739\n4739\n".utf8),
                                 environment: environment)
        #expect(set.status == 0, "\(set.stderr)")
        let freeTries = LockoutPolicy.default.delays.prefix { $0 == 0 }.count + 1
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
                    (try? runLockbox(["pin", "verify", "kids", "max", "--hash-cost", "interactive"], stdin: Data("9999\n".utf8),
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
        let status = try runLockbox(["pin", "status", "kids", "max", "--json"], environment: environment)
        #expect(status.stdoutString.contains("\"failures\" : \(evaluated)"), "\(status.stdoutString)")
    }
}

@Suite("Issue 13: names and windows")
struct NameAndWindowRegressionTests {
    @Test("a service or account name that is not UTF-8 is refused with exit 64, naming the argument; nothing is stored")
    func nonUTF8Names() throws {
        let folder = try TemporaryFolder()
        let environment = ["LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("k.key").string,
                           "XDG_CONFIG_HOME": folder.file("config").string]
        #expect(try runLockbox(["init", "--generate-key-file", folder.file("k.key").string], environment: environment).status == 0)
        var result = try runBash("printf one | \"$L\" set u8 $'a\\xff'", environment: environment)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("argument 3"), "\(result.stderr)")
        result = try runBash("printf two | \"$L\" set $'s\\xfe' a", environment: environment)
        #expect(result.status == 64, "\(result.stderr)")
        result = try runBash("\"$L\" get --vault $'\\xff' u8 a", environment: environment)
        #expect(result.status == 64 && result.stderr.contains("the value of --vault"), "\(result.stderr)")
        let list = try runLockbox(["list", "--json"], environment: environment)
        #expect(list.status == 0 && !list.stdoutString.contains("u8"), "\(list.stdoutString)")
    }

    @Test("unlock outside a login session keyring (the user's default session keyring, as cron and containers get) exits 41; inside one it works")
    func windowOutsideSessionKeyring() throws {
        let folder = try TemporaryFolder()
        let passFile = folder.file("pass").string
        try "vault pass\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        let environment = ["LOCKBOX_VAULT": folder.file("v.lockbox").string, "XDG_CONFIG_HOME": folder.file("config").string]
        #expect(try runLockbox(["init", "--passphrase-fd", "3", "--kdf", "interactive"], environment: environment,
                               shellRedirect: "3<'\(passFile)'").status == 0)
        // `keyctl session _uid_ses.UID` runs a command in the user's default session keyring: the
        // one the kernel lends a process that has no session keyring of its own. Check that it is.
        let outside = "keyctl session _uid_ses.$(id -u)"
        let probe = try runBash("\(outside) sh -c 'test \"$(keyctl id @s)\" = \"$(keyctl id @us)\"'")
        #expect(probe.status == 0, "keyctl cannot reach the user's default session keyring here: \(probe.stderr)")
        var result = try runBash("\(outside) \"$L\" unlock --for 30s --passphrase-fd 3 3<'\(passFile)'", environment: environment)
        #expect(result.status == 41, "\(result.stderr)")
        #expect(result.stderr.contains("keyctl session"), "says what to do: \(result.stderr)")
        result = try runBash("\(outside) \"$L\" status", environment: environment)
        #expect(result.stdoutString.hasPrefix("locked"), "\(result.stdoutString)")
        // Inside the test command's own session keyring (as in a login), the window is kept.
        result = try runLockbox(["unlock", "--for", "30s", "--passphrase-fd", "3"], environment: environment, shellRedirect: "3<'\(passFile)'")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try runLockbox(["status"], environment: environment).stdoutString.hasPrefix("unlocked"))
        _ = try runLockbox(["lock"], environment: environment)
    }
}
