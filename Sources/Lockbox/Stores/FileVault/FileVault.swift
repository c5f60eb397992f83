import FoundationEssentials
import SystemPackage

/// The encrypted vault file: one way to open any vault Lockbox ever wrote, and one way to create
/// a new one — what `lockbox init` makes, what a service opens.
///
/// ``create(at:credentials:kdf:timeout:now:)`` makes a vault in format 2 (``SQLiteVaultStore``:
/// one SQLite database of sealed rows, whose writes cost the same at ten items and at a million).
/// ``open(at:credentials:readOnly:timeout:now:)`` opens format 2, and format 1 (the single
/// encrypted file ``EncryptedFileStore`` reads and writes), which `lockbox convert` or
/// ``SQLiteVaultStore/convert(formatOneAt:credentials:lockTimeout:)`` turns into format 2. The file is
/// opened once; its first bytes say which format it is.
///
/// ```swift
/// let store = try FileVault.open(at: "/var/lib/app/vault.lockbox", credentials: [.keyFile("/etc/app/vault.key")])
/// let vault = Vault(store: store)
/// ```
public enum FileVault {
    /// Opens the vault at `path`, in whichever format it is, with the first credential that opens
    /// one of its key slots (key files first, then passphrases).
    ///
    /// - Parameters:
    ///   - path: the vault file.
    ///   - credentials: key files, passphrases or TPM seals; at least one.
    ///   - readOnly: open a format-2 vault read-only wherever it is, changing nothing in or beside
    ///     its file. A vault on a read-only or full file system is opened read-only anyway.
    ///   - timeout: how long a write waits for another process's write to finish.
    ///   - now: the clock for item timestamps.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public static func open(
        at path: FilePath, credentials: [VaultCredential], readOnly: Bool = false, timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> any KeySlotManaging {
        guard !credentials.isEmpty else {
            throw LockboxError.invalidArgument("opening a vault needs a credential: its passphrase or its key file")
        }
        switch try VaultFile.probe(at: path) {
        case .format1(let snapshot):
            return try EncryptedFileStore.open(snapshot, credentials: credentials, lockTimeout: timeout, now: now)
        case .format2(let file):
            return try SQLiteVaultStore.open(
                at: file.path, windowKey: { _ in nil }, credentials: { credentials }, probed: file, readOnly: readOnly,
                busyTimeout: timeout, now: now
            ).store
        }
    }

    /// Opens the vault at `path`, in whichever format it is, through its re-authentication
    /// window when `window` holds a valid one (then `credentials` is never called), else with the
    /// first credential `credentials` returns that opens one of its key slots. A window the
    /// vault's keys no longer match, or whose ``FileVaultWindowKey/confirm`` refuses, is revoked.
    /// The file is opened once, unless a window is refused after it opened the vault.
    ///
    /// - Parameters:
    ///   - path: the vault file.
    ///   - window: where windows are kept (`SessionWindow.fileVaultWindows()`), or `nil`.
    ///   - credentials: asked only when no window opened the vault; must return at least one.
    ///   - readOnly: as for ``open(at:credentials:readOnly:timeout:now:)``.
    ///   - timeout: how long a write waits for another process's write to finish.
    ///   - now: the clock for item timestamps.
    /// - Returns: the store, and whether a window opened it.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public static func open(
        at path: FilePath, window: (any FileVaultWindow)?, credentials: () throws -> [VaultCredential], readOnly: Bool = false,
        timeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> (store: any KeySlotManaging, throughWindow: Bool) {
        func given() throws -> [VaultCredential] {
            let list = try credentials()
            guard !list.isEmpty else {
                throw LockboxError.invalidArgument("opening a vault needs a credential: its passphrase or its key file")
            }
            return list
        }
        switch try VaultFile.probe(at: path) {
        case .format1(let snapshot):
            if let key = window?.key(forVault: snapshot.vaultID) {
                if let store = try EncryptedFileStore.open(
                    snapshot, windowDataKey: key.dataKey, fingerprint: key.fingerprint, lockTimeout: timeout, now: now),
                    try key.confirm(store)
                {
                    return (store, true)
                }
                key.revoke()
            }
            return (try EncryptedFileStore.open(snapshot, credentials: given(), lockTimeout: timeout, now: now), false)
        case .format2(let file):
            var used: FileVaultWindowKey?
            let opened = try SQLiteVaultStore.open(
                at: file.path,
                windowKey: { vaultID in
                    guard let key = window?.key(forVault: vaultID) else { return nil }
                    used = key
                    return (key.dataKey, key.fingerprint)
                }, credentials: given, probed: file, readOnly: readOnly, busyTimeout: timeout, now: now)
            guard let used else { return (opened.store, opened.throughWindow) }
            if opened.throughWindow {
                if try used.confirm(opened.store) { return (opened.store, true) }
                used.revoke()
                return (
                    try SQLiteVaultStore.open(at: file.path, credentials: given(), readOnly: readOnly, busyTimeout: timeout, now: now),
                    false
                )
            }
            used.revoke()  // read, but the vault's keys changed since
            return (opened.store, false)
        }
    }

    /// ``open(at:credentials:readOnly:timeout:now:)`` with one credential.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public static func open(
        at path: FilePath, credential: VaultCredential, readOnly: Bool = false, timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> any KeySlotManaging {
        try open(at: path, credentials: [credential], readOnly: readOnly, timeout: timeout, now: now)
    }

    /// Creates a new, empty vault in format 2 at `path` with one key slot per credential.
    ///
    /// Missing folders are created with mode 0700; the vault file gets mode 0600. The vault is
    /// built under a temporary name and linked into place when complete; it fails with
    /// ``LockboxError/vaultAlreadyExists(path:)`` rather than overwrite anything.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public static func create(
        at path: FilePath, credentials: [VaultCredential], kdf: KDFParameters = .default, timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> SQLiteVaultStore {
        try SQLiteVaultStore.create(at: path, credentials: credentials, kdf: kdf, busyTimeout: timeout, now: now)
    }

    /// The formats ``create(at:credentials:format:kdf:timeout:now:)`` makes, by version number.
    package enum Format: Int, Sendable, CaseIterable {
        /// One encrypted file, rewritten on every write (``EncryptedFileStore``).
        case one = 1
        /// Sealed rows in one SQLite database (``SQLiteVaultStore``): what new vaults are.
        case two = 2
    }

    /// Creates a new, empty vault in `format` at `path` with one key slot per credential: format 2
    /// as ``create(at:credentials:kdf:timeout:now:)`` makes it, or format 1 — what
    /// `lockbox init --format 1` makes, and the backup file `lockbox export` writes from a store
    /// that is not a format-2 vault. Fails with ``LockboxError/vaultAlreadyExists(path:)`` rather
    /// than overwrite anything.
    package static func create(
        at path: FilePath, credentials: [VaultCredential], format: Format, kdf: KDFParameters = .default,
        timeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> any KeySlotManaging {
        switch format {
        case .two: try SQLiteVaultStore.create(at: path, credentials: credentials, kdf: kdf, busyTimeout: timeout, now: now)
        case .one: try EncryptedFileStore.create(at: path, credentials: credentials, kdf: kdf, lockTimeout: timeout, now: now)
        }
    }

    // MARK: Before opening

    /// `$XDG_DATA_HOME/lockbox/vault.lockbox`, or `~/.local/share/lockbox/vault.lockbox` when
    /// `XDG_DATA_HOME` is unset or not absolute (as the XDG Base Directory spec requires), from
    /// the `environment` the program passes (Lockbox reads no environment variable itself).
    public static func defaultPath(environment: [String: String]) -> FilePath {
        let dataHome: FilePath
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            dataHome = FilePath(xdg)
        } else {
            let home =
                environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? FileManager.default.homeDirectoryForCurrentUser.path
            dataHome = FilePath(home).appending(".local/share")
        }
        return dataHome.appending("lockbox/vault.lockbox")
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
                "\(path.string) is a symbolic link to \(target), which does not exist; Lockbox does not create a vault through a dangling link. Remove the link, or choose another path with --vault."
            )
        }
        guard let status = try? path.stat() else { return }
        guard status.type == .regular else {
            throw LockboxError.invalidArgument(
                "\(path.string) is \(describe(status.type)), not a vault; refusing to create one there. Name the vault file with --vault (e.g. \(path.string)/vault.lockbox for a directory)."
            )
        }
        let format = VaultFileFormat.detect(at: path)
        if format == .format1 || format == .format2 {
            throw LockboxError.vaultAlreadyExists(path: path.string)
        }
        throw LockboxError.invalidArgument(
            "a file that is not a Lockbox vault (\(status.size) bytes) is at \(path.string); refusing to overwrite it. Choose another path with --vault, or move the file away deliberately."
        )
    }

    /// The kinds of the vault's key slots, in order, read from its header without any credential
    /// (to know whether a TPM could open it before asking for a passphrase).
    public static func keySlotKinds(at path: FilePath) throws -> [KeySlotInfo.Kind] {
        try keySlotsWithoutCredential(at: path).map { KeySlotInfo.Kind($0.kind) }
    }

    /// The sealed bytes of the vault's TPM2 key slots, by slot index, read without any credential
    /// (to tell whether a slot needs a PIN before asking for one).
    public static func sealedKeySlots(at path: FilePath) throws -> [Int: [UInt8]] {
        var result: [Int: [UInt8]] = [:]
        for (index, slot) in try keySlotsWithoutCredential(at: path).enumerated() where slot.kind == .tpm2 {
            result[index] = slot.sealed
        }
        return result
    }

    /// The format of the vault at `path`, from its first bytes; `nil` when it is not a vault
    /// (nothing there, another kind of file, a database of another program's).
    package static func format(at path: FilePath) -> Format? {
        switch VaultFileFormat.detect(at: path) {
        case .format1: .one
        case .format2: .two
        case .foreignDatabase, .unknown: nil
        }
    }

    /// The vault ID of the vault at `path`, in whichever format it is, read without a credential
    /// (a session window's scope).
    package static func vaultID(at path: FilePath) throws -> [UInt8] {
        if VaultFileFormat.detect(at: path) == .format2 { return try SQLiteVaultStore.vaultID(at: path) }
        return try VaultFile.snapshot(at: path).header.vaultID
    }

    /// The key slots of the vault at `path`, in whichever format it is, read without a credential
    /// (which kinds it has, whether a TPM slot needs a PIN).
    package static func keySlotsWithoutCredential(at path: FilePath) throws -> [KeySlot] {
        if VaultFileFormat.detect(at: path) == .format2 { return try SQLiteVaultStore.keySlots(at: path) }
        return try VaultFile.snapshot(at: path).header.slots
    }

    // MARK: Async variants

    /// ``open(at:credentials:readOnly:timeout:now:)``, awaited: it runs on
    /// ``BlockingExecutor/shared`` (a passphrase slot hashes with Argon2id for about a second), so
    /// a caller on Swift's cooperative pool suspends instead of blocking a thread.
    ///
    /// - Parameters:
    ///   - path: the vault file.
    ///   - credentials: key files, passphrases or TPM seals; at least one.
    ///   - readOnly: open a format-2 vault read-only wherever it is.
    ///   - timeout: how long a write waits for another process's write to finish.
    ///   - now: the clock for item timestamps.
    public static func open(
        at path: FilePath, credentials: [VaultCredential], readOnly: Bool = false, timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> any KeySlotManaging {
        try await BlockingExecutor.shared.run {
            try open(at: path, credentials: credentials, readOnly: readOnly, timeout: timeout, now: now)
        }
    }

    /// ``open(at:credential:readOnly:timeout:now:)``, awaited: runs on ``BlockingExecutor/shared``.
    public static func open(
        at path: FilePath, credential: VaultCredential, readOnly: Bool = false, timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> any KeySlotManaging {
        try await BlockingExecutor.shared.run {
            try open(at: path, credentials: [credential], readOnly: readOnly, timeout: timeout, now: now)
        }
    }

    /// ``open(at:window:credentials:readOnly:timeout:now:)``, awaited: runs on ``BlockingExecutor/shared``.
    ///
    /// - Parameters:
    ///   - path: the vault file.
    ///   - window: where windows are kept, or `nil`.
    ///   - credentials: asked only when no window opened the vault; must return at least one.
    ///   - readOnly: open a format-2 vault read-only wherever it is.
    ///   - timeout: how long a write waits for another process's write to finish.
    ///   - now: the clock for item timestamps.
    /// - Returns: the store, and whether a window opened it.
    public static func open(
        at path: FilePath, window: (any FileVaultWindow)?, credentials: @escaping @Sendable () throws -> [VaultCredential],
        readOnly: Bool = false, timeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> (store: any KeySlotManaging, throughWindow: Bool) {
        try await BlockingExecutor.shared.run {
            try open(at: path, window: window, credentials: credentials, readOnly: readOnly, timeout: timeout, now: now)
        }
    }

    /// ``create(at:credentials:kdf:timeout:now:)``, awaited: runs on ``BlockingExecutor/shared``
    /// (each passphrase slot hashes with Argon2id).
    ///
    /// - Parameters:
    ///   - path: where the vault is made; nothing may exist there.
    ///   - credentials: one key slot per credential.
    ///   - kdf: the Argon2id parameters for passphrase slots.
    ///   - timeout: how long a write waits for another process's write to finish.
    ///   - now: the clock for item timestamps.
    public static func create(
        at path: FilePath, credentials: [VaultCredential], kdf: KDFParameters = .default, timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> SQLiteVaultStore {
        try await BlockingExecutor.shared.run {
            try create(at: path, credentials: credentials, kdf: kdf, timeout: timeout, now: now)
        }
    }
}
