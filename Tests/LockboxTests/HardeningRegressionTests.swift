import Foundation
import Synchronization
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

// Regression tests for the holes an adversarial review found. Each test feeds the bad
// input and asserts the outcome: exit code and state after.

/// A clock whose wall time, boot ID and boot clock an attacker moves independently.
final class AttackerClock: PinClock {
    private let instant = Mutex(PinInstant(wall: Date(timeIntervalSince1970: 1_800_000_000), bootID: "boot-1", sinceBoot: 1000))

    func now() -> PinInstant { instant.withLock { $0 } }

    func move(_ change: (inout PinInstant) -> Void) { instant.withLock { change(&$0) } }
}

@Suite("Hardening: the lockout clock under attack")
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

    @Test("the boot clock is read without this process's time-namespace offset (/proc/self/timens_offsets)")
    func timeNamespaceOffset() {
        #expect(
            SystemPinClock.bootTimeOffset(inTimeNamespaceOffsets: "monotonic           0         0\nboottime         7200 500000000\n")
                == 7200.5)
        #expect(SystemPinClock.bootTimeOffset(inTimeNamespaceOffsets: "monotonic 0 0\nboottime -30 0\n") == -30)
        #expect(SystemPinClock.bootTimeOffset(inTimeNamespaceOffsets: "") == 0, "kernels without time namespaces")
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

@Suite("Hardening: names and windows")
struct NameAndWindowRegressionTests {
    @Test("a service or account name that is not UTF-8 is refused with exit 64, naming the argument; nothing is stored")
    func nonUTF8Names() throws {
        let folder = try TemporaryFolder()
        let environment = [
            "LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("k.key").string,
            "XDG_CONFIG_HOME": folder.file("config").string,
        ]
        #expect(try runLockbox(["init", "--generate-key-file", folder.file("k.key").string], environment: environment).status == 0)
        var result = try runBash("printf one | \"$L\" set u8 $'a\\xff'", environment: environment)
        #expect(result.status == 64 && result.errorCode == .invalidArgument, "\(result.stderr)")
        #expect(result.stderr.contains("argument 3"), "names the argument by its position: \(result.stderr)")
        result = try runBash("printf two | \"$L\" set $'s\\xfe' a", environment: environment)
        #expect(result.status == 64, "\(result.stderr)")
        result = try runBash("\"$L\" get --vault $'\\xff' u8 a", environment: environment)
        #expect(
            result.status == 64 && result.errorCode == .invalidArgument && result.stderr.contains("--vault"),
            "names the option: \(result.stderr)")
        let list = try runLockbox(["list", "--json"], environment: environment)
        #expect(list.status == 0 && !list.stdoutString.contains("u8"), "\(list.stdoutString)")
    }

    @Test(
        "unlock outside a login session keyring (the user's default session keyring, as cron and containers get) exits 41; inside one it works"
    )
    func windowOutsideSessionKeyring() throws {
        let folder = try TemporaryFolder()
        let passFile = folder.file("pass").string
        try "vault pass\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        let environment = ["LOCKBOX_VAULT": folder.file("v.lockbox").string, "XDG_CONFIG_HOME": folder.file("config").string]
        #expect(
            try runLockbox(
                ["init", "--passphrase-fd", "3", "--kdf", "interactive"], environment: environment,
                shellRedirect: "3<'\(passFile)'"
            ).status == 0)
        // `keyctl session _uid_ses.UID` runs a command in the user's default session keyring: the
        // one the kernel lends a process that has no session keyring of its own. Check that it is.
        let outside = "keyctl session _uid_ses.$(id -u)"
        let probe = try runBash("\(outside) sh -c 'test \"$(keyctl id @s)\" = \"$(keyctl id @us)\"'")
        #expect(probe.status == 0, "keyctl cannot reach the user's default session keyring here: \(probe.stderr)")
        var result = try runBash("\(outside) \"$L\" unlock --for 30s --passphrase-fd 3 3<'\(passFile)'", environment: environment)
        #expect(result.status == 41 && result.errorCode == .kernelKeyringUnavailable, "\(result.stderr)")
        #expect(result.stderr.contains("keyctl session"), "names the command that fixes it: \(result.stderr)")
        result = try runBash("\(outside) \"$L\" status --json", environment: environment)
        #expect(result.jsonObject?["open"] as? Bool == false, "\(result.stdoutString)")
        // Inside the test command's own session keyring (as in a login), the window is kept.
        result = try runLockbox(
            ["unlock", "--for", "30s", "--passphrase-fd", "3"], environment: environment, shellRedirect: "3<'\(passFile)'")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try runLockbox(["status", "--json"], environment: environment).jsonObject?["open"] as? Bool == true)
        _ = try runLockbox(["lock"], environment: environment)
    }
}

/// Bad numbers and bad files: each a clear error with its exit code, never a signal or a hang.
@Suite("Hardening: crashes and hangs become clear errors")
struct CrashAndHangRegressionTests {
    let folder: TemporaryFolder
    let environment: [String: String]

    init() throws {
        folder = try TemporaryFolder()
        environment = try cliVaultWithKeyFile(in: folder, format: 1)  // edits the format-1 file itself
    }

    @Test("pin set --lockout-delays 1e19 (nan, inf, -1) exits 64; a stored record with such a delay is undecodable (25), not a crash")
    func lockoutDelaysOutOfRange() throws {
        for delays in ["1e19", "0,nan", "inf", "-1", "0,0,31622401"] {
            let result = try runLockbox(
                ["pin", "set", "kids", "max", "--hash-cost", "interactive", "--lockout-delays", delays],
                stdin: Data("4739\n4739\n".utf8), environment: environment)
            #expect(result.status == 64, "\(delays): \(result.stderr)")
        }
        #expect(try runLockbox(["pin", "status", "kids", "max"], environment: environment).status == 33, "nothing was stored")
        // A record someone edited: one failure just now, and a delay of 1e19 seconds.
        let store = try EncryptedFileStore.open(at: folder.file("v.lockbox"), credential: .keyFile(folder.file("k.key")))
        let wall = Date().timeIntervalSinceReferenceDate
        let record = """
            {"hash":"x","lockout":{"delays":[1e19],"disableAfter":100},"wipeItems":[],"failures":1,\
            "lastAttempt":{"wall":\(wall),"bootID":"b","sinceBoot":1},"disabled":false}
            """
        try store.set(SecretBytes(utf8: record), for: ItemKey(service: "kids", account: "pin:max"), options: ItemOptions(kind: .pinHash))
        for command in [["verify"], ["status"], ["status", "--json"]] {
            let result = try runLockbox(
                ["pin"] + command + ["kids", "max", "--hash-cost", "interactive"], stdin: Data("4739\n".utf8),
                environment: environment)
            #expect(result.status == 25, "\(command): \(result.stderr)")
        }
    }

    @Test("numeric options refuse NaN, infinities and out-of-range values with exit 64")
    func numericOptions() throws {
        for leeway in ["nan", "inf", "-inf", "1e19", "-1"] {
            let result = try runLockbox(["token", "get", "s", "a", "--leeway", leeway], environment: environment)
            #expect(result.status == 64, "--leeway \(leeway): \(result.stderr)")
        }
        for arguments in [["--target", "nan"], ["--target", "inf"], ["--target", "1e19"], ["--memory", "99999999999999"]] {
            let result = try runLockbox(["pin", "calibrate"] + arguments, environment: environment)
            #expect(result.status == 64, "calibrate \(arguments): \(result.stderr)")
        }
        for expiresIn in ["1e19", "1e300", "\"1e19\""] {
            let response = #"{"access_token":"a","token_type":"Bearer","expires_in":\#(expiresIn)}"#
            let result = try runLockbox(["token", "set", "s", "a"], stdin: Data(response.utf8), environment: environment)
            #expect(result.status == 64, "expires_in \(expiresIn): \(result.stderr)")
        }
        #expect(try runLockbox(["token", "status", "s", "a"], environment: environment).status == 52, "nothing was stored")
    }

    @Test("a FIFO as key file or vault is refused at once (exit 11, 64), never waited on")
    func fifoIsRefused() throws {
        let fifo = folder.file("fifo").string
        #expect(mkfifo(fifo, 0o600) == 0)
        // `timeout` turns the old hang into exit 124 instead of a test that never ends.
        var result = try runBash("timeout -s KILL 20 \"$L\" list --key-file '\(fifo)'", environment: environment)
        #expect(result.status == 11, "\(result.stderr)")
        result = try runBash("timeout -s KILL 20 \"$L\" list --vault '\(fifo)'", environment: environment)
        #expect(result.status == 64, "\(result.stderr)")
    }

    @Test("/dev/null as key file and a vault linked to /etc/passwd are not a key file / not a vault: no chmod advice")
    func notAKeyFileNotAVault() throws {
        var result = try runLockbox(["list", "--key-file", "/dev/null"], environment: environment)
        #expect(result.status == 11 && result.errorCode == .invalidKeyFile && !result.stderr.contains("chmod"), "\(result.stderr)")
        let other = folder.file("other.txt").string
        try "not a key\n".write(toFile: other, atomically: true, encoding: .utf8)
        chmod(other, 0o644)
        result = try runLockbox(["list", "--key-file", other], environment: environment)
        #expect(result.status == 11 && result.errorCode == .invalidKeyFile && !result.stderr.contains("chmod"), "\(result.stderr)")
        let link = folder.file("passwd.lockbox").string
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/etc/passwd")
        result = try runLockbox(["list", "--vault", link], environment: environment)
        #expect(result.status == 6 && result.errorCode == .corruptVault && !result.stderr.contains("chmod"), "\(result.stderr)")
        // A real key file or vault with loose permissions still gets the advice.
        chmod(folder.file("k.key").string, 0o644)
        result = try runLockbox(["list"], environment: environment)
        #expect(result.status == 8 && result.errorCode == .insecurePermissions && result.stderr.contains("chmod"), "\(result.stderr)")
        chmod(folder.file("k.key").string, 0o600)
        chmod(folder.file("v.lockbox").string, 0o644)
        result = try runLockbox(["list"], environment: environment)
        #expect(result.status == 8 && result.errorCode == .insecurePermissions && result.stderr.contains("chmod"), "\(result.stderr)")
    }

    @Test("init on a directory, a dangling link or a file that is not a vault says what is there (64), and generates no key file")
    func initSaysWhatIsThere() throws {
        let directory = folder.file("dir").string
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let dangling = folder.file("dangling").string
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: folder.file("nowhere").string)
        let text = folder.file("notes.txt").string
        try "my notes\n".write(toFile: text, atomically: true, encoding: .utf8)
        for (path, what) in [(directory, "directory"), (dangling, "symbolic link"), (text, "not a Lockbox vault")] {
            let key = folder.file("new-\(what.count).key").string
            let result = try runLockbox(["init", "--vault", path, "--generate-key-file", key], environment: environment)
            #expect(result.status == 64 && result.errorCode == .invalidArgument && result.stderr.contains(what), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: key), "no key file generated for a vault that was not created")
        }
        #expect(try String(contentsOfFile: text, encoding: .utf8) == "my notes\n")
        let again = try runLockbox(["init", "--generate-key-file", folder.file("k2.key").string], environment: environment)
        #expect(again.status == 4 && again.errorCode == .vaultAlreadyExists, "\(again.stderr)")
    }
}
