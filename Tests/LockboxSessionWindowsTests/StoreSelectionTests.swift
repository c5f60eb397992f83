import Foundation
import LockboxSecretService
import LockboxSessionWindows
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

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
        #expect(resolution.storeKind == .file)
        #expect(resolution.isNewChoice)
        #expect(try StoreSettings.load(from: settingsPath).profiles["p"] == nil, "resolving records nothing")
        _ = try resolution.open(credentials: [.keyFile(key)])
        #expect(try StoreSettings.load(from: settingsPath).profiles["p"]?.storeKind == .file)
        #expect(try SessionWindow.scope(for: resolution) == SessionWindow.scope(forVaultAt: vaultPath))
        // A program without Secret Service support resolves the same way.
        #expect(try selection(.auto, nil).resolve().storeKind == .file)
    }

    @Test("a recorded store that is not available stops, never switches to another, empty store")
    func recordedStoreMissing() throws {
        try StoreSettings.record(.secretService, for: "p", reason: "requested explicitly", at: settingsPath)
        let resolution = try selection(.auto, UnreachableSecretService()).resolve()
        #expect(resolution.storeKind == .secretService)
        #expect(try SessionWindow.scope(for: resolution) == SessionWindow.scope(secretServiceProfile: "p"))
        do {
            _ = try resolution.open(credentials: [.keyFile(key)])
            Issue.record("opened a store although the recorded one is unreachable")
        } catch let error as LockboxError {
            guard case .recordedStoreUnavailable(let backend, _, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(backend == "secret-service")
        }
        // The file vault recorded, then gone: the same rule.
        try StoreSettings.record(.file, for: "q", reason: "requested explicitly", at: settingsPath)
        try FileManager.default.removeItem(atPath: vaultPath.string)
        var other = selection(.auto, UnreachableSecretService())
        other.profile = "q"
        #expect(throws: LockboxError.self) { _ = try other.resolve().open(credentials: [.keyFile(key)]) }
        do {
            _ = try other.resolve().open(credentials: [.keyFile(key)])
        } catch let error as LockboxError {
            if case .recordedStoreUnavailable = error {} else { Issue.record("unexpected \(error)") }
        }
    }

    @Test("an explicit request wins over the recorded choice, and does not change it")
    func explicitRequest() throws {
        try StoreSettings.record(.secretService, for: "p", reason: "requested explicitly", at: settingsPath)
        let resolution = try selection(.file, UnreachableSecretService()).resolve()
        #expect(resolution.storeKind == .file && !resolution.isNewChoice)
        _ = try resolution.open(credentials: [.keyFile(key)])
        #expect(try StoreSettings.load(from: settingsPath).profiles["p"]?.storeKind == .secretService)
    }

    @Test("the settings' time is read without a formatter exactly as the ISO 8601 formatters read it")
    func settingsTimeFastPath() throws {
        let formatter = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var generator = SystemRandomNumberGenerator()
        // Leap days, month and year ends, and random times from 1970 to 2400.
        var texts = [
            "1970-01-01T00:00:00.000Z", "2000-02-29T23:59:59.999Z", "2024-02-29T12:00:00.001Z", "2026-12-31T23:59:59.500Z",
            "2100-03-01T00:00:00.000Z", "2399-12-31T00:00:00.183Z",
        ]
        for _ in 0..<2000 {
            let milliseconds = Int64.random(in: 0..<13_569_465_600_000, using: &generator)
            let seconds = Date(timeIntervalSince1970: Double(milliseconds / 1000)).formatted(Date.ISO8601FormatStyle())
            let fraction = String(milliseconds % 1000)
            texts.append(String(seconds.dropLast()) + "." + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z")
        }
        for text in texts {
            let slow = try Date(text, strategy: formatter)
            let expected = Date(timeIntervalSince1970: (slow.timeIntervalSince1970 * 1000).rounded() / 1000)
            #expect(millisecondTimestampDate(text) == expected, "\(text)")
        }
        // Anything else is left to the formatters (which decide what is valid, as before).
        for text in [
            "2026-02-30T00:00:00.000Z", "2026-11-21T05:57:03Z", "2026-11-21T05:57:03.18Z", "2026-11-21T24:00:00.000Z",
            "2026-11-21T05:57:03.183+01:00", "2026-11-21 05:57:03.183Z", "2026-11-21T05:57:03.183Z ", "１９７０-01-01T00:00:00.000Z",
        ] {
            #expect(millisecondTimestampDate(text) == nil, "\(text)")
        }
    }
}
