import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

@Suite("FileVault: one opener for every format, one creator of the current one")
struct FileVaultTests {
    @Test(
        "a vault made by lockbox init --key-file opens through FileVault.open and LockboxConfiguration.openFileVault, with what lockbox set stored"
    )
    func opensWhatTheCLIMade() throws {
        let cli = try CLIFixture()
        var result = try cli.run(["init", "--vault", cli.vault, "--generate-key-file", cli.key])
        #expect(result.status == 0, "\(result.stderr)")
        result = try cli.run(cli.withKey(["set", "com.example.api", "alice"]), stdin: "from the CLI")
        #expect(result.status == 0, "\(result.stderr)")
        let store = try FileVault.open(at: FilePath(cli.vault), credential: .keyFile(FilePath(cli.key)))
        #expect(store is SQLiteVaultStore, "lockbox init makes format 2")
        #expect(try Vault(store: store).string(service: "com.example.api", account: "alice") == "from the CLI")
        let configured = try LockboxConfiguration(vaultPath: FilePath(cli.vault), keyFile: FilePath(cli.key)).openFileVault()
        #expect(try Vault(store: configured).string(service: "com.example.api", account: "alice") == "from the CLI")
    }

    @Test("FileVault.create makes format 2; a format-1 vault still opens through FileVault.open")
    func createsFormatTwoAndOpensFormatOne() throws {
        let folder = try TemporaryFolder()
        let key = folder.file("k")
        try KeyFile.generate(at: key)
        let created = try FileVault.create(at: folder.file("new.lockbox"), credentials: [.keyFile(key)], kdf: testKDF)
        try created.set(secret("v2"), for: ItemKey(service: "s", account: "a"), options: ItemOptions())
        #expect(VaultFileFormat.detect(at: folder.file("new.lockbox")) == .format2)
        let legacy = try EncryptedFileStore.create(at: folder.file("old.lockbox"), credentials: [.keyFile(key)], kdf: testKDF)
        try legacy.set(secret("v1"), for: ItemKey(service: "s", account: "a"), options: ItemOptions())
        let reopened = try FileVault.open(at: folder.file("old.lockbox"), credential: .keyFile(key))
        #expect(reopened is EncryptedFileStore)
        #expect(try reopened.get(ItemKey(service: "s", account: "a")) == secret("v1"))
        #expect(
            try FileVault.open(at: folder.file("new.lockbox"), credential: .keyFile(key)).get(ItemKey(service: "s", account: "a"))
                == secret("v2"))
        let error = caughtError { _ = try EncryptedFileStore.open(at: folder.file("new.lockbox"), credential: .keyFile(key)) }
        #expect(
            error.map { "\($0)".contains("FileVault.open") } == true,
            "the format-1 reader points at the one opener: \(String(describing: error))")
    }

    @Test("the async FileVault.create, FileVault.open and openFileVault give the same vault as the blocking ones, off the caller's thread")
    func asyncOpenersOpenTheSameVault() async throws {
        let folder = try TemporaryFolder()
        let key = folder.file("k")
        try KeyFile.generate(at: key)
        let path = folder.file("v.lockbox")
        let created = try await FileVault.create(at: path, credentials: [.keyFile(key)], kdf: testKDF)
        try await Vault(store: created).set(secret("async"), service: "s", account: "a")
        #expect(VaultFileFormat.detect(at: path) == .format2)
        let opened = try await FileVault.open(at: path, credential: .keyFile(key))
        #expect(try await Vault(store: opened).string(service: "s", account: "a") == "async")
        let configured = try await LockboxConfiguration(vaultPath: path, keyFile: key).openFileVault()
        #expect(try await Vault(store: configured).string(service: "s", account: "a") == "async")
        let error = await caughtError { _ = try await FileVault.open(at: path, credentials: []) }
        #expect(error.map { "\($0)".contains("needs a credential") } == true, "\(String(describing: error))")
        let exists = await caughtError { _ = try await FileVault.create(at: path, credentials: [.keyFile(key)], kdf: testKDF) }
        #expect(exists?.code == .vaultAlreadyExists, "\(String(describing: exists))")
    }
}
