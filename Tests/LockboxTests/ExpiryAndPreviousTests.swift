import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// Items that expire and the previous version kept through a rotation, over the memory store and
/// both file-vault formats (the Secret Service and PostgreSQL run the same checks in their
/// suites: `SecretServiceTests`, `PostgresStoreTests`).
@Suite("Expiry and previous versions")
struct ExpiryAndPreviousTests {
    static func stores() throws -> [(String, any SecretStore, AnyObject?)] {
        let format1 = try KeyFileVault()
        let folder = try TemporaryFolder()
        let key = folder.file("v.key")
        try KeyFile.generate(at: key)
        let format2 = try SQLiteVaultStore.create(at: folder.file("v.lockbox"), credentials: [.keyFile(key)], kdf: testKDF)
        return [("memory", MemoryStore(), nil), ("format 1", format1.store, format1.folder), ("format 2", format2, folder)]
    }

    @Test("an expired item is refused with its code, read with allowExpired, listed with its expiry, removed by wipeExpired")
    func expiry() async throws {
        for (name, store, keepAlive) in try Self.stores() {
            defer { withExtendedLifetime(keepAlive) {} }
            try ExpiryContract.expiry(name, store)
        }
    }

    @Test("a rotation keeping the previous value: both readable in the grace period, one after; restore swaps them")
    func previous() throws {
        for (name, store, keepAlive) in try Self.stores() {
            defer { withExtendedLifetime(keepAlive) {} }
            try ExpiryContract.previous(name, store)
        }
    }

    @Test("expiry and the previous version survive reopening a format-2 vault; old readers' view documented")
    func persisted() throws {
        let folder = try TemporaryFolder()
        let key = folder.file("v.key")
        try KeyFile.generate(at: key)
        let path = folder.file("v.lockbox")
        let expires = Date(timeIntervalSince1970: 4_102_444_800)
        do {
            let vault = Vault(store: try SQLiteVaultStore.create(at: path, credentials: [.keyFile(key)], kdf: testKDF))
            try vault.set(secret("one"), service: "s", account: "a", changes: ItemChanges(expires: expires))
            try vault.set(
                secret("two"), service: "s", account: "a", changes: ItemChanges(expires: expires), keepingPreviousFor: .seconds(600))
        }
        let reopened = try SQLiteVaultStore.open(at: path, credentials: [.keyFile(key)])
        let vault = Vault(store: reopened)
        #expect(try vault.metadata(service: "s", account: "a")?.expires == expires)
        #expect(try vault.previous(service: "s", account: "a")?.stringValue() == "one")
        // The store itself lists the companion (what a reader without this version's rules sees),
        // marked as one; the vault leaves it out.
        let raw = try reopened.list(service: "s")
        #expect(raw.count == 2)
        #expect(raw.contains { $0.account == "lockbox.previous:a" && $0.isCompanion })
        #expect(try vault.list(service: "s").map(\.account) == ["a"])
    }

    @Test("bad input is refused: a grace period that is not positive, an expiry out of range")
    func badInput() throws {
        let vault = Vault(store: MemoryStore())
        try vault.set("v", service: "s", account: "a")
        for grace in [Duration.zero, .seconds(-5), .seconds(Int64.max)] {
            #expect(
                caughtError { try vault.set(secret("w"), service: "s", account: "a", changes: ItemChanges(), keepingPreviousFor: grace) }?
                    .code
                    == .invalidArgument, "grace \(grace)")
        }
        for expires in [Date(timeIntervalSince1970: .nan), Date(timeIntervalSince1970: 1e16), Date(timeIntervalSince1970: -.infinity)] {
            #expect(
                caughtError { try vault.set(secret("w"), service: "s", account: "a", changes: ItemChanges(expires: expires)) }?.code
                    == .invalidArgument)
        }
        #expect(try vault.get(service: "s", account: "a")?.stringValue() == "v", "nothing refused was stored")
    }

    @Test("a malformed reserved attribute: corrupt in the file vault, the strictest reading in the Secret Service")
    func malformedReservedAttributes() throws {
        #expect(throws: Never.self) { _ = try ReservedAttributes.decode { $0 == "expires" ? "1700000000000" : nil }.get() }
        for bad in ["", "1e3", "nan", "99999999999999999999", "-1x", " 5"] {
            guard case .failure = ReservedAttributes.decode({ $0 == "expires" ? bad : nil }) else {
                Issue.record("'\(bad)' was read as an expiry")
                continue
            }
        }
        guard case .failure = ReservedAttributes.decode({ $0 == "previous" ? "NOT-HEX" : nil }) else {
            Issue.record("a malformed previous-version ID was accepted")
            return
        }
    }
}
