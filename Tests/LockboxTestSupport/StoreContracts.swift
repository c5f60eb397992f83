import Foundation
import Testing

@testable import Lockbox

/// The checks every store must pass.
enum StoreContract {
    static func roundTrip(_ name: String, _ store: any SecretStore) throws {
        do {
            let vault = Vault(store: store)
            #expect(try vault.get(service: "svc", account: "alice") == nil, "\(name)")
            try vault.set("token-1", service: "svc", account: "alice", kind: .token)
            #expect(try vault.string(service: "svc", account: "alice") == "token-1", "\(name)")
            let first = try #require(try vault.metadata(service: "svc", account: "alice"))
            try vault.set("token-2", service: "svc", account: "alice", kind: .token, label: "Alice's token")
            let second = try #require(try vault.metadata(service: "svc", account: "alice"))
            #expect(try vault.string(service: "svc", account: "alice") == "token-2", "\(name)")
            #expect(second.created == first.created, "\(name): creation time is kept on overwrite")
            #expect(second.modified >= first.modified, "\(name)")
            #expect(second.label == "Alice's token", "\(name)")
            #expect(first.label == "Password for 'alice' on 'svc'", "\(name)")
            #expect(try vault.delete(service: "svc", account: "alice"), "\(name)")
            #expect(try !vault.delete(service: "svc", account: "alice"), "\(name)")
            #expect(try vault.get(service: "svc", account: "alice") == nil, "\(name)")
        }
    }

    static func binary(_ name: String, _ store: any SecretStore) throws {
        do {
            let vault = Vault(store: store)
            let bytes: [UInt8] = (0...255).map { UInt8($0) } + [0, 0, 10, 13]
            try vault.set(SecretBytes(copying: bytes), service: "bin", account: "blob")
            let read = try vault.require(service: "bin", account: "blob")
            #expect(read.withUnsafeBytes { Array($0) } == bytes, "\(name)")
            #expect(throws: LockboxError.self) { try vault.string(service: "bin", account: "blob") }
        }
    }

    static func listAndWipe(_ name: String, _ store: any SecretStore) throws {
        do {
            let vault = Vault(store: store)
            try vault.set("s1", service: "b", account: "2", attributes: ["env": "prod"])
            try vault.set("s2", service: "a", account: "1", kind: .deviceID)
            try vault.set("s3", service: "b", account: "1")
            let all = try vault.list()
            #expect(all.map(\.key.description) == ["1@a", "1@b", "2@b"], "\(name)")
            #expect(all.first?.kind == .deviceID, "\(name)")
            #expect(all.last?.attributes == ["env": "prod"], "\(name)")
            #expect(try vault.list(service: "b").count == 2, "\(name)")
            let encoded = String(decoding: try JSONEncoder().encode(all), as: UTF8.self)
            for value in ["s1", "s2", "s3"] { #expect(!encoded.contains("\"\(value)\""), "\(name)") }
            #expect(try vault.wipe(service: "b") == 2, "\(name)")
            #expect(try vault.list().count == 1, "\(name)")
            #expect(try vault.wipe(service: "nothing") == 0, "\(name)")
            try vault.set("s4", service: "c", account: "1")
            #expect(try vault.wipeAll() == 2, "\(name)")
            #expect(try vault.list().isEmpty, "\(name)")
        }
    }

    static func validation(_ name: String, _ store: any SecretStore) throws {
        do {
            let vault = Vault(store: store)
            expectError(.invalidArgument("the service must not be empty")) { try vault.set("x", service: "", account: "a") }
            expectError(.invalidArgument("the account must not be empty")) { try vault.get(service: "s", account: "") }
            expectError(.invalidArgument("the service must not contain a NUL character")) {
                try vault.set("x", service: "a\u{0}b", account: "a")
            }
            let long = String(repeating: "x", count: ItemLimits.maxNameBytes + 1)
            #expect(throws: LockboxError.self, "\(name)") { try vault.set("x", service: long, account: "a") }
            #expect(try vault.list().isEmpty, "\(name)")
        }
    }

    static func concurrentThreads(_ name: String, _ store: any SecretStore) async throws {
        do {
            let vault = Vault(store: store)
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        for index in 0..<10 {
                            try? await vault.set("v\(worker)-\(index)", service: "threads", account: "\(worker)-\(index)")
                            _ = try? await vault.get(service: "threads", account: "\(worker)-\(index)")
                        }
                    }
                }
            }
            #expect(try await vault.list(service: "threads").count == 80, "\(name)")
            #expect(try await vault.string(service: "threads", account: "7-9") == "v7-9", "\(name)")
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
        try vault.set(secret("v5"), service: "rot", account: "db", changes: ItemChanges(), keepingPreviousFor: .seconds(2))
        #expect(try vault.previous(service: "rot", account: "db")?.stringValue() == "v4", "\(name)")
        Thread.sleep(forTimeInterval: 2.2)
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
