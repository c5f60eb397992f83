import Foundation
import LockboxSessionWindows
import Synchronization
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// The window in the kernel keyring. The test command runs the suite in its own session keyring
/// (`keyctl session`), as a login session has one.
@Suite("Re-authentication windows (kernel keyring)", .serialized)
struct SessionWindowTests {
    @Test("a window in the kernel keyring opens the vault without a credential, and the kernel expires it")
    func kernelWindow() throws {
        let fixture = try KeyFileVault(passphrase: "pass")
        try Vault(store: fixture.store).set("v", service: "s", account: "a")
        let scope = try SessionWindow.scope(forVaultAt: fixture.vaultPath)
        try SessionWindow.open(for: fixture.store, duration: .seconds(600), openedBy: "passphrase")
        let opened = try #require(try SessionWindow.openStore(at: fixture.vaultPath))
        #expect(try Vault(store: opened).string(service: "s", account: "a") == "v")
        #expect(SessionWindow.status(scope: scope) != nil)
        // Lockbox itself refuses the window once its exact expiry passes: driven through the
        // clock the window is read with (the kernel's own timeout is the part below).
        let openedAt = ReauthGate.monotonicClock()
        try SessionWindow.open(for: fixture.store, duration: .seconds(10), openedBy: "passphrase", clock: { openedAt })
        #expect(try SessionWindow.openStore(at: fixture.vaultPath, clock: { openedAt + 9.9 }) != nil, "open until the last moment")
        #expect(abs((SessionWindow.status(scope: scope, clock: { openedAt + 4 })?.remaining ?? 0) - 6) < 1e-6)
        #expect(try SessionWindow.openStore(at: fixture.vaultPath, clock: { openedAt + 10 }) == nil, "closed at its expiry")
        #expect(SessionWindow.status(scope: scope) == nil, "and revoked: the kernel no longer has it")
        // And the kernel expires the key on its own: with a new window left untouched (read
        // straight from the kernel, never through Lockbox, which would revoke it), the key must
        // vanish within its timeout (whole seconds plus one spare); 30 s is the generous bound.
        try SessionWindow.open(for: fixture.store, duration: .seconds(1), openedBy: "passphrase")
        let started = Date()
        if let id = KernelKeyring.search(description: SessionWindow.descriptionPrefix + scope) {
            while KernelKeyring.read(id) != nil && Date().timeIntervalSince(started) < 30 { usleep(50_000) }
            #expect(KernelKeyring.read(id) == nil, "the kernel kept the key for 30 s")
        }
        #expect(KernelKeyring.search(description: SessionWindow.descriptionPrefix + scope) == nil)
    }

    @Test("the key is possessor-only, and a passphrase change or lock makes the window useless")
    func invalidation() throws {
        let fixture = try KeyFileVault(passphrase: "pass")
        let scope = try SessionWindow.scope(forVaultAt: fixture.vaultPath)
        try SessionWindow.open(for: fixture.store, duration: .seconds(60), openedBy: "passphrase")
        let id = try #require(KernelKeyring.search(description: SessionWindow.descriptionPrefix + scope))
        let permissions = try String(contentsOfFile: "/proc/keys", encoding: .utf8).split(separator: "\n")
            .first { $0.hasPrefix(String(format: "%08x", id)) }
        #expect(permissions?.contains(" 3f000000 ") == true, "\(permissions ?? "not in /proc/keys")")
        try fixture.store.changePassphrase(to: secret("new"), kdf: testKDF)
        #expect(try SessionWindow.openStore(at: fixture.vaultPath) == nil, "keys changed: the window is void")
        try SessionWindow.open(for: fixture.store, duration: .seconds(60), openedBy: "passphrase")
        #expect(try SessionWindow.openStore(at: fixture.vaultPath) != nil)
        #expect(SessionWindow.close(scope: scope))
        #expect(try SessionWindow.openStore(at: fixture.vaultPath) == nil)
    }

    @Test("CLI: unlock with a PIN, get a protected item without asking, then lock or expiry brings exit 40; nothing written to disk")
    func cliWindow() throws {
        let folder = try TemporaryFolder()
        let runtime = folder.file("run").string
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let key = folder.file("k.key").string
        let base = [
            "LOCKBOX_VAULT": folder.file("v.lockbox").string, "XDG_CONFIG_HOME": folder.file("config").string,
            "XDG_RUNTIME_DIR": runtime,
        ]
        let withKey = base.merging(["LOCKBOX_KEY_FILE": key]) { a, _ in a }
        #expect(try runLockbox(["init", "--generate-key-file", key], environment: base).status == 0)
        #expect(
            try runLockbox(["set", "--protected", "screen", "parent-token"], stdin: Data("parent-only".utf8), environment: withKey).status
                == 0)
        #expect(
            try runLockbox(
                ["pin", "set", "screen", "parent", "--hash-cost", "interactive"], stdin: Data("4739\n4739\n".utf8),
                environment: withKey
            ).status == 0)
        var result = try runLockbox(["get", "screen", "parent-token"], environment: withKey)
        #expect(result.status == 40, "protected, no window: \(result.stderr)")

        let snapshot = { () throws -> [String: Data] in
            var files: [String: Data] = [:]
            for folderPath in [folder.path.string, folder.file("config/lockbox").string] {
                for name in try FileManager.default.contentsOfDirectory(atPath: folderPath) {
                    let path = folderPath + "/" + name
                    var isDirectory: ObjCBool = false
                    if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
                        files[path] = FileManager.default.contents(atPath: path)
                    }
                }
            }
            return files
        }
        result = try runLockbox(
            ["unlock", "--for", "10m", "--pin", "screen/parent"],
            stdin: Data("4739\n".utf8), environment: withKey)
        #expect(result.status == 0, "\(result.stderr)")
        let afterUnlock = try snapshot()
        // Inside the window: no key file, no passphrase, no prompt.
        result = try runLockbox(["get", "screen", "parent-token"], environment: base)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutString == "parent-only")
        let window = try runLockbox(["status", "--json"], environment: base).jsonObject
        #expect(window?["open"] as? Bool == true && (window?["openedBy"] as? String)?.hasPrefix("pin") == true, "\(window ?? [:])")
        #expect((window?["remainingSeconds"] as? Int).map { $0 > 0 && $0 <= 600 } == true, "\(window ?? [:])")
        #expect(try runLockbox(["lock"], environment: base).status == 0)
        #expect(try runLockbox(["get", "screen", "parent-token"], environment: base).status == 40)
        #expect(try runLockbox(["get", "screen", "parent-token"], environment: withKey).status == 40)
        #expect(try snapshot() == afterUnlock, "reads inside the window wrote nothing")

        // A passphrase-less vault cannot be unlocked by its key file: that is not a person.
        #expect(try runLockbox(["unlock", "--for", "1s"], environment: withKey).status != 0)
        // Expiry: a short window opens, and is gone after it ends. A window that had already ended
        // before the first `get` (a slow machine) proves nothing: it is tried again, twice as long.
        var seconds = 1
        while true {
            let started = Date()
            result = try runLockbox(
                ["unlock", "--for", "\(seconds)s", "--pin", "screen/parent"],
                stdin: Data("4739\n".utf8), environment: withKey)
            #expect(result.status == 0, "\(result.stderr)")
            let inside = try runLockbox(["get", "screen", "parent-token"], environment: base).status
            if inside == 0 || Date().timeIntervalSince(started) < Double(seconds) || seconds >= 64 {
                #expect(inside == 0, "a \(seconds)-second window was not open right after unlock")
                break
            }
            seconds *= 2
        }
        Thread.sleep(forTimeInterval: Double(seconds) + 0.2)
        result = try runLockbox(["get", "screen", "parent-token"], environment: withKey)
        #expect(result.status == 40)
        #expect(result.stderr.contains("error[\(LockboxError.Code.reauthenticationRequired)]"))
    }

    @Test("CLI: a passphrase unlock changes no file at all")
    func passphraseUnlockWritesNothing() throws {
        let folder = try TemporaryFolder()
        let passFile = folder.file("pass").string
        try "vault pass\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        let env = ["LOCKBOX_VAULT": folder.file("v.lockbox").string, "XDG_CONFIG_HOME": folder.file("config").string]
        #expect(
            try runLockbox(
                ["init", "--passphrase-fd", "3", "--kdf", "interactive"], environment: env,
                shellRedirect: "3<'\(passFile)'"
            ).status == 0)
        #expect(
            try runLockbox(
                ["set", "--passphrase-fd", "3", "--protected", "s", "a"], stdin: Data("x".utf8), environment: env,
                shellRedirect: "3<'\(passFile)'"
            ).status == 0)
        let vaultBefore = FileManager.default.contents(atPath: folder.file("v.lockbox").string)
        let settingsBefore = FileManager.default.contents(atPath: folder.file("config/lockbox/settings.json").string)
        let listingBefore = try FileManager.default.contentsOfDirectory(atPath: folder.path.string).sorted()
        let result = try runLockbox(["unlock", "--for", "10m", "--passphrase-fd", "3"], environment: env, shellRedirect: "3<'\(passFile)'")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.contents(atPath: folder.file("v.lockbox").string) == vaultBefore)
        #expect(FileManager.default.contents(atPath: folder.file("config/lockbox/settings.json").string) == settingsBefore)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path.string).sorted() == listingBefore)
        #expect(try runLockbox(["get", "s", "a"], environment: env).stdoutString == "x")
        _ = try runLockbox(["lock"], environment: env)
    }

    @Test("CLI: when the kernel keyring cannot hold a window (key quota full), unlock says so with exit 41 and nothing is opened")
    func keyringFull() throws {
        guard
            prerequisiteMet(
                geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
                    && FileManager.default.isExecutableFile(atPath: "/usr/bin/keyctl"),
                "keyringFull needs root, setpriv and keyctl")
        else { return }
        // A real kernel refusing add_key: user `nobody`, in a session keyring of its own, first
        // fills its key quota (kernel/keys/maxbytes, 20,000 bytes by default) with one big key,
        // leaving less than 25 bytes, too few for any window.
        let folder = try TemporaryFolder()
        chmod(folder.path.string, 0o777)
        let passFile = folder.file("pass").string
        try "vault pass\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        chmod(passFile, 0o644)
        let script = """
            set -u
            L='\(lockboxBinary.path)'; V='\(folder.file("v.lockbox").string)'; P='\(passFile)'
            "$L" init --vault "$V" --passphrase-fd 3 --kdf interactive 3<"$P" >/dev/null 2>&1 || { echo "init failed"; exit 90; }
            filled=no
            # The largest key that still fits this user's quota (kernel/keys/maxbytes, whatever
            # it is set to here, less what the user already holds), so almost nothing is left.
            n=$(cat /proc/sys/kernel/keys/maxbytes)
            while [ "$n" -gt 0 ]; do
                if head -c "$n" /dev/zero | keyctl padd user filler @s >/dev/null 2>&1; then filled=$n; break; fi
                n=$((n - 25))
            done
            echo "filled=$filled"
            "$L" unlock --vault "$V" --passphrase-fd 3 --for 1m 3<"$P"; echo "unlock=$?"
            "$L" status --vault "$V" --json | tr -d ' \\n'; echo; echo "status=${PIPESTATUS[0]}"
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = [
            "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/keyctl", "session", "-", "/bin/bash", "-c", script,
        ]
        var environment = [
            "PATH": "/usr/bin:/bin", "HOME": folder.path.string, "XDG_CONFIG_HOME": folder.file("config").string,
            "XDG_RUNTIME_DIR": folder.file("run").string,
        ]
        // Under scripts/ci/sanitizers.sh, `nobody` cannot write the report folder; leaks at exit
        // are the toolchain's (see its suppressions) and must not change the exit status.
        if runningUnderSanitizer { environment["ASAN_OPTIONS"] = "detect_leaks=0" }
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(!text.contains("filled=no"), "the quota could not be filled: \(text)")
        #expect(text.contains("unlock=41"), "\(text)")
        #expect(
            text.contains("lockbox: error[\(LockboxError.Code.kernelKeyringUnavailable)]") && text.contains("add_key failed"), "\(text)")
        #expect(text.contains("{\"open\":false}") && text.contains("status=0"), "\(text)")
    }
}
