import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// A window that holds one vault's key, counting how often it was confirmed and revoked.
final class FakeWindow: FileVaultWindow, @unchecked Sendable {
    let vaultID: [UInt8]
    let dataKey: SecretBytes
    let fingerprint: String
    let accept: Bool
    private let counts = Locked((confirmed: 0, revoked: 0))

    init(_ material: (vaultID: [UInt8], fingerprint: String, dataKey: SecretBytes), fingerprint: String? = nil, accept: Bool = true) {
        (vaultID, dataKey, self.fingerprint, self.accept) = (
            material.vaultID, material.dataKey, fingerprint ?? material.fingerprint, accept
        )
    }

    var confirmed: Int { counts.withLock { $0.confirmed } }
    var revoked: Int { counts.withLock { $0.revoked } }

    func key(forVault vaultID: [UInt8]) -> FileVaultWindowKey? {
        guard vaultID == self.vaultID else { return nil }
        return FileVaultWindowKey(
            dataKey: dataKey, fingerprint: fingerprint,
            confirm: { [self] _ in
                counts.withLock { $0.confirmed += 1 }
                return accept
            },
            revoke: { [self] in counts.withLock { $0.revoked += 1 } })
    }
}

/// A stand-in for a provider from another product (PostgreSQL's): it records what it was asked.
struct RecordingProvider: StoreProvider {
    let opened = Locked(0)
    var kind: StoreKind { .postgres }
    var capabilities: StoreCapabilities { [.persistent, .sharedAcrossHosts] }
    func open(_ request: StoreOpenRequest) throws -> OpenedStore {
        opened.withLock { $0 += 1 }
        return OpenedStore(store: MemoryStore(), location: "recorded")
    }
}

@Suite("Store providers: one seam opens every store; windows plug into the one file-vault opener")
struct StoreProviderTests {
    let folder: TemporaryFolder
    let key: FilePath
    let item = ItemKey(service: "s", account: "a")

    init() throws {
        folder = try TemporaryFolder()
        key = folder.file("k.key")
        try KeyFile.generate(at: key)
    }

    @Test("each built-in provider names its store and says what it can do; PostgreSQL needs its provider")
    func builtInProviders() throws {
        let selection = StoreSelection(request: .file, settingsPath: folder.file("settings.json"), vaultPath: folder.file("v.lockbox"))
        #expect(selection.provider(for: .file)?.kind == .file)
        #expect(selection.provider(for: .file)?.capabilities == [.persistent, .keySlots, .windowCarriesKey, .creatable])
        #expect(selection.provider(for: .memory)?.capabilities == [])
        #expect(selection.provider(for: .postgres) == nil, "no PostgreSQL provider unless one is given")
        #expect(selection.provider(for: .secretService) == nil, "no Secret Service provider unless one is given")
        var given = selection
        given.providers = [RecordingProvider()]
        #expect(given.provider(for: .postgres)?.capabilities == [.persistent, .sharedAcrossHosts])
        #expect(StoreKind.allCases.filter(\.isRecordable) == [.secretService, .file])
        #expect(StoreKind.allCases.allSatisfy { StoreRequest($0).kind == $0 })
        #expect(StoreRequest.auto.kind == nil)
        #expect(StoreRequest.allCases.allSatisfy { StoreRequest(rawValue: $0.rawValue) == $0 }, "each request's name reads back")
        #expect(
            StoreRequest.allCases.map(\.rawValue) == ["auto"] + StoreKind.allCases.map(\.rawValue), "stores are named by StoreKind alone")
        #expect(StoreRequest(rawValue: "keychain") == nil && StoreRequest(rawValue: "") == nil)
        #expect(StoreRequest.file == .store(.file) && StoreRequest(.postgres) == .postgres)
    }

    @Test("a configuration opens a file vault made by FileVault.create through the file vault's provider")
    func configurationOpensThroughTheProvider() throws {
        let path = folder.file("v.lockbox")
        try Vault(store: FileVault.create(at: path, credentials: [.keyFile(key)], kdf: testKDF)).set("v", service: "s", account: "a")
        let configuration = LockboxConfiguration(vaultPath: path, keyFile: key)
        let opened = try configuration.openStore()
        #expect(opened.store is SQLiteVaultStore)
        #expect(!opened.freshlyAuthenticated && !opened.throughWindow, "a key file is not a fresh authentication")
        #expect(opened.location == path.string)
        #expect(try Vault(store: opened.store).string(service: "s", account: "a") == "v")
        #expect(try opened.asyncStore.blocking().get(item) == secret("v"))
        let byPassphrase = try FileVault.open(at: path, credential: .keyFile(key))
        try byPassphrase.addKeySlot(.passphrase(secret("words")), kdf: testKDF)
        let fresh = try FileVaultProvider().open(
            StoreOpenRequest(configuration: configuration, credentials: { [.passphrase(secret("words"))] }))
        #expect(fresh.freshlyAuthenticated, "a passphrase given now that opened a passphrase slot is fresh")
    }

    @Test("an explicit PostgreSQL or memory request reads no settings, records nothing, and opens through its provider")
    func unrecordedStores() throws {
        let settings = folder.file("config/settings.json")
        var configuration = LockboxConfiguration(store: .postgres, vaultPath: folder.file("v.lockbox"), settingsPath: settings)
        let error = caughtError { _ = try configuration.openStore() }
        #expect(error.map { "\($0)".contains("no provider for the postgres store") } == true, "\(String(describing: error))")
        let provider = RecordingProvider()
        let opened = try configuration.openStore(providers: [provider])
        #expect(opened.location == "recorded" && provider.opened.withLock { $0 } == 1)
        configuration.store = .memory
        configuration.settingsPath = nil
        #expect(try configuration.openStore().store is MemoryStore)
        #expect(!FileManager.default.fileExists(atPath: settings.string), "nothing recorded for stores auto never chooses")
    }

    @Test("FileVault.open goes through a window holding the key, for either format, without asking for credentials")
    func windowOpensEitherFormat() throws {
        let format2 = try FileVault.create(at: folder.file("two.lockbox"), credentials: [.keyFile(key)], kdf: testKDF)
        try format2.set(secret("two"), for: item, options: ItemOptions())
        let format1 = try EncryptedFileStore.create(at: folder.file("one.lockbox"), credentials: [.keyFile(key)], kdf: testKDF)
        try format1.set(secret("one"), for: item, options: ItemOptions())
        for (path, material, expected) in [
            (folder.file("two.lockbox"), try format2.windowMaterial(), "two"),
            (folder.file("one.lockbox"), try format1.windowMaterial(), "one"),
        ] {
            let window = FakeWindow(material)
            let opened = try FileVault.open(
                at: path, window: window,
                credentials: {
                    Issue.record("no credential is asked for")
                    return []
                })
            #expect(opened.throughWindow)
            #expect(try opened.store.get(item) == secret(expected))
            #expect(window.confirmed == 1 && window.revoked == 0)
        }
    }

    @Test("a window whose keys no longer match, or that refuses, is revoked and the credentials open the vault")
    func staleWindowIsRevoked() throws {
        for path in [folder.file("two.lockbox"), folder.file("one.lockbox")] {
            let store: any FileVaultWindowMaterial
            if path == folder.file("two.lockbox") {
                store = try FileVault.create(at: path, credentials: [.keyFile(key)], kdf: testKDF)
            } else {
                store = try EncryptedFileStore.create(at: path, credentials: [.keyFile(key)], kdf: testKDF)
            }
            let material = try store.windowMaterial()
            for window in [FakeWindow(material, fingerprint: "changed since"), FakeWindow(material, accept: false)] {
                var asked = 0
                let opened = try FileVault.open(
                    at: path, window: window,
                    credentials: {
                        asked += 1
                        return [.keyFile(key)]
                    })
                #expect(!opened.throughWindow && asked == 1, "\(path)")
                #expect(window.revoked == 1, "\(path): the window is revoked")
            }
        }
    }

    @Test("no credential and no window: a clear error, not a crash")
    func noCredential() throws {
        _ = try FileVault.create(at: folder.file("v.lockbox"), credentials: [.keyFile(key)], kdf: testKDF)
        let error = caughtError { _ = try FileVault.open(at: folder.file("v.lockbox"), window: nil, credentials: { [] }) }
        #expect(error?.category == .invalidArgument)
    }

    @Test("the async openers of a configuration, a selection and a resolution open what the blocking ones do, off the caller's thread")
    func asyncOpeners() async throws {
        let path = folder.file("v.lockbox")
        let created = try await FileVault.create(at: path, credentials: [.keyFile(key)], kdf: testKDF)
        try await Vault(store: created).set("v", service: "s", account: "a")
        let settings = folder.file("settings.json")
        let configuration = LockboxConfiguration(store: .auto, vaultPath: path, settingsPath: settings, keyFile: key)
        let opened = try await configuration.openStore()
        #expect(opened.store is SQLiteVaultStore && opened.location == path.string)
        #expect(try await Vault(store: opened.asyncStore).string(service: "s", account: "a") == "v")
        #expect(try StoreSettings.load(from: settings).profiles["default"]?.storeKind == .file, "auto's choice is recorded")

        let selection = StoreSelection(request: .file, settingsPath: FilePath(), vaultPath: path)
        let resolution = try await selection.resolve()
        #expect(resolution.storeKind == .file)
        let byCredentials = try await resolution.open(credentials: [.keyFile(key)])
        #expect(try await Vault(store: byCredentials).string(service: "s", account: "a") == "v")
        let byRequest = try await resolution.open(StoreOpenRequest(configuration: configuration))
        #expect(try await Vault(store: byRequest.store).string(service: "s", account: "a") == "v")
        let missing = await caughtError { _ = try await resolution.openSecretService() }
        #expect(missing?.code == .secretServiceUnavailable, "\(String(describing: missing))")
        let wrong = await caughtError {
            _ = try await resolution.open(StoreOpenRequest(configuration: configuration, credentials: { [.passphrase(secret("nope"))] }))
        }
        #expect(wrong != nil, "a credential that opens no slot still fails when awaited")
    }

    @Test("FileVault creates either format through its one creator, and says which format a file is")
    func createsEitherFormat() throws {
        let one = folder.file("one.lockbox")
        let two = folder.file("two.lockbox")
        #expect(try FileVault.create(at: one, credentials: [.keyFile(key)], format: .one, kdf: testKDF) is EncryptedFileStore)
        #expect(try FileVault.create(at: two, credentials: [.keyFile(key)], format: .two, kdf: testKDF) is SQLiteVaultStore)
        #expect(FileVault.format(at: one) == .one && VaultFileFormat.detect(at: one) == .format1)
        #expect(FileVault.format(at: two) == .two && VaultFileFormat.detect(at: two) == .format2)
        #expect(FileVault.format(at: key) == nil && FileVault.format(at: folder.file("none")) == nil, "a key file, nothing: not a vault")
        let exists = caughtError { _ = try FileVault.create(at: one, credentials: [.keyFile(key)], format: .two, kdf: testKDF) }
        #expect(exists?.code == .vaultAlreadyExists)
        for path in [one, two] {
            #expect(try FileVault.open(at: path, credential: .keyFile(key)).keySlots().count == 1, "\(path)")
        }
    }
}
