import Foundation
import Lockbox
import SystemPackage
import Testing

@testable import LockboxCLI

/// A Secret Service as a store provider gives it: a memory store that says whether it is locked.
private struct KeyringStore: LockableSecretStore {
    let locked: Bool
    let items = MemoryStore()

    func isLocked() throws -> Bool { locked }
    var isOpenToOtherProcessesOfUser: Bool { true }
    var isReachableFromOtherProcesses: Bool { true }
    func get(_ key: ItemKey) throws -> SecretBytes? { try items.get(key) }
    func metadata(_ key: ItemKey) throws -> ItemMetadata? { try items.metadata(key) }
    func item(_ key: ItemKey) throws -> StoredItem? { try items.item(key) }
    func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws { try items.set(secret, for: key, options: options) }
    func set(_ writes: [ItemWrite]) throws { try items.set(writes) }
    func delete(_ key: ItemKey) throws -> Bool { try items.delete(key) }
    func delete(_ keys: [ItemKey]) throws -> [ItemKey] { try items.delete(keys) }
    func list(service: String?) throws -> [ItemMetadata] { try items.list(service: service) }
    func wipe(service: String) throws -> Int { try items.wipe(service: service) }
    func wipeAll() throws -> Int { try items.wipeAll() }
    func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) throws -> Bool {
        try items.set(secret, for: key, changes: changes, when: condition)
    }
    func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) throws -> Bool { try items.delete(key, ifCurrent: expected) }
}

/// A Secret Service provider that opens a keyring store, or fails as the real one does; it counts
/// its openings.
private final class FakeSecretServiceProvider: StoreProvider, @unchecked Sendable {
    let locked: Bool
    let failure: LockboxError?
    private(set) var openings = 0

    init(locked: Bool = false, failure: LockboxError? = nil) {
        (self.locked, self.failure) = (locked, failure)
    }

    var kind: StoreKind { .secretService }
    var capabilities: StoreCapabilities { [.persistent] }
    func open(_ request: StoreOpenRequest) throws -> OpenedStore {
        openings += 1
        if let failure { throw failure }
        return OpenedStore(store: KeyringStore(locked: locked), location: "the Secret Service")
    }
}

@Suite("lockbox doctor asks the store provider seam, not the Secret Service directly")
struct DoctorSeamTests {
    let configuration = LockboxConfiguration(store: .secretService, vaultPath: "/nonexistent/v.lockbox")

    func check(_ provider: (any StoreProvider)?, bus: String = "") throws -> (names: [String: Bool], problem: LockboxError?) {
        let result = try Doctor.secretServiceChecks(provider: provider, configuration: configuration, busAddress: bus)
        return (Dictionary(result.checks.map { ($0.name, $0.ok) }, uniquingKeysWith: { $1 }), result.problem)
    }

    @Test("an unlocked keyring: every part ok, opened once through the provider")
    func unlocked() throws {
        let provider = FakeSecretServiceProvider()
        let result = try check(provider, bus: "unix:path=/run/user/1/bus")
        #expect(provider.openings == 1)
        #expect(result.names == ["D-Bus session bus": true, "Secret Service provider": true, "default collection": true])
        #expect(result.problem == nil)
    }

    @Test("a locked keyring is the problem, with its own error")
    func locked() throws {
        let result = try check(FakeSecretServiceProvider(locked: true))
        #expect(result.names["default collection"] == false)
        #expect(result.problem?.code == .keyringLocked)
    }

    @Test("the provider's failures name the part that is missing")
    func failures() throws {
        let noBus = try check(FakeSecretServiceProvider(failure: .noSessionBus(detail: "none")))
        #expect(noBus.names == ["D-Bus session bus": false] && noBus.problem?.code == .noSessionBus)
        let noService = try check(FakeSecretServiceProvider(failure: .secretServiceUnavailable(detail: "nobody answers")))
        #expect(noService.names == ["D-Bus session bus": true, "Secret Service provider": false])
        #expect(noService.problem?.code == .secretServiceUnavailable)
        let timeout = try check(FakeSecretServiceProvider(failure: .secretServiceTimeout(operation: "connect", seconds: 5)))
        #expect(timeout.names == ["Secret Service": false] && timeout.problem?.code == .secretServiceTimeout)
        let none = try check(nil)
        #expect(none.names["Secret Service provider"] == false && none.problem?.code == .secretServiceUnavailable)
    }
}
