import Foundation
import Lockbox
import LockboxTesting
import SystemPackage
import Testing

@testable import LockboxCLI

/// A Secret Service provider that opens a store acting locked or unlocked, as a keyring does, or
/// fails as the real one does; it counts its openings.
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
        let keyring = FaultInjectingStore()
        keyring.actLocked(locked)
        return OpenedStore(store: keyring, location: "the Secret Service")
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
