import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// A format-2 vault (SQLite, sealed rows) with a key file and a passphrase slot in a fresh folder.
private struct Format2Vault {
    let folder: TemporaryFolder
    let path: FilePath
    let keyPath: FilePath
    let store: SQLiteVaultStore

    init() throws {
        folder = try TemporaryFolder()
        path = folder.file("vault.lockbox")
        keyPath = folder.file("vault.key")
        try KeyFile.generate(at: keyPath)
        store = try SQLiteVaultStore.create(
            at: path, credentials: [.keyFile(keyPath), .passphrase(secret("format two"))], kdf: testKDF)
    }

    func reopen() throws -> SQLiteVaultStore {
        try SQLiteVaultStore.open(at: path, credentials: [.keyFile(keyPath)])
    }

    /// A raw connection to the database, as any SQLite tool would have.
    func raw() throws -> SQLiteConnection {
        try SQLiteConnection(path: path, create: false, busyTimeout: .seconds(5))
    }

    /// The bytes of the database and its write-ahead log, as `strings` would read them.
    func fileBytes() throws -> [UInt8] {
        var bytes: [UInt8] = []
        for name in [path.string, path.string + "-wal"] where FileManager.default.fileExists(atPath: name) {
            bytes += Array(try Data(contentsOf: URL(fileURLWithPath: name)))
        }
        return bytes
    }
}

private func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    Data(haystack).range(of: Data(needle.utf8)) != nil
}

@Suite("Vault format 2: sealed rows in SQLite")
struct SQLiteVaultStoreTests {
    @Test("every connection runs WAL, synchronous=FULL, secure_delete and the busy timeout")
    func connectionSettings() throws {
        let vault = try Format2Vault()
        let connection = try vault.raw()
        try connection.useWriteAheadLog()
        #expect(try connection.queryText("PRAGMA journal_mode") == "wal")
        #expect(try connection.queryInteger("PRAGMA synchronous") == 2)  // FULL
        #expect(try connection.queryInteger("PRAGMA secure_delete") == 1)
        #expect(try connection.queryInteger("PRAGMA busy_timeout") == 5000)
        #expect(try connection.queryInteger("PRAGMA trusted_schema") == 0)
        #expect(try connection.queryInteger("PRAGMA application_id") == SQLiteVaultStore.applicationID)
        #expect(try connection.queryInteger("PRAGMA user_version") == 2)
        let tables = try connection.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        var names: [String] = []
        while try tables.step() { names.append(tables.text(0) ?? "") }
        #expect(names == ["items", "key_slots", "vault"])
    }

    @Test("items round-trip through a reopen with either credential; overwrite keeps the creation time")
    func roundTrip() throws {
        let vault = try Format2Vault()
        let binary = SecretBytes(copying: (0..<300).map { UInt8($0 & 0xFF) })
        let unicode = ItemKey(service: "сервис.пример", account: "アカウント")
        try vault.store.set(
            secret("hunter2"), for: ItemKey(service: "com.example.api", account: "alice"),
            options: ItemOptions(kind: .token, label: "API", attributes: ["env": "prod"]))
        try vault.store.set(binary, for: unicode, options: ItemOptions(access: .freshAuthentication))
        try vault.store.set(SecretBytes(count: 0) { _ in }, for: ItemKey(service: "empty", account: "secret"), options: ItemOptions())
        let before = try #require(try vault.store.metadata(ItemKey(service: "com.example.api", account: "alice")))
        try vault.store.set(
            secret("hunter3"), for: ItemKey(service: "com.example.api", account: "alice"), options: ItemOptions(kind: .token))

        for store in [try vault.reopen(), try SQLiteVaultStore.open(at: vault.path, credentials: [.passphrase(secret("format two"))])] {
            #expect(try store.get(ItemKey(service: "com.example.api", account: "alice")) == secret("hunter3"))
            #expect(try store.get(unicode) == binary)
            #expect(try store.get(ItemKey(service: "empty", account: "secret"))?.count == 0)
            #expect(try store.get(ItemKey(service: "com.example.api", account: "nobody")) == nil)
            let alice = try #require(try store.metadata(ItemKey(service: "com.example.api", account: "alice")))
            #expect(alice.created == before.created)
            #expect(alice.attributes.isEmpty)
            #expect(try store.metadata(unicode)?.access == .freshAuthentication)
            #expect(try store.list(service: nil).map(\.key.account) == ["alice", "secret", "アカウント"])
            #expect(try store.list(service: "com.example.api").count == 1)
        }
        // Canonically equivalent names are one address, as in format 1 (Swift compares them equal).
        #expect(try vault.store.get(ItemKey(service: "e\u{301}", account: "x")) == nil)
        try vault.store.set(secret("é"), for: ItemKey(service: "\u{e9}", account: "x"), options: ItemOptions())
        #expect(try vault.store.get(ItemKey(service: "e\u{301}", account: "x")) == secret("é"))

        #expect(
            try vault.store.delete([ItemKey(service: "empty", account: "secret"), ItemKey(service: "no", account: "such")])
                == [ItemKey(service: "empty", account: "secret")])
        #expect(try vault.store.wipe(service: "com.example.api") == 1)
        #expect(try vault.store.wipeAll() == 2)
        #expect(try vault.reopen().list(service: nil).isEmpty)
    }

    @Test("the file shows no service or account name, no secret, and is mode 0600")
    func nothingInTheClear() throws {
        let vault = try Format2Vault()
        try vault.store.set([
            ItemWrite(secret("plain-secret-value"), for: ItemKey(service: "visible.service.name", account: "visible-account")),
            ItemWrite(
                secret("another-secret"), for: ItemKey(service: "second.service", account: "bob"), options: ItemOptions(label: "a label")),
        ])
        let bytes = try vault.fileBytes()
        for text in ["visible.service.name", "visible-account", "second.service", "plain-secret-value", "another-secret", "a label"] {
            #expect(!contains(bytes, text), "\(text) appears in the vault's files")
        }
        #expect(contains(bytes, "SQLite format 3"))
        for name in [vault.path.string, vault.path.string + "-wal"] where FileManager.default.fileExists(atPath: name) {
            #expect(try FilePath(name).stat().permissions.rawValue & 0o077 == 0, "\(name) is readable by others")
        }
    }

    @Test("a row moved to another address, or a secret from an older write, fails authentication: corruptVault, never the other item")
    func rowsAreBoundToTheirAddress() throws {
        let vault = try Format2Vault()
        let alice = ItemKey(service: "svc", account: "alice")
        let bob = ItemKey(service: "svc", account: "bob")
        let carol = ItemKey(service: "svc", account: "carol")
        try vault.store.set([
            ItemWrite(secret("alice's"), for: alice), ItemWrite(secret("bob's"), for: bob), ItemWrite(secret("carol's"), for: carol),
        ])
        let raw = try vault.raw()
        var rows: [[UInt8]: ([UInt8], [UInt8])] = [:]
        let query = try raw.prepare("SELECT address, metadata, secret FROM items")
        while try query.step() { rows[query.blob(0)] = (query.blob(1), query.blob(2)) }
        #expect(rows.count == 3)
        let records = try #require(rows.keys.sorted { $0.lexicographicallyPrecedes($1) } as [[UInt8]]?)
        let (first, second) = (records[0], records[1])
        // Swap the whole rows of two addresses.
        let update = try raw.prepare("UPDATE items SET metadata = ?, secret = ? WHERE address = ?")
        for (target, source) in [(first, second), (second, first)] {
            update.reset()
            try update.bind(1, rows[source]?.0 ?? [])
            try update.bind(2, rows[source]?.1 ?? [])
            try update.bind(3, target)
            try update.step()
        }
        let store = try vault.reopen()
        var failures = 0
        for key in [alice, bob, carol] {
            do {
                let value = try store.get(key)
                #expect(value == secret("\(key.account)'s"), "a swapped row gave another item's secret")
            } catch let error as LockboxError {
                #expect(error.code == .corruptVault)
                failures += 1
            }
        }
        #expect(failures == 2)
        expectCode(.corruptVault) { try store.list(service: nil) }

        // Put the rows back, then give one address the secret column of an older write.
        let vault2 = try Format2Vault()
        try vault2.store.set(secret("old"), for: alice, options: ItemOptions())
        let raw2 = try vault2.raw()
        let oldSecret = try #require(try raw2.prepare("SELECT secret FROM items").blobIfRow())
        try vault2.store.set(secret("new"), for: alice, options: ItemOptions())
        let rollback = try raw2.prepare("UPDATE items SET secret = ?")
        try rollback.bind(1, oldSecret)
        try rollback.step()
        expectCode(.corruptVault) { try vault2.reopen().get(alice) }
        #expect(try vault2.reopen().metadata(alice) != nil)  // metadata alone still opens: list works
    }

    @Test("key slots are rows: a passphrase change rewrites one row and no item; add, remove, wrong credential")
    func keySlots() throws {
        let vault = try Format2Vault()
        try vault.store.set(secret("v"), for: ItemKey(service: "s", account: "a"), options: ItemOptions())
        func snapshot() throws -> (slots: [[UInt8]], items: [[UInt8]]) {
            let raw = try vault.raw()
            var slots: [[UInt8]] = []
            var items: [[UInt8]] = []
            let s = try raw.prepare("SELECT slot FROM key_slots ORDER BY slot_id")
            while try s.step() { slots.append(s.blob(0)) }
            let i = try raw.prepare("SELECT metadata || secret FROM items")
            while try i.step() { items.append(i.blob(0)) }
            return (slots, items)
        }
        let before = try snapshot()
        try vault.store.changePassphrase(to: secret("new words"), kdf: testKDF)
        let after = try snapshot()
        #expect(after.items == before.items)
        #expect(after.slots[0] == before.slots[0])
        #expect(after.slots[1] != before.slots[1])
        expectCode(.wrongCredential) { try SQLiteVaultStore.open(at: vault.path, credentials: [.passphrase(secret("format two"))]) }
        #expect(
            try SQLiteVaultStore.open(at: vault.path, credentials: [.passphrase(secret("new words"))]).get(
                ItemKey(service: "s", account: "a")) == secret("v"))
        try vault.store.verifyPassphrase(secret("new words"))
        expectCode(.wrongCredential) { try vault.store.verifyPassphrase(secret("format two")) }

        let second = vault.folder.file("second.key")
        try KeyFile.generate(at: second)
        #expect(try vault.store.addKeySlot(.keyFile(second)) == 2)
        #expect(
            try SQLiteVaultStore.open(at: vault.path, credentials: [.keyFile(second)]).get(ItemKey(service: "s", account: "a"))
                == secret("v"))
        try vault.store.removeKeySlot(at: 0)
        expectCode(.wrongCredential) { try vault.reopen() }
        #expect(try vault.store.keySlots().map(\.kind) == [.passphrase, .keyFile])
        expectCode(.keySlotRefused) { try vault.store.removeKeySlot(at: 5) }
    }

    @Test("creating refuses to overwrite: a format-2 vault is reported as a vault, any other file as not one")
    func createRefuses() throws {
        let vault = try Format2Vault()
        expectError(.vaultAlreadyExists(path: vault.path.string)) {
            try SQLiteVaultStore.create(at: vault.path, credentials: [.keyFile(vault.keyPath)], kdf: testKDF)
        }
        expectError(.vaultAlreadyExists(path: vault.path.string)) {
            try EncryptedFileStore.create(at: vault.path, credentials: [.keyFile(vault.keyPath)], kdf: testKDF)
        }
        let other = vault.folder.file("other.db")
        let database = try SQLiteConnection(path: other, create: true, busyTimeout: .seconds(1))
        try database.execute("CREATE TABLE t (x)")
        chmod(other.string, 0o600)
        expectCode(.invalidArgument) { try SQLiteVaultStore.create(at: other, credentials: [.keyFile(vault.keyPath)], kdf: testKDF) }
        expectCode(.corruptVault) { try SQLiteVaultStore.open(at: other, credentials: [.keyFile(vault.keyPath)]) }
        let text = vault.folder.file("text")
        try Data("not a database at all, just some text".utf8).write(to: URL(fileURLWithPath: text.string))
        chmod(text.string, 0o600)
        expectCode(.corruptVault) { try SQLiteVaultStore.open(at: text, credentials: [.keyFile(vault.keyPath)]) }
        expectCode(.vaultNotFound) { try SQLiteVaultStore.open(at: vault.folder.file("missing"), credentials: [.keyFile(vault.keyPath)]) }
        chmod(vault.path.string, 0o644)
        expectCode(.insecurePermissions) { try vault.reopen() }
    }

    @Test(
        "the independent decryptor (scripts/format/vault-decrypt.py, from docs/FORMAT.md section 18) reads a format-2 vault with each credential"
    )
    func independentDecryptor() throws {
        let vault = try Format2Vault()
        let binary = SecretBytes(copying: (0..<200).map { UInt8(255 - $0) })
        try vault.store.set([
            ItemWrite(
                secret("hunter2"), for: ItemKey(service: "com.example.api", account: "alice"),
                options: ItemOptions(kind: .token, label: "API", attributes: ["env": "prod", "région": "Zürich"])),
            ItemWrite(binary, for: ItemKey(service: "сервис", account: "アカウント"), options: ItemOptions(access: .freshAuthentication)),
        ])
        let passphraseFile = vault.folder.file("passphrase")
        try Data("format two\n".utf8).write(to: URL(fileURLWithPath: passphraseFile.string))
        let script = repositoryRoot.appendingPathComponent("scripts/format/vault-decrypt.py").path
        let fingerprint = try KeyFile.fingerprint(at: vault.keyPath)
        for (arguments, slot) in [(["--key-file", vault.keyPath.string], 0), (["--passphrase-fd", "3"], 1)] {
            // The python3 scripts/ci/check-format.sh uses (with PyNaCl), from PATH; fd 3 is the passphrase file.
            let (status, data) = try runTool(
                "/bin/sh", ["-c", "exec python3 \"$0\" \"$@\" 3<\"\(passphraseFile.string)\"", script, vault.path.string] + arguments)
            #expect(status == 0, "vault-decrypt.py failed (it needs PyNaCl: scripts/ci/check-format.sh installs it)")
            let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            #expect(json["format_version"] as? Int == 2)
            #expect(json["opened_slot"] as? Int == slot)
            // The key-file slot's fingerprint (FORMAT.md 18.1.1) as recorded, and as the decryptor
            // computes it from the key file when that opened the vault.
            let slots = try #require(json["key_slots"] as? [[String: Any]])
            #expect(slots.first?["key_file_fingerprint"] as? String == fingerprint)
            #expect(json["opened_key_file_fingerprint"] as? String == (slot == 0 ? fingerprint : nil))
            let items = try #require(json["items"] as? [[String: Any]])
            #expect(items.count == 2)
            let alice = try #require(items.first { $0["account"] as? String == "alice" })
            #expect(alice["kind"] as? String == "token")
            #expect(alice["label"] as? String == "API")
            #expect(alice["attributes"] as? [String: String] == ["env": "prod", "région": "Zürich"])
            #expect(alice["secret_base64"] as? String == Data("hunter2".utf8).base64EncodedString())
            let other = try #require(items.first { $0["account"] as? String == "アカウント" })
            #expect(other["secret_base64"] as? String == binary.withUnsafeBytes { Data($0).base64EncodedString() })
            #expect(other["attributes"] as? [String: String] == ["lockbox.access": "fresh-authentication"])
        }
        // A row swapped to another address: the decryptor refuses with the corrupt exit code, 6.
        let raw = try vault.raw()
        try raw.execute(
            "UPDATE items SET metadata = (SELECT metadata FROM items ORDER BY address LIMIT 1) WHERE address = (SELECT address FROM items ORDER BY address DESC LIMIT 1)"
        )
        let (status, _) = try runTool("/usr/bin/env", ["python3", script, vault.path.string, "--key-file", vault.keyPath.string])
        #expect(status == 6)
    }

    @Test("a format-1 vault converts to format 2 with every item byte-identical and every credential still opening it; re-runnable")
    func conversionFromFormatOne() throws {
        let old = try KeyFileVault(passphrase: "old words")
        let times = Locked(Date(timeIntervalSince1970: 1_700_000_000.123))
        let formatOne = try EncryptedFileStore.open(at: old.vaultPath, credentials: [.keyFile(old.keyPath)], now: { times.withLock { $0 } })
        try formatOne.set(
            secret("first"), for: ItemKey(service: "svc", account: "a"),
            options: ItemOptions(kind: .token, label: "L", attributes: ["x": "1"]))
        times.withLock { $0 = Date(timeIntervalSince1970: 1_700_000_100.456) }
        try formatOne.set(
            secret("second"), for: ItemKey(service: "svc", account: "a"), options: ItemOptions(kind: .token, attributes: ["y": "2"]))
        try formatOne.set(
            SecretBytes(copying: (0..<1000).map { UInt8($0 % 251) }), for: ItemKey(service: "Ωmega", account: "ü"),
            options: ItemOptions(access: .freshAuthentication))
        let before = try formatOne.list(service: nil)
        var secrets: [ItemKey: SecretBytes] = [:]
        for item in before { secrets[item.key] = try formatOne.get(item.key) }

        // The wrong credential converts nothing.
        let stranger = old.folder.file("stranger.key")
        try KeyFile.generate(at: stranger)
        expectCode(.wrongCredential) { try SQLiteVaultStore.convert(formatOneAt: old.vaultPath, credentials: [.keyFile(stranger)]) }
        #expect(VaultFileFormat.detect(at: old.vaultPath) == .format1)

        #expect(try SQLiteVaultStore.convert(formatOneAt: old.vaultPath, credentials: [.keyFile(old.keyPath)]) == .converted(items: 2))
        #expect(VaultFileFormat.detect(at: old.vaultPath) == .format2)
        for credential in [VaultCredential.keyFile(old.keyPath), .passphrase(secret("old words"))] {
            let store = try SQLiteVaultStore.open(at: old.vaultPath, credentials: [credential])
            #expect(try store.list(service: nil) == before)
            for (key, value) in secrets { #expect(try store.get(key) == value) }
        }
        // Nothing else is left beside the vault but its lock file (and SQLite's while open).
        let names = try FileManager.default.contentsOfDirectory(atPath: old.folder.path.string).filter { $0.contains(".new-") }
        #expect(names.isEmpty)
        // A format-1 handle opened before the conversion gets a typed error, not damage or old data.
        expectCode(.unsupportedFormatVersion) { try formatOne.get(ItemKey(service: "svc", account: "a")) }
        expectCode(.unsupportedFormatVersion) { try old.reopen() }
        #expect(try SQLiteVaultStore.convert(formatOneAt: old.vaultPath, credentials: [.keyFile(old.keyPath)]) == .alreadyFormat2)
        expectCode(.wrongCredential) { try SQLiteVaultStore.convert(formatOneAt: old.vaultPath, credentials: [.keyFile(stranger)]) }
    }

    @Test("rotating the data key re-seals every row; another open handle follows through its slot")
    func rotation() throws {
        let vault = try Format2Vault()
        let other = try vault.reopen()
        try vault.store.set([
            ItemWrite(secret("one"), for: ItemKey(service: "s", account: "1")),
            ItemWrite(secret("two"), for: ItemKey(service: "s", account: "2")),
        ])
        let addressesBefore = try vault.raw().prepare("SELECT group_concat(hex(address)) FROM items").blobOrText()
        expectCode(.keySlotRefused) { try vault.store.rotateDataKey() }  // the passphrase slot needs its passphrase
        try vault.store.rotateDataKey(credentials: [.passphrase(secret("format two"))])
        #expect(try vault.raw().prepare("SELECT group_concat(hex(address)) FROM items").blobOrText() != addressesBefore)
        #expect(try other.get(ItemKey(service: "s", account: "2")) == secret("two"))
        try other.set(secret("three"), for: ItemKey(service: "s", account: "3"), options: ItemOptions())
        for credential in [VaultCredential.keyFile(vault.keyPath), .passphrase(secret("format two"))] {
            let store = try SQLiteVaultStore.open(at: vault.path, credentials: [credential])
            #expect(try store.list(service: nil).count == 3)
            #expect(try store.get(ItemKey(service: "s", account: "1")) == secret("one"))
        }
        let byPassphrase = try SQLiteVaultStore.open(at: vault.path, credentials: [.passphrase(secret("format two"))])
        try vault.store.rotateDataKey(dropUnmatchedSlots: true)  // drops the passphrase slot
        #expect(try vault.store.keySlots().count == 1)
        #expect(try other.get(ItemKey(service: "s", account: "1")) == secret("one"))  // its key-file slot remains
        expectCode(.credentialsChanged) { try byPassphrase.get(ItemKey(service: "s", account: "1")) }
    }

    @Test("8 handles on 8 threads × 250 sets on one vault: zero lost")
    func concurrentWriters() async throws {
        let vault = try Format2Vault()
        let (path, key) = (vault.path, vault.keyPath)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    let store = try SQLiteVaultStore.open(at: path, credentials: [.keyFile(key)], busyTimeout: .seconds(60))
                    for index in 0..<250 {
                        try store.set(
                            secret("\(writer)-\(index)"), for: ItemKey(service: "w\(writer)", account: "\(index)"), options: ItemOptions())
                    }
                }
            }
            try await group.waitForAll()
        }
        let store = try vault.reopen()
        #expect(try store.list(service: nil).count == 2000)
        for writer in 0..<8 {
            for index in stride(from: 0, to: 250, by: 49) {
                #expect(try store.get(ItemKey(service: "w\(writer)", account: "\(index)")) == secret("\(writer)-\(index)"))
            }
        }
    }

    @Test("corruption sweep: bit flips across the file and truncations give an error or the right item, never another value or a crash")
    func corruptionSweep() throws {
        let vault = try Format2Vault()
        var expected: [ItemKey: SecretBytes] = [:]
        for index in 0..<40 {
            let key = ItemKey(service: "svc\(index % 3)", account: "acct\(index)")
            expected[key] = secret(String(repeating: "\(index)", count: 1 + index))
        }
        try vault.store.set(expected.map { ItemWrite($0.value, for: $0.key) })
        try vault.raw().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        let original = Array(try Data(contentsOf: URL(fileURLWithPath: vault.path.string)))
        let damaged = vault.folder.file("damaged.lockbox")
        var outcomes = (intact: 0, refused: 0)
        func check(_ bytes: [UInt8]) throws {
            for suffix in ["-wal", "-shm"] { try? FilePath(damaged.string + suffix).unlinkIfPresent() }
            try Data(bytes).write(to: URL(fileURLWithPath: damaged.string))
            chmod(damaged.string, 0o600)
            do {
                let store = try SQLiteVaultStore.open(at: damaged, credentials: [.keyFile(vault.keyPath)])
                for (key, value) in expected {
                    do {
                        let got = try store.get(key)
                        #expect(got == nil || got == value, "a damaged vault gave a wrong secret for \(key)")
                        if got == value { outcomes.intact += 1 } else { outcomes.refused += 1 }
                    } catch is LockboxError {
                        outcomes.refused += 1
                    }
                }
            } catch is LockboxError {
                outcomes.refused += 1
            }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<150 {
            var bytes = original
            let offset = Int.random(in: 0..<bytes.count, using: &generator)
            bytes[offset] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &generator)
            try check(bytes)
        }
        for length in stride(from: 0, to: original.count, by: max(1, original.count / 12)) {
            try check(Array(original.prefix(length)))
        }
        #expect(outcomes.refused > 0)
        #expect(outcomes.intact > 0)
    }
}

private func expectCode<T>(_ code: LockboxError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) {
    do {
        _ = try body()
        Issue.record("expected \(code), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as LockboxError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

extension SQLiteStatement {
    fileprivate func blobIfRow() throws -> [UInt8]? { try step() ? blob(0) : nil }
    fileprivate func blobOrText() throws -> String? { try step() ? text(0) : nil }
}

extension SQLiteVaultStoreTests {
    @Test(
        "a format-2 vault, or its -wal or -shm, open to group or others or not a regular file is refused as format 1 is (insecurePermissions)"
    )
    func loosePermissions() throws {
        let vault = try Format2Vault()
        try vault.store.set(secret("kept"), for: ItemKey(service: "s", account: "a"), options: ItemOptions())
        for mode: mode_t in [0o640, 0o604, 0o660] {
            chmod(vault.path.string, mode)
            let error = caughtError { _ = try vault.reopen() }
            guard case .insecurePermissions(let path, let detail) = error else {
                Issue.record("vault mode \(String(mode, radix: 8)): got \(String(describing: error))")
                continue
            }
            #expect(path == vault.path.string)
            #expect(detail.contains("chmod 600"))
        }
        chmod(vault.path.string, 0o600)
        // The log and its index hold sealed rows as the vault does: while a handle is open they
        // exist, and a loose one is refused by name.
        for sidecar in SQLiteVaultStore.sidecarPaths(vault.path) {
            #expect(FileManager.default.fileExists(atPath: sidecar.string), "\(sidecar) exists while the vault is open")
            chmod(sidecar.string, 0o644)
            let error = caughtError { _ = try vault.reopen() }
            guard case .insecurePermissions(let path, let detail) = error else {
                Issue.record("\(sidecar) mode 644: got \(String(describing: error))")
                continue
            }
            #expect(path == sidecar.string)
            #expect(detail.contains("chmod 600 \(sidecar.string)"))
            chmod(sidecar.string, 0o600)
        }
        #expect(try vault.reopen().get(ItemKey(service: "s", account: "a")) == secret("kept"))
    }

    @Test("a -wal that is a symbolic link is refused, not followed")
    func symlinkedLogIsRefused() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let keyPath = folder.file("vault.key")
        try KeyFile.generate(at: keyPath)
        _ = try SQLiteVaultStore.create(at: path, credentials: [.keyFile(keyPath)], kdf: testKDF)
        let target = folder.file("elsewhere")
        try Data().write(to: URL(fileURLWithPath: target.string))
        chmod(target.string, 0o600)
        #expect(symlink(target.string, path.string + "-wal") == 0)
        #expect(caughtError { _ = try SQLiteVaultStore.open(at: path, credentials: [.keyFile(keyPath)]) }?.code == .invalidArgument)
    }
}

extension SQLiteVaultStoreTests {
    @Test(
        "backup: one self-contained 0600 file, a snapshot with every item byte-identical (times too), opening with the vault's slots and the backup passphrase; --service; never overwrites"
    )
    func backup() throws {
        let vault = try Format2Vault()
        let binary = SecretBytes(copying: (0..<3000).map { UInt8(($0 * 13) & 0xFF) })
        try vault.store.set(binary, for: ItemKey(service: "svc", account: "binary"), options: ItemOptions(kind: .token, label: "bin"))
        try vault.store.set(
            secret("x"), for: ItemKey(service: "svc", account: "ü"),
            options: ItemOptions(attributes: ["env": "prod"], access: .freshAuthentication))
        try vault.store.set(secret("other"), for: ItemKey(service: "elsewhere", account: "a"), options: ItemOptions())
        try vault.store.delete(ItemKey(service: "elsewhere", account: "a"))
        try vault.store.set(secret("kept"), for: ItemKey(service: "elsewhere", account: "b"), options: ItemOptions())

        let path = vault.folder.file("backup.lockbox")
        #expect(try vault.store.backup(to: path, passphrase: secret("backup words"), kdf: testKDF) == 3)
        let names = try FileManager.default.contentsOfDirectory(atPath: vault.folder.path.string).filter { $0.hasPrefix("backup") }
        #expect(names == ["backup.lockbox"], "no -wal, -shm or temporary file beside it")
        #expect(try path.stat().permissions.rawValue & 0o777 == 0o600)
        let header = try Data(contentsOf: URL(fileURLWithPath: path.string))
        #expect(header[18] == 1 && header[19] == 1, "rollback-journal mode: opening it needs no -wal")

        let original = try vault.store.list(service: nil)
        for credentials: [VaultCredential] in [
            [.passphrase(secret("backup words"))], [.keyFile(vault.keyPath)], [.passphrase(secret("format two"))],
        ] {
            let copy = try SQLiteVaultStore.open(at: path, credentials: credentials)
            #expect(try copy.list(service: nil) == original, "\(credentials)")
            for item in original {
                #expect(try copy.get(item.key) == vault.store.get(item.key))
            }
            #expect(try copy.keySlots().count == 3)
        }

        let partial = vault.folder.file("partial.lockbox")
        #expect(try vault.store.backup(to: partial, passphrase: secret("backup words"), kdf: testKDF, service: "svc") == 2)
        let partialCopy = try SQLiteVaultStore.open(at: partial, credentials: [.passphrase(secret("backup words"))])
        #expect(try partialCopy.list(service: nil).map(\.key.service) == ["svc", "svc"])
        #expect(try partialCopy.get(ItemKey(service: "svc", account: "binary")) == binary)

        expectError(.vaultAlreadyExists(path: path.string)) {
            try vault.store.backup(to: path, passphrase: secret("again"), kdf: testKDF)
        }
        // The backup changed nothing in the vault.
        #expect(try vault.reopen().list(service: nil) == original)
    }
}

extension SQLiteVaultStoreTests {
    @Test(
        "backup: another process rotating the data key right after the snapshot still gives a backup of the snapshot (it used to fail with vault-busy)",
        arguments: [false, true])
    func backupAcrossARotation(rotateTwice: Bool) throws {
        let vault = try Format2Vault()
        try vault.store.set(secret("before the rotation"), for: ItemKey(service: "svc", account: "a"), options: ItemOptions())
        let path = vault.folder.file("backup.lockbox")
        let count = try vault.store.backup(to: path, passphrase: secret("backup words"), kdf: testKDF, service: nil) {
            // Another handle (as another process would) rotates the data key and writes under the new one.
            let other = try vault.reopen()
            let passphraseSlot: [VaultCredential] = [.passphrase(secret("format two"))]
            try other.rotateDataKey(credentials: passphraseSlot)
            if rotateTwice { try other.rotateDataKey(credentials: passphraseSlot) }
            try other.set(secret("after the rotation"), for: ItemKey(service: "svc", account: "b"), options: ItemOptions())
        }
        #expect(count == 1)
        for credentials: [VaultCredential] in [[.passphrase(secret("backup words"))], [.keyFile(vault.keyPath)]] {
            let copy = try SQLiteVaultStore.open(at: path, credentials: credentials)
            #expect(try copy.list(service: nil).map(\.key.account) == ["a"])
            #expect(try copy.get(ItemKey(service: "svc", account: "a")) == secret("before the rotation"))
        }
        // The handle that made the backup follows the rotation for its own reads and writes.
        #expect(try vault.store.get(ItemKey(service: "svc", account: "b")) == secret("after the rotation"))
    }
}

extension SQLiteVaultStoreTests {
    @Test("statements are prepared once per connection and reused; a nested use of the same SQL gets its own")
    func statementCache() throws {
        let vault = try Format2Vault()
        let connection = try vault.raw()
        for round in 0..<50 {
            try connection.transaction(writing: true) {
                try connection.withStatement("INSERT OR REPLACE INTO key_slots (slot_id, slot) VALUES (?, ?)") { insert in
                    try insert.bind(1, Int64(100 + round % 3))
                    try insert.bind(2, [UInt8(round)])
                    try insert.step()
                }
            }
        }
        // BEGIN IMMEDIATE, COMMIT and the INSERT: three, not 150.
        #expect(connection.cachedStatementCount == 3)
        let count = try connection.withStatement("SELECT count(*) FROM key_slots WHERE slot_id >= 100") { outer in
            #expect(try outer.step())
            let inner = try connection.withStatement("SELECT count(*) FROM key_slots WHERE slot_id >= 100") { inner in
                try inner.step() ? inner.integer(0) : -1
            }
            #expect(inner == outer.integer(0), "the nested use did not reset the outer statement")
            return outer.integer(0)
        }
        #expect(count == 3)
        #expect(connection.cachedStatementCount == 4)
    }

    @Test("list(service:each:) gives every item's metadata one row at a time, the same items list(service:) sorts")
    func streamingList() throws {
        let vault = try Format2Vault()
        try vault.store.set(
            (0..<200).map { ItemWrite(secret("s\($0)"), for: ItemKey(service: $0 % 2 == 0 ? "even" : "odd", account: "a\($0)")) })
        var streamed: [ItemMetadata] = []
        try vault.store.list(service: nil) { streamed.append($0) }
        #expect(streamed.count == 200)
        #expect(streamed.sortedForListing() == (try vault.store.list(service: nil)))
        var even = 0
        try vault.store.list(service: "even") { item in
            #expect(item.key.service == "even")
            even += 1
        }
        #expect(even == 100)
    }
}

extension SQLiteVaultStoreTests {
    /// POSIX record locks belong to the process: closing ANY descriptor of a file drops every
    /// lock the process holds on it, SQLite's included. A handle closed while another stays open
    /// leaves its descriptor with SQLite (deferred close), and SQLite reuses that descriptor for
    /// the next open of the file instead of calling `open` — so the descriptor Lockbox probed and
    /// offered is left over, and must not be closed while SQLite holds locks on the file.
    @Test(
        "handles opened and closed while another stays open keep its locks: a writer process that closes the vault does not take it for unused and corrupt it"
    )
    func reopeningBesideAnOpenHandle() throws {
        let vault = try Format2Vault()
        // After its first transaction, a WAL-mode connection holds a shared lock on the file.
        try vault.store.set(secret("first"), for: ItemKey(service: "svc", account: "first"), options: ItemOptions())
        let inode = try vault.path.stat().inode.rawValue
        func sharedLocksHeld() throws -> Int {
            try String(contentsOfFile: "/proc/locks", encoding: .utf8).split(separator: "\n").filter {
                $0.contains(" \(getpid()) ") && $0.contains(":\(inode) ")
            }.count
        }
        #expect(try sharedLocksHeld() > 0)
        for round in 0..<20 {
            let other = try vault.reopen()
            try other.set(secret("round \(round)"), for: ItemKey(service: "svc", account: "round-\(round)"), options: ItemOptions())
            #expect(VaultFileFormat.detect(at: vault.path) == .format2)
        }
        #expect(try sharedLocksHeld() > 0, "a descriptor of the vault was closed beside the open handle")
        // One read-write probe and one header read kept, however many rounds.
        #expect(DatabaseFileDescriptors.parkedCount(path: vault.path) <= 2)
        // Another process writes and closes the vault. Had this process lost its locks, that
        // process would find itself the last user, fold the WAL in and delete it under us.
        for index in 0..<3 {
            let result = try runLockbox(
                ["set", "--vault", vault.path.string, "--key-file", vault.keyPath.string, "svc", "process-\(index)"],
                stdin: Data("from a process \(index)".utf8))
            #expect(result.status == 0, "\(result.stderr)")
        }
        try vault.store.set(secret("after"), for: ItemKey(service: "svc", account: "after"), options: ItemOptions())
        for round in 0..<20 {
            #expect(try vault.store.get(ItemKey(service: "svc", account: "round-\(round)")) == secret("round \(round)"))
        }
        for index in 0..<3 {
            #expect(try vault.store.get(ItemKey(service: "svc", account: "process-\(index)")) == secret("from a process \(index)"))
        }
        #expect(try vault.reopen().list(service: "svc").count == 25)
    }
}
