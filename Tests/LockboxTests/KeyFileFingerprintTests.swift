import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// The fingerprint a key-file slot records of its key file (docs/FORMAT.md section 18.1.1): how it
/// is derived, where it is written and recorded later, how a changed or malformed one is handled,
/// and what `lockbox init`, `slot list`, `slot add-key-file` and `slot fingerprint` show.
@Suite("Key-file fingerprints")
struct KeyFileFingerprintTests {
    let folder: TemporaryFolder
    let vault: FilePath
    let key: FilePath

    init() throws {
        folder = try TemporaryFolder()
        vault = folder.file("vault.lockbox")
        key = folder.file("vault.key")
    }

    /// A format-2 vault with a key-file slot (0) and a passphrase slot (1).
    func makeVault() throws -> SQLiteVaultStore {
        try KeyFile.generate(at: key)
        return try SQLiteVaultStore.create(at: vault, credentials: [.keyFile(key), .passphrase(secret("pass words"))], kdf: testKDF)
    }

    func openWithPassphrase(readOnly: Bool = false) throws -> SQLiteVaultStore {
        try SQLiteVaultStore.open(at: vault, credentials: [.passphrase(secret("pass words"))], readOnly: readOnly)
    }

    func openWithKeyFile(readOnly: Bool = false) throws -> SQLiteVaultStore {
        try SQLiteVaultStore.open(at: vault, credentials: [.keyFile(key)], readOnly: readOnly)
    }

    /// Slot row `index` as stored.
    func slotRow(_ index: Int64) throws -> [UInt8] {
        let connection = try SQLiteConnection(path: vault, create: false, busyTimeout: .seconds(5))
        return try connection.withStatement("SELECT slot FROM key_slots WHERE slot_id = ?") { query in
            try query.bind(1, index)
            return try query.step() ? query.blob(0) : []
        }
    }

    /// Replaces slot row `index` with `bytes`, as anyone who can write the file can.
    func setSlotRow(_ index: Int64, _ bytes: [UInt8]) throws {
        let connection = try SQLiteConnection(path: vault, create: false, busyTimeout: .seconds(5))
        try connection.withStatement("UPDATE key_slots SET slot = ? WHERE slot_id = ?") { update in
            try update.bind(1, bytes)
            try update.bind(2, index)
            _ = try update.step()
        }
    }

    /// A key-file slot row with its body set to `body` and the length field to match.
    static func keyFileRow(body: some Collection<UInt8>) -> [UInt8] {
        [2, UInt8(body.count & 0xFF), UInt8(body.count >> 8)] + Array(body)
    }

    @Test("the fingerprint is BLAKE2b-128 keyed with the key over its own context, as FORMAT.md prints it")
    func derivation() throws {
        let bytes: [UInt8] = (0..<32).map { UInt8($0) }
        #expect(KeyFile.fingerprint(of: SecretBytes(copying: bytes)).hexString == "13c4da548031fdecaaca6e10814797a3")
        // Not the key-file KEK's derivation, and not the key.
        #expect(KeyFile.fingerprintContext != KeySlotCrypto.keyFileContext)
        // Both encodings of one key file give one fingerprint.
        let raw = folder.file("raw.key")
        let hex = folder.file("hex.key")
        #expect(FileManager.default.createFile(atPath: raw.string, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
        let digits = Data((bytes.hexString + "\n").utf8)
        #expect(FileManager.default.createFile(atPath: hex.string, contents: digits, attributes: [.posixPermissions: 0o600]))
        #expect(try KeyFile.fingerprint(at: raw) == "13c4da548031fdecaaca6e10814797a3")
        #expect(try KeyFile.fingerprint(at: hex) == "13c4da548031fdecaaca6e10814797a3")
    }

    @Test("a new format-2 key-file slot records its key file's fingerprint; the key file that opens it confirms it")
    func recordedAtCreation() throws {
        let store = try makeVault()
        let expected = try KeyFile.fingerprint(at: key)
        #expect(try slotRow(0).count == 3 + 88 + 16)
        let slots = try store.keySlots()
        #expect(slots.map(\.keyFileFingerprint) == [expected, nil])
        #expect(slots[0].keyFileFingerprintMatches == true, "created with the key file, so checked against it")
        #expect(slots[0].description == "0: key-file, fingerprint \(expected) (opened this handle)")
        // Opened by the passphrase: shown, not checked.
        let byPassphrase = try openWithPassphrase().keySlots()
        #expect(byPassphrase[0].keyFileFingerprint == expected && byPassphrase[0].keyFileFingerprintMatches == nil)
        // A second key-file slot records its own.
        let second = folder.file("second.key")
        try KeyFile.generate(at: second)
        let index = try store.addKeySlot(.keyFile(second))
        #expect(try store.keySlots()[index].keyFileFingerprint == KeyFile.fingerprint(at: second))
        #expect(try KeyFile.fingerprint(at: second) != expected)
    }

    @Test("a slot without one (an older vault) gets it when its key file opens the vault, not before, and not read-only")
    func recordedOnOpen() throws {
        _ = try makeVault()
        let expected = try KeyFile.fingerprint(at: key)
        let withFingerprint = try slotRow(0)
        try setSlotRow(0, Self.keyFileRow(body: withFingerprint[3..<(3 + 88)]))
        #expect(try openWithPassphrase().keySlots()[0].keyFileFingerprint == nil)
        #expect(try openWithPassphrase().keySlots()[0].description == "0: key-file, fingerprint (not recorded)")
        // Read-only: opens, records nothing.
        #expect(try openWithKeyFile(readOnly: true).keySlots()[0].keyFileFingerprint == nil)
        #expect(try slotRow(0).count == 3 + 88)
        // Opened with the key file: recorded, and the slot still opens with either credential.
        let opened = try openWithKeyFile()
        #expect(try opened.keySlots()[0].keyFileFingerprint == expected)
        #expect(try opened.keySlots()[0].keyFileFingerprintMatches == true)
        #expect(try slotRow(0) == withFingerprint, "the same row as a new slot's: only the fingerprint was added")
        #expect(try openWithPassphrase().keySlots()[0].keyFileFingerprint == expected)
    }

    @Test("recording waits for no writer: with another process's write lock held, the slot opens and stays unrecorded")
    func recordingDoesNotWait() throws {
        _ = try makeVault()
        let withFingerprint = try slotRow(0)
        try setSlotRow(0, Self.keyFileRow(body: withFingerprint[3..<(3 + 88)]))
        let holder = try SQLiteConnection(path: vault, create: false, busyTimeout: .seconds(5))
        try holder.useWriteAheadLog()
        let start = ContinuousClock.now
        try holder.transaction(writing: true) {
            let store = try SQLiteVaultStore.open(at: vault, credentials: [.keyFile(key)], busyTimeout: .seconds(5))
            #expect(try store.keySlots()[0].keyFileFingerprint == nil)
        }
        #expect(ContinuousClock.now - start < .seconds(4), "the open waited for the write lock")
        #expect(try slotRow(0).count == 3 + 88)
        _ = try openWithKeyFile()
        #expect(try slotRow(0) == withFingerprint, "the next open records it")
    }

    @Test("a changed fingerprint is shown as recorded and flagged by the key file that opens the slot; rotate-key rewrites it")
    func tamperedFingerprint() throws {
        _ = try makeVault()
        var row = try slotRow(0)
        row[row.count - 1] ^= 0x01
        try setSlotRow(0, row)
        let tampered = Array(row.suffix(16)).hexString
        // The slot still opens (the fingerprint is a label, not part of the wrap).
        let store = try openWithKeyFile()
        let slot = try store.keySlots()[0]
        #expect(slot.keyFileFingerprint == tampered && slot.keyFileFingerprintMatches == false)
        #expect(slot.description.contains("recorded wrongly"))
        #expect(try openWithPassphrase().keySlots()[0].keyFileFingerprintMatches == nil)
        // Rotation rewraps the slot with the key given and records that key's fingerprint.
        try store.rotateDataKey(credentials: [.keyFile(key), .passphrase(secret("pass words"))])
        let rotated = try openWithKeyFile().keySlots()[0]
        #expect(rotated.keyFileFingerprint == (try KeyFile.fingerprint(at: key)) && rotated.keyFileFingerprintMatches == true)
    }

    @Test("a fingerprint of any length but 16 is a damaged slot: corrupt, with the reason")
    func malformedFingerprint() throws {
        _ = try makeVault()
        let row = try slotRow(0)
        for body in [Array(row[3..<(row.count - 1)]), Array(row[3...]) + [0], Array(row[3..<(3 + 88)]) + [0x41]] {
            try setSlotRow(0, Self.keyFileRow(body: body))
            do {
                _ = try openWithPassphrase()
                Issue.record("a key-file slot of \(body.count) bytes opened")
            } catch let error as LockboxError {
                #expect(error.code == .corruptVault, "\(error)")
                #expect("\(error)".contains("key slot 0 has a key-file fingerprint of \(body.count - 88) bytes, not 16"), "\(error)")
            }
        }
        // A passphrase slot has no fingerprint to end with.
        try setSlotRow(0, row)
        let passphrase = try slotRow(1)
        try setSlotRow(1, [1, UInt8((passphrase.count - 3 + 16) & 0xFF), 0] + Array(passphrase[3...]) + [UInt8](repeating: 7, count: 16))
        #expect(throws: LockboxError.self) { try openWithKeyFile() }
    }

    @Test("format 1 records none and refuses a key-file slot that has one; convert keeps the slot, the next open records it")
    func formatOne() throws {
        try KeyFile.generate(at: key)
        let store = try EncryptedFileStore.create(
            at: vault, credentials: [.keyFile(key), .passphrase(secret("pass words"))], kdf: testKDF)
        #expect(try store.keySlots().map(\.keyFileFingerprint) == [nil, nil])
        let extra = folder.file("extra.key")
        try KeyFile.generate(at: extra)
        try store.addKeySlot(.keyFile(extra))
        #expect(try store.keySlots().map(\.keyFileFingerprint) == [nil, nil, nil], "dropped in memory too")
        let header = try EncryptedFileStore.readSnapshot(at: vault).header
        #expect(header.slots.allSatisfy { $0.keyFileFingerprint == nil })
        // The header parser refuses the longer key-file slot; a format-2 row parser accepts it.
        var slot = KeySlot(
            kind: .keyFile, kdf: nil, salt: [UInt8](repeating: 1, count: 16), nonce: [UInt8](repeating: 2, count: 24),
            wrappedKey: [UInt8](repeating: 3, count: 48), keyFileFingerprint: [UInt8](repeating: 4, count: 16))
        let bytes = slot.encoded()
        #expect(bytes.count == 3 + 104)
        #expect(throws: FormatError.self) {
            try bytes.withUnsafeBytes { buffer in
                var reader = ByteReader(buffer)
                _ = try KeySlot.parse(&reader, index: 0)
            }
        }
        #expect(try KeySlots.parseRow(bytes, index: 0, vault: "v") == slot)
        slot.keyFileFingerprint = nil
        #expect(slot.encoded().count == 3 + 88)

        #expect(try SQLiteVaultStore.convert(formatOneAt: vault, credentials: [.passphrase(secret("pass words"))]) == .converted(items: 0))
        #expect(try openWithPassphrase().keySlots().map(\.keyFileFingerprint) == [nil, nil, nil])
        #expect(try openWithKeyFile().keySlots().map(\.keyFileFingerprint) == [try KeyFile.fingerprint(at: key), nil, nil])
    }

    // MARK: The command line

    func lockbox(_ arguments: [String]) throws -> ProcessResult {
        try runLockbox(
            arguments, environment: ["XDG_CONFIG_HOME": folder.path.string, "XDG_DATA_HOME": folder.path.string])
    }

    @Test("init prints the fingerprint; slot list (text and --json) shows the same; slot fingerprint computes it from the file")
    func commandLine() throws {
        let created = try lockbox(["init", "--vault", vault.string, "--generate-key-file", key.string])
        #expect(created.status == 0, "\(created.stderr)")
        let printed = try #require(created.stderr.firstMatch(of: /Key file fingerprint: ([0-9a-f]{32})/)?.1, "\(created.stderr)")
        let fingerprint = String(printed)
        #expect(fingerprint == (try KeyFile.fingerprint(at: key)))

        let computed = try lockbox(["slot", "fingerprint", key.string])
        #expect(computed.status == 0 && computed.stdoutString == fingerprint + "\n", "\(computed.stderr)")
        let computedJSON = try lockbox(["slot", "fingerprint", key.string, "--json"])
        #expect(computedJSON.jsonObject?["fingerprint"] as? String == fingerprint, "\(computedJSON.stdoutString)")

        // The profile remembers the key file: slot list needs no option.
        let here = ["--vault", vault.string]
        var listed = try lockbox(["slot", "list"] + here)
        #expect(listed.status == 0 && listed.stdoutString == "0: key-file, fingerprint \(fingerprint) (opened this handle)\n", "\(listed)")
        listed = try lockbox(["slot", "list", "--json"] + here)
        let slots = try #require(listed.jsonArray, "\(listed.stdoutString)")
        #expect(slots.first?["keyFileFingerprint"] as? String == fingerprint)
        #expect(slots.first?["keyFileFingerprintMatches"] as? Bool == true)
        #expect(listed.stdoutString.contains("\"kdf\" : null"), "an absent value is null: \(listed.stdoutString)")

        // slot add-key-file prints the new slot's, which slot fingerprint gives for that file.
        let second = folder.file("second.key")
        let added = try lockbox(["slot", "add-key-file", "--generate", second.string] + here)
        #expect(added.status == 0, "\(added.stderr)")
        let secondFingerprint = try lockbox(["slot", "fingerprint", second.string]).stdoutString.trimmingCharacters(in: .newlines)
        #expect(added.stderr.contains("Added key-file slot 1 for \(second.string), fingerprint \(secondFingerprint)."), "\(added.stderr)")
        #expect(
            try lockbox(["slot", "list", "--json"] + here).jsonArray?.map { $0["keyFileFingerprint"] as? String } == [
                fingerprint, secondFingerprint,
            ])

        // A missing or unreadable file: the key file's own error.
        let missing = try lockbox(["slot", "fingerprint", folder.file("gone.key").string])
        #expect(missing.status == 11 && missing.errorCode == .invalidKeyFile, "\(missing.stderr)")
    }

    @Test("slot list with a changed fingerprint: shown, flagged, exit 0; with a malformed one: corrupt, exit 6")
    func commandLineTampered() throws {
        #expect(try lockbox(["init", "--vault", vault.string, "--generate-key-file", key.string]).status == 0)
        var row = try slotRow(0)
        row[row.count - 1] ^= 0x80
        try setSlotRow(0, row)
        let here = ["--vault", vault.string]
        var listed = try lockbox(["slot", "list", "--json"] + here)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.jsonArray?.first?["keyFileFingerprintMatches"] as? Bool == false)
        #expect(listed.jsonArray?.first?["keyFileFingerprint"] as? String == Array(row.suffix(16)).hexString)
        #expect(listed.stderr.contains("slot 0 records a fingerprint that is not its key file's"), "\(listed.stderr)")
        listed = try lockbox(["slot", "list"] + here)
        #expect(listed.status == 0 && listed.stdoutString.contains("recorded wrongly"), "\(listed.stdoutString)")

        try setSlotRow(0, Self.keyFileRow(body: row[3..<(row.count - 3)]))
        listed = try lockbox(["slot", "list"] + here)
        #expect(listed.status == 6 && listed.errorCode == .corruptVault, "\(listed.stderr)")
        #expect(listed.stderr.contains("key-file fingerprint of 13 bytes"), "\(listed.stderr)")
    }
}
