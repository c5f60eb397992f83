import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// A format-2 vault with a key file in a fresh folder, and the `lockbox` command on it.
private struct GuardedVault {
    let folder: TemporaryFolder
    let path: FilePath
    let keyPath: FilePath

    init() throws {
        folder = try TemporaryFolder()
        path = folder.file("vault.lockbox")
        keyPath = folder.file("vault.key")
        try KeyFile.generate(at: keyPath)
        let store = try SQLiteVaultStore.create(at: path, credentials: [.keyFile(keyPath)], kdf: testKDF)
        try store.set(secret("s3cret"), for: ItemKey(service: "svc", account: "acct"), options: ItemOptions())
    }

    func open(_ path: FilePath? = nil) throws -> SQLiteVaultStore {
        try SQLiteVaultStore.open(at: path ?? self.path, credentials: [.keyFile(keyPath)])
    }

    /// Runs SQL on the file as any SQLite tool could (what an attacker with write access to the
    /// file, a synced folder or a restored backup can plant).
    func tamper(_ sql: String) throws {
        try SQLiteConnection(path: path, create: false, busyTimeout: .seconds(5)).execute(sql)
    }

    func lockbox(_ arguments: [String], vault: String? = nil, stdin: String = "") throws -> ProcessResult {
        try runLockbox(
            arguments + ["--vault", vault ?? path.string, "--key-file", keyPath.string], stdin: Data(stdin.utf8),
            environment: ["XDG_CONFIG_HOME": folder.path.string, "XDG_DATA_HOME": folder.path.string])
    }
}

/// The error `body` throws, and how long it took to throw it.
private func timedError(_ body: () throws -> Void) -> (error: LockboxError?, seconds: Double) {
    let start = ContinuousClock.now
    let error = caughtError(body)
    let elapsed = ContinuousClock.now - start
    return (error, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

@Suite("Format 2 trusts no code or size in its file")
struct VaultSchemaTrustTests {
    /// Each plants something in the file a vault never holds; each must be refused as corrupt
    /// within a second, by the library and by the CLI (exit 6), before any row is read.
    static let plantings: [(what: String, sql: String)] = [
        (
            "a trigger that drops every write",
            "CREATE TRIGGER drop_writes AFTER INSERT ON items BEGIN DELETE FROM items WHERE address = NEW.address; END;"
        ),
        (
            "a trigger that freezes a counter",
            "CREATE TRIGGER freeze BEFORE UPDATE ON items BEGIN SELECT RAISE(IGNORE); END;"
        ),
        (
            "a view named items that never ends",
            """
            ALTER TABLE items RENAME TO items_real;
            CREATE VIEW items AS WITH RECURSIVE forever(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM forever)
                SELECT address, metadata, secret FROM items_real, forever;
            """
        ),
        ("an extra index", "CREATE INDEX by_metadata ON items(metadata);"),
        ("an extra table", "CREATE TABLE notes (body TEXT);"),
        ("an extra column", "ALTER TABLE key_slots ADD COLUMN note TEXT;"),
    ]

    @Test(
        "a planted trigger, view, index, table or column: refused as corrupt within 1 s by open and by lockbox get (6)",
        arguments: plantings.indices)
    func plantedObjectsAreRefused(index: Int) throws {
        let planting = Self.plantings[index]
        let vault = try GuardedVault()
        try vault.tamper(planting.sql)
        let (error, seconds) = timedError { _ = try vault.open() }
        #expect(error?.code == .corruptVault, "\(planting.what): \(String(describing: error))")
        #expect(seconds < 1, "\(planting.what): refused after \(seconds) s")
        let start = ContinuousClock.now
        for command in [["get", "svc", "acct"], ["list"], ["set", "svc", "other"]] {
            let result = try vault.lockbox(command, stdin: "new")
            #expect(result.status == 6, "\(planting.what), \(command): \(result.status) \(result.stderr)")
        }
        #expect(ContinuousClock.now - start < .seconds(10), "\(planting.what): the commands took too long")
    }

    @Test("the connection never fires a trigger: one planted in a raw copy changes nothing a write does")
    func triggersNeverFire() throws {
        let vault = try GuardedVault()
        let connection = try SQLiteConnection(path: vault.path, create: false, busyTimeout: .seconds(5))
        try connection.execute(
            "CREATE TABLE fired (n INTEGER); CREATE TRIGGER t AFTER INSERT ON key_slots BEGIN INSERT INTO fired VALUES (1); END;")
        try connection.execute("INSERT INTO key_slots (slot_id, slot) VALUES (99, x'00')")
        #expect(try connection.queryInteger("SELECT count(*) FROM fired") == 0)
    }

    @Test("a row column larger than the format allows is refused as corrupt before it is loaded")
    func oversizedColumnIsRefused() throws {
        let vault = try GuardedVault()
        let store = try vault.open()
        let address = VaultRecords(vaultID: try SQLiteVaultStore.vaultID(at: vault.path), dataKey: try store.currentKeys().dataKey)
            .address(ItemKey(service: "svc", account: "acct"))
        // Written by a connection without the limit, as a tampering tool would.
        let big = SQLiteConnection.maximumValueBytes + 1024
        let process = try runProcess(
            URL(fileURLWithPath: "/usr/bin/python3"),
            [
                "-c",
                """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                db.execute("UPDATE items SET secret = zeroblob(?) WHERE address = ?", (int(sys.argv[2]), bytes.fromhex(sys.argv[3])))
                db.commit()
                """, vault.path.string, String(big), address.hexString,
            ])
        #expect(process.status == 0, "\(process.stderr)")
        let error = caughtError { _ = try store.get(ItemKey(service: "svc", account: "acct")) }
        #expect(error?.code == .corruptVault, "\(String(describing: error))")
        let result = try vault.lockbox(["get", "svc", "acct"])
        #expect(result.status == 6, "\(result.stderr)")
        #expect(try store.list(service: nil).count == 1, "the metadata column is within the limit and still lists")
    }
}

@Suite("Format 2: one vault, one name")
struct VaultSingleNameTests {
    @Test("a hard link to the vault: refused by open and by the CLI (8) under either name, before any write")
    func hardLinkIsRefused() throws {
        let vault = try GuardedVault()
        let second = vault.folder.file("second.lockbox")
        #expect(link(vault.path.string, second.string) == 0)
        for name in [vault.path, second] {
            let error = caughtError { _ = try vault.open(name) }
            #expect(error?.code == .insecurePermissions, "\(String(describing: error))")
            #expect(error.map { "\($0)".contains("2 names") } == true, "\(String(describing: error))")
        }
        // Two writers through the two names: every write refused, none acknowledged.
        for index in 0..<5 {
            for name in [vault.path.string, second.string] {
                let result = try vault.lockbox(["set", "svc", "item\(index)"], vault: name, stdin: "v\(index)")
                #expect(result.status == 8, "\(result.stderr)")
            }
        }
        #expect(unlink(second.string) == 0)
        let store = try vault.open()
        #expect(try store.list(service: nil).map(\.key.account) == ["acct"], "nothing was written through either name")
        #expect(try store.get(ItemKey(service: "svc", account: "acct")) == secret("s3cret"))
    }

    @Test("the vault bind-mounted on its own (a container's FILE:FILE mount): refused (8); the folder bind-mounted works")
    func singleFileMountIsRefused() throws {
        let vault = try GuardedVault()
        let target = vault.folder.file("mounted.lockbox")
        let other = try TemporaryFolder()
        _ = FileManager.default.createFile(atPath: target.string, contents: nil)
        chmod(target.string, 0o600)
        // A private mount namespace (a user namespace too when not root), as a container has.
        let namespace = getuid() == 0 ? ["unshare", "-m", "--propagation", "private"] : ["unshare", "-Urm"]
        let script = """
            mount --bind "$1" "$2" || exit 99
            "$3" get svc acct --vault "$2" --key-file "$4"; echo "file mount: $?"
            mount --bind "$5" "$6"
            "$3" get svc acct --vault "$6/vault.lockbox" --key-file "$4"; echo "folder mount: $?"
            """
        let result = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            namespace + [
                "sh", "-c", script, "sh",
                vault.path.string, target.string, lockboxBinary.path, vault.keyPath.string, vault.folder.path.string, other.path.string,
            ])
        try #require(
            !result.stderr.contains("unshare failed") && !result.stderr.contains("Operation not permitted"),
            "this machine cannot make a mount namespace: \(result.stderr)")
        #expect(result.stdoutString.contains("file mount: 8"), "\(result.stdoutString) \(result.stderr)")
        #expect(result.stderr.contains("mounted on its own"), "\(result.stderr)")
        #expect(result.stdoutString.contains("s3cretfolder mount: 0"), "\(result.stdoutString) \(result.stderr)")
    }
}

/// A shell script's standard output, run as root in a private mount namespace of its own (a user
/// namespace too when not root, as `unshare -Urm` gives an unprivileged user), with positional
/// arguments; fails the test if no such namespace can be made here.
/// With `unprivileged` (when the tests run as root), as user `nobody` in a user namespace of its
/// own (`setpriv`, then `unshare -Urm`), as an unprivileged user in a container runs.
private func inMountNamespace(_ script: String, _ arguments: [String], unprivileged: Bool = false, home: String = NSTemporaryDirectory())
    throws -> ProcessResult
{
    var command = getuid() == 0 ? ["unshare", "-m", "--propagation", "private"] : ["unshare", "-Urm"]
    if unprivileged && getuid() == 0 {
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "-Urm"]
    }
    let result = try runProcess(
        URL(fileURLWithPath: "/usr/bin/env"), command + ["sh", "-c", script, "sh"] + arguments,
        environment: ["HOME": home, "XDG_CONFIG_HOME": home + "/config", "XDG_DATA_HOME": home + "/data"])
    try #require(!result.stderr.contains("unshare failed"), "this machine cannot make a mount namespace: \(result.stderr)")
    return result
}

/// Whether the unprivileged variant cannot run here: in a sanitizer build the runtime writes its
/// reports to root's folder and reads root's suppressions, which `nobody` cannot. The plain suite
/// of the same test command runs it; here it says so instead of passing silently.
private func unprivilegedRunImpossible(_ unprivileged: Bool) -> Bool {
    guard unprivileged, getuid() == 0, ProcessInfo.processInfo.environment["LOCKBOX_SANITIZER_BUILD"] == "1" else { return false }
    FileHandle.standardError.write(Data("NOT TESTED here: as nobody under a sanitizer build (the plain suite runs it)\n".utf8))
    return true
}

/// Hands `folders` to user `nobody` (when the tests run as root and `unprivileged`), with a copy of
/// the lockbox binary it can run wherever the checkout is; returns the binary to run.
private func handToNobody(_ folders: [TemporaryFolder], unprivileged: Bool) throws -> String {
    guard unprivileged && getuid() == 0, let first = folders.first else { return lockboxBinary.path }
    let copy = first.file("lockbox-copy").string
    // Copied by `cp`, a process of its own: a write descriptor of the copy open in this process
    // would be inherited by any process another test forks meanwhile, and running the copy while
    // that child holds it fails with ETXTBSY ("Text file busy").
    let copied = try runProcess(URL(fileURLWithPath: "/bin/cp"), ["--", lockboxBinary.path, copy])
    #expect(copied.status == 0, "\(copied.stderr)")
    for folder in folders {
        let chown = try runProcess(URL(fileURLWithPath: "/bin/chown"), ["-R", "65534:65534", folder.path.string])
        #expect(chown.status == 0, "\(chown.stderr)")
    }
    return copy
}

@Suite("Format 2: every read-modify-write is one transaction of the vault")
struct VaultTransactionTests {
    /// Eight `lockbox` processes at once, each in a mount namespace of its own with a private,
    /// empty `VAULT.locks` (a tmpfs over it) — or, with `deleting`, all in one namespace while
    /// another process removes `VAULT.locks` in a loop: the path-named lock never joins them, so
    /// only the vault's own transaction can. Returns each process's exit status and output.
    private func eight(_ vault: GuardedVault, _ arguments: [String], stdin: String, deleting: Bool) throws -> [(
        status: Int32, output: String
    )] {
        let locks = vault.path.string + ".locks"
        try FileManager.default.createDirectory(atPath: locks, withIntermediateDirectories: true)
        let input = vault.folder.file("stdin").string
        try Data(stdin.utf8).write(to: URL(fileURLWithPath: input))
        let out = vault.folder.path.string
        let private_ = getuid() == 0 ? "unshare -m --propagation private" : "unshare -Urm"
        let command = ([lockboxBinary.path] + arguments + ["--vault", vault.path.string, "--key-file", vault.keyPath.string])
            .map { "'\($0)'" }.joined(separator: " ")
        // Polled rather than `wait`ed for: the test runner starts the shell with SIGCHLD blocked,
        // and a shell's `wait` then sleeps forever. Bounded: a hung child fails the test.
        let waitForAll = """
            n=0; for i in 1 2 3 4 5 6 7 8; do while [ ! -e "\(out)/rc.$i" ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; done
            """
        let script =
            deleting
            ? """
            ( while [ ! -e "\(out)/stop" ]; do rm -rf "\(locks)"; done ) &
            for i in 1 2 3 4 5 6 7 8; do ( \(command) < "\(input)" > "\(out)/out.$i" 2>&1; echo $? > "\(out)/rc.$i.new"; mv "\(out)/rc.$i.new" "\(out)/rc.$i" ) & done
            \(waitForAll)
            touch "\(out)/stop"
            """
            : """
            for i in 1 2 3 4 5 6 7 8; do
              ( \(private_) sh -c 'mount -t tmpfs tmpfs "$1" && shift && exec "$@"' sh "\(locks)" sh -c '\(command.replacingOccurrences(of: "'", with: "")) < "$0"' "\(input)" > "\(out)/out.$i" 2>&1; echo $? > "\(out)/rc.$i.new"; mv "\(out)/rc.$i.new" "\(out)/rc.$i" ) &
            done
            \(waitForAll)
            """
        let result = try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", script])
        #expect(result.status == 0, "\(result.stderr)")
        return try (1...8).map { index in
            let status =
                Int32(try String(contentsOfFile: "\(out)/rc.\(index)", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
                ?? -1
            return (status, try String(contentsOfFile: "\(out)/out.\(index)", encoding: .utf8))
        }
    }

    @Test(
        "8 wrong PINs at once, each verifier's lock folder private (its own mount namespace) or removed in a loop: all 8 counted",
        arguments: [false, true])
    func everyWrongPinIsCounted(deleting: Bool) throws {
        let (results, failures) = try eightWrongPins(delays: "0", deleting: deleting)
        for result in results { #expect(result.status == 30, "\(result.output)") }
        #expect(failures == 8)
    }

    /// A PIN set with `delays`, then eight wrong guesses at once (``eight(_:_:stdin:deleting:)``);
    /// each guess's outcome, and the failures `pin status` counts after.
    private func eightWrongPins(delays: String, deleting: Bool) throws -> (results: [(status: Int32, output: String)], failures: Int?) {
        let vault = try GuardedVault()
        let set = try vault.lockbox(
            ["pin", "set", "kids", "max", "--hash-cost", "interactive", "--lockout-delays", delays], stdin: "4739\n4739\n")
        #expect(set.status == 0, "\(set.stderr)")
        let results = try eight(vault, ["pin", "verify", "kids", "max", "--hash-cost", "interactive"], stdin: "9999\n", deleting: deleting)
        let status = try vault.lockbox(["pin", "status", "kids", "max", "--json"])
        #expect(status.status == 0, "\(status.stderr)")
        return (results, status.jsonObject?["failures"] as? Int)
    }

    @Test(
        "8 wrong PINs at once under a 5-free-tries policy, lock folders private or removed: exactly 5 evaluated, 3 refused by the delay",
        arguments: [false, true])
    func noGuessIsEvaluatedPastTheDelay(deleting: Bool) throws {
        let (results, failures) = try eightWrongPins(delays: "0,0,0,0,3600", deleting: deleting)
        #expect(results.filter { $0.status == 30 }.count == 5, "\(results.map(\.status))")
        #expect(results.filter { $0.status == 31 }.count == 3, "\(results.map(\.status))")
        #expect(failures == 5)
    }

    @Test("8 first device-id calls at once, each lock folder private or removed in a loop: one ID", arguments: [false, true])
    func oneDeviceID(deleting: Bool) throws {
        let vault = try GuardedVault()
        let results = try eight(vault, ["device-id", "com.example.app"], stdin: "", deleting: deleting)
        for result in results { #expect(result.status == 0, "\(result.output)") }
        let ids = Set(results.map { $0.output.trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(ids.count == 1, "\(ids)")
        let stored = try vault.lockbox(["device-id", "com.example.app"])
        #expect(ids == [stored.stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)])
    }

    @Test("compare-and-delete and compare-and-set write only over the value read; no-clobber never overwrites")
    func conditionalWrites() throws {
        let vault = try GuardedVault()
        let store = try vault.open()
        let key = ItemKey(service: "svc", account: "acct")
        #expect(try !store.delete(key, ifCurrent: secret("old")), "another value: kept")
        #expect(try store.get(key) == secret("s3cret"))
        #expect(try !store.set(secret("x"), for: key, changes: ItemChanges(), when: .ifAbsent))
        #expect(try !store.set(secret("x"), for: key, changes: ItemChanges(), when: .ifCurrent(secret("stale"))))
        #expect(try store.get(key) == secret("s3cret"))
        #expect(try store.set(secret("new"), for: key, changes: ItemChanges(), when: .ifCurrent(secret("s3cret"))))
        #expect(try store.get(key) == secret("new"))
        #expect(try store.delete(key, ifCurrent: secret("new")))
        #expect(try store.get(key) == nil)
        #expect(try store.set(secret("first"), for: key, changes: ItemChanges(), when: .ifAbsent))

        // Through the CLI: --no-clobber exits 14, --if-current-fd with a stale value 15, nothing written.
        var result = try vault.lockbox(["set", "svc", "acct", "--no-clobber"], stdin: "second")
        #expect(result.status == 14, "\(result.stderr)")
        /// `lockbox set svc acct --if-current-fd 3` storing `new`, with `current` on descriptor 3.
        func setIfCurrent(_ current: String, _ new: String) throws -> ProcessResult {
            let file = vault.folder.file("current").string
            try Data((current + "\n").utf8).write(to: URL(fileURLWithPath: file))
            return try runLockbox(
                ["set", "svc", "acct", "--if-current-fd", "3", "--vault", vault.path.string, "--key-file", vault.keyPath.string],
                stdin: Data(new.utf8), shellRedirect: "3<'\(file)'")
        }
        result = try setIfCurrent("stale", "third")
        #expect(result.status == 15, "\(result.stderr)")
        #expect(try store.get(key) == secret("first"))
        result = try setIfCurrent("first", "fourth")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try store.get(key) == secret("fourth"))
    }

    @Test("git-credential erase with the old password, racing stores of new ones: a new password is never erased")
    func eraseNeverRemovesANewPassword() throws {
        let vault = try GuardedVault()
        let describe: @Sendable (String) -> String = { password in
            "protocol=https\nhost=example.com\nusername=alice\npassword=\(password)\n\n"
        }
        for round in 0..<20 {
            #expect(try vault.lockbox(["git-credential", "store"], stdin: describe("old\(round)")).status == 0)
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) {
                _ = try? vault.lockbox(["git-credential", "erase"], stdin: describe("old\(round)"))
            }
            DispatchQueue.global().async(group: group) {
                _ = try? vault.lockbox(["git-credential", "store"], stdin: describe("new\(round)"))
            }
            group.wait()
            let get = try vault.lockbox(["git-credential", "get"], stdin: "protocol=https\nhost=example.com\nusername=alice\n\n")
            // Either the erase came first (new stored after) or the store did (erase found another password).
            #expect(get.stdoutString.contains("password=new\(round)\n"), "round \(round): \(get.stdoutString)")
        }
    }
}

@Suite("Format 2: rotation keeps what the caller did not change")
struct RotationSafeWriteTests {
    @Test("lockbox set over a protected item without --protected: it stays protected, with its kind, label and attributes")
    func setKeepsProtectionAndMetadata() throws {
        let vault = try GuardedVault()
        var result = try vault.lockbox(
            [
                "set", "api", "ci", "--protected", "--kind", "token", "--label", "CI token",
                "--attribute", "env=prod",
            ], stdin: "one")
        #expect(result.status == 0, "\(result.stderr)")
        result = try vault.lockbox(["set", "api", "ci"], stdin: "two")
        #expect(result.status == 0, "\(result.stderr)")
        let store = try vault.open()
        let metadata = try #require(try store.metadata(ItemKey(service: "api", account: "ci")))
        #expect(metadata.access == .freshAuthentication)
        #expect(metadata.kind == .token && metadata.label == "CI token" && metadata.attributes == ["env": "prod"])
        #expect(try store.get(ItemKey(service: "api", account: "ci")) == secret("two"))
        result = try vault.lockbox(["get", "api", "ci"])
        #expect(result.status == 40, "still protected: \(result.stderr)")
        // Protection and attributes change only when asked.
        result = try vault.lockbox(["set", "api", "ci", "--no-protected", "--attribute", "env=dev"], stdin: "three")
        #expect(result.status == 0, "\(result.stderr)")
        let changed = try #require(try vault.open().metadata(ItemKey(service: "api", account: "ci")))
        #expect(changed.access == .always && changed.attributes == ["env": "dev"] && changed.kind == .token)
    }

    @Test("Vault.set from a service keeps kind, label, attributes and access unless given")
    func vaultSetKeepsMetadata() throws {
        let vault = try GuardedVault()
        let api = Vault(store: try vault.open())
        try api.set(
            secret("one"), service: "api", account: "svc", kind: .token, label: "L", attributes: ["a": "b"], access: .freshAuthentication)
        try api.set(secret("two"), service: "api", account: "svc")
        let metadata = try #require(try api.metadata(service: "api", account: "svc"))
        #expect(
            metadata.kind == .token && metadata.label == "L" && metadata.attributes == ["a": "b"] && metadata.access == .freshAuthentication
        )
        try api.set(secret("new"), service: "api", account: "fresh")
        let fresh = try #require(try api.metadata(service: "api", account: "fresh"))
        #expect(fresh.kind == .generic && fresh.access == .always && fresh.label == "Password for 'fresh' on 'api'")
    }
}

@Suite("Format 2 on read-only and full file systems")
struct VaultReadOnlyMediaTests {
    @Test(
        "get, list, export and pin status work on a read-only bind mount; set fails with 74 naming the cause; nothing is written there (as root, and as nobody)",
        arguments: [false, true])
    func readOnlyMount(unprivileged: Bool) throws {
        if unprivilegedRunImpossible(unprivileged) { return }
        let vault = try GuardedVault()
        let pin = try vault.lockbox(["pin", "set", "kids", "max", "--hash-cost", "interactive"], stdin: "4739\n4739\n")
        #expect(pin.status == 0, "\(pin.stderr)")
        let mounted = try TemporaryFolder()
        let backupFolder = try TemporaryFolder()
        let pass = vault.folder.file("pass")
        try Data("backup passphrase\n".utf8).write(to: URL(fileURLWithPath: pass.string))
        let script = """
            mount --bind "$1" "$2" && mount -o remount,ro,bind "$2" || exit 99
            v="$2/vault.lockbox"
            "$3" get svc acct --vault "$v" --key-file "$4"; echo "get: $?"
            "$3" list --vault "$v" --key-file "$4"; echo "list: $?"
            "$3" pin status kids max --vault "$v" --key-file "$4"; echo "pin status: $?"
            "$3" export --to "$5/backup.lockbox" --backup-passphrase-fd 3 --kdf interactive --vault "$v" --key-file "$4" 3<"$6"; echo "export: $?"
            echo new | "$3" set svc other --vault "$v" --key-file "$4"; echo "set: $?"
            ls -a "$2"
            """
        let binary = try handToNobody([vault.folder, mounted, backupFolder], unprivileged: unprivileged)
        let result = try inMountNamespace(
            script,
            [
                vault.folder.path.string, mounted.path.string, binary,
                vault.keyPath.string, backupFolder.path.string, pass.string,
            ], unprivileged: unprivileged,
            home: vault.folder.path.string)
        if unprivileged && getuid() == 0 {
            _ = try runProcess(URL(fileURLWithPath: "/bin/chown"), ["-R", "0:0", backupFolder.path.string])
        }
        let out = result.stdoutString
        #expect(!out.contains("99"), "could not mount: \(result.stderr)")
        #expect(out.contains("s3cretget: 0"), "\(out) \(result.stderr)")
        #expect(out.contains("list: 0") && out.contains("pin status: 0") && out.contains("export: 0"), "\(out) \(result.stderr)")
        #expect(out.contains("set: 74"), "\(out)")
        #expect(result.stderr.contains("read-only"), "\(result.stderr)")
        #expect(!out.contains("vault.lockbox-wal") && !out.contains("vault.lockbox-shm"), "\(out)")
        let backup = try SQLiteVaultStore.open(
            at: backupFolder.file("backup.lockbox"), credentials: [.passphrase(secret("backup passphrase"))])
        #expect(try backup.get(ItemKey(service: "svc", account: "acct")) == secret("s3cret"))
    }

    @Test(
        "get on a full tmpfs: exit 0 with the secret; set fails with 74 naming the full disk (as root, and as nobody)",
        arguments: [false, true])
    func fullFileSystem(unprivileged: Bool) throws {
        if unprivilegedRunImpossible(unprivileged) { return }
        let vault = try GuardedVault()
        let mounted = try TemporaryFolder()
        let binary = try handToNobody([vault.folder, mounted], unprivileged: unprivileged)
        let script = """
            mount -t tmpfs -o size=2m tmpfs "$1" || exit 99
            cp -p "$2" "$1/vault.lockbox"
            dd if=/dev/zero of="$1/filler" bs=64k 2>/dev/null
            "$3" get svc acct --vault "$1/vault.lockbox" --key-file "$4"; echo "get: $?"
            echo new | "$3" set svc other --vault "$1/vault.lockbox" --key-file "$4"; echo "set: $?"
            """
        let result = try inMountNamespace(
            script, [mounted.path.string, vault.path.string, binary, vault.keyPath.string],
            unprivileged: unprivileged, home: vault.folder.path.string)
        let out = result.stdoutString
        #expect(!out.contains("99"), "could not mount: \(result.stderr)")
        #expect(out.contains("s3cretget: 0"), "\(out) \(result.stderr)")
        #expect(out.contains("set: 74"), "\(out)")
        #expect(result.stderr.contains("full") || result.stderr.contains("No space"), "\(result.stderr)")
    }

    @Test("import BACKUP opens the backup read-only: its bytes stay as they were, no -wal or -shm beside it")
    func importLeavesTheBackupAlone() throws {
        let vault = try GuardedVault()
        let pass = vault.folder.file("pass")
        try Data("backup passphrase\n".utf8).write(to: URL(fileURLWithPath: pass.string))
        let backup = vault.folder.file("backup.lockbox").string
        var result = try runLockbox(
            [
                "export", "--to", backup, "--backup-passphrase-fd", "3", "--kdf", "interactive",
                "--vault", vault.path.string, "--key-file", vault.keyPath.string,
            ], shellRedirect: "3<'\(pass.string)'")
        #expect(result.status == 0, "\(result.stderr)")
        let before = try Data(contentsOf: URL(fileURLWithPath: backup))
        let other = try GuardedVault()
        result = try runLockbox(
            ["import", backup, "--backup-passphrase-fd", "3", "--vault", other.path.string, "--key-file", other.keyPath.string],
            shellRedirect: "3<'\(pass.string)'")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: backup)) == before)
        #expect(!FileManager.default.fileExists(atPath: backup + "-wal") && !FileManager.default.fileExists(atPath: backup + "-shm"))
    }
}

@Suite("Inputs Lockbox would not honour are refused")
struct RefusedInputTests {
    @Test(
        "import --json-lines refuses --on-conflict skip or keep-both, --json and --backup-passphrase-fd (64); a line over the cap is refused without storing anything"
    )
    func jsonLinesRefusesWhatItWouldIgnore() throws {
        let vault = try GuardedVault()
        let line = #"{"service":"s","account":"a","secret_b64":"eA=="}"# + "\n"
        for options in [["--on-conflict", "skip"], ["--on-conflict", "keep-both"], ["--json"], ["--backup-passphrase-fd", "3"]] {
            let result = try vault.lockbox(["import", "--json-lines", "-"] + options, stdin: line)
            #expect(result.status == 64, "\(options): \(result.stderr)")
        }
        #expect(try vault.lockbox(["import", "--json-lines", "-", "--on-conflict", "overwrite"], stdin: line).status == 0)
        // One line longer than any item can need: refused while reading it, and the batch with it.
        let huge = vault.folder.file("huge.jsonl").string
        #expect(FileManager.default.createFile(atPath: huge, contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: huge))
        try handle.write(contentsOf: Data(#"{"service":"s","account":"b","secret_b64":""#.utf8))
        try handle.write(contentsOf: Data(repeating: UInt8(ascii: "A"), count: 32 << 20))
        try handle.write(contentsOf: Data("\"}\n".utf8))
        try handle.close()
        let result = try vault.lockbox(["import", "--json-lines", huge])
        #expect(result.status == 64 && result.stderr.contains("line 1") && result.stderr.contains("longer than"), "\(result.stderr)")
        #expect(try vault.open().get(ItemKey(service: "s", account: "b")) == nil)
    }

    @Test("git-credential refuses a host, path or user name that is not UTF-8, storing and returning nothing")
    func gitCredentialRefusesInvalidUTF8() throws {
        let vault = try GuardedVault()
        for (field, bytes) in [
            ("host", Data("host=ex".utf8) + Data([0xFF, 0x61])), ("username", Data("username=".utf8) + Data([0xC3, 0x28])),
        ] {
            var input = Data("protocol=https\n".utf8)
            if field != "host" { input += Data("host=example.com\n".utf8) }
            input += bytes + Data("\npassword=p\n\n".utf8)
            let result = try runLockbox(
                ["git-credential", "store", "--vault", vault.path.string, "--key-file", vault.keyPath.string], stdin: input)
            #expect(result.status == 64 && result.stderr.contains("not valid UTF-8"), "\(field): \(result.status) \(result.stderr)")
        }
        #expect(try vault.open().list(service: nil).map(\.key.service) == ["svc"], "nothing stored")
    }
}

@Suite("Format 2: leftovers of interrupted work are removed")
struct LeftoverTests {
    @Test("convert removes the sealed copies an interrupted conversion left (.NAME.new-HEX), and nothing else")
    func convertRemovesUnfinishedCopies() throws {
        let folder = try TemporaryFolder()
        let key = folder.file("k")
        try KeyFile.generate(at: key)
        let path = folder.file("v.lockbox")
        let legacy = try EncryptedFileStore.create(at: path, credentials: [.keyFile(key)], kdf: testKDF)
        try legacy.set(secret("x"), for: ItemKey(service: "s", account: "a"), options: ItemOptions())
        let stale = folder.file(".v.lockbox.new-00ff11ee22dd33cc").string
        let unrelated = folder.file(".v.lockbox.new-notours").string
        #expect(FileManager.default.createFile(atPath: stale, contents: Data("sealed copy".utf8)))
        #expect(FileManager.default.createFile(atPath: unrelated, contents: Data("keep".utf8)))
        #expect(try SQLiteVaultStore.convert(formatOneAt: path, credentials: [.keyFile(key)]) == .converted(items: 1))
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(FileManager.default.fileExists(atPath: unrelated))
    }
}

@Suite("Format 2: token refreshes whose locks do not meet")
struct TokenFenceTests {
    /// Two token stores on one vault whose lock folders differ, as two processes in two mount
    /// namespaces have: their refreshes are not serialised by the lock.
    private func twoHosts() throws -> (GuardedVault, TokenRefresher, TokenRefresher) {
        let vault = try GuardedVault()
        let first = TokenRefresher(store: try vault.open(), lockDirectory: vault.folder.file("locks-a"))
        let second = TokenRefresher(store: try vault.open(), lockDirectory: vault.folder.file("locks-b"))
        return (vault, first, second)
    }

    /// Waits, at most a minute, until the vault holds `refreshToken`: the other host's refresh
    /// then answers after the first one stored, whatever the machine's load.
    private func waitUntilStored(refreshToken: String, by refresher: TokenRefresher) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while try await refresher.load(service: "api", account: "alice")?.refreshToken != SecretBytes(utf8: refreshToken) {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test("two refreshes at once: the first stored wins, the other returns its tokens instead of overwriting them")
    func refreshesDoNotOverwriteEachOther() async throws {
        let (_, first, second) = try twoHosts()
        try await first.save(oauthResponse: oauth("old", expiresIn: 30), service: "api", account: "alice")
        let refreshA: @Sendable (TokenSet) async throws -> TokenSet = { _ in
            return TokenSet(
                accessToken: SecretBytes(utf8: "from-a"), refreshToken: SecretBytes(utf8: "rt-from-a"),
                expiresAt: Date().addingTimeInterval(3600))
        }
        let refreshB: @Sendable (TokenSet) async throws -> TokenSet = { _ in
            try await waitUntilStored(refreshToken: "rt-from-a", by: first)
            return TokenSet(
                accessToken: SecretBytes(utf8: "from-b"), refreshToken: SecretBytes(utf8: "rt-from-b"),
                expiresAt: Date().addingTimeInterval(3600))
        }
        async let a = first.validAccessToken(service: "api", account: "alice", refresh: refreshA)
        async let b = second.validAccessToken(service: "api", account: "alice", refresh: refreshB)
        let (tokenA, tokenB) = try await (a, b)
        #expect(
            tokenA.stringValue() == "from-a" && tokenB.stringValue() == "from-a",
            "\(tokenA.stringValue() ?? "") \(tokenB.stringValue() ?? "")")
        #expect(try await first.load(service: "api", account: "alice")?.refreshToken == SecretBytes(utf8: "rt-from-a"))
    }

    @Test("a refresh rejected after another host stored new tokens signs nobody out")
    func rejectionDoesNotEraseNewTokens() async throws {
        let (_, first, second) = try twoHosts()
        try await first.save(oauthResponse: oauth("old", expiresIn: 30), service: "api", account: "alice")
        async let a = first.validAccessToken(service: "api", account: "alice") { current in
            TokenSet(
                accessToken: SecretBytes(utf8: "new"), refreshToken: SecretBytes(utf8: "rt-new"), expiresAt: Date().addingTimeInterval(3600)
            )
        }
        async let b = second.validAccessToken(service: "api", account: "alice") { _ in
            try await waitUntilStored(refreshToken: "rt-new", by: first)
            throw TokenRefreshError.rejected("invalid_grant: the old refresh token was rotated away")
        }
        let (tokenA, tokenB) = try await (a, b)
        #expect(tokenA.stringValue() == "new" && tokenB.stringValue() == "new")
        #expect(try await first.load(service: "api", account: "alice")?.accessToken == SecretBytes(utf8: "new"))
    }
}

@Suite("Format 2 against an outside review's attacks")
struct VaultReviewFindingTests {
    @Test("a rollback journal planted beside the vault (hot, as SQLite would replay it) is refused, not replayed")
    func plantedJournalIsRefused() throws {
        let vault = try GuardedVault()
        let journal = vault.path.string + "-journal"
        #expect(FileManager.default.createFile(atPath: journal, contents: Data(repeating: 0xd9, count: 512)))
        chmod(journal, 0o644)  // what another user's file looks like to the ownership check
        let result = try vault.lockbox(["get", "svc", "acct"])
        #expect(result.status == 8 && result.stderr.contains("-journal"), "\(result.status) \(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: journal), "not replayed and removed")
    }

    @Test("a CHECK constraint or a wide table written into the schema text: refused as corrupt, quickly")
    func schemaTextIsCompared() throws {
        for sql in [
            #"PRAGMA writable_schema=ON; UPDATE sqlite_schema SET sql = replace(sql, 'secret BLOB NOT NULL)', 'secret BLOB NOT NULL CHECK (length(secret) < 60))') WHERE name = 'items';"#,
            "CREATE TABLE wide (" + (0..<900).map { "c\($0)" }.joined(separator: ", ") + ");",
        ] {
            let vault = try GuardedVault()
            let tamper = try runProcess(
                URL(fileURLWithPath: "/usr/bin/python3"),
                [
                    "-c", "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.executescript(sys.argv[2]); d.close()",
                    vault.path.string, sql,
                ])
            #expect(tamper.status == 0, "\(tamper.stderr)")
            let (error, seconds) = timedError { _ = try vault.open() }
            #expect(error?.code == .corruptVault && seconds < 1, "\(String(describing: error)) after \(seconds) s")
        }
    }

    @Test("format 1: no-clobber and compare-and-set hold between handles (its flock)")
    func formatOneConditionalWritesAreAtomic() async throws {
        let folder = try TemporaryFolder()
        let key = folder.file("k")
        try KeyFile.generate(at: key)
        let path = folder.file("v.lockbox")
        _ = try EncryptedFileStore.create(at: path, credentials: [.keyFile(key)], kdf: testKDF)
        let item = ItemKey(service: "s", account: "counter")
        let winners = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    let store = try EncryptedFileStore.open(at: path, credential: .keyFile(key))
                    return try store.set(secret("\(index)"), for: item, changes: ItemChanges(), when: .ifAbsent)
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(winners == 1)
        // Eight handles each add 5 by compare-and-set, retrying when another came first: 40.
        let store = try EncryptedFileStore.open(at: path, credential: .keyFile(key))
        try store.set(secret("0"), for: item, options: ItemOptions())
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let handle = try EncryptedFileStore.open(at: path, credential: .keyFile(key))
                    var added = 0
                    while added < 5 {
                        let current = try #require(try handle.get(item))
                        let next = (Int(current.stringValue() ?? "") ?? 0) + 1
                        if try handle.set(secret("\(next)"), for: item, changes: ItemChanges(), when: .ifCurrent(current)) { added += 1 }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try store.get(item)?.stringValue() == "40")
    }

    @Test("--if-current-fd on a protected item needs the re-authentication window (40), so it tells nothing about a guess")
    func compareOnAProtectedItemNeedsTheWindow() throws {
        let vault = try GuardedVault()
        #expect(try vault.lockbox(["set", "api", "prot", "--protected"], stdin: "right").status == 0)
        let guess = vault.folder.file("guess").string
        for attempt in ["wrong", "right"] {
            try Data((attempt + "\n").utf8).write(to: URL(fileURLWithPath: guess))
            let result = try runLockbox(
                ["set", "api", "prot", "--if-current-fd", "3", "--vault", vault.path.string, "--key-file", vault.keyPath.string],
                stdin: Data("new".utf8), shellRedirect: "3<'\(guess)'")
            #expect(result.status == 40, "\(attempt): \(result.status) \(result.stderr)")
        }
    }
}
