import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

@Suite("Encrypted file vault")
struct EncryptedFileStoreTests {
    @Test("items persist across reopening, with metadata")
    func persistence() throws {
        let fixture = try KeyFileVault()
        try Vault(store: fixture.store).set(
            "refresh-1", service: "api", account: "alice", kind: .token,
            attributes: ["scope": "read"])
        let reopened = Vault(store: try fixture.reopen())
        #expect(try reopened.string(service: "api", account: "alice") == "refresh-1")
        let metadata = try #require(try reopened.metadata(service: "api", account: "alice"))
        #expect(metadata.kind == .token)
        #expect(metadata.attributes == ["scope": "read"])
        #expect(metadata == (try fixture.store.metadata(ItemKey(service: "api", account: "alice"))))
    }

    @Test("the file is 0600 in a 0700 folder, and names and secrets are not in it in clear")
    func fileIsPrivateAndOpaque() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("nested/deeper/vault.lockbox")
        let key = folder.file("key")
        try KeyFile.generate(at: key)
        let store = try EncryptedFileStore.create(at: path, credentials: [.keyFile(key)])
        try Vault(store: store).set("super-secret-token", service: "com.example.visible", account: "alice@example.com")
        #expect(try path.stat().permissions.rawValue & 0o777 == 0o600)
        #expect(try path.removingLastComponent().stat().permissions.rawValue & 0o777 == 0o700)
        #expect(try key.stat().permissions.rawValue & 0o777 == 0o600)
        let contents = try Data(contentsOf: URL(fileURLWithPath: path.string))
        for needle in ["super-secret-token", "com.example.visible", "alice@example.com", "token"] {
            #expect(contents.range(of: Data(needle.utf8)) == nil, "\(needle) appears in the file")
        }
    }

    @Test("a wrong passphrase or key is refused")
    func wrongCredential() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("v.lockbox")
        _ = try EncryptedFileStore.create(at: path, credentials: [.passphrase(secret("correct horse"))], kdf: testKDF)
        expectError(.wrongCredential(path: path.string)) {
            try EncryptedFileStore.open(at: path, credential: .passphrase(secret("wrong horse")))
        }
        let otherKey = folder.file("other.key")
        try KeyFile.generate(at: otherKey)
        expectError(.wrongCredential(path: path.string)) { try EncryptedFileStore.open(at: path, credential: .keyFile(otherKey)) }
        _ = try EncryptedFileStore.open(at: path, credential: .passphrase(secret("correct horse")))
    }

    @Test("key-file slot: raw and hex key files open the vault; a raw key works too")
    func keyFileSlot() throws {
        let fixture = try KeyFileVault()
        try Vault(store: fixture.store).set("x", service: "s", account: "a")
        let raw = try KeyFile.read(at: fixture.keyPath)
        let hexPath = fixture.folder.file("hex.key")
        let hex = raw.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() } + "\n"
        _ = FileManager.default.createFile(atPath: hexPath.string, contents: Data(hex.utf8), attributes: [.posixPermissions: 0o600])
        #expect(
            try Vault(store: EncryptedFileStore.open(at: fixture.vaultPath, credential: .keyFile(hexPath)))
                .string(service: "s", account: "a") == "x")
        #expect(
            try Vault(store: EncryptedFileStore.open(at: fixture.vaultPath, credential: .key(raw)))
                .string(service: "s", account: "a") == "x")
        let bad = fixture.folder.file("bad.key")
        _ = FileManager.default.createFile(atPath: bad.string, contents: Data("not a key".utf8), attributes: [.posixPermissions: 0o600])
        #expect(throws: LockboxError.self) { try EncryptedFileStore.open(at: fixture.vaultPath, credential: .keyFile(bad)) }
        if case .invalidKeyFile = caughtError({ try KeyFile.read(at: bad) }) {} else { Issue.record("expected invalidKeyFile") }
    }

    @Test("changing the passphrase keeps the data and retires the old passphrase")
    func changePassphrase() throws {
        let fixture = try KeyFileVault(passphrase: "old passphrase")
        try Vault(store: fixture.store).set("kept", service: "s", account: "a")
        let byPassphrase = try EncryptedFileStore.open(at: fixture.vaultPath, credential: .passphrase(secret("old passphrase")))
        try byPassphrase.changePassphrase(to: secret("new passphrase"), kdf: testKDF)
        expectError(.wrongCredential(path: fixture.vaultPath.string)) {
            try EncryptedFileStore.open(at: fixture.vaultPath, credential: .passphrase(secret("old passphrase")))
        }
        let reopened = try EncryptedFileStore.open(at: fixture.vaultPath, credential: .passphrase(secret("new passphrase")))
        #expect(try Vault(store: reopened).string(service: "s", account: "a") == "kept")
        // The other handle, opened by key file, follows the change without being reopened.
        #expect(try Vault(store: fixture.store).string(service: "s", account: "a") == "kept")
        #expect(try fixture.store.keySlots().map(\.kind) == [.keyFile, .passphrase])
    }

    @Test("rotating the data key keeps the data, rewraps every slot and re-encrypts everything")
    func rotateDataKey() throws {
        let fixture = try KeyFileVault(passphrase: "pass")
        let vault = Vault(store: fixture.store)
        for index in 0..<20 { try vault.set("secret-\(index)", service: "s", account: "\(index)") }
        let before = try fixture.bytes()
        let oldKey = try dataKey(of: before, key: try KeyFile.read(at: fixture.keyPath))

        #expect { try fixture.store.rotateDataKey() } throws: { ($0 as? LockboxError)?.code == .keySlotRefused }
        try fixture.store.rotateDataKey(credentials: [.passphrase(secret("pass"))])
        let after = try fixture.bytes()
        let newKey = try dataKey(of: after, key: try KeyFile.read(at: fixture.keyPath))
        #expect(oldKey != newKey)

        let (oldHeader, oldLength) = try before.withUnsafeBytes { try VaultHeader.parse($0) }
        let (newHeader, newLength) = try after.withUnsafeBytes { try VaultHeader.parse($0) }
        #expect(newHeader.vaultID == oldHeader.vaultID)
        for (old, new) in zip(oldHeader.slots, newHeader.slots) { #expect(old.wrappedKey != new.wrappedKey) }
        let oldBody = before[oldLength...]
        let newBody = after[newLength...]
        #expect(oldBody.count == newBody.count)
        let samePositions = zip(oldBody, newBody).filter { $0 == $1 }.count
        #expect(samePositions < oldBody.count / 20, "ciphertexts should be unrelated, \(samePositions) bytes equal")
        // The old data key no longer decrypts anything.
        let decrypted = after.withUnsafeBytes { file in
            newHeader.bodyNonce.withUnsafeBytes { nonce in
                Sodium.open(
                    UnsafeRawBufferPointer(rebasing: file[newLength...]),
                    additionalData: UnsafeRawBufferPointer(rebasing: file[0..<newLength]), nonce: nonce, key: oldKey)
            }
        }
        #expect(decrypted == nil)
        for opener in [VaultCredential.keyFile(fixture.keyPath), .passphrase(secret("pass"))] {
            let reopened = Vault(store: try EncryptedFileStore.open(at: fixture.vaultPath, credential: opener))
            #expect(try reopened.list().count == 20)
            #expect(try reopened.string(service: "s", account: "13") == "secret-13")
        }
    }

    @Test("rotation can drop the slots nobody can open")
    func rotateDroppingSlots() throws {
        let fixture = try KeyFileVault(passphrase: "forgotten")
        try fixture.store.rotateDataKey(dropUnmatchedSlots: true)
        #expect(try fixture.store.keySlots().map(\.kind) == [.keyFile])
        expectError(.wrongCredential(path: fixture.vaultPath.string)) {
            try EncryptedFileStore.open(at: fixture.vaultPath, credential: .passphrase(secret("forgotten")))
        }
    }

    @Test("adding and removing key slots; the last slot stays")
    func slots() throws {
        let fixture = try KeyFileVault()
        let index = try fixture.store.addKeySlot(.passphrase(secret("second way in")), kdf: testKDF)
        #expect(index == 1)
        try fixture.store.removeKeySlot(at: 0)
        expectError(.wrongCredential(path: fixture.vaultPath.string)) { try fixture.reopen() }
        let byPassphrase = try EncryptedFileStore.open(at: fixture.vaultPath, credential: .passphrase(secret("second way in")))
        #expect(throws: LockboxError.self) { try byPassphrase.removeKeySlot(at: 0) }
        #expect(throws: LockboxError.self) { try byPassphrase.removeKeySlot(at: 7) }
        #expect(try byPassphrase.keySlots().count == 1)
    }

    @Test("corruption sweep: every truncation and every bit flip — header or body — is reported as corrupt, never as data")
    func corruptionSweep() throws {
        let fixture = try KeyFileVault()
        try Vault(store: fixture.store).set("payload", service: "s", account: "a")
        let bytes = try fixture.bytes()
        let (_, headerLength) = try bytes.withUnsafeBytes { try VaultHeader.parse($0) }
        #expect(headerLength < bytes.count)
        var checked = 0
        for damage in everyCorruption(of: bytes) {
            try fixture.write(damage.bytes)
            let error = caughtError { try fixture.reopen() }
            guard case .corruptVault(_, let reason) = error else {
                Issue.record("\(damage.what): expected corruptVault, got \(String(describing: error))")
                continue
            }
            if damage.bytes.count == bytes.count && damage.position >= headerLength {
                #expect(reason == "the encrypted contents failed authentication", "\(damage.what)")
            }
            checked += 1
        }
        #expect(checked == 2 * bytes.count + 1)
    }

    @Test("an unknown format version is named as such")
    func unknownVersion() throws {
        let fixture = try KeyFileVault()
        var bytes = try fixture.bytes()
        bytes[8] = 2  // version field, little-endian UInt16 at offset 8
        let headerLength = Int(bytes[12]) | Int(bytes[13]) << 8
        let checksum = bytes.withUnsafeBytes { Sodium.blake2b(UnsafeRawBufferPointer(rebasing: $0[0..<headerLength - 32])) }
        bytes.replaceSubrange(headerLength - 32..<headerLength, with: checksum)
        try fixture.write(bytes)
        expectError(.unsupportedFormatVersion(path: fixture.vaultPath.string, found: 2, supported: 1)) { try fixture.reopen() }
    }

    @Test("a file that is not a vault is named as such")
    func notAVault() throws {
        let fixture = try KeyFileVault()
        try fixture.write(Array("PK\u{3}\u{4} this is a zip".utf8))
        expectError(.corruptVault(path: fixture.vaultPath.string, reason: "not a Lockbox vault (wrong magic bytes)")) {
            try fixture.reopen()
        }
    }

    @Test("vault and key files readable by others are refused, with the fix in the message")
    func loosePermissions() throws {
        let fixture = try KeyFileVault()
        for mode: mode_t in [0o640, 0o604, 0o660] {
            chmod(fixture.vaultPath.string, mode)
            let error = caughtError { try fixture.reopen() }
            guard case .insecurePermissions(let path, let detail) = error else {
                Issue.record("mode \(String(mode, radix: 8)): got \(String(describing: error))")
                continue
            }
            #expect(path == fixture.vaultPath.string)
            #expect(detail.contains("chmod 600"))
        }
        chmod(fixture.vaultPath.string, 0o600)
        chmod(fixture.keyPath.string, 0o644)
        let keyError = caughtError { try fixture.reopen() }
        if case .insecurePermissions = keyError {} else { Issue.record("loose key file: got \(String(describing: keyError))") }
        chmod(fixture.keyPath.string, 0o400)
        _ = try fixture.reopen()
    }

    @Test("missing vault, existing vault and missing credential are distinct errors")
    func lifecycleErrors() throws {
        let fixture = try KeyFileVault()
        expectError(.vaultAlreadyExists(path: fixture.vaultPath.string)) {
            try EncryptedFileStore.create(at: fixture.vaultPath, credentials: [.keyFile(fixture.keyPath)])
        }
        let missing = fixture.folder.file("missing.lockbox")
        expectError(.vaultNotFound(path: missing.string)) {
            try EncryptedFileStore.open(at: missing, credential: .keyFile(fixture.keyPath))
        }
        #expect(throws: LockboxError.self) { try EncryptedFileStore.create(at: missing, credentials: []) }
        #expect(throws: LockboxError.self) { try EncryptedFileStore.create(at: missing, credentials: [.passphrase(secret(""))]) }
        #expect(!missing.exists())
        try FileManager.default.removeItem(atPath: fixture.vaultPath.string)
        expectError(.vaultNotFound(path: fixture.vaultPath.string)) { try fixture.store.get(ItemKey(service: "s", account: "a")) }
    }

    @Test("two handles on one file see each other's writes")
    func twoHandles() throws {
        let fixture = try KeyFileVault()
        let other = Vault(store: try fixture.reopen())
        let mine = Vault(store: fixture.store)
        try mine.set("one", service: "s", account: "1")
        try other.set("two", service: "s", account: "2")
        try mine.set("three", service: "s", account: "3")
        #expect(try other.list().count == 3)
        #expect(try mine.string(service: "s", account: "2") == "two")
    }

    @Test("a writer that cannot get the lock fails with vaultBusy instead of hanging")
    func lockTimeout() throws {
        let fixture = try KeyFileVault()
        let lockPath = fixture.vaultPath.string + ".lock"
        let holder = open(lockPath, O_RDWR)
        #expect(holder >= 0)
        defer { close(holder) }
        #expect(flock(holder, LOCK_EX) == 0)
        let impatient = try EncryptedFileStore.open(
            at: fixture.vaultPath, credential: .keyFile(fixture.keyPath),
            lockTimeout: .milliseconds(150))
        let error = caughtError { try Vault(store: impatient).set("x", service: "s", account: "a") }
        if case .vaultBusy = error {} else { Issue.record("expected vaultBusy, got \(String(describing: error))") }
        // Reading needs no lock.
        #expect(try impatient.list(service: nil).isEmpty)
    }

    /// The data key of a vault file, unwrapped through its first key-file slot.
    private func dataKey(of file: [UInt8], key: SecretBytes) throws -> SecretBytes {
        let (header, _) = try file.withUnsafeBytes { try VaultHeader.parse($0) }
        let slot = try #require(header.slots.first { $0.kind == .keyFile })
        let kek = try KeySlotCrypto.deriveKEK(for: slot, from: .key(key))
        return try #require(KeySlotCrypto.unwrap(slot, vaultID: header.vaultID, kek: kek))
    }
}

@Suite("Encrypted file vault: edge cases found by the independent decoder")
struct EncryptedFileEdgeCaseTests {
    @Test("a body length that would overflow is reported as corrupt, not a crash")
    func hugeBodyLength() throws {
        let fixture = try KeyFileVault()
        var bytes = try fixture.bytes()
        let headerLength = Int(bytes[12]) | Int(bytes[13]) << 8
        let bodyLengthOffset = headerLength - 32 - 8
        bytes.replaceSubrange(bodyLengthOffset..<bodyLengthOffset + 8, with: [UInt8](repeating: 0xff, count: 8))
        let checksum = bytes.withUnsafeBytes { Sodium.blake2b(UnsafeRawBufferPointer(rebasing: $0[0..<headerLength - 32])) }
        bytes.replaceSubrange(headerLength - 32..<headerLength, with: checksum)
        try fixture.write(bytes)
        let error = caughtError { try fixture.reopen() }
        if case .corruptVault = error {} else { Issue.record("got \(String(describing: error))") }
    }

    @Test("format version 0 is corrupt, not 'upgrade Lockbox'")
    func versionZero() throws {
        let fixture = try KeyFileVault()
        var bytes = try fixture.bytes()
        bytes[8] = 0
        let headerLength = Int(bytes[12]) | Int(bytes[13]) << 8
        let checksum = bytes.withUnsafeBytes { Sodium.blake2b(UnsafeRawBufferPointer(rebasing: $0[0..<headerLength - 32])) }
        bytes.replaceSubrange(headerLength - 32..<headerLength, with: checksum)
        try fixture.write(bytes)
        let error = caughtError { try fixture.reopen() }
        if case .corruptVault = error {} else { Issue.record("got \(String(describing: error))") }
    }

    @Test("timestamps survive any number of rewrites unchanged")
    func timestampsAreStable() throws {
        // Values where decoding to Date and rounding down used to lose a millisecond.
        for milliseconds: Int64 in [1_086_000_000_001, 2_178_018_828_002, -4_998, 0, 1_763_700_000_123] {
            let date = VaultPayload.date(milliseconds: milliseconds)
            #expect(VaultPayload.milliseconds(date) == milliseconds, "\(milliseconds)")
        }
        #expect(VaultPayload.milliseconds(VaultPayload.date(milliseconds: .max)) == VaultPayload.timestampLimit)
        // Every value near the limits, and a spread of random ones, survive a round trip.
        var generator = SystemRandomNumberGenerator()
        let limit = VaultPayload.timestampLimit
        let samples =
            (0..<5000).flatMap { [limit - $0, -limit + $0] }
            + (0..<100_000).map { _ in Int64.random(in: -limit...limit, using: &generator) }
        let drifting = samples.filter { VaultPayload.milliseconds(VaultPayload.date(milliseconds: $0)) != $0 }
        #expect(drifting.isEmpty, "\(drifting.prefix(5))")
        let fixed = VaultPayload.date(milliseconds: 1_086_000_000_001)
        let folder = try TemporaryFolder()
        let key = folder.file("k")
        try KeyFile.generate(at: key)
        let store = try EncryptedFileStore.create(at: folder.file("v"), credentials: [.keyFile(key)], now: { fixed })
        try Vault(store: store).set("a", service: "s", account: "1")
        for index in 2...4 { try Vault(store: store).set("b", service: "s", account: "\(index)") }
        let reopened = try EncryptedFileStore.open(at: folder.file("v"), credential: .keyFile(key))
        #expect(try reopened.metadata(ItemKey(service: "s", account: "1"))?.created == fixed)
    }

    @Test("a symlinked vault path writes through to the target and shares its lock")
    func symlinkedPath() throws {
        let fixture = try KeyFileVault()
        let link = fixture.folder.file("link.lockbox")
        #expect(symlink(fixture.vaultPath.string, link.string) == 0)
        let viaLink = Vault(store: try EncryptedFileStore.open(at: link, credential: .keyFile(fixture.keyPath)))
        try viaLink.set("through the link", service: "s", account: "a")
        #expect(try link.stat(followTargetSymlink: false).type == .symbolicLink)
        #expect(try Vault(store: fixture.reopen()).string(service: "s", account: "a") == "through the link")
        #expect(!FileManager.default.fileExists(atPath: link.string + ".lock"))
    }

    @Test("a stale temporary of another vault in the same folder is left alone")
    func temporariesOfOtherVaults() throws {
        let fixture = try KeyFileVault()
        let mine = fixture.folder.file(".vault.lockbox.tmp-00112233aabb")
        let notMine = fixture.folder.file(".vault.lockbox.tmp-x.lockbox.tmp-00112233aabb")
        for path in [mine, notMine] {
            _ = FileManager.default.createFile(atPath: path.string, contents: Data([1]), attributes: [.posixPermissions: 0o600])
        }
        try Vault(store: fixture.store).set("x", service: "s", account: "a")
        #expect(!mine.exists())
        #expect(notMine.exists())
    }
}
