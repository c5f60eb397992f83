import Foundation
import SystemPackage
import Testing

@testable import Lockbox

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

@Suite("The first run: init remembers how the vault opens")
struct FirstRunTests {
    @Test("init --generate-key-file, then set, get and list with no key-file option or variable")
    func newcomerPath() throws {
        let cli = try CLIFixture()
        let key = cli.folder.file("keys/vault.key").string
        var result = try cli.run(["init", "--generate-key-file", key])
        #expect(result.status == 0, "\(result.stderr)")
        result = try cli.run(["set", "com.example.api", "alice"], stdin: "first run")
        #expect(result.status == 0, "\(result.stderr)")
        result = try cli.run(["get", "com.example.api", "alice"])
        #expect(result.status == 0 && result.stdoutString == "first run", "\(result.stderr)")
        result = try cli.run(["list"])
        #expect(result.status == 0 && result.stdoutString.contains("alice"), "\(result.stderr)")
        // Another vault of the same profile does not borrow the key file: it stays locked.
        result = try cli.run(
            ["init", "--vault", cli.vault, "--passphrase-fd", "3"], redirect: "3<'\(try cli.lineFile("pass", "a long passphrase here"))'")
        #expect(result.status == 0, "\(result.stderr)")
        result = try cli.run(["get", "com.example.api", "alice", "--vault", cli.vault])
        #expect(result.status == 40 || result.status == 2 || result.status == 5, "\(result.status) \(result.stderr)")
        #expect(result.status != 0)
    }

    @Test("VaultFileFormat tells format 1, format 2, another SQLite database and anything else apart from the first bytes")
    func detectsEachFormat() throws {
        let sqlite = Array("SQLite format 3".utf8) + [0]
        func database(applicationID: UInt32) -> [UInt8] {
            var header = sqlite + [UInt8](repeating: 0, count: 72 - sqlite.count)
            header[68...71] = [
                UInt8(applicationID >> 24), UInt8(applicationID >> 16 & 0xFF), UInt8(applicationID >> 8 & 0xFF),
                UInt8(applicationID & 0xFF),
            ]
            return header
        }
        let cases: [([UInt8], VaultFileFormat)] = [
            (Array("LOCKBOX".utf8) + [0, 1, 0], .format1),
            (database(applicationID: UInt32(SQLiteVaultStore.applicationID)), .format2),
            (database(applicationID: 0x1234_5678), .foreignDatabase),
            (sqlite + [0, 0], .foreignDatabase),
            (Array("LOCKBOX".utf8), .unknown),
            (Array("plain text, not a vault".utf8), .unknown),
            ([], .unknown),
        ]
        let folder = try TemporaryFolder()
        for (index, (bytes, expected)) in cases.enumerated() {
            #expect(VaultFileFormat.detect(header: bytes[...]) == expected, "case \(index)")
            let file = folder.file("case-\(index)")
            try Data(bytes).write(to: URL(fileURLWithPath: file.string))
            #expect(VaultFileFormat.detect(at: file) == expected, "case \(index) from a file")
        }
        #expect(VaultFileFormat.detect(at: folder.file("missing")) == .unknown)
        #expect(mkfifo(folder.file("fifo").string, 0o600) == 0)
        #expect(VaultFileFormat.detect(at: folder.file("fifo")) == .unknown, "a FIFO is not waited on")
    }
}
