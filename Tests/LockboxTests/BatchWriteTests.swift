import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

@Suite("Batch writes")
struct BatchWriteTests {
    /// The vault's generation counter: one more for every rewrite of the file.
    static func generation(_ fixture: KeyFileVault) throws -> UInt64 {
        try fixture.bytes().withUnsafeBytes { try VaultHeader.parse($0) }.0.generation
    }

    @Test("a batch is one rewrite of the vault file, and reads back item by item")
    func oneRewrite() throws {
        let fixture = try KeyFileVault()
        try fixture.store.set(SecretBytes(utf8: "before"), for: ItemKey(service: "api", account: "item-7"), options: ItemOptions())
        let created = try #require(try fixture.store.metadata(ItemKey(service: "api", account: "item-7"))?.created)
        let before = try Self.generation(fixture)
        let writes = (0..<1_200).map {
            ItemWrite(
                SecretBytes(utf8: "token-\($0)"), for: ItemKey(service: "api", account: "item-\($0)"),
                options: ItemOptions(kind: .token, attributes: ["n": "\($0)"]))
        }
        try fixture.store.set(writes)
        #expect(try Self.generation(fixture) == before + 1, "one rewrite for 1,200 items")
        let reopened = try fixture.reopen()
        #expect(try reopened.list(service: "api").count == 1_200)
        #expect(try Vault(store: reopened).string(service: "api", account: "item-1199") == "token-1199")
        let seven = try #require(try reopened.item(ItemKey(service: "api", account: "item-7")))
        #expect(seven.secret == SecretBytes(utf8: "token-7") && seven.metadata.kind == .token && seven.metadata.attributes == ["n": "7"])
        #expect(seven.metadata.created == created, "replacing keeps the creation time, as set does")
    }

    @Test("an invalid write anywhere in a batch means nothing is written")
    func validatedFirst() throws {
        let fixture = try KeyFileVault()  // kept alive: its folder goes with it
        let stores: [any SecretStore] = [fixture.store, MemoryStore()]
        for store in stores {
            let tooLong = String(repeating: "a", count: 70_000)
            let writes = [
                ItemWrite(SecretBytes(utf8: "one"), for: ItemKey(service: "s", account: "first")),
                ItemWrite(SecretBytes(utf8: "two"), for: ItemKey(service: "s", account: tooLong)),
            ]
            #expect(throws: LockboxError.self) { try store.set(writes) }
            #expect(try store.list(service: nil).isEmpty, "\(type(of: store)): nothing written")
        }
    }

    @Test("later writes to the same address win, as with separate calls")
    func lastWriteWins() throws {
        let fixture = try KeyFileVault()
        let key = ItemKey(service: "s", account: "a")
        try fixture.store.set([ItemWrite(SecretBytes(utf8: "first"), for: key), ItemWrite(SecretBytes(utf8: "second"), for: key)])
        #expect(try fixture.reopen().get(key) == SecretBytes(utf8: "second"))
    }

    @Test("a transfer of more than one batch copies every item, verified, in a rewrite per batch")
    func transferInBatches() throws {
        let source = MemoryStore()
        let count = Transfer.batchSize * 2 + 17
        try source.set((0..<count).map { ItemWrite(SecretBytes(utf8: "v\($0)"), for: ItemKey(service: "bulk", account: "a\($0)")) })
        let destination = try KeyFileVault()
        let before = try Self.generation(destination)
        var progress: [Int] = []
        let report = try Transfer.run(from: source, to: destination.store) { done, _ in progress.append(done) }
        #expect(report.copied.count == count)
        #expect(try Self.generation(destination) == before + 3, "three batches, three rewrites")
        #expect(progress == Array(1...count))
        #expect(try destination.reopen().get(ItemKey(service: "bulk", account: "a\(count - 1)")) == SecretBytes(utf8: "v\(count - 1)"))
        // A re-run finds everything already there and writes nothing.
        let again = try Transfer.run(from: source, to: destination.store)
        #expect(again.alreadyPresent.count == count && again.copied.isEmpty)
        #expect(try Self.generation(destination) == before + 3)
    }

    @Test("keep-both never gives an incoming copy an address another incoming item is copied to")
    func keepBothInOneBatch() throws {
        let source = MemoryStore()
        let destination = MemoryStore()
        try source.set(SecretBytes(utf8: "incoming alice"), for: ItemKey(service: "s", account: "alice"), options: ItemOptions())
        try source.set(
            SecretBytes(utf8: "a different item"), for: ItemKey(service: "s", account: "alice (imported 1)"), options: ItemOptions())
        try destination.set(SecretBytes(utf8: "local alice"), for: ItemKey(service: "s", account: "alice"), options: ItemOptions())
        let report = try Transfer.run(from: source, to: destination, onConflict: .keepBoth)
        let vault = Vault(store: destination)
        #expect(report.keptBoth[ItemKey(service: "s", account: "alice")] == ItemKey(service: "s", account: "alice (imported 2)"))
        #expect(try vault.string(service: "s", account: "alice") == "local alice")
        #expect(try vault.string(service: "s", account: "alice (imported 1)") == "a different item")
        #expect(try vault.string(service: "s", account: "alice (imported 2)") == "incoming alice")
    }
}

@Suite("Batch removal")
struct BatchRemovalTests {
    @Test("a batch delete is one rewrite and reports which keys held items")
    func oneRewrite() throws {
        let fixture = try KeyFileVault()
        try fixture.store.set((0..<50).map { ItemWrite(SecretBytes(utf8: "v\($0)"), for: ItemKey(service: "s", account: "a\($0)")) })
        let before = try BatchWriteTests.generation(fixture)
        let keys = (0..<50).map { ItemKey(service: "s", account: "a\($0)") } + [ItemKey(service: "s", account: "missing")]
        let removed = try fixture.store.delete(keys)
        #expect(removed.count == 50 && !removed.contains(ItemKey(service: "s", account: "missing")))
        #expect(try BatchWriteTests.generation(fixture) == before + 1)
        #expect(try fixture.reopen().list(service: nil).isEmpty)
        #expect(try fixture.store.delete([ItemKey(service: "s", account: "missing")]).isEmpty)
        #expect(try BatchWriteTests.generation(fixture) == before + 1, "nothing removed, nothing written")
    }

    @Test("moving out of a file vault removes the sources in one rewrite per batch")
    func moveIsLinear() throws {
        let source = try KeyFileVault()
        let count = Transfer.batchSize + 100
        try source.store.set((0..<count).map { ItemWrite(SecretBytes(utf8: "v\($0)"), for: ItemKey(service: "m", account: "a\($0)")) })
        let before = try BatchWriteTests.generation(source)
        let destination = MemoryStore()
        let report = try Transfer.run(from: source.store, to: destination, move: true)
        #expect(report.copied.count == count && report.removedFromSource.count == count)
        #expect(try BatchWriteTests.generation(source) == before + 2, "two batches, two rewrites of the source")
        #expect(try source.reopen().list(service: nil).isEmpty)
        #expect(try destination.list(service: "m").count == count)
    }
}
