import FoundationEssentials
import Synchronization
import SystemPackage

/// A vault in one encrypted file: the store for servers, containers, CI and SSH sessions, where
/// no Secret Service runs.
///
/// A random 256-bit data key encrypts everything — item names, metadata and secrets — with
/// XChaCha20-Poly1305, the header bound as associated data. The data key is wrapped in key
/// slots, LUKS-style: passphrase slots (Argon2id) and key-file slots (32 random bytes kept in a
/// separate file). docs/FORMAT.md describes the bytes.
///
/// Writes replace the file atomically (temporary file, fsync, rename, fsync the folder) under an
/// exclusive `flock`, after re-reading any change another process made, so concurrent processes
/// never lose an update. Every call checks whether the file changed since it was last read
/// (one `stat`) and reloads it if so. Safe to call from many threads.
public final class EncryptedFileStore: SecretStore {
    /// `false`: reading or rewriting an item needs the vault's passphrase or key file (or an open
    /// re-authentication window in the same session keyring).
    public var isOpenToOtherProcessesOfUser: Bool { false }

    /// The vault file.
    public let path: FilePath
    private let lock: VaultLock
    private let state: Locked<State>
    private let now: @Sendable () -> Date

    private struct State: ~Copyable {
        var dataKey: SecretBytes
        var unlocker: SlotUnlocker?
        var header: VaultHeader
        var entries: [ItemKey: VaultEntry]
        /// The file version `entries` reflect; `nil` forces a reload from disk on the next call
        /// (after a failed write, so memory never disagrees with the file).
        var identity: FileIdentity?
    }

    private init(path: FilePath, lockTimeout: Duration, now: @escaping @Sendable () -> Date, state: consuming State) {
        self.path = path
        self.lock = VaultLock(vaultPath: path, timeout: lockTimeout)
        self.now = now
        self.state = Locked(state)
    }

    // MARK: Locating, creating and opening

    /// The default vault path: ``FileVault/defaultPath(environment:)``, which applies to both formats.
    @available(
        *, deprecated, renamed: "FileVault.defaultPath(environment:)",
        message: "applies to both formats: use FileVault.defaultPath(environment:)"
    )
    public static func defaultPath(environment: [String: String]) -> FilePath {
        FileVault.defaultPath(environment: environment)
    }

    /// Creates a new, empty vault at `path` with one key slot per credential.
    ///
    /// Missing folders are created with mode 0700; the vault file gets mode 0600. Fails with
    /// ``LockboxError/vaultAlreadyExists(path:)`` rather than overwrite anything.
    /// - Parameters:
    ///   - path: where the vault file goes.
    ///   - credentials: at least one passphrase, key file or key; each gets its own key slot, and
    ///     the returned handle is unlocked by the first.
    ///   - kdf: Argon2id cost for passphrase slots.
    ///   - lockTimeout: how long a write waits for another process's lock before failing.
    ///   - now: the clock for item timestamps.
    public static func create(
        at path: FilePath, credentials: [VaultCredential], kdf: KDFParameters = .default,
        lockTimeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> EncryptedFileStore {
        let path = try VaultFile.prepareNewVault(at: path, credentials: credentials)
        // Key derivation (Argon2id) happens before taking the lock, so it never blocks other writers.
        let dataKey = SecretBytes.random(count: Sodium.aeadKeyBytes)
        let vaultID = Sodium.randomBytes(VaultHeader.vaultIDBytes)
        let (slots, unlocker) = try KeySlots.make(for: credentials, dataKey: dataKey, vaultID: vaultID, kdf: kdf)
        let initial = VaultHeader(vaultID: vaultID, generation: 0, slots: slots, bodyNonce: [], bodyLength: 0)
        let lock = VaultLock(vaultPath: path, timeout: lockTimeout)
        let (header, identity) = try lock.withLock { () throws -> (VaultHeader, FileIdentity) in
            try FileVault.checkCanCreate(at: path)
            return try VaultFile.write(header: initial, entries: [:], dataKey: dataKey, to: path)
        }
        return EncryptedFileStore(
            path: path, lockTimeout: lockTimeout, now: now,
            state: State(dataKey: dataKey, unlocker: unlocker, header: header, entries: [:], identity: identity))
    }

    /// Throws unless a vault can be created at `path`: ``FileVault/checkCanCreate(at:)``, which applies to both formats.
    @available(
        *, deprecated, renamed: "FileVault.checkCanCreate(at:)", message: "applies to both formats: use FileVault.checkCanCreate(at:)"
    )
    public static func checkCanCreate(at path: FilePath) throws {
        try FileVault.checkCanCreate(at: path)
    }

    /// Opens the vault at `path` with the first credential that opens one of its key slots.
    ///
    /// Key-file credentials are tried first (cheap), then passphrases (Argon2id per slot).
    public static func open(
        at path: FilePath, credentials: [VaultCredential], lockTimeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> EncryptedFileStore {
        guard !credentials.isEmpty else {
            throw LockboxError.invalidArgument("opening a vault needs a credential: its passphrase or its key file")
        }
        return try open(readSnapshot(at: path), credentials: credentials, lockTimeout: lockTimeout, now: now)
    }

    /// Opens the vault from a file already read (``readSnapshot(at:)``), so a caller that first
    /// looked at the header (for the session window) does not read the file again.
    package static func open(
        _ snapshot: VaultFileSnapshot, credentials: [VaultCredential], lockTimeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> EncryptedFileStore {
        guard !credentials.isEmpty else {
            throw LockboxError.invalidArgument("opening a vault needs a credential: its passphrase or its key file")
        }
        let (path, header) = (snapshot.path, snapshot.header)
        let (dataKey, unlocker) = try KeySlots.open(header.slots, vaultID: header.vaultID, credentials: credentials, path: path)
        let entries = try VaultBodyCodec.entries(
            snapshot.bytes, header: header, headerLength: snapshot.headerLength, dataKey: dataKey, path: path)
        return EncryptedFileStore(
            path: path, lockTimeout: lockTimeout, now: now,
            state: State(dataKey: dataKey, unlocker: unlocker, header: header, entries: entries, identity: snapshot.identity))
    }

    /// The kinds of the vault's key slots: ``FileVault/keySlotKinds(at:)``, which applies to both formats.
    @available(*, deprecated, renamed: "FileVault.keySlotKinds(at:)", message: "applies to both formats: use FileVault.keySlotKinds(at:)")
    public static func keySlotKinds(at path: FilePath) throws -> [Lockbox.KeySlotInfo.Kind] {
        try FileVault.keySlotKinds(at: path)
    }

    /// The sealed bytes of the vault's TPM2 key slots: ``FileVault/sealedKeySlots(at:)``, which applies to both formats.
    @available(
        *, deprecated, renamed: "FileVault.sealedKeySlots(at:)", message: "applies to both formats: use FileVault.sealedKeySlots(at:)"
    )
    public static func sealedKeySlots(at path: FilePath) throws -> [Int: [UInt8]] {
        try FileVault.sealedKeySlots(at: path)
    }

    /// Opens the vault at `path` with one credential. See ``open(at:credentials:lockTimeout:now:)``.
    public static func open(
        at path: FilePath, credential: VaultCredential, lockTimeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> EncryptedFileStore {
        try open(at: path, credentials: [credential], lockTimeout: lockTimeout, now: now)
    }

    // MARK: SecretStore

    public func get(_ key: ItemKey) throws -> SecretBytes? {
        try withFreshState { $0.entries[key]?.secret }
    }

    public func metadata(_ key: ItemKey) throws -> ItemMetadata? {
        try withFreshState { $0.entries[key]?.metadata }
    }

    public func item(_ key: ItemKey) throws -> StoredItem? {
        try withFreshState { state in state.entries[key].map { StoredItem(metadata: $0.metadata, secret: $0.secret) } }
    }

    public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws {
        try ItemLimits.validate(key, options: options, secretCount: secret.count)
        let time = timestamp()
        try mutateEntries { entries throws in
            let metadata = ItemMetadata(key: key, options: options, created: entries[key]?.metadata.created ?? time, modified: time)
            entries[key] = VaultEntry(metadata: metadata, secret: secret)
            return ((), true)
        }
    }

    /// Checks `condition` against the item stored now and writes, under the vault's `flock` after
    /// re-reading the file, so no other writer on this host comes between the check and the write.
    @discardableResult
    public func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) throws -> Bool {
        try ItemLimits.validate(key, options: changes.options(over: nil), secretCount: secret.count)
        let time = timestamp()
        return try mutateEntries { entries throws in
            let existing = entries[key]
            guard condition.holds(for: existing?.secret) else { return (false, false) }
            let options = changes.options(over: existing?.metadata)
            try ItemLimits.validate(key, options: options, secretCount: secret.count)
            let metadata = ItemMetadata(key: key, options: options, created: existing?.metadata.created ?? time, modified: time)
            entries[key] = VaultEntry(metadata: metadata, secret: secret)
            return (true, true)
        }
    }

    /// Compares and deletes under the vault's `flock` (see ``set(_:for:changes:when:)``).
    @discardableResult
    public func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) throws -> Bool {
        try mutateEntries { entries throws in
            guard let current = entries[key], current.secret == expected else { return (false, false) }
            entries[key] = nil
            return (true, true)
        }
    }

    /// Stores every write with one rewrite of the vault file: after a crash the file holds all of
    /// them or none. Later writes to the same key win, as with separate calls.
    public func set(_ writes: [ItemWrite]) throws {
        for write in writes { try ItemLimits.validate(write.key, options: write.options, secretCount: write.secret.count) }
        guard !writes.isEmpty else { return }
        let time = timestamp()
        try mutateEntries { entries throws in
            for write in writes {
                let metadata = ItemMetadata(
                    key: write.key, options: write.options, created: entries[write.key]?.metadata.created ?? time, modified: time)
                entries[write.key] = VaultEntry(metadata: metadata, secret: write.secret)
            }
            return ((), true)
        }
    }

    /// Removes every key's item with one rewrite of the vault file (none if nothing was there).
    @discardableResult
    public func delete(_ keys: [ItemKey]) throws -> [ItemKey] {
        guard !keys.isEmpty else { return [] }
        return try mutateEntries { entries throws in
            let removed = keys.filter { entries.removeValue(forKey: $0) != nil }
            return (removed, !removed.isEmpty)
        }
    }

    @discardableResult
    public func delete(_ key: ItemKey) throws -> Bool {
        try mutateEntries { entries throws in
            let removed = entries.removeValue(forKey: key) != nil
            return (removed, removed)
        }
    }

    public func list(service: String?) throws -> [ItemMetadata] {
        try withFreshState { state in
            state.entries.values.lazy.map(\.metadata).filter { service == nil || $0.key.service == service }
        }.sortedForListing()
    }

    @discardableResult
    public func wipe(service: String) throws -> Int {
        try mutateEntries { entries throws in
            let doomed = entries.keys.filter { $0.service == service }
            for key in doomed { entries.removeValue(forKey: key) }
            return (doomed.count, !doomed.isEmpty)
        }
    }

    @discardableResult
    public func wipeAll() throws -> Int {
        try mutateEntries { entries throws in
            let count = entries.count
            entries.removeAll()
            return (count, count > 0)
        }
    }

    // MARK: Key slots

    /// The old name of ``Lockbox/KeySlotInfo``, which describes a key slot of a vault in either
    /// format.
    @available(*, deprecated, message: "KeySlotInfo is a top-level type now: it describes a key slot of either format.")
    public typealias KeySlotInfo = Lockbox.KeySlotInfo

    /// The vault's key slots, in order.
    public func keySlots() throws -> [Lockbox.KeySlotInfo] {
        try withFreshState { state in
            state.header.slots.enumerated().map { index, slot in
                Lockbox.KeySlotInfo(
                    index: index, kind: Lockbox.KeySlotInfo.Kind(slot.kind), kdf: slot.kdf,
                    openedThisHandle: state.unlocker?.opened(slot) ?? false)
            }
        }
    }

    /// Adds a key slot that `credential` opens; returns its index. The data key is unchanged.
    @discardableResult
    public func addKeySlot(_ credential: VaultCredential, kdf: KDFParameters = .default) throws -> Int {
        let source = try KeySlots.source(for: credential, kdf: kdf)
        return try mutateHeader { state throws in
            (try KeySlots.add(source, to: &state.header.slots, dataKey: state.dataKey, vaultID: state.header.vaultID), nil)
        }
    }

    /// Removes the key slot at `index`. The last slot cannot be removed.
    public func removeKeySlot(at index: Int) throws {
        try mutateHeader { state throws in
            try KeySlots.remove(at: index, from: &state.header.slots, unlocker: &state.unlocker)
            return ((), nil)
        }
    }

    /// Replaces a passphrase slot with one for `newPassphrase`, wrapping the same data key.
    ///
    /// Throws ``LockboxError/keySlot(_:)`` when there is no such passphrase slot, or when `slot`
    /// is `nil` and the vault has several passphrase slots, none of which opened this handle.
    /// - Parameters:
    ///   - newPassphrase: the new passphrase; must not be empty.
    ///   - kdf: Argon2id cost for the new slot.
    ///   - slot: which passphrase slot; by default the one that opened this handle, or the
    ///     vault's only passphrase slot.
    public func changePassphrase(to newPassphrase: SecretBytes, kdf: KDFParameters = .default, slot: Int? = nil) throws {
        let source = try KeySlots.source(for: .passphrase(newPassphrase), kdf: kdf)
        try mutateHeader { state throws in
            try KeySlots.changePassphrase(
                in: &state.header.slots, to: source, target: slot, unlocker: &state.unlocker,
                dataKey: state.dataKey, vaultID: state.header.vaultID)
            return ((), nil)
        }
    }

    /// Replaces the data key with a fresh one and re-encrypts the vault under it.
    ///
    /// Every key slot must be rewrapped, so each needs its credential: the one that opened this
    /// handle is remembered; give the others in `credentials`. Slots that no credential opens
    /// make the call fail, unless `dropUnmatchedSlots` is set, in which case they are removed.
    public func rotateDataKey(credentials: [VaultCredential] = [], dropUnmatchedSlots: Bool = false) throws {
        let sources = try credentials.map { credential throws in try KeySlots.source(for: credential, kdf: .default) }
        try mutateHeader { state throws in
            let (slots, newKey) = try KeySlots.rotated(
                state.header.slots, vaultID: state.header.vaultID, unlocker: state.unlocker, sources: sources,
                dropUnmatched: dropUnmatchedSlots)
            state.header.slots = slots
            return ((), newKey)
        }
    }

    // MARK: Re-authentication support

    /// Checks `passphrase` against the vault's passphrase slots (Argon2id); throws
    /// ``LockboxError/wrongCredential(path:)`` if none opens. Proves a person is present, where a
    /// key file (a service's credential) does not.
    public func verifyPassphrase(_ passphrase: SecretBytes) throws {
        let source = try KeySlots.source(for: .passphrase(passphrase), kdf: .default)
        let header = try withFreshState { $0.header }
        try KeySlots.verify(source, header.slots, vaultID: header.vaultID, path: path)
    }

    /// A fingerprint of the vault's key slots: it changes with any passphrase change, slot
    /// change or data-key rotation, which closes re-authentication windows opened before.
    public func credentialFingerprint() throws -> String {
        try withFreshState { Self.fingerprint(of: $0.header) }
    }

    static func fingerprint(of header: VaultHeader) -> String {
        KeySlots.fingerprint(header.slots, vaultID: header.vaultID)
    }

    /// The vault's ID and the data key, for a session window (kernel keyring).
    package func windowMaterial() throws -> (vaultID: [UInt8], fingerprint: String, dataKey: SecretBytes) {
        try withFreshState { state in (state.header.vaultID, Self.fingerprint(of: state.header), state.dataKey) }
    }

    /// Opens the vault with a data key taken from a session window, if it still opens it and
    /// the key slots are as they were when the window opened. The body is decrypted once.
    package static func open(
        _ snapshot: VaultFileSnapshot, windowDataKey dataKey: SecretBytes, fingerprint: String,
        lockTimeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> EncryptedFileStore? {
        let (path, header) = (snapshot.path, snapshot.header)
        guard Self.fingerprint(of: header) == fingerprint,
            let plaintext = VaultBodyCodec.decrypt(snapshot.bytes, header: header, headerLength: snapshot.headerLength, dataKey: dataKey)
        else { return nil }
        let entries = try VaultBodyCodec.decode(plaintext, path: path)
        return EncryptedFileStore(
            path: path, lockTimeout: lockTimeout, now: now,
            state: State(dataKey: dataKey, unlocker: nil, header: header, entries: entries, identity: snapshot.identity))
    }

    /// Everything a vault in another format needs to hold this one unchanged: the vault ID, the
    /// key slots (whose wraps bind the vault ID, so they move as they are), the data key and
    /// every item as stored. For ``SQLiteVaultStore/convert(formatOneAt:credentials:lockTimeout:)``.
    package func contentsForConversion() throws -> (
        vaultID: [UInt8], slots: [KeySlot], dataKey: SecretBytes, entries: [ItemKey: VaultEntry]
    ) {
        try withFreshState { state in (state.header.vaultID, state.header.slots, state.dataKey, state.entries) }
    }

    /// The vault's ID, read from its header without any credential.
    package static func vaultID(at path: FilePath) throws -> [UInt8] {
        try readSnapshot(at: path).header.vaultID
    }

    /// The vault file at `path` (symbolic links resolved), read once and its header parsed: what
    /// the session window and the credentials then open without reading the file again.
    package static func readSnapshot(at path: FilePath) throws -> VaultFileSnapshot {
        try VaultFile.snapshot(at: path)
    }

    // MARK: Reading and writing the file

    private func timestamp() -> Date {
        VaultPayload.date(milliseconds: VaultPayload.milliseconds(now()))
    }

    /// Runs `body` on state that reflects the file as it is now.
    private func withFreshState<T: Sendable>(_ body: (borrowing State) -> T) throws -> T {
        try state.withLock { (state: inout State) throws -> T in
            try reloadIfChanged(&state)
            return body(state)
        }
    }

    /// Read-modify-write of the items under the cross-process lock; writes only if `body` says
    /// it changed something.
    private func mutateEntries<T: Sendable>(
        _ body: (inout [ItemKey: VaultEntry]) throws -> (T, changed: Bool)
    ) throws -> T {
        try state.withLock { (state: inout State) throws -> T in
            try lock.withLock { () throws -> T in
                try reloadIfChanged(&state)
                // Changed in place (no copy of a possibly large dictionary); if anything fails,
                // the next call reloads the file, which still holds the old state.
                do {
                    let (result, changed) = try body(&state.entries)
                    if changed {
                        let (header, identity) = try VaultFile.write(
                            header: state.header, entries: state.entries, dataKey: state.dataKey, to: path)
                        state.header = header
                        state.identity = identity
                    }
                    return result
                } catch {
                    state.identity = nil
                    throw error
                }
            }
        }
    }

    /// Read-modify-write of the header (key slots) under the cross-process lock. `body` may
    /// return a new data key, under which the items are then re-encrypted.
    private func mutateHeader<T: Sendable>(
        _ body: (inout State) throws -> (T, newDataKey: SecretBytes?)
    ) throws -> T {
        try state.withLock { (state: inout State) throws -> T in
            try lock.withLock { () throws -> T in
                try reloadIfChanged(&state)
                let saved = (state.header, state.unlocker)
                let result: T
                let newKey: SecretBytes?
                do {
                    (result, newKey) = try body(&state)
                } catch {
                    (state.header, state.unlocker) = saved
                    throw error
                }
                let dataKey = newKey ?? state.dataKey
                do {
                    let (header, identity) = try VaultFile.write(
                        header: state.header, entries: state.entries, dataKey: dataKey, to: path)
                    state.header = header
                    state.identity = identity
                    state.dataKey = dataKey
                } catch {
                    (state.header, state.unlocker) = saved
                    throw error
                }
                return result
            }
        }
    }

    /// If the file changed since it was last read (another process wrote it), reads it again.
    private func reloadIfChanged(_ state: inout State) throws {
        if try VaultFile.identity(path) == state.identity { return }
        let snapshot = try VaultFile.snapshot(resolved: path)
        let header = snapshot.header
        var dataKey = state.dataKey
        var plaintext = VaultBodyCodec.decrypt(snapshot.bytes, header: header, headerLength: snapshot.headerLength, dataKey: dataKey)
        if plaintext == nil {
            // The data key may have been rotated: the slot that opened this handle still opens it.
            guard let rotated = KeySlots.reopen(header.slots, vaultID: header.vaultID, with: state.unlocker) else {
                throw LockboxError.credentialsChanged(path: path.string)
            }
            dataKey = rotated
            plaintext = VaultBodyCodec.decrypt(snapshot.bytes, header: header, headerLength: snapshot.headerLength, dataKey: dataKey)
        }
        guard let plaintext else {
            throw LockboxError.corruptVault(path: path.string, reason: "the encrypted contents failed authentication")
        }
        state.entries = try VaultBodyCodec.decode(plaintext, path: path)
        state.header = header
        state.dataKey = dataKey
        state.identity = snapshot.identity
    }
}
