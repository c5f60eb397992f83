import Foundation
import Lockbox
import LockboxSecretService
import SystemPackage

/// What every example shares: a narrated run on a throwaway file vault (or on gnome-keyring when
/// it is running and LOCKBOX_EXAMPLE_BACKEND=secret-service), exiting non-zero on the first step
/// that does not behave as described.
public final class ExampleRun: @unchecked Sendable {
    public let name: String
    public let folder: FilePath
    public let store: any SecretStore
    /// Where the example keeps PIN records: the same file vault, or with the Secret Service a
    /// key-file vault of their own, since in the Secret Service every process of the user could
    /// read a PIN's hash and reset its failure count (``PinGuard`` refuses it; SECURITY.md).
    public let pinStore: any SecretStore
    /// A store handle as a restarted app would open it.
    public let reopen: () throws -> any SecretStore
    private var stepNumber = 0

    public init(_ name: String) {
        self.name = name
        ProcessHardening.apply()
        folder = FilePath(NSTemporaryDirectory()).appending("lockbox-example-\(UUID().uuidString.prefix(8))")
        do {
            // The store is chosen as every Lockbox program chooses it: by StoreSelection.
            let request: StoreRequest =
                ProcessInfo.processInfo.environment["LOCKBOX_EXAMPLE_BACKEND"] == "secret-service" ? .secretService : .file
            let key = folder.appending("app.key")
            let vault = folder.appending("app.lockbox")
            let selection = StoreSelection(
                request: request, profile: "example", settingsPath: folder.appending("settings.json"),
                vaultPath: vault, secretService: SecretServiceStoreProvider())
            let resolution = try selection.resolve()
            if resolution.storeKind == .file {
                try KeyFile.generate(at: key)
                _ = try FileVault.create(at: vault, credentials: [.keyFile(key)])
            }
            let opened = try resolution.open(credentials: [.keyFile(key)])
            store = opened
            reopen = { try resolution.open(credentials: [.keyFile(key)]) }
            switch resolution.storeKind {
            case .secretService:
                let pinKey = folder.appending("pins.key")
                try KeyFile.generate(at: pinKey)
                pinStore = try FileVault.create(at: folder.appending("pins.lockbox"), credentials: [.keyFile(pinKey)])
                print("\(name) — on the Secret Service (gnome-keyring); PINs in an encrypted file vault in \(folder.string)")
            case .file, .postgres, .memory:
                pinStore = opened
                print("\(name) — on an encrypted file vault in \(folder.string)")
            }
        } catch {
            FileHandle.standardError.write(Data("\(name): could not set up a store: \(error)\n".utf8))
            exit(1)
        }
    }

    /// Narrates a step.
    public func step(_ text: String) {
        stepNumber += 1
        print("\(stepNumber). \(text)")
    }

    /// A detail under the current step.
    public func say(_ text: String) { print("   \(text)") }

    /// Fails the example (exit 1) unless `condition` holds.
    public func expect(_ condition: @autoclosure () throws -> Bool, _ what: String) {
        do {
            if try condition() { return }
            fail("expected \(what)")
        } catch {
            fail("\(what): \(error)")
        }
    }

    /// Runs `body`, which must throw an error matching `matches`; returns that error.
    @discardableResult
    public func expectError(_ what: String, matching matches: (LockboxError) -> Bool, _ body: () throws -> Void) -> LockboxError? {
        do {
            try body()
            fail("expected an error: \(what)")
        } catch let error as LockboxError where matches(error) {
            return error
        } catch {
            fail("\(what): unexpected \(error)")
        }
    }

    public func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("\(name): step \(stepNumber) did not behave as described: \(message)\n".utf8))
        cleanUp()
        exit(1)
    }

    /// Removes the throwaway vault; on the Secret Service, the example's service's items.
    public func finish(services: [String]) {
        for service in services { _ = try? store.wipe(service: service) }
        cleanUp()
        print("\(name): every step behaved as described.")
    }

    private func cleanUp() { try? FileManager.default.removeItem(atPath: folder.string) }
}

/// A PIN "typed twice" by the user in the example.
public func enterTwice(_ pin: String, _ confirmation: String) -> SecretBytes? {
    pin == confirmation ? SecretBytes(utf8: pin) : nil
}
