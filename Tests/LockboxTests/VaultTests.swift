import Foundation
import Testing

@testable import Lockbox

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
