import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// LockboxConfiguration: the one value a program configures Lockbox with, and the key-file
/// exception for Kubernetes secret mounts (KeyFileAccess.readOnlyMount).
@Suite struct ConfigurationTests {
    @Test func userDefaultsComeFromTheEnvironmentThatIsPassed() {
        let xdg = LockboxConfiguration.forUser(environment: ["XDG_DATA_HOME": "/data", "XDG_CONFIG_HOME": "/config", "HOME": "/home/u"])
        #expect(xdg.vaultPath == "/data/lockbox/vault.lockbox")
        #expect(xdg.settingsPath == "/config/lockbox/settings.json")
        #expect(xdg.store == .auto)
        #expect(xdg.pinPreset == .desktop)
        let home = LockboxConfiguration.forUser(environment: ["HOME": "/home/u", "XDG_DATA_HOME": "relative"])
        #expect(home.vaultPath == "/home/u/.local/share/lockbox/vault.lockbox")
        #expect(home.settingsPath == "/home/u/.config/lockbox/settings.json")
    }

    @Test func buildsTheTypesItDescribes() throws {
        let folder = try TemporaryFolder()
        let configuration = LockboxConfiguration(
            vaultPath: folder.file("vault.lockbox"), lockDirectory: folder.file("locks"), pinPreset: .server,
            hashMemoryBudgetBytes: 64 << 20, concurrentHashes: 2, blockingThreads: 3)
        let executor = configuration.makeExecutor()
        #expect(executor.threadCount == 3)
        #expect(executor.hashMemoryBudget.bytes == 64 << 20)
        #expect(executor.hashMemoryBudget.concurrentHashes == 2)
        // Left out, the hash cap is the machine's default, apart from the thread count.
        let defaults = LockboxConfiguration(vaultPath: folder.file("vault.lockbox"), blockingThreads: 6).makeExecutor()
        #expect(defaults.hashMemoryBudget.concurrentHashes == HashMemoryBudget.defaultConcurrentHashes)
        #expect(defaults.hashMemoryBudget.bytes == HashMemoryBudget.defaultBytes)
        let pins = configuration.pinGuard(store: MemoryStore(), executor: executor)
        #expect(pins.hashParameters == PinPreset.server.hashParameters)
        #expect(pins.failureRecording == .afterComparing)
        #expect(pins.executor === executor)
        #expect(configuration.tokenRefresher(store: MemoryStore(), executor: executor).executor === executor)
    }

    @Test func mistakesAreRefusedNamingTheSetting() {
        let path: FilePath = "/tmp/vault.lockbox"
        for bad in [
            LockboxConfiguration(vaultPath: path, hashMemoryBudgetBytes: 0),
            LockboxConfiguration(vaultPath: path, concurrentHashes: 0),
            LockboxConfiguration(vaultPath: path, concurrentHashes: -1),
            LockboxConfiguration(vaultPath: path, concurrentHashes: 1025),
            LockboxConfiguration(vaultPath: path, blockingThreads: 0),
            LockboxConfiguration(vaultPath: path, blockingThreads: 5000),
            LockboxConfiguration(profile: "", vaultPath: path),
            LockboxConfiguration(vaultPath: ""),
            LockboxConfiguration(vaultPath: path, keyFile: ""),
        ] {
            #expect(caughtError { try bad.validate() }?.code == .invalidArgument)
        }
        // A store choice is recorded in a settings file: none configured, no selection.
        #expect(caughtError { try LockboxConfiguration(store: .auto, vaultPath: path).storeSelection() }?.code == .invalidArgument)
        // A vault opened by configuration needs a key file.
        #expect(caughtError { try LockboxConfiguration(vaultPath: path).openFileVault() }?.code == .invalidArgument)
    }

    @Test func storeSelectionUsesTheConfiguredPaths() throws {
        let selection = try LockboxConfiguration(
            store: .file, profile: "svc", vaultPath: "/srv/vault.lockbox", settingsPath: "/srv/settings.json"
        ).storeSelection()
        #expect(selection.request == .file)
        #expect(selection.profile == "svc")
        #expect(selection.vaultPath == "/srv/vault.lockbox")
        #expect(selection.settingsPath == "/srv/settings.json")
    }

    @Test func opensAVaultWithItsKeyFile() throws {
        let folder = try TemporaryFolder()
        let key = folder.file("vault.key")
        try KeyFile.generate(at: key)
        let vaultPath = folder.file("vault.lockbox")
        _ = try EncryptedFileStore.create(at: vaultPath, credentials: [.keyFile(key)])
        let store = try LockboxConfiguration(vaultPath: vaultPath, keyFile: key).openFileVault()
        try Vault(store: store).set("v", service: "s", account: "a")
        #expect(
            try Vault(store: LockboxConfiguration(vaultPath: vaultPath, keyFile: key).openFileVault()).string(service: "s", account: "a")
                == "v")
    }

    // MARK: Key files on a Kubernetes secret mount

    @Test func theMountExceptionDoesNotApplyOnAWritableFileSystem() throws {
        let folder = try TemporaryFolder()
        let key = folder.file("vault.key")
        try KeyFile.generate(at: key)
        #expect(chmod(key.string, 0o640) == 0)
        #expect(caughtError { try KeyFile.read(at: key) }?.code == .insecurePermissions)
        #expect(caughtError { try KeyFile.read(at: key, access: .readOnlyMount) }?.code == .insecurePermissions)
        // Owner-only files need no exception either way.
        #expect(chmod(key.string, 0o600) == 0)
        #expect(try KeyFile.read(at: key, access: .readOnlyMount).count == KeyFile.keyBytes)
    }

    /// A Kubernetes secret volume, reproduced: a tmpfs mounted read-only, files owned by root with
    /// mode 0644 or 0640. Needs root (mount); under CI=true it must run.
    @Test func aReadOnlyRootMountIsAcceptedOnlyWhenAskedFor() throws {
        guard prerequisiteMet(geteuid() == 0, "the read-only mount key-file test needs root to mount a tmpfs") else { return }
        let folder = try TemporaryFolder()
        let mountPoint = folder.file("secret")
        try mountPoint.createDirectories(permissions: .ownerReadWriteExecute)
        let mounted = try runProcess(URL(fileURLWithPath: "/bin/mount"), ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint.string])
        guard prerequisiteMet(mounted.status == 0, "mounting a tmpfs (\(mounted.stderr))") else { return }
        defer { _ = try? runProcess(URL(fileURLWithPath: "/bin/umount"), ["-l", mountPoint.string]) }

        let key = SecretBytes.random(count: KeyFile.keyBytes)
        func place(_ name: String, mode: mode_t, owner: uid_t = 0) throws -> FilePath {
            let path = mountPoint.appending(name)
            let fd = try FileDescriptor.open(path, .writeOnly, options: [.create, .exclusiveCreate], permissions: .ownerReadWrite)
            try fd.closeAfter { _ = try key.withUnsafeBytes { try fd.writeAll($0) } }
            #expect(chown(path.string, owner, 0) == 0)
            #expect(chmod(path.string, mode) == 0)
            return path
        }
        let worldReadable = try place("world-readable", mode: 0o644)
        let groupReadable = try place("group-readable", mode: 0o640)
        let groupWritable = try place("group-writable", mode: 0o660)
        let notRoots = try place("not-roots", mode: 0o640, owner: 1000)
        // As the kubelet leaves it: a symbolic link to the file in a timestamped folder.
        #expect(symlink("group-readable", mountPoint.appending("link").string) == 0)
        let remounted = try runProcess(URL(fileURLWithPath: "/bin/mount"), ["-o", "remount,ro", mountPoint.string])
        #expect(remounted.status == 0, "remounting read-only: \(remounted.stderr)")

        for path in [worldReadable, groupReadable, mountPoint.appending("link")] {
            #expect(caughtError { try KeyFile.read(at: path) }?.code == .insecurePermissions, "owner-only by default: \(path)")
            #expect(try KeyFile.read(at: path, access: .readOnlyMount) == key)
        }
        for path in [groupWritable, notRoots] {
            #expect(caughtError { try KeyFile.read(at: path, access: .readOnlyMount) }?.code == .insecurePermissions, "\(path)")
        }

        // Through the configuration, as a service opens its vault.
        let vaultPath = folder.file("vault.lockbox")
        _ = try EncryptedFileStore.create(at: vaultPath, credentials: [.key(key)])
        var configuration = LockboxConfiguration(vaultPath: vaultPath, keyFile: groupReadable)
        #expect(caughtError { try configuration.openFileVault() }?.code == .insecurePermissions)
        configuration.keyFileAccess = .readOnlyMount
        _ = try configuration.openFileVault()
    }
}
