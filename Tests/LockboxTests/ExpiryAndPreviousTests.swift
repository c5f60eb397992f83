import Foundation
import SystemPackage
import Testing

@testable import Lockbox

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

/// The checks every store passes, shared with the Secret Service and PostgreSQL suites.
enum ExpiryContract {
    static func expiry(_ name: String, _ store: any SecretStore) throws {
        let vault = Vault(store: store)
        let past = Date().addingTimeInterval(-5)
        let future = Date().addingTimeInterval(3600)
        try vault.set(secret("old"), service: "exp", account: "gone", changes: ItemChanges(expires: past))
        try vault.set(secret("new"), service: "exp", account: "live", changes: ItemChanges(expires: future))
        try vault.set(secret("forever"), service: "exp", account: "plain", changes: ItemChanges())
        let error = caughtError { try vault.get(service: "exp", account: "gone") }
        #expect(error?.code == .itemExpired, "\(name)")
        if case .itemExpired(let service, let account, let expired)? = error {
            #expect(service == "exp" && account == "gone" && abs(expired.timeIntervalSince(past)) < 0.01, "\(name)")
        }
        #expect(try vault.get(service: "exp", account: "gone", allowExpired: true)?.stringValue() == "old", "\(name)")
        #expect(try vault.get(service: "exp", account: "live")?.stringValue() == "new", "\(name)")
        let listed = try vault.list(service: "exp")
        #expect(listed.map(\.account) == ["gone", "live", "plain"], "\(name)")
        #expect(
            listed.first { $0.account == "live" }.map { abs(($0.expires ?? .distantPast).timeIntervalSince(future)) < 0.01 } == true,
            "\(name)")
        #expect(listed.first { $0.account == "plain" }?.expires == nil, "\(name)")
        // A rotation without an expiry stores a value that does not expire.
        try vault.set(secret("renewed"), service: "exp", account: "live", changes: ItemChanges())
        #expect(try vault.metadata(service: "exp", account: "live")?.expires == nil, "\(name)")
        #expect(try vault.wipeExpired(service: "exp") == [ItemKey(service: "exp", account: "gone")], "\(name)")
        #expect(try vault.list(service: "exp").map(\.account) == ["live", "plain"], "\(name)")
        #expect(try vault.wipeExpired() == [], "\(name)")
        _ = try vault.wipe(service: "exp")
    }

    static func previous(_ name: String, _ store: any SecretStore) throws {
        let vault = Vault(store: store)
        try vault.set(secret("v1"), service: "rot", account: "db", kind: .password, label: "DB")
        #expect(try vault.previous(service: "rot", account: "db") == nil, "\(name): nothing kept yet")
        #expect(
            try vault.set(secret("v2"), service: "rot", account: "db", changes: ItemChanges(), keepingPreviousFor: .seconds(600)), "\(name)"
        )
        #expect(try vault.get(service: "rot", account: "db")?.stringValue() == "v2", "\(name)")
        #expect(try vault.previous(service: "rot", account: "db")?.stringValue() == "v1", "\(name)")
        let metadata = try vault.metadata(service: "rot", account: "db")
        #expect(metadata?.previousUntil != nil && metadata?.kind == .password && metadata?.label == "DB", "\(name): metadata kept")
        #expect(try vault.list(service: "rot").map(\.account) == ["db"], "\(name): the previous value is not an item of its own")
        #expect(try vault.list(service: "rot").first?.previousUntil != nil, "\(name)")

        // Another rotation keeping the previous: only one previous value, the one just replaced.
        try vault.set(secret("v3"), service: "rot", account: "db", changes: ItemChanges(), keepingPreviousFor: .seconds(600))
        #expect(try vault.previous(service: "rot", account: "db")?.stringValue() == "v2", "\(name)")
        #expect(try store.list(service: "rot").count == 2, "\(name): one item, one previous value")

        // Restore swaps them, so it can be undone.
        #expect(try vault.restorePrevious(service: "rot", account: "db"), "\(name)")
        #expect(try vault.get(service: "rot", account: "db")?.stringValue() == "v2", "\(name)")
        #expect(try vault.previous(service: "rot", account: "db")?.stringValue() == "v3", "\(name)")

        // A rotation without a grace period drops the previous value.
        try vault.set(secret("v4"), service: "rot", account: "db", changes: ItemChanges())
        #expect(try vault.previous(service: "rot", account: "db") == nil, "\(name)")
        #expect(caughtError { try vault.restorePrevious(service: "rot", account: "db") }?.code == .noPreviousVersion, "\(name)")
        #expect(try store.list(service: "rot").count == 1, "\(name): the dropped value is gone from the store")

        // The grace period ends: only the new value is readable, and wipeExpired removes the old.
        try vault.set(secret("v5"), service: "rot", account: "db", changes: ItemChanges(), keepingPreviousFor: .milliseconds(300))
        #expect(try vault.previous(service: "rot", account: "db")?.stringValue() == "v4", "\(name)")
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try vault.previous(service: "rot", account: "db") == nil, "\(name): the grace period ended")
        #expect(try vault.get(service: "rot", account: "db")?.stringValue() == "v5", "\(name)")
        #expect(try vault.list(service: "rot").first?.previousUntil == nil, "\(name)")
        #expect(try vault.wipeExpired(service: "rot") == [], "\(name): the item itself does not expire")
        #expect(try store.list(service: "rot").count == 1, "\(name): the ended previous value was removed")

        // Deleting the item removes its previous value too.
        try vault.set(secret("v6"), service: "rot", account: "db", changes: ItemChanges(), keepingPreviousFor: .seconds(600))
        #expect(try vault.delete(service: "rot", account: "db"), "\(name)")
        #expect(try store.list(service: "rot").isEmpty, "\(name)")
        #expect(caughtError { try vault.restorePrevious(service: "rot", account: "db") }?.code == .itemNotFound, "\(name)")

        // The conditions hold: a rotation over a value that changed meanwhile writes nothing.
        try vault.set(secret("a"), service: "rot", account: "cas")
        #expect(
            try !vault.set(
                secret("b"), service: "rot", account: "cas", changes: ItemChanges(), when: .ifCurrent(secret("zzz")),
                keepingPreviousFor: .seconds(60)), "\(name)")
        #expect(try vault.get(service: "rot", account: "cas")?.stringValue() == "a", "\(name)")
        #expect(try vault.previous(service: "rot", account: "cas") == nil, "\(name)")
        // An item of the user's own at the previous value's address is never overwritten.
        try vault.set(secret("mine"), service: "rot", account: "lockbox.previous:cas")
        #expect(
            caughtError {
                try vault.set(secret("c"), service: "rot", account: "cas", changes: ItemChanges(), keepingPreviousFor: .seconds(60))
            }?
            .code == .invalidArgument, "\(name)")
        #expect(try vault.get(service: "rot", account: "lockbox.previous:cas")?.stringValue() == "mine", "\(name)")
        #expect(try vault.delete(service: "rot", account: "cas"), "\(name)")
        #expect(
            try vault.get(service: "rot", account: "lockbox.previous:cas")?.stringValue() == "mine", "\(name): not taken for a companion")
        _ = try vault.wipe(service: "rot")
    }
}
