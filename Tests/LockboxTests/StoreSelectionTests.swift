import Foundation
import SystemPackage
import Testing
@testable import Lockbox
import LockboxSecretService
import LockboxWindows

/// A Secret Service provider that is never reachable: the "no session bus" a service or a
/// container has.
struct UnreachableSecretService: SecretServiceProvider {
    func connect() throws -> any LockableSecretStore { throw LockboxError.noSessionBus(detail: "none in this test") }
}

/// StoreSelection, the one resolver, where no keyring is needed (the keyring cases are in
/// SecretServiceTests).
@Suite("Store selection")
struct StoreSelectionTests {
    let folder: TemporaryFolder
    let vaultPath: FilePath
    let settingsPath: FilePath
    let key: FilePath

    init() throws {
        folder = try TemporaryFolder()
        vaultPath = folder.file("vault.lockbox")
        settingsPath = folder.file("config/settings.json")
        key = folder.file("k.key")
        try KeyFile.generate(at: key)
        _ = try EncryptedFileStore.create(at: vaultPath, credentials: [.keyFile(key)])
    }

    func selection(_ request: StoreRequest, _ provider: (any SecretServiceProvider)?) -> StoreSelection {
        StoreSelection(request: request, profile: "p", settingsPath: settingsPath, vaultPath: vaultPath, secretService: provider)
    }

    @Test("auto without a reachable Secret Service is the file vault, recorded only once it opened")
    func autoFallsBackToFile() throws {
        let resolution = try selection(.auto, UnreachableSecretService()).resolve()
        #expect(resolution.backend == .file)
        #expect(resolution.isNewChoice)
        #expect(try BackendSettings.load(from: settingsPath).profiles["p"] == nil, "resolving records nothing")
        _ = try resolution.open(credentials: [.keyFile(key)])
        #expect(try BackendSettings.load(from: settingsPath).profiles["p"]?.backend == .file)
        #expect(try SessionWindow.scope(for: resolution) == SessionWindow.scope(forVaultAt: vaultPath))
        // A program without Secret Service support resolves the same way.
        #expect(try selection(.auto, nil).resolve().backend == .file)
    }

    @Test("a recorded store that is not available stops, never switches to another, empty store")
    func recordedStoreMissing() throws {
        try BackendSettings.record(.secretService, for: "p", reason: "requested explicitly", at: settingsPath)
        let resolution = try selection(.auto, UnreachableSecretService()).resolve()
        #expect(resolution.backend == .secretService)
        #expect(try SessionWindow.scope(for: resolution) == SessionWindow.scope(secretServiceProfile: "p"))
        do {
            _ = try resolution.open(credentials: [.keyFile(key)])
            Issue.record("opened a store although the recorded one is unreachable")
        } catch let error as LockboxError {
            guard case let .recordedBackendUnavailable(backend, _, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(backend == "secret-service")
        }
        // The file vault recorded, then gone: the same rule.
        try BackendSettings.record(.file, for: "q", reason: "requested explicitly", at: settingsPath)
        try FileManager.default.removeItem(atPath: vaultPath.string)
        var other = selection(.auto, UnreachableSecretService())
        other.profile = "q"
        #expect(throws: LockboxError.self) { _ = try other.resolve().open(credentials: [.keyFile(key)]) }
        do {
            _ = try other.resolve().open(credentials: [.keyFile(key)])
        } catch let error as LockboxError {
            if case .recordedBackendUnavailable = error {} else { Issue.record("unexpected \(error)") }
        }
    }

    @Test("an explicit request wins over the recorded choice, and does not change it")
    func explicitRequest() throws {
        try BackendSettings.record(.secretService, for: "p", reason: "requested explicitly", at: settingsPath)
        let resolution = try selection(.file, UnreachableSecretService()).resolve()
        #expect(resolution.backend == .file && !resolution.isNewChoice)
        _ = try resolution.open(credentials: [.keyFile(key)])
        #expect(try BackendSettings.load(from: settingsPath).profiles["p"]?.backend == .secretService)
    }
}
