import Foundation
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

    /// The largest vault file Lockbox reads (1 GiB).
    static let maximumFileBytes = 1 << 30

    /// What remembers which slot opened the vault, so a change by another process that keeps the
    /// slot (an added item, an added slot, a rotated data key) does not need the credential again.
    private struct Unlocker {
        var kind: KeySlot.Kind
        var salt: [UInt8]
        var kek: SecretBytes
    }

    private struct State: ~Copyable {
        var dataKey: SecretBytes
        var unlocker: Unlocker?
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

    /// `$XDG_DATA_HOME/lockbox/vault.lockbox`, or `~/.local/share/lockbox/vault.lockbox` when
    /// `XDG_DATA_HOME` is unset or not absolute (as the XDG Base Directory spec requires), from
    /// the `environment` the program passes (Lockbox reads no environment variable itself).
    public static func defaultPath(environment: [String: String]) -> FilePath {
        let dataHome: FilePath
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            dataHome = FilePath(xdg)
        } else {
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? FileManager.default.homeDirectoryForCurrentUser.path
            dataHome = FilePath(home).appending(".local/share")
        }
        return dataHome.appending("lockbox/vault.lockbox")
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
        guard !credentials.isEmpty else {
            throw LockboxError.invalidArgument("a new vault needs at least one credential: a passphrase or a key file")
        }
        do {
            try path.removingLastComponent().createDirectories(permissions: .ownerReadWriteExecute)
        } catch {
            throw LockboxError.io(operation: "creating the vault's folder", path: path.removingLastComponent().string, errno: error.asErrno)
        }
        try checkCanCreate(at: path)
        let path = resolvedVaultPath(path)
        // Key derivation (Argon2id) happens before taking the lock, so it never blocks other writers.
        let dataKey = SecretBytes.random(count: Sodium.aeadKeyBytes)
        let vaultID = Sodium.randomBytes(VaultHeader.vaultIDBytes)
        var slots: [KeySlot] = []
        var unlocker: Unlocker?
        for credential in credentials {
            let source = try loadKEKSource(credential, kdf: kdf)
            let (slot, kek) = try KeySlotCrypto.makeSlot(wrapping: dataKey, vaultID: vaultID, using: source)
            slots.append(slot)
            if unlocker == nil { unlocker = Unlocker(kind: slot.kind, salt: slot.salt, kek: kek) }
        }
        let initial = VaultHeader(vaultID: vaultID, generation: 0, slots: slots, bodyNonce: [], bodyLength: 0)
        let lock = VaultLock(vaultPath: path, timeout: lockTimeout)
        let (header, identity) = try lock.withLock { () throws -> (VaultHeader, FileIdentity) in
            try checkCanCreate(at: path)
            return try sealAndWrite(header: initial, entries: [:], dataKey: dataKey, to: path)
        }
        return EncryptedFileStore(
            path: path, lockTimeout: lockTimeout, now: now,
            state: State(dataKey: dataKey, unlocker: unlocker, header: header, entries: [:], identity: identity))
    }

    /// Throws unless nothing is at `path`, saying what is there:
    /// ``LockboxError/vaultAlreadyExists(path:)`` for a vault (or a link to one), and
    /// ``LockboxError/invalidArgument(_:)`` for a directory, a dangling symbolic link, a special
    /// file or a file that is not a vault. Never blocks on a FIFO.
    public static func checkCanCreate(at path: FilePath) throws {
        guard let link = try? path.stat(followTargetSymlink: false) else { return }
        if link.type == .symbolicLink, (try? path.stat()) == nil {
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: path.string)) ?? "?"
            throw LockboxError.invalidArgument(
                "\(path.string) is a symbolic link to \(target), which does not exist; Lockbox does not create a vault through a dangling link. Remove the link, or choose another path with --vault.")
        }
        guard let status = try? path.stat() else { return }
        guard status.type == .regular else {
            throw LockboxError.invalidArgument(
                "\(path.string) is \(describe(status.type)), not a vault; refusing to create one there. Name the vault file with --vault (e.g. \(path.string)/vault.lockbox for a directory).")
        }
        var start = [UInt8](repeating: 0, count: VaultHeader.magic.count)
        if let fd = try? FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .nonBlocking]) {
            _ = try? fd.closeAfter { try start.withUnsafeMutableBytes { try fd.read(into: $0) } }
        }
        if start == VaultHeader.magic { throw LockboxError.vaultAlreadyExists(path: path.string) }
        throw LockboxError.invalidArgument(
            "a file that is not a Lockbox vault (\(status.size) bytes) is at \(path.string); refusing to overwrite it. Choose another path with --vault, or move the file away deliberately.")
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
        let ordered = credentials.filter { if case .passphrase = $0 { false } else { true } }
            + credentials.filter { if case .passphrase = $0 { true } else { false } }
        var opened: (SecretBytes, Unlocker)?
        var sealerError: (any Error)?  // why a TPM2 slot could not be opened, if none opened
        search: for credential in ordered {
            let source = try loadKEKSource(credential, kdf: .default)
            for slot in header.slots where slot.kind == source.slotKind {
                let kek: SecretBytes
                do {
                    kek = try KeySlotCrypto.deriveKEK(for: slot, from: source)
                } catch where slot.kind == .tpm2 {
                    sealerError = sealerError ?? error
                    continue
                }
                if let dataKey = KeySlotCrypto.unwrap(slot, vaultID: header.vaultID, kek: kek) {
                    opened = (dataKey, Unlocker(kind: slot.kind, salt: slot.salt, kek: kek))
                    break search
                }
            }
        }
        guard let (dataKey, unlocker) = opened else { throw sealerError ?? LockboxError.wrongCredential(path: path.string) }
        let entries = try decryptEntries(snapshot.bytes, header: header, headerLength: snapshot.headerLength, dataKey: dataKey, path: path)
        return EncryptedFileStore(
            path: path, lockTimeout: lockTimeout, now: now,
            state: State(dataKey: dataKey, unlocker: unlocker, header: header, entries: entries, identity: snapshot.identity))
    }

    /// The kinds of the vault's key slots, in order, read from its header without any credential
    /// (to know whether a TPM could open it before asking for a passphrase).
    public static func keySlotKinds(at path: FilePath) throws -> [KeySlotInfo.Kind] {
        let path = resolvedVaultPath(path)
        let file = try readVaultFile(path)
        return try parseHeader(file.bytes, path: path).0.slots.map { KeySlotInfo.Kind($0.kind) }
    }

    /// The sealed bytes of the vault's TPM2 key slots, by slot index, read without any credential
    /// (to tell whether a slot needs a PIN before asking for one).
    public static func sealedKeySlots(at path: FilePath) throws -> [Int: [UInt8]] {
        let path = resolvedVaultPath(path)
        let file = try readVaultFile(path)
        var result: [Int: [UInt8]] = [:]
        for (index, slot) in try parseHeader(file.bytes, path: path).0.slots.enumerated() where slot.kind == .tpm2 {
            result[index] = slot.sealed
        }
        return result
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
            let metadata = ItemMetadata(
                key: key, kind: options.kind, label: options.resolvedLabel(for: key),
                created: entries[key]?.metadata.created ?? time, modified: time, attributes: options.attributes,
                access: options.access)
            entries[key] = VaultEntry(metadata: metadata, secret: secret)
            return ((), true)
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
                    key: write.key, kind: write.options.kind, label: write.options.resolvedLabel(for: write.key),
                    created: entries[write.key]?.metadata.created ?? time, modified: time,
                    attributes: write.options.attributes, access: write.options.access)
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

    /// What a key slot is, without any of its key material.
    public struct KeySlotInfo: Sendable, Hashable, CustomStringConvertible {
        /// The kinds of key slot.
        public enum Kind: String, Sendable, Hashable {
            /// Opened by a passphrase (Argon2id).
            case passphrase
            /// Opened by a key file.
            case keyFile = "key-file"
            /// Opened by a secret a TPM keeps (``VaultCredential/sealed(_:)``).
            case tpm2

            init(_ kind: KeySlot.Kind) {
                switch kind {
                case .passphrase: self = .passphrase
                case .keyFile: self = .keyFile
                case .tpm2: self = .tpm2
                }
            }
        }
        /// The slot's position, as `removeKeySlot(at:)` and `lockbox slot remove` take it.
        public var index: Int
        /// What opens the slot.
        public var kind: Kind
        /// Argon2id cost, for passphrase slots.
        public var kdf: KDFParameters?
        /// Whether this handle was opened through this slot.
        public var openedThisHandle: Bool

        /// `0: passphrase, Argon2id(t=3, m=256 MiB)`.
        public var description: String {
            "\(index): \(kind.rawValue)" + (kdf.map { ", \($0)" } ?? "") + (openedThisHandle ? " (opened this handle)" : "")
        }
    }

    /// The vault's key slots, in order.
    public func keySlots() throws -> [KeySlotInfo] {
        try withFreshState { state in
            state.header.slots.enumerated().map { index, slot in
                KeySlotInfo(
                    index: index, kind: KeySlotInfo.Kind(slot.kind), kdf: slot.kdf,
                    openedThisHandle: state.unlocker.map { $0.kind == slot.kind && $0.salt == slot.salt } ?? false)
            }
        }
    }

    /// Adds a key slot that `credential` opens; returns its index. The data key is unchanged.
    @discardableResult
    public func addKeySlot(_ credential: VaultCredential, kdf: KDFParameters = .default) throws -> Int {
        let source = try Self.loadKEKSource(credential, kdf: kdf)
        return try mutateHeader { state throws in
            guard state.header.slots.count < VaultHeader.maxSlots else {
                throw LockboxError.keySlot("the vault already has \(VaultHeader.maxSlots) key slots, the most it can hold; remove one first")
            }
            let (slot, _) = try KeySlotCrypto.makeSlot(wrapping: state.dataKey, vaultID: state.header.vaultID, using: source)
            state.header.slots.append(slot)
            return (state.header.slots.count - 1, nil)
        }
    }

    /// Removes the key slot at `index`. The last slot cannot be removed.
    public func removeKeySlot(at index: Int) throws {
        try mutateHeader { state throws in
            guard state.header.slots.indices.contains(index) else {
                throw LockboxError.keySlot("there is no key slot \(index)")
            }
            guard state.header.slots.count > 1 else {
                throw LockboxError.keySlot("refusing to remove the last key slot: nothing could open the vault after that. Add another slot first.")
            }
            let removed = state.header.slots.remove(at: index)
            if let unlocker = state.unlocker, unlocker.kind == removed.kind, unlocker.salt == removed.salt {
                state.unlocker = nil
            }
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
        let source = try Self.loadKEKSource(.passphrase(newPassphrase), kdf: kdf)
        try mutateHeader { state throws in
            let slots = state.header.slots
            let passphraseSlots = slots.indices.filter { slots[$0].kind == .passphrase }
            let target: Int
            if let slot {
                guard passphraseSlots.contains(slot) else {
                    throw LockboxError.keySlot("key slot \(slot) is not a passphrase slot")
                }
                target = slot
            } else if let unlocker = state.unlocker, unlocker.kind == .passphrase,
                      let opened = passphraseSlots.first(where: { slots[$0].salt == unlocker.salt }) {
                target = opened
            } else if passphraseSlots.count == 1 {
                target = passphraseSlots[0]
            } else if passphraseSlots.isEmpty {
                throw LockboxError.keySlot("the vault has no passphrase slot to change")
            } else {
                throw LockboxError.keySlot("the vault has \(passphraseSlots.count) passphrase slots; say which one to change")
            }
            let (newSlot, kek) = try KeySlotCrypto.makeSlot(wrapping: state.dataKey, vaultID: state.header.vaultID, using: source)
            let old = state.header.slots[target]
            state.header.slots[target] = newSlot
            if let unlocker = state.unlocker, unlocker.kind == old.kind, unlocker.salt == old.salt {
                state.unlocker = Unlocker(kind: .passphrase, salt: newSlot.salt, kek: kek)
            }
            return ((), nil)
        }
    }

    /// Replaces the data key with a fresh one and re-encrypts the vault under it.
    ///
    /// Every key slot must be rewrapped, so each needs its credential: the one that opened this
    /// handle is remembered; give the others in `credentials`. Slots that no credential opens
    /// make the call fail, unless `dropUnmatchedSlots` is set, in which case they are removed.
    public func rotateDataKey(credentials: [VaultCredential] = [], dropUnmatchedSlots: Bool = false) throws {
        let sources = try credentials.map { credential throws in try Self.loadKEKSource(credential, kdf: .default) }
        try mutateHeader { state throws in
            let vaultID = state.header.vaultID
            var keys: [(KeySlot, SecretBytes)] = []
            var unmatched: [Int] = []
            for (index, slot) in state.header.slots.enumerated() {
                if let unlocker = state.unlocker, unlocker.kind == slot.kind, unlocker.salt == slot.salt {
                    keys.append((slot, unlocker.kek))
                    continue
                }
                var found: SecretBytes?
                for source in sources where source.slotKind == slot.kind {
                    let kek = try KeySlotCrypto.deriveKEK(for: slot, from: source)
                    if KeySlotCrypto.unwrap(slot, vaultID: vaultID, kek: kek) != nil {
                        found = kek
                        break
                    }
                }
                if let found { keys.append((slot, found)) } else { unmatched.append(index) }
            }
            if !unmatched.isEmpty && !dropUnmatchedSlots {
                let list = unmatched.map(String.init).joined(separator: ", ")
                throw LockboxError.keySlot("key slot(s) \(list) could not be opened with the credentials given. Give their passphrase or key file too, or drop the unmatched slots.")
            }
            guard !keys.isEmpty else { throw LockboxError.keySlot("no key slot would remain after rotation") }
            let newKey = SecretBytes.random(count: Sodium.aeadKeyBytes)
            state.header.slots = keys.map { slot, kek in
                KeySlotCrypto.rewrap(slot, dataKey: newKey, vaultID: vaultID, kek: kek)
            }
            return ((), newKey)
        }
    }

    // MARK: Re-authentication support

    /// Checks `passphrase` against the vault's passphrase slots (Argon2id); throws
    /// ``LockboxError/wrongCredential(path:)`` if none opens. Proves a person is present, where a
    /// key file (a service's credential) does not.
    public func verifyPassphrase(_ passphrase: SecretBytes) throws {
        let source = try Self.loadKEKSource(.passphrase(passphrase), kdf: .default)
        let header = try withFreshState { $0.header }
        for slot in header.slots where slot.kind == .passphrase {
            let kek = try KeySlotCrypto.deriveKEK(for: slot, from: source)
            if KeySlotCrypto.unwrap(slot, vaultID: header.vaultID, kek: kek) != nil { return }
        }
        throw LockboxError.wrongCredential(path: path.string)
    }

    /// A fingerprint of the vault's key slots: it changes with any passphrase change, slot
    /// change or data-key rotation, which closes re-authentication windows opened before.
    public func credentialFingerprint() throws -> String {
        try withFreshState { Self.fingerprint(of: $0.header) }
    }

    static func fingerprint(of header: VaultHeader) -> String {
        var bytes = header.vaultID
        for slot in header.slots { bytes += slot.parameterBytes + slot.wrappedKey }
        return bytes.withUnsafeBytes { Sodium.blake2b($0).hexString }
    }

    /// The vault's ID and the data key, for a session window (kernel keyring).
    package func windowMaterial() throws -> (vaultID: [UInt8], fingerprint: String, dataKey: SecretBytes) {
        try withFreshState { state in (state.header.vaultID, Self.fingerprint(of: state.header), state.dataKey) }
    }

    /// Opens the vault with a data key taken from a session window, if it still opens it and
    /// the key slots are as they were when the window opened. The body is decrypted once.
    package static func open(_ snapshot: VaultFileSnapshot, windowDataKey dataKey: SecretBytes, fingerprint: String,
                             lockTimeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }) throws -> EncryptedFileStore? {
        let (path, header) = (snapshot.path, snapshot.header)
        guard Self.fingerprint(of: header) == fingerprint,
              let plaintext = decryptBody(snapshot.bytes, header: header, headerLength: snapshot.headerLength, dataKey: dataKey)
        else { return nil }
        let entries = try decodeEntries(plaintext, path: path)
        return EncryptedFileStore(
            path: path, lockTimeout: lockTimeout, now: now,
            state: State(dataKey: dataKey, unlocker: nil, header: header, entries: entries, identity: snapshot.identity))
    }

    /// The vault's ID, read from its header without any credential.
    package static func vaultID(at path: FilePath) throws -> [UInt8] {
        try readSnapshot(at: path).header.vaultID
    }

    /// The vault file at `path` (symbolic links resolved), read once and its header parsed: what
    /// the session window and the credentials then open without reading the file again.
    package static func readSnapshot(at path: FilePath) throws -> VaultFileSnapshot {
        let path = resolvedVaultPath(path)
        let file = try readVaultFile(path)
        let (header, headerLength) = try parseHeader(file.bytes, path: path)
        return VaultFileSnapshot(path: path, bytes: file.bytes, identity: file.identity, header: header, headerLength: headerLength)
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
                        let (header, identity) = try Self.sealAndWrite(
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
                    let (header, identity) = try Self.sealAndWrite(
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
        let current: Stat
        do {
            current = try path.stat()
        } catch {
            if error == .noSuchFileOrDirectory { throw LockboxError.vaultNotFound(path: path.string) }
            throw LockboxError.io(operation: "checking the vault", path: path.string, errno: error.asErrno)
        }
        if FileIdentity(current) == state.identity { return }

        let file = try Self.readVaultFile(path)
        let (header, headerLength) = try Self.parseHeader(file.bytes, path: path)
        var dataKey = state.dataKey
        if Self.decryptBody(file.bytes, header: header, headerLength: headerLength, dataKey: dataKey) == nil {
            // The data key may have been rotated: the slot that opened this handle still opens it.
            guard let unlocker = state.unlocker,
                  let slot = header.slots.first(where: { $0.kind == unlocker.kind && $0.salt == unlocker.salt }),
                  let rotated = KeySlotCrypto.unwrap(slot, vaultID: header.vaultID, kek: unlocker.kek)
            else {
                throw LockboxError.credentialsChanged(path: path.string)
            }
            dataKey = rotated
        }
        state.entries = try Self.decryptEntries(file.bytes, header: header, headerLength: headerLength, dataKey: dataKey, path: path)
        state.header = header
        state.dataKey = dataKey
        state.identity = file.identity
    }

    /// The vault's real location: symbolic links in the path are resolved once, so writes replace
    /// the target file (not the link) and every path to one vault shares one lock file.
    private static func resolvedVaultPath(_ path: FilePath) -> FilePath {
        if let resolved = path.resolvingSymlinks() { return resolved }
        guard let name = path.lastComponent else { return path }
        let folder = path.removingLastComponent()
        return (folder.isEmpty ? FilePath(".") : folder).resolvingSymlinks()?.appending(name) ?? path
    }

    private static func readVaultFile(_ path: FilePath) throws -> (bytes: [UInt8], identity: FileIdentity) {
        do {
            // Without blocking: a FIFO at the vault's path must be refused, not waited on.
            let fd = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .nonBlocking])
            return try fd.closeAfter { () throws -> ([UInt8], FileIdentity) in
                let status: Stat
                do { status = try fd.stat() } catch {
                    throw LockboxError.io(operation: "checking the vault", path: path.string, errno: error.asErrno)
                }
                guard status.type == .regular else {
                    throw LockboxError.invalidArgument("\(path.string) is \(describe(status.type)), not a regular file, so it cannot be a vault")
                }
                do {
                    let bytes = try fd.readToEnd(limit: maximumFileBytes, expectedSize: Int(status.size))
                    // Permission advice only for a file that is a vault; anything else (a link to
                    // /etc/passwd, say) is reported as not a vault when its header is parsed.
                    if bytes.starts(with: VaultHeader.magic) { try checkOwnership(status, path: path) }
                    return (bytes, FileIdentity(status))
                } catch let error as LockboxError {
                    throw error
                } catch {
                    if error.asErrno == .fileTooLarge {
                        throw LockboxError.corruptVault(path: path.string, reason: "larger than the 1 GiB a vault can be")
                    }
                    throw LockboxError.io(operation: "reading the vault", path: path.string, errno: error.asErrno)
                }
            }
        } catch let error as LockboxError {
            throw error
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            throw LockboxError.vaultNotFound(path: path.string)
        } catch {
            throw LockboxError.io(operation: "opening the vault", path: path.string, errno: error.asErrno)
        }
    }

    /// Refuses a vault that is not ours with mode 0600 or tighter.
    private static func checkOwnership(_ status: Stat, path: FilePath) throws {
        let mode = status.permissions.rawValue
        if mode & 0o077 != 0 {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail: "the vault is accessible by group or others (mode \(octal(mode))). If nobody else could have read or changed it, fix it with `chmod 600 \(path.string)`.")
        }
        let owner = UInt32(status.userID.rawValue)
        if owner != effectiveUserID() {
            throw LockboxError.insecurePermissions(
                path: path.string,
                detail: "the vault is owned by user ID \(owner), not by you (user ID \(effectiveUserID())). Copy it to a file you own, or run as its owner.")
        }
    }

    private static func parseHeader(_ bytes: [UInt8], path: FilePath) throws -> (VaultHeader, Int) {
        do {
            return try bytes.withUnsafeBytes { buffer throws in try VaultHeader.parse(buffer) }
        } catch let reason as LockboxErrorReason {
            throw reason.error(path: path.string)
        }
    }

    /// The body of the vault file `bytes` decrypted under `dataKey` (the whole header as
    /// associated data), or `nil` if it fails authentication. Also the fuzzing harness's path.
    package static func decryptBody(_ bytes: [UInt8], header: VaultHeader, headerLength: Int, dataKey: SecretBytes) -> SecretBytes? {
        bytes.withUnsafeBytes { file in
            header.bodyNonce.withUnsafeBytes { nonce in
                Sodium.open(UnsafeRawBufferPointer(rebasing: file[headerLength...]),
                            additionalData: UnsafeRawBufferPointer(rebasing: file[0..<headerLength]),
                            nonce: nonce, key: dataKey)
            }
        }
    }

    private static func decryptEntries(
        _ bytes: [UInt8], header: VaultHeader, headerLength: Int, dataKey: SecretBytes, path: FilePath
    ) throws -> [ItemKey: VaultEntry] {
        guard let plaintext = decryptBody(bytes, header: header, headerLength: headerLength, dataKey: dataKey) else {
            throw LockboxError.corruptVault(path: path.string, reason: "the encrypted contents failed authentication")
        }
        return try decodeEntries(plaintext, path: path)
    }

    /// The items of a decrypted body.
    private static func decodeEntries(_ plaintext: SecretBytes, path: FilePath) throws -> [ItemKey: VaultEntry] {
        do {
            return try VaultPayload.decode(plaintext)
        } catch let error as FormatError {
            throw LockboxError.corruptVault(path: path.string, reason: error.reason)
        }
    }

    /// Encrypts `entries` under `dataKey` with a fresh nonce and the next generation number,
    /// and replaces the file atomically.
    private static func sealAndWrite(
        header: VaultHeader, entries: [ItemKey: VaultEntry], dataKey: SecretBytes, to path: FilePath
    ) throws -> (VaultHeader, FileIdentity) {
        var header = header
        header.generation &+= 1
        let payload = VaultPayload.encode(entries)
        header.bodyNonce = Sodium.randomBytes(Sodium.aeadNonceBytes)
        header.bodyLength = UInt64(payload.count + Sodium.aeadTagBytes)
        let headerBytes = header.encoded()
        guard headerBytes.count + payload.count + Sodium.aeadTagBytes <= maximumFileBytes else {
            throw LockboxError.invalidArgument(
                "refusing the change: the vault would grow past \(maximumFileBytes >> 20) MiB, the most Lockbox reads back. Remove items or keep large data elsewhere.")
        }
        let ciphertext = payload.withUnsafeBytes {
            Sodium.seal($0, additionalData: headerBytes, nonce: header.bodyNonce, key: dataKey)
        }
        let identity = try AtomicFileWriter.write([headerBytes, ciphertext], to: path)
        return (header, identity)
    }

    private static func loadKEKSource(_ credential: VaultCredential, kdf: KDFParameters) throws -> KEKSource {
        switch credential {
        case let .passphrase(passphrase):
            guard passphrase.count > 0 else { throw LockboxError.invalidArgument("the passphrase must not be empty") }
            return .passphrase(passphrase, kdf)
        case let .keyFile(path):
            return .key(try KeyFile.read(at: path))
        case let .key(key):
            guard key.count == KeyFile.keyBytes else {
                throw LockboxError.invalidArgument("a vault key must be exactly \(KeyFile.keyBytes) bytes, not \(key.count)")
            }
            return .key(key)
        case let .sealed(sealer):
            return .sealer(sealer)
        }
    }
}

/// A vault file read once (``EncryptedFileStore/readSnapshot(at:)``): its bytes (ciphertext),
/// identity and parsed header.
package struct VaultFileSnapshot {
    /// The vault's real path (symbolic links resolved).
    package let path: FilePath
    let bytes: [UInt8]
    let identity: FileIdentity
    let header: VaultHeader
    let headerLength: Int

    /// The vault's ID, from the header.
    package var vaultID: [UInt8] { header.vaultID }
}
