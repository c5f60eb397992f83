import FoundationEssentials
import SystemPackage

extension SQLiteVaultStore {
    /// Writes a backup of this format-2 vault to `path`: one self-contained format-2 database
    /// (docs/FORMAT.md, "Backups of a format-2 vault"), never a `-wal` or `-shm` beside it.
    ///
    /// The backup is a consistent snapshot of the database (SQLite's `VACUUM INTO`, taken in one
    /// read transaction while other processes go on writing), so every item is copied sealed, as
    /// it is, with its times and attributes; nothing is decrypted but, with `service`, the
    /// metadata that says which rows to leave out. It keeps the vault's key slots (whatever
    /// opened the vault when the backup was made opens the backup) and gains one for
    /// `passphrase`, so it also opens away from the vault's key file or TPM. It is written under a
    /// temporary name with mode 0600, fsynced, and linked into place only when complete: `path`
    /// never shows a partial backup, and an existing file is never overwritten
    /// (``LockboxError/vaultAlreadyExists(path:)``).
    ///
    /// - Returns: the number of items in the backup.
    @discardableResult
    public func backup(to path: FilePath, passphrase: SecretBytes, kdf: KDFParameters = .default, service: String? = nil) throws -> Int {
        try backup(to: path, passphrase: passphrase, kdf: kdf, service: service, afterSnapshot: {})
    }

    /// ``backup(to:passphrase:kdf:service:)`` with `afterSnapshot` run between taking the snapshot
    /// and reading it: where a test changes the vault to show the backup is the snapshot's.
    @discardableResult
    package func backup(
        to path: FilePath, passphrase: SecretBytes, kdf: KDFParameters = .default, service: String? = nil,
        afterSnapshot: () throws -> Void
    ) throws -> Int {
        let path = try VaultFile.prepareNewVault(at: path, credentials: [.passphrase(passphrase)])
        let source = try KeySlots.source(for: .passphrase(passphrase), kdf: kdf)
        let temporary = try Self.createTemporary(beside: path)
        var placed = false
        defer { if !placed { try? temporary.unlinkIfPresent() } }
        let count = try Self.fill(temporary, from: self, source: source, service: service, afterSnapshot: afterSnapshot)
        try Self.syncFile(temporary)
        try Self.place(temporary, at: path, replacing: false)
        placed = true
        return count
    }

    /// Copies the vault into the empty file `temporary`, drops the rows of other services, adds
    /// the backup's slot; returns the item count. `afterSnapshot` runs between the snapshot and
    /// reading it (tests rotate the vault's data key there).
    private static func fill(
        _ temporary: FilePath, from store: SQLiteVaultStore, source: KEKSource, service: String?,
        afterSnapshot: () throws -> Void
    ) throws -> Int {
        // A separate connection: VACUUM INTO cannot run inside the transactions the store's own
        // connection runs everything in, and it needs no lock of ours (it reads one snapshot).
        let busyTimeout = try store.currentKeys().busyTimeout
        let original =
            try store.readOnlyCause.map { cause in
                try SQLiteConnection(path: store.path, readOnly: try readOnlyAccess(store.path, cause: cause), busyTimeout: busyTimeout)
            } ?? SQLiteConnection(path: store.path, create: false, busyTimeout: busyTimeout)
        try original.snapshot(into: temporary)
        try afterSnapshot()
        let copy = try SQLiteConnection(path: temporary, create: false, busyTimeout: busyTimeout)
        try copy.execute("PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL;")
        try checkIdentity(copy, path: temporary)
        let (count, removed) = try copy.transaction(writing: true) { () throws -> (Int, Bool) in
            let (vaultID, keyCheck, rows) = try readVaultRow(copy, path: temporary)
            // The snapshot's own slots give its data key, whether or not another process rotated
            // the vault's key since (a backup taken during a rotation is the vault before it).
            let (dataKey, records) = try store.keys(ofCopyWith: vaultID, keyCheck: keyCheck, slots: rows.map(\.slot))
            var doomed: [[UInt8]] = []
            if let service {
                try forEachMetadata(copy, records: records, path: store.path) { metadata, address in
                    if metadata.key.service != service { doomed.append(address) }
                }
                try deleteRows(doomed, copy)
            }
            var slots = rows.map(\.slot)
            let index = try KeySlots.add(source, to: &slots, dataKey: dataKey, vaultID: vaultID)
            try insertSlot(slots[index], after: rows, copy)
            return (Int(try copy.queryInteger("SELECT count(*) FROM items") ?? 0), !doomed.isEmpty)
        }
        // Rows left out are zeroed (secure_delete); VACUUM also drops their pages.
        if removed { try copy.execute("VACUUM") }
        return count
    }
}

extension SQLiteConnection {
    /// Writes a consistent copy of the database into the empty file at `target` (`VACUUM INTO`:
    /// one read transaction, no free pages, in rollback-journal mode so it needs no `-wal`).
    /// SQLite keeps the file's mode: create it 0600 first.
    package func snapshot(into target: FilePath) throws {
        let statement = try prepare("VACUUM INTO ?")
        try statement.bind(1, text: target.string)
        try statement.step()
    }
}
