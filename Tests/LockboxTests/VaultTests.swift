import Foundation
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// The `SecretStore` contract, run against every store so they behave the same. The Secret
/// Service runs the same checks in `SecretServiceTests` (serialised: the keyring is shared).
@Suite("Vault over every store")
struct VaultContractTests {
    static func stores() throws -> [(String, any SecretStore, AnyObject?)] {
        let fileVault = try KeyFileVault()
        return [("memory", MemoryStore(), nil), ("encrypted file", fileVault.store, fileVault.folder)]
    }

    @Test("set, get, overwrite, delete")
    func roundTrip() throws {
        for (name, store, keepAlive) in try Self.stores() {
            defer { withExtendedLifetime(keepAlive) {} }
            try StoreContract.roundTrip(name, store)
        }
    }

    @Test("binary secrets survive byte for byte")
    func binary() throws {
        for (name, store, keepAlive) in try Self.stores() {
            defer { withExtendedLifetime(keepAlive) {} }
            try StoreContract.binary(name, store)
        }
    }

    @Test("list returns metadata only, filtered and sorted; wipe removes by service or all")
    func listAndWipe() throws {
        for (name, store, keepAlive) in try Self.stores() {
            defer { withExtendedLifetime(keepAlive) {} }
            try StoreContract.listAndWipe(name, store)
        }
    }

    @Test("invalid addresses are refused with a reason")
    func validation() throws {
        for (name, store, keepAlive) in try Self.stores() {
            defer { withExtendedLifetime(keepAlive) {} }
            try StoreContract.validation(name, store)
        }
    }

    @Test("many threads at once lose nothing")
    func concurrentThreads() async throws {
        for (name, store, keepAlive) in try Self.stores() {
            defer { withExtendedLifetime(keepAlive) {} }
            try await StoreContract.concurrentThreads(name, store)
        }
    }
}
