import FoundationEssentials
import SystemPackage

extension SQLiteVaultStore {
    /// What ``convert(formatOneAt:credentials:lockTimeout:)`` did.
    public enum Conversion: Sendable, Equatable {
        /// The format-1 vault was replaced by a format-2 vault holding these many items.
        case converted(items: Int)
        /// The vault was already in format 2 (and opens with the credentials given).
        case alreadyFormat2
    }

    /// The two passes of a conversion over the items, as its progress reports them.
    public enum ConversionStep: Sendable, Equatable {
        /// Sealing each item into a row of the new database.
        case writing
        /// Reading each row of the finished database back and comparing it with the old vault's item.
        case checking
    }

    /// Converts the format-1 vault at `path` to format 2 in place, keeping its vault ID, data
    /// key, key slots (so every passphrase, key file and TPM slot still opens it) and every item
    /// byte for byte, times and attributes included.
    ///
    /// Holds the format-1 vault's lock throughout, so no format-1 writer's change is lost. The new
    /// database is built beside the vault, fsynced, then read back and compared item by item
    /// with the old contents; only then does it replace the old file, atomically (`rename`):
    /// at every moment `path` is the old vault or the proved new one. Re-runnable: a vault
    /// already in format 2 is left alone (``Conversion/alreadyFormat2``), and a temporary file
    /// left by an interrupted run is not in the way.
    public static func convert(
        formatOneAt path: FilePath, credentials: [VaultCredential], lockTimeout: Duration = .seconds(10)
    ) throws -> Conversion {
        try convert(formatOneAt: path, credentials: credentials, lockTimeout: lockTimeout, progress: nil)
    }

    /// ``convert(formatOneAt:credentials:lockTimeout:)``, calling `progress` on this thread with the
    /// pass it is in, the items that pass has done and the items in all, after each item of each
    /// pass (writing the new database, then checking it).
    ///
    /// - Parameters:
    ///   - path: The format-1 vault.
    ///   - credentials: What opens it (a passphrase, a key file, a TPM).
    ///   - lockTimeout: How long to wait for the vault's lock.
    ///   - progress: Called with (pass, items done in it, items in all), or `nil`.
    public static func convert(
        formatOneAt path: FilePath, credentials: [VaultCredential], lockTimeout: Duration,
        progress: ((_ step: ConversionStep, _ done: Int, _ total: Int) -> Void)?
    ) throws -> Conversion {
        let path = VaultFile.resolvedPath(path)
        if VaultFileFormat.detect(at: path).isDatabase {
            _ = try open(at: path, credentials: credentials, busyTimeout: lockTimeout)
            return .alreadyFormat2
        }
        let old = try EncryptedFileStore.open(at: path, credentials: credentials, lockTimeout: lockTimeout)
        return try VaultLock(vaultPath: path, timeout: lockTimeout).withLock { () throws -> Conversion in
            if VaultFileFormat.detect(at: path).isDatabase { return .alreadyFormat2 }  // another converter finished first
            // A conversion killed before it finished left its full sealed copy; no other is being
            // built now (this lock), and the copy would still open with credentials retired later.
            removeUnfinishedCopies(of: path)
            let contents = try old.contentsForConversion()
            let total = contents.entries.count
            try build(
                at: path, replacing: true, vaultID: contents.vaultID, slots: contents.slots, dataKey: contents.dataKey,
                entries: contents.entries, busyTimeout: lockTimeout, sealed: progress.map { report in { report(.writing, $0, total) } }
            ) { temporary in
                try verifyConversion(temporary, against: contents, checked: progress.map { report in { report(.checking, $0, total) } })
            }
            return .converted(items: contents.entries.count)
        }
    }

    /// Removes the temporary databases ``createTemporary(beside:)`` makes for `path`
    /// (`.NAME.new-HEX`) that an interrupted conversion left; call it holding the vault's lock.
    static func removeUnfinishedCopies(of path: FilePath) {
        guard let name = path.lastComponent?.string else { return }
        let folder = path.removingLastComponent()
        let prefix = ".\(name).new-"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder.isEmpty ? "." : folder.string)) ?? []
        for entry in entries where entry.hasPrefix(prefix) && entry.dropFirst(prefix.count).allSatisfy(\.isHexDigit) {
            let copy = folder.appending(entry)
            guard (try? copy.stat(followTargetSymlink: false))?.type == .regular else { continue }
            try? copy.unlinkIfPresent()
        }
    }

    /// Reads the finished database at `temporary` back and compares it with what it must hold.
    /// `checked` is called with the rows checked so far after each one.
    private static func verifyConversion(
        _ temporary: FilePath,
        against contents: (vaultID: [UInt8], slots: [KeySlot], dataKey: SecretBytes, entries: [ItemKey: VaultEntry]),
        checked: ((Int) -> Void)?
    ) throws {
        func mismatch(_ what: String) -> LockboxError {
            LockboxError.corruptVault(
                path: temporary.string, reason: "the converted vault failed its check (\(what)); the format-1 vault was left as it was")
        }
        let connection = try SQLiteConnection(path: temporary, create: false, busyTimeout: .seconds(1))
        try checkIdentity(connection, path: temporary)
        let (vaultID, keyCheck, slots) = try connection.transaction(writing: false) { try readVaultRow(connection, path: temporary) }
        let records = VaultRecords(vaultID: contents.vaultID, dataKey: contents.dataKey)
        guard vaultID == contents.vaultID, keyCheck == records.keyCheck else { throw mismatch("vault row") }
        guard slots.map(\.slot) == contents.slots else { throw mismatch("key slots") }
        var seen = 0
        let rows = try connection.prepare("SELECT address, metadata, secret FROM items")
        while try rows.step() {
            let (address, metadataColumn, secretColumn) = (rows.blob(0), rows.blob(1), rows.blob(2))
            let (metadata, reserved): (ItemMetadata, [String: String])
            let secret: SecretBytes
            do {
                (metadata, reserved) = try records.openMetadata(metadataColumn, address: address)
                secret = try records.openSecret(secretColumn, address: address, metadata: metadataColumn)
            } catch let error as FormatError {
                throw mismatch(error.reason)
            }
            guard let original = contents.entries[metadata.key], original.metadata == metadata,
                original.secret == secret, original.unknownReservedAttributes == reserved
            else { throw mismatch("an item differs from the format-1 vault's") }
            seen += 1
            checked?(seen)
        }
        guard seen == contents.entries.count else { throw mismatch("\(seen) items instead of \(contents.entries.count)") }
    }
}
