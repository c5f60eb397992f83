import FoundationEssentials
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A vault in format 2: one SQLite database in which every item is a row sealed on its own
/// (docs/FORMAT.md, "Format 2"), so a write costs the same at ten items and at a million.
///
/// The data key and its key slots work as in format 1 (``EncryptedFileStore``, the same
/// `KeySlots` code); each slot is a row, so changing a passphrase rewrites one row. Rows are
/// addressed by a keyed hash of (service, account): the file holds no service or account name.
/// Each item's metadata is sealed apart from its secret, so ``list(service:)`` never decrypts a
/// secret. Many processes write one vault through SQLite's own locking (WAL, durable commits).
/// Safe to call from many threads: calls on one handle are serialised.
public final class SQLiteVaultStore: SecretStore {
    /// `false`: reading an item needs the vault's passphrase or key file.
    public var isOpenToOtherProcessesOfUser: Bool { false }

    /// The vault file.
    public let path: FilePath
    private let state: Locked<State>
    private let now: @Sendable () -> Date

    /// `PRAGMA application_id` of a format-2 vault: "LKBX".
    package static let applicationID: Int64 = 0x4C4B_4258

    private struct State: ~Copyable {
        var connection: SQLiteConnection
        var records: VaultRecords
        var dataKey: SecretBytes
        var unlocker: SlotUnlocker?
    }

    /// Why this handle is read-only — the vault's file system is read-only or full, or it was
    /// opened read-only — or `nil`: every write then fails with
    /// ``LockboxError/io(operation:path:errno:)`` naming it.
    package let readOnlyCause: ReadOnlyCause?

    /// Why a handle is read-only: the `errno` its writes fail with, and the reason in words.
    package typealias ReadOnlyCause = (errno: Errno, reason: String)

    private init(path: FilePath, now: @escaping @Sendable () -> Date, state: consuming State, readOnlyCause: ReadOnlyCause? = nil) {
        self.path = path
        self.now = now
        self.state = Locked(state)
        self.readOnlyCause = readOnlyCause
    }

    static let schema = """
        CREATE TABLE vault (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
            format_version INTEGER NOT NULL,
            vault_id BLOB NOT NULL,
            key_check BLOB NOT NULL
        );
        CREATE TABLE key_slots (slot_id INTEGER PRIMARY KEY, slot BLOB NOT NULL);
        CREATE TABLE items (address BLOB PRIMARY KEY, metadata BLOB NOT NULL, secret BLOB NOT NULL) WITHOUT ROWID;
        """

    // MARK: Creating and opening

    /// Creates a new, empty format-2 vault at `path` with one key slot per credential.
    ///
    /// The database is built under a temporary name and linked into place only when complete,
    /// so `path` never shows a half-made vault, and nothing that is there is overwritten
    /// (``LockboxError/vaultAlreadyExists(path:)``). The file gets mode 0600.
    public static func create(
        at path: FilePath, credentials: [VaultCredential], kdf: KDFParameters = .default,
        busyTimeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> SQLiteVaultStore {
        let path = try VaultFile.prepareNewVault(at: path, credentials: credentials)
        let dataKey = SecretBytes.random(count: Sodium.aeadKeyBytes)
        let vaultID = Sodium.randomBytes(VaultHeader.vaultIDBytes)
        let (slots, unlocker) = try KeySlots.make(for: credentials, dataKey: dataKey, vaultID: vaultID, kdf: kdf)
        let records = VaultRecords(vaultID: vaultID, dataKey: dataKey)
        try build(at: path, replacing: false, vaultID: vaultID, slots: slots, dataKey: dataKey, entries: [:], busyTimeout: busyTimeout)
        let connection = try SQLiteConnection(path: path, create: false, busyTimeout: busyTimeout)
        try connection.useWriteAheadLog()
        return SQLiteVaultStore(
            path: path, now: now, state: State(connection: connection, records: records, dataKey: dataKey, unlocker: unlocker))
    }

    /// Writes a complete format-2 database (vault row, slot rows, a row per entry, as they are:
    /// times and reserved attributes kept) under a temporary name in `path`'s folder, fsyncs
    /// it, then puts it at `path`: with `link(2)` when not `replacing` (never overwrites:
    /// ``LockboxError/vaultAlreadyExists(path:)``), else with `rename(2)` after `verify` has
    /// passed on the finished temporary file. The folder is fsynced after. `sealed` is called with
    /// the rows sealed so far after each one.
    static func build(
        at path: FilePath, replacing: Bool, vaultID: [UInt8], slots: [KeySlot], dataKey: SecretBytes,
        entries: [ItemKey: VaultEntry], busyTimeout: Duration, sealed: ((Int) -> Void)? = nil,
        verify: (FilePath) throws -> Void = { _ in }
    ) throws {
        let records = VaultRecords(vaultID: vaultID, dataKey: dataKey)
        var count = 0
        let rows = entries.values.lazy.map { entry in
            count += 1
            sealed?(count)
            let address = records.address(entry.metadata.key)
            let metadata = records.sealMetadata(entry, address: address)
            return SealedRow(
                address: address, metadata: metadata, secret: records.sealSecret(entry.secret, address: address, metadata: metadata))
        }
        try build(
            at: path, replacing: replacing, vaultID: vaultID, keyCheck: records.keyCheck, slots: slots, rows: rows,
            busyTimeout: busyTimeout, verify: verify)
    }

    /// One row of the `items` table as stored: address, sealed metadata, sealed secret.
    package struct SealedRow {
        /// The row's address.
        package var address: [UInt8]
        /// The metadata column.
        package var metadata: [UInt8]
        /// The secret column.
        package var secret: [UInt8]

        /// A row of these columns.
        package init(address: [UInt8], metadata: [UInt8], secret: [UInt8]) {
            (self.address, self.metadata, self.secret) = (address, metadata, secret)
        }
    }

    /// ``build(at:replacing:vaultID:slots:dataKey:entries:busyTimeout:sealed:verify:)`` with the rows
    /// already sealed: the known-answer self-test writes a vector's rows with it as they are.
    package static func build(
        at path: FilePath, replacing: Bool, vaultID: [UInt8], keyCheck: [UInt8], slots: [KeySlot],
        rows: some Sequence<SealedRow>, busyTimeout: Duration, verify: (FilePath) throws -> Void = { _ in }
    ) throws {
        let temporary = try createTemporary(beside: path)
        var placed = false
        defer { if !placed { try? temporary.unlinkIfPresent() } }
        do {
            // Rollback journal while building (one file, fsynced on commit); WAL once in place.
            let connection = try SQLiteConnection(path: temporary, create: false, busyTimeout: busyTimeout)
            try connection.execute(
                "PRAGMA synchronous=FULL; PRAGMA application_id=\(applicationID); PRAGMA user_version=\(VaultRecords.formatVersion);")
            try connection.transaction(writing: true) {
                try connection.execute(schema)
                let insert = try connection.prepare(
                    "INSERT INTO vault (singleton, format_version, vault_id, key_check) VALUES (1, ?, ?, ?)")
                try insert.bind(1, Int64(VaultRecords.formatVersion))
                try insert.bind(2, vaultID)
                try insert.bind(3, keyCheck)
                try insert.step()
                try writeSlots(slots, connection)
                let item = try connection.prepare("INSERT INTO items (address, metadata, secret) VALUES (?, ?, ?)")
                for row in rows {
                    item.reset()
                    try item.bind(1, row.address)
                    try item.bind(2, row.metadata)
                    try item.bind(3, row.secret)
                    try item.step()
                }
            }
        }
        try syncFile(temporary)
        try verify(temporary)
        try place(temporary, at: path, replacing: replacing)
        placed = true
    }

    /// A new, empty file with mode 0600 under a temporary name in `path`'s folder, for a database
    /// to be built in and then put at `path` with ``place(_:at:replacing:)``.
    static func createTemporary(beside path: FilePath) throws -> FilePath {
        let temporary = path.removingLastComponent().appending(
            ".\(path.lastComponent?.string ?? "vault").new-\(Sodium.randomBytes(8).hexString)")
        do {
            // Created by us with 0600 first: SQLite would create it 0644 (less the umask).
            try FileDescriptor.open(
                temporary, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                permissions: [.ownerReadWrite]
            ).close()
        } catch {
            throw LockboxError.io(operation: "creating the vault", path: temporary.string, errno: error.asErrno)
        }
        return temporary
    }

    /// Puts the finished, fsynced `temporary` at `path`: with `rename(2)` when `replacing`, else
    /// with `link(2)`, which never overwrites (``LockboxError/vaultAlreadyExists(path:)``). Then
    /// fsyncs the folder.
    static func place(_ temporary: FilePath, at path: FilePath, replacing: Bool) throws {
        if replacing {
            do { try temporary.rename(to: path) } catch {
                throw LockboxError.io(operation: "putting the new vault in place", path: path.string, errno: error.asErrno)
            }
        } else {
            // link(2) fails if anything appeared at `path` meanwhile: never overwrite.
            if link(temporary.string, path.string) != 0 {
                let error = Errno(rawValue: errno)
                if error == .fileExists { throw LockboxError.vaultAlreadyExists(path: path.string) }
                throw LockboxError.io(operation: "putting the new vault in place", path: path.string, errno: error)
            }
            try? temporary.unlinkIfPresent()
        }
        try syncFile(path.removingLastComponent())
    }

    /// Opens the format-2 vault at `path` with the first credential that opens one of its key
    /// slots (key files first, then passphrases).
    ///
    /// A vault on a read-only or full file system is opened read-only: reads work, writes fail
    /// with ``LockboxError/io(operation:path:errno:)`` naming the cause. With `readOnly`, the
    /// vault is opened read-only wherever it is, and nothing in or beside its file is changed
    /// (a backup being imported, a snapshot).
    public static func open(
        at path: FilePath, credentials: [VaultCredential], readOnly: Bool = false, busyTimeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> SQLiteVaultStore {
        guard !credentials.isEmpty else { throw noCredential }
        return try open(
            at: path, windowKey: { _ in nil }, credentials: { credentials }, readOnly: readOnly,
            busyTimeout: busyTimeout, now: now
        ).store
    }

    private static var noCredential: LockboxError {
        LockboxError.invalidArgument("opening a vault needs a credential: its passphrase or its key file")
    }

    /// Opens the format-2 vault at `path` with the data key a session window holds for its vault
    /// ID (`windowKey`, asked once the vault row is read), if that key still opens it and the key
    /// slots are as they were when the window opened (the fingerprint); else with `credentials`
    /// (asked only then). The file is opened once either way: `probed` is the file as
    /// ``VaultFile/probe(at:)`` opened it (its first bytes say it is a format-2 vault), else it is
    /// opened and checked here.
    package static func open(
        at path: FilePath, windowKey: ([UInt8]) -> (dataKey: SecretBytes, fingerprint: String)?,
        credentials: () throws -> [VaultCredential], probed: OpenedDatabaseFile? = nil, readOnly: Bool = false,
        busyTimeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> (store: SQLiteVaultStore, throughWindow: Bool) {
        let file = try probed ?? VaultFile.openDatabase(resolved: VaultFile.resolvedPath(path))
        let path = file.path
        let (connection, readOnlyCause, (vaultID, keyCheck, slots)) = try connect(file, busyTimeout: busyTimeout, readOnly: readOnly)
        if let window = windowKey(vaultID), KeySlots.fingerprint(slots.map(\.slot), vaultID: vaultID) == window.fingerprint {
            let records = VaultRecords(vaultID: vaultID, dataKey: window.dataKey)
            if Sodium.constantTimeEqual(records.keyCheck, keyCheck) {
                let state = State(connection: connection, records: records, dataKey: window.dataKey, unlocker: nil)
                return (SQLiteVaultStore(path: path, now: now, state: state, readOnlyCause: readOnlyCause), true)
            }
        }
        let credentials = try credentials()
        guard !credentials.isEmpty else { throw noCredential }
        let (dataKey, unlocker) = try KeySlots.open(slots.map(\.slot), vaultID: vaultID, credentials: credentials, path: path)
        let records = VaultRecords(vaultID: vaultID, dataKey: dataKey)
        guard Sodium.constantTimeEqual(records.keyCheck, keyCheck) else {
            throw LockboxError.corruptVault(path: path.string, reason: "the key check does not match the data key the key slots hold")
        }
        if readOnlyCause == nil, unlocker.kind == .keyFile, let fingerprint = unlocker.keyFileFingerprint,
            let row = slots.first(where: { unlocker.opened($0.slot) }), row.slot.keyFileFingerprint == nil
        {
            recordFingerprint(fingerprint, in: row, connection: connection, busyTimeout: busyTimeout)
        }
        let state = State(connection: connection, records: records, dataKey: dataKey, unlocker: unlocker)
        return (SQLiteVaultStore(path: path, now: now, state: state, readOnlyCause: readOnlyCause), false)
    }

    /// Records the fingerprint of the key file that opened the slot of `row`, which records none
    /// (a slot made before fingerprints were, or brought over from format 1 by `convert`):
    /// docs/FORMAT.md section 18.1.1. One write transaction rewrites that row only if it still holds
    /// the bytes read at open, so a slot another process changed or removed meanwhile is left
    /// alone. Nothing waits for it: when another process holds the write lock, or anything else
    /// fails, the slot stays unrecorded and the next open through it tries again.
    private static func recordFingerprint(_ fingerprint: [UInt8], in row: SlotRow, connection: SQLiteConnection, busyTimeout: Duration) {
        var recorded = row.slot
        recorded.keyFileFingerprint = fingerprint
        let milliseconds = busyTimeout.components.seconds * 1000 + busyTimeout.components.attoseconds / 1_000_000_000_000_000
        do {
            try connection.execute("PRAGMA busy_timeout=0")
            defer { try? connection.execute("PRAGMA busy_timeout=\(max(0, milliseconds))") }
            try connection.transaction(writing: true) {
                let update = try connection.prepare("UPDATE key_slots SET slot = ? WHERE slot_id = ? AND slot = ?")
                try update.bind(1, recorded.encoded())
                try update.bind(2, row.id)
                try update.bind(3, row.slot.encoded())
                _ = try update.step()
            }
        } catch {
            // Not recorded this time: the slot opens as before, and the next open tries again.
        }
    }

    typealias VaultRow = (vaultID: [UInt8], keyCheck: [UInt8], slots: [SlotRow])

    /// A connection to the vault in `file`, checked (identity, then schema) before its vault row is
    /// read, and why it is read-only, if it is. A vault SQLite cannot open for writing because its
    /// file system is read-only or full (a WAL database's readers need an index beside it, which
    /// cannot be made there) is opened read-only instead (``connectReadOnly(_:busyTimeout:cause:)``),
    /// as it is with `readOnly`.
    private static func connect(_ file: OpenedDatabaseFile, busyTimeout: Duration, readOnly: Bool)
        throws -> (connection: SQLiteConnection, readOnlyCause: ReadOnlyCause?, row: VaultRow)
    {
        let path = file.path
        try checkSidecars(path)
        if readOnly {
            let cause: ReadOnlyCause = (.readOnlyFileSystem, "it was opened read-only")
            let (connection, row) = try connectReadOnly(file, busyTimeout: busyTimeout, cause: cause)
            return (connection, cause, row)
        }
        do {
            let connection = try SQLiteConnection(file: file, busyTimeout: busyTimeout)
            try checkIdentity(connection, path: path)
            try connection.useWriteAheadLog()
            let row = try connection.transaction(writing: false) { try readVaultRow(connection, path: path) }
            // SQLite opens a file it may not write read-only by itself: say why writes will fail.
            let cause = connection.isReadOnly ? unwritableMedium(path) ?? (.permissionDenied, "the vault file is not writable") : nil
            return (connection, cause, row)
        } catch let error as LockboxError {
            guard case .io = error, let cause = unwritableMedium(path) else { throw error }
            // The same checks as the first open, on a descriptor of its own.
            let again = try VaultFile.openDatabase(resolved: path)
            let (connection, row) = try connectReadOnly(again, busyTimeout: busyTimeout, cause: cause)
            return (connection, cause, row)
        }
    }

    /// A read-only connection to the vault in `file`, checked, and its vault row. With the log's
    /// index (`-shm`) beside the vault it is read through the index and the log; without them it is
    /// read as an immutable file. A log with writes in it but no index is refused: reading the
    /// file alone would miss those writes.
    private static func connectReadOnly(_ file: OpenedDatabaseFile, busyTimeout: Duration, cause: ReadOnlyCause) throws -> (
        SQLiteConnection, VaultRow
    ) {
        let path = file.path
        let access = try readOnlyAccess(path, cause: cause)
        let connection = try SQLiteConnection(file: file, busyTimeout: busyTimeout, readOnly: access)
        try checkIdentity(connection, path: path)
        let row = try connection.transaction(writing: false) { try readVaultRow(connection, path: path) }
        return (connection, row)
    }

    /// How to read the vault at `path` without writing: as an immutable file when its log is
    /// empty or absent (the file then holds every committed write; an index left beside it is not
    /// needed); through the log and its index when the log holds writes and the index exists.
    /// A log with writes but no index is refused: reading the file alone would miss them.
    static func readOnlyAccess(_ path: FilePath, cause: ReadOnlyCause) throws -> SQLiteConnection.ReadOnlyAccess {
        let sidecars = sidecarPaths(path)
        let (log, index) = (sidecars[0], sidecars[1])
        guard let size = try? log.stat(followTargetSymlink: false).size, size > 0 else { return .immutable }
        // An index SQLite finished setting up is at least 32 KiB; a shorter one is a failed start
        // (a full disk), no index.
        guard let indexSize = try? index.stat(followTargetSymlink: false).size, indexSize >= 32 * 1024 else {
            throw LockboxError.io(
                operation:
                    "reading the vault: its write-ahead log (\(log.string)) holds writes not yet in the vault file, and the log's index cannot be made (\(cause.reason)); open the vault once where its folder is writable",
                path: path.string, errno: cause.errno)
        }
        return .sharedIndex
    }

    /// Why nothing can be written beside the vault at `path`: its file system is read-only
    /// (`EROFS`), full (`ENOSPC`), or its folder is not writable for us (`EACCES`); `nil` if none
    /// of these holds.
    private static func unwritableMedium(_ path: FilePath) -> ReadOnlyCause? {
        let folder = path.removingLastComponent()
        let name = folder.isEmpty ? "." : folder.string
        var status = statvfs()
        if statvfs(name, &status) == 0 {
            if status.f_flag & UInt(ST_RDONLY) != 0 { return (.readOnlyFileSystem, "its file system is read-only") }
            if status.f_bavail == 0 { return (.noSpace, "its file system is full") }
        }
        if access(name, W_OK) != 0 { return (.permissionDenied, "its folder is not writable") }
        return nil
    }

    /// The vault ID of the format-2 vault at `path`, read without a credential (a session
    /// window's scope).
    package static func vaultID(at path: FilePath) throws -> [UInt8] {
        try vaultRow(at: path).0
    }

    /// The key slots of the format-2 vault at `path`, read without a credential (which kinds it
    /// has, whether a TPM slot needs a PIN).
    package static func keySlots(at path: FilePath) throws -> [KeySlot] {
        try vaultRow(at: path).2.map(\.slot)
    }

    private static func vaultRow(at path: FilePath) throws -> VaultRow {
        let file = try VaultFile.openDatabase(resolved: VaultFile.resolvedPath(path))
        return try connect(file, busyTimeout: .seconds(10), readOnly: false).row
    }

    /// The vault's ID, its key slots' fingerprint and the data key, for a session window (kernel
    /// keyring), as ``EncryptedFileStore`` gives them.
    package func windowMaterial() throws -> (vaultID: [UInt8], fingerprint: String, dataKey: SecretBytes) {
        let path = path
        return try withTransaction(writing: false) { state in
            let (vaultID, _, slots) = try Self.readVaultRow(state.connection, path: path)
            return (vaultID, KeySlots.fingerprint(slots.map(\.slot), vaultID: vaultID), state.dataKey)
        }
    }

    /// The files SQLite keeps beside a vault in WAL mode: the log (committed writes not yet in
    /// the database) and its shared-memory index. They hold sealed rows as the vault does.
    package static func sidecarPaths(_ path: FilePath) -> [FilePath] {
        ["-wal", "-shm"].map { FilePath(path.string + $0) }
    }

    /// Every file SQLite would read beside the vault: the log and its index, and a rollback
    /// journal (`-journal`), which a WAL vault never has but SQLite replays into the database
    /// when it finds one "hot" — before any check of Lockbox's could run.
    static func sideFilesRead(_ path: FilePath) -> [FilePath] {
        sidecarPaths(path) + [FilePath(path.string + "-journal")]
    }

    /// Refuses a `-wal`, `-shm` or `-journal` beside the vault that is not a regular file owned by
    /// us with mode 0600 or tighter, where they exist (a symbolic link is refused, not followed):
    /// SQLite would use them as they are — a rollback journal planted by someone who can write the
    /// folder would be replayed into the vault. The vault file itself is checked when it is opened
    /// (``VaultFile/probe(at:)``, `VaultFile.openDatabase`).
    private static func checkSidecars(_ path: FilePath) throws {
        for sidecar in sideFilesRead(path) {
            let status: Stat
            do {
                status = try sidecar.stat(followTargetSymlink: false)
            } catch {
                if error == .noSuchFileOrDirectory { continue }
                throw LockboxError.io(operation: "checking the vault's write-ahead log", path: sidecar.string, errno: error.asErrno)
            }
            guard status.type == .regular else {
                throw LockboxError.invalidArgument(
                    "\(sidecar.string) is \(describe(status.type)), not a regular file, so it cannot be the vault's write-ahead log")
            }
            try VaultFile.checkOwnership(status, path: sidecar)
        }
    }

    /// Refuses a database that is not a format-2 vault: its `application_id`, its `user_version`,
    /// then its schema, which must be exactly the documented one (``checkSchema(_:path:)``),
    /// before any row is read.
    static func checkIdentity(_ connection: SQLiteConnection, path: FilePath) throws {
        guard try connection.queryInteger("PRAGMA application_id") == applicationID else {
            throw LockboxError.corruptVault(path: path.string, reason: "a SQLite database that is not a Lockbox vault")
        }
        let version = try connection.queryInteger("PRAGMA user_version") ?? 0
        guard version == Int64(VaultRecords.formatVersion) else {
            throw LockboxError.unsupportedFormatVersion(
                path: path.string, found: Int(clamping: version), supported: Int(VaultRecords.formatVersion))
        }
        try checkSchema(connection, path: path)
    }

    /// Refuses a vault whose schema is not exactly ``schema``: the same three tables, each with
    /// the same columns (name, declared type, NOT NULL, default, primary key, hidden) and the same
    /// `WITHOUT ROWID` and `STRICT` flags, and no other object — no index, trigger or view (which
    /// the connection would not run anyway), no virtual table. A vault is data, never code.
    static func checkSchema(_ connection: SQLiteConnection, path: FilePath) throws {
        let found: [String]
        do {
            found = try describeSchema(connection)
        } catch let error as LockboxError where error.code != .corruptVault {
            // A schema SQLite can read but these queries cannot describe (a column of a table
            // that is not there, say) is not the documented one.
            throw LockboxError.corruptVault(path: path.string, reason: "the database's schema is not a format-2 vault's")
        }
        guard found == expectedSchema else {
            throw LockboxError.corruptVault(
                path: path.string,
                reason: "the database's schema is not a format-2 vault's (it has objects or columns the format does not define)")
        }
    }

    /// ``schema`` as ``describeSchema(_:)`` describes it, from an in-memory database made with it.
    private static let expectedSchema: [String] = {
        do {
            let connection = try SQLiteConnection(path: FilePath(":memory:"), create: true, busyTimeout: .zero)
            try connection.execute(schema)
            return try describeSchema(connection)
        } catch {
            // Only a libsqlite3 that cannot make three tables in memory gets here; every vault is
            // then refused as corrupt, which is safe.
            return ["unavailable: \(error)"]
        }
    }()

    /// A `CREATE` statement as compared: `--` comments removed, letters in lower case, white space
    /// collapsed to one space and dropped around parentheses and commas.
    static func normalizedSQL(_ sql: String) -> String {
        let uncommented = sql.split(separator: "\n", omittingEmptySubsequences: false)
            .map { line in String(line.firstRange(of: "--").map { line[..<$0.lowerBound] } ?? line[...]) }
            .joined(separator: " ")
        var result = ""
        var pendingSpace = false
        for character in uncommented.lowercased() {
            if character.isWhitespace {
                pendingSpace = true
                continue
            }
            if pendingSpace, !"(),".contains(character), let last = result.last, !"(,".contains(last) { result.append(" ") }
            pendingSpace = false
            result.append(character)
        }
        return result
    }

    /// One line per object of the schema and per column of each table, in a fixed order.
    private static func describeSchema(_ connection: SQLiteConnection) throws -> [String] {
        var lines: [String] = []
        var tables: [String] = []
        // Three objects, or not a vault: nothing of a larger schema is described.
        guard try connection.queryInteger("SELECT count(*) FROM sqlite_schema") == 3 else { return ["not three objects"] }
        let objects = try connection.prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name")
        while try objects.step() {
            let (type, name, table) = (objects.text(0) ?? "", objects.text(1) ?? "", objects.text(2) ?? "")
            // The statement itself too, so no constraint, collation or conflict clause the
            // columns do not show can differ.
            lines.append("\(type) \(name) on \(table): \(normalizedSQL(objects.text(3) ?? ""))")
            if type == "table" { tables.append(name) }
        }
        for table in tables {
            let flags = try connection.prepare("SELECT type, wr, strict FROM pragma_table_list(?)")
            try flags.bind(1, text: table)
            while try flags.step() { lines.append("\(table): \(flags.text(0) ?? "") wr=\(flags.integer(1)) strict=\(flags.integer(2))") }
            let columns = try connection.prepare(#"SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?)"#)
            try columns.bind(1, text: table)
            while try columns.step() {
                lines.append(
                    "\(table).\(columns.text(0) ?? "") \(columns.text(1) ?? "") notnull=\(columns.integer(2)) "
                        + "default=\(columns.text(3) ?? "none") pk=\(columns.integer(4)) hidden=\(columns.integer(5))")
            }
        }
        return lines
    }

    static func syncFile(_ path: FilePath) throws {
        do {
            let fd = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec])
            try fd.closeAfter { if fsync(fd.rawValue) != 0 { throw Errno(rawValue: errno) } }
        } catch {
            throw LockboxError.io(operation: "syncing the vault to disk", path: path.string, errno: error.asErrno)
        }
    }

    typealias SlotRow = (id: Int64, slot: KeySlot)

    /// The vault row and the key slots, in slot order.
    static func readVaultRow(_ connection: SQLiteConnection, path: FilePath) throws -> VaultRow {
        let row = try connection.prepare("SELECT format_version, vault_id, key_check FROM vault WHERE singleton = 1")
        guard try row.step(), row.integer(0) == Int64(VaultRecords.formatVersion) else {
            throw LockboxError.corruptVault(path: path.string, reason: "the vault row is missing or names another format version")
        }
        let vaultID = row.blob(1)
        let keyCheck = row.blob(2)
        guard vaultID.count == VaultHeader.vaultIDBytes, keyCheck.count == 32 else {
            throw LockboxError.corruptVault(path: path.string, reason: "the vault row has a malformed vault ID or key check")
        }
        var slots: [SlotRow] = []
        let query = try connection.prepare("SELECT slot_id, slot FROM key_slots ORDER BY slot_id")
        while try query.step() {
            let slot = try KeySlots.parseRow(query.blob(1), index: slots.count, vault: path.string)
            slots.append((query.integer(0), slot))
        }
        guard (1...VaultHeader.maxSlots).contains(slots.count) else {
            throw LockboxError.corruptVault(path: path.string, reason: "implausible slot count \(slots.count)")
        }
        return (vaultID, keyCheck, slots)
    }

    /// Adds `slot` as a new row after the last of `rows` (the slots as ``readVaultRow(_:path:)``
    /// read them).
    static func insertSlot(_ slot: KeySlot, after rows: [SlotRow], _ connection: SQLiteConnection) throws {
        let insert = try connection.prepare("INSERT INTO key_slots (slot_id, slot) VALUES (?, ?)")
        try insert.bind(1, (rows.last?.id ?? -1) + 1)
        try insert.bind(2, slot.encoded())
        try insert.step()
    }

    static func writeSlots(_ slots: [KeySlot], _ connection: SQLiteConnection) throws {
        try connection.execute("DELETE FROM key_slots")
        let insert = try connection.prepare("INSERT INTO key_slots (slot_id, slot) VALUES (?, ?)")
        for (index, slot) in slots.enumerated() {
            insert.reset()
            try insert.bind(1, Int64(index))
            try insert.bind(2, slot.encoded())
            try insert.step()
        }
    }

    // MARK: Transactions

    /// Runs `body` in one SQLite transaction on state whose keys match the vault's data key now
    /// (another process may have rotated it: the slot that opened this handle still opens it).
    private func withTransaction<T>(writing: Bool, _ body: (inout State) throws -> T) throws -> T {
        if writing, let readOnlyCause {
            throw LockboxError.io(
                operation: "writing to the vault (it is open read-only: \(readOnlyCause.reason))",
                path: path.string, errno: readOnlyCause.errno)
        }
        return try state.withLock { (state: inout State) throws -> T in
            let connection = state.connection
            return try connection.transaction(writing: writing) { () throws -> T in
                let current = try connection.withStatement("SELECT key_check FROM vault WHERE singleton = 1") { check in
                    try check.step() ? check.blob(0) : nil
                }
                guard let current else { throw LockboxError.corruptVault(path: path.string, reason: "the vault row is missing") }
                if !Sodium.constantTimeEqual(current, state.records.keyCheck) {
                    let (vaultID, keyCheck, slots) = try Self.readVaultRow(connection, path: path)
                    (state.dataKey, state.records) = try reopenKeys(
                        slots.map(\.slot), vaultID: vaultID, keyCheck: keyCheck, unlocker: state.unlocker)
                }
                return try body(&state)
            }
        }
    }

    /// The data key and row keys the vault's rows are sealed under now (followed through the
    /// slot that opened this handle if another process rotated them), and the connection's busy
    /// timeout.
    func currentKeys() throws -> (dataKey: SecretBytes, records: VaultRecords, busyTimeout: Duration) {
        try withTransaction(writing: false) { state in
            let milliseconds = try state.connection.queryInteger("PRAGMA busy_timeout") ?? 0
            return (state.dataKey, state.records, .milliseconds(milliseconds))
        }
    }

    /// The data key and row keys of a copy of this vault (a backup snapshot) whose vault row
    /// holds `vaultID`, `keyCheck` and `slots`: this handle's keys when the copy's rows are sealed
    /// under them; otherwise the data key the copy's slots give the slot that opened this handle —
    /// the copy may predate a rotation this handle has followed, or follow one it has not seen.
    func keys(ofCopyWith vaultID: [UInt8], keyCheck: [UInt8], slots: [KeySlot]) throws -> (dataKey: SecretBytes, records: VaultRecords) {
        try state.withLock { (state: inout State) throws -> (dataKey: SecretBytes, records: VaultRecords) in
            guard vaultID == state.records.vaultID else {
                throw LockboxError.corruptVault(path: path.string, reason: "the snapshot belongs to another vault")
            }
            if Sodium.constantTimeEqual(keyCheck, state.records.keyCheck) { return (state.dataKey, state.records) }
            return try reopenKeys(slots, vaultID: vaultID, keyCheck: keyCheck, unlocker: state.unlocker)
        }
    }

    /// The data key `slots` give the slot `unlocker` opened (after a rotation by another process),
    /// and its row keys, checked against the vault row's `keyCheck`.
    private func reopenKeys(_ slots: [KeySlot], vaultID: [UInt8], keyCheck: [UInt8], unlocker: SlotUnlocker?) throws -> (
        dataKey: SecretBytes, records: VaultRecords
    ) {
        guard let dataKey = KeySlots.reopen(slots, vaultID: vaultID, with: unlocker) else {
            throw LockboxError.credentialsChanged(path: path.string)
        }
        let records = VaultRecords(vaultID: vaultID, dataKey: dataKey)
        guard Sodium.constantTimeEqual(records.keyCheck, keyCheck) else {
            throw LockboxError.corruptVault(path: path.string, reason: "the key check does not match the data key the key slots hold")
        }
        return (dataKey, records)
    }

    private func corrupt(_ error: FormatError) -> LockboxError {
        LockboxError.corruptVault(path: path.string, reason: error.reason)
    }

    /// The row of `key`: its metadata column and (if asked) its secret column.
    private func row(_ key: ItemKey, records: VaultRecords, connection: SQLiteConnection, withSecret: Bool) throws -> (
        address: [UInt8], metadata: [UInt8], secret: [UInt8]
    )? {
        let address = records.address(key)
        return try connection.withStatement(
            withSecret ? "SELECT metadata, secret FROM items WHERE address = ?" : "SELECT metadata FROM items WHERE address = ?"
        ) { query in
            try query.bind(1, address)
            guard try query.step() else { return nil }
            return (address, query.blob(0), withSecret ? query.blob(1) : [])
        }
    }

    private func entry(_ key: ItemKey, _ state: borrowing State, withSecret: Bool) throws -> VaultEntry? {
        guard let row = try row(key, records: state.records, connection: state.connection, withSecret: withSecret) else { return nil }
        do {
            let (metadata, reserved) = try state.records.openMetadata(row.metadata, address: row.address)
            let secret =
                withSecret
                ? try state.records.openSecret(row.secret, address: row.address, metadata: row.metadata) : SecretBytes(count: 0) { _ in }
            return VaultEntry(metadata: metadata, secret: secret, unknownReservedAttributes: reserved)
        } catch let error as FormatError {
            throw corrupt(error)
        }
    }

    // MARK: SecretStore

    public func get(_ key: ItemKey) throws -> SecretBytes? {
        try withTransaction(writing: false) { state in try entry(key, state, withSecret: true)?.secret }
    }

    public func metadata(_ key: ItemKey) throws -> ItemMetadata? {
        try withTransaction(writing: false) { state in try entry(key, state, withSecret: false)?.metadata }
    }

    public func item(_ key: ItemKey) throws -> StoredItem? {
        try withTransaction(writing: false) { state in
            try entry(key, state, withSecret: true).map { StoredItem(metadata: $0.metadata, secret: $0.secret) }
        }
    }

    public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws {
        try set([ItemWrite(secret, for: key, options: options)])
    }

    /// Stores every write in one SQLite transaction: after a crash the vault holds all of them
    /// or none. Later writes to the same key win, as with separate calls.
    public func set(_ writes: [ItemWrite]) throws {
        for write in writes { try ItemLimits.validate(write.key, options: write.options, secretCount: write.secret.count) }
        guard !writes.isEmpty else { return }
        try set(streaming: { store in
            for write in writes { try store(write) }
        })
    }

    /// Stores the writes that `produce` hands to its argument, as it hands them, all in one SQLite
    /// transaction: the vault holds all of them or — if `produce` or a write throws, or the
    /// process dies first — none. Only the write being stored is in memory, so a batch of a
    /// million items (an import read line by line) takes no more memory than one of ten. Later
    /// writes to the same key win, as with separate calls.
    ///
    /// The transaction holds the vault's write lock until `produce` returns: other writers wait
    /// (up to their busy timeout) meanwhile. `produce` must not call this store.
    ///
    /// - Returns: the number of writes stored.
    @discardableResult
    public func set(streaming produce: (_ store: (ItemWrite) throws -> Void) throws -> Void) throws -> Int {
        let time = VaultPayload.date(milliseconds: VaultPayload.milliseconds(now()))
        return try withTransaction(writing: true) { state in
            var count = 0
            try produce { write in
                try ItemLimits.validate(write.key, options: write.options, secretCount: write.secret.count)
                try store(write, existing: try entry(write.key, state, withSecret: false), state, time: time)
                count += 1
            }
            return count
        }
    }

    /// Writes the row of `write` (the item's creation time kept from `existing`), inside the
    /// caller's write transaction.
    private func store(_ write: ItemWrite, existing: VaultEntry?, _ state: borrowing State, time: Date) throws {
        let metadata = ItemMetadata(
            key: write.key, options: write.options, created: existing?.metadata.created ?? time, modified: time)
        let address = state.records.address(write.key)
        let sealedMetadata = state.records.sealMetadata(VaultEntry(metadata: metadata, secret: write.secret), address: address)
        let sealedSecret = state.records.sealSecret(write.secret, address: address, metadata: sealedMetadata)
        try state.connection.withStatement("INSERT OR REPLACE INTO items (address, metadata, secret) VALUES (?, ?, ?)") { insert in
            try insert.bind(1, address)
            try insert.bind(2, sealedMetadata)
            try insert.bind(3, sealedSecret)
            try insert.step()
        }
    }

    /// Checks `condition` against the item stored now and writes, in one SQLite write
    /// transaction: no other writer — another thread, another process, another mount namespace —
    /// comes between the check and the write, since SQLite's lock belongs to the database file.
    @discardableResult
    public func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) throws -> Bool {
        try ItemLimits.validate(key, options: changes.options(over: nil), secretCount: secret.count)
        let time = VaultPayload.date(milliseconds: VaultPayload.milliseconds(now()))
        var needsSecret = true
        if case .always = condition { needsSecret = false } else if case .ifAbsent = condition { needsSecret = false }
        return try withTransaction(writing: true) { state in
            let existing = try entry(key, state, withSecret: needsSecret)
            guard condition.holds(for: existing?.secret) else { return false }
            let options = changes.options(over: existing?.metadata)
            try ItemLimits.validate(key, options: options, secretCount: secret.count)
            try store(ItemWrite(secret, for: key, options: options), existing: existing, state, time: time)
            return true
        }
    }

    /// Compares and deletes in one SQLite write transaction (see
    /// ``set(_:for:changes:when:)``).
    @discardableResult
    public func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) throws -> Bool {
        try withTransaction(writing: true) { state in
            guard let current = try entry(key, state, withSecret: true), current.secret == expected else { return false }
            try Self.deleteRows([state.records.address(key)], state.connection)
            return true
        }
    }

    @discardableResult
    public func delete(_ key: ItemKey) throws -> Bool {
        try !delete([key]).isEmpty
    }

    /// Removes every key's item in one transaction.
    @discardableResult
    public func delete(_ keys: [ItemKey]) throws -> [ItemKey] {
        guard !keys.isEmpty else { return [] }
        return try withTransaction(writing: true) { state in
            var removed: [ItemKey] = []
            for key in keys {
                try state.connection.withStatement("DELETE FROM items WHERE address = ?") { delete in
                    try delete.bind(1, state.records.address(key))
                    try delete.step()
                }
                if state.connection.changes > 0 { removed.append(key) }
            }
            return removed
        }
    }

    /// Every item's metadata, decrypting no secret, sorted by service and account.
    public func list(service: String?) throws -> [ItemMetadata] {
        var result: [ItemMetadata] = []
        try list(service: service) { result.append($0) }
        return result.sortedForListing()
    }

    /// Calls `each` with every item's metadata (of `service` only, if given) as its row is read,
    /// in the database's order (not sorted), decrypting no secret: one row in memory at a time, so
    /// listing a million items takes no more memory than listing ten. One read transaction: the
    /// items are those of one moment. `each` must not call this store (the handle is busy).
    public func list(service: String?, each: (ItemMetadata) throws -> Void) throws {
        try withTransaction(writing: false) { state in
            try forEachMetadata(state) { metadata, _ in
                if service == nil || metadata.key.service == service { try each(metadata) }
            }
        }
    }

    private func forEachMetadata(_ state: borrowing State, _ body: (ItemMetadata, [UInt8]) throws -> Void) throws {
        try Self.forEachMetadata(state.connection, records: state.records, path: path, body)
    }

    /// Calls `body` with each row's metadata, opened with `records`, and its address (a row that
    /// does not open: ``LockboxError/corruptVault(path:reason:)`` for `path`).
    static func forEachMetadata(
        _ connection: SQLiteConnection, records: VaultRecords, path: FilePath, _ body: (ItemMetadata, [UInt8]) throws -> Void
    ) throws {
        try connection.withStatement("SELECT address, metadata FROM items") { query in
            while try query.step() {
                let address = query.blob(0)
                do {
                    try body(try records.openMetadata(query.blob(1), address: address).0, address)
                } catch let error as FormatError {
                    throw LockboxError.corruptVault(path: path.string, reason: error.reason)
                }
            }
        }
    }

    /// Deletes the item rows at `addresses`.
    static func deleteRows(_ addresses: [[UInt8]], _ connection: SQLiteConnection) throws {
        for address in addresses {
            try connection.withStatement("DELETE FROM items WHERE address = ?") { delete in
                try delete.bind(1, address)
                try delete.step()
            }
        }
    }

    @discardableResult
    public func wipe(service: String) throws -> Int {
        try withTransaction(writing: true) { state in
            var doomed: [[UInt8]] = []
            try forEachMetadata(state) { metadata, address in if metadata.key.service == service { doomed.append(address) } }
            try Self.deleteRows(doomed, state.connection)
            return doomed.count
        }
    }

    @discardableResult
    public func wipeAll() throws -> Int {
        try withTransaction(writing: true) { state in
            try state.connection.execute("DELETE FROM items")
            return state.connection.changes
        }
    }

    // MARK: Key slots

    /// The vault's key slots, in order.
    public func keySlots() throws -> [KeySlotInfo] {
        try withTransaction(writing: false) { state in
            try Self.readVaultRow(state.connection, path: path).2.enumerated().map { index, row in
                KeySlotInfo(
                    index: index, kind: .init(row.slot.kind), kdf: row.slot.kdf,
                    openedThisHandle: state.unlocker?.opened(row.slot) ?? false,
                    keyFileFingerprint: row.slot.keyFileFingerprint, openedWith: state.unlocker?.keyFileFingerprint)
            }
        }
    }

    /// Adds a key slot that `credential` opens (one new row); returns its index.
    @discardableResult
    public func addKeySlot(_ credential: VaultCredential, kdf: KDFParameters = .default) throws -> Int {
        let source = try KeySlots.source(for: credential, kdf: kdf)
        return try withTransaction(writing: true) { state in
            let rows = try Self.readVaultRow(state.connection, path: path).2
            var slots = rows.map(\.slot)
            let index = try KeySlots.add(source, to: &slots, dataKey: state.dataKey, vaultID: state.records.vaultID)
            try Self.insertSlot(slots[index], after: rows, state.connection)
            return index
        }
    }

    /// Removes the key slot at `index` (one row). The last slot cannot be removed.
    public func removeKeySlot(at index: Int) throws {
        try withTransaction(writing: true) { state in
            let rows = try Self.readVaultRow(state.connection, path: path).2
            var slots = rows.map(\.slot)
            try KeySlots.remove(at: index, from: &slots, unlocker: &state.unlocker)
            let delete = try state.connection.prepare("DELETE FROM key_slots WHERE slot_id = ?")
            try delete.bind(1, rows[index].id)
            try delete.step()
        }
    }

    /// Replaces a passphrase slot with one for `newPassphrase` (one row rewritten). See
    /// ``EncryptedFileStore/changePassphrase(to:kdf:slot:)``.
    public func changePassphrase(to newPassphrase: SecretBytes, kdf: KDFParameters = .default, slot: Int? = nil) throws {
        let source = try KeySlots.source(for: .passphrase(newPassphrase), kdf: kdf)
        try withTransaction(writing: true) { state in
            let rows = try Self.readVaultRow(state.connection, path: path).2
            var slots = rows.map(\.slot)
            try KeySlots.changePassphrase(
                in: &slots, to: source, target: slot, unlocker: &state.unlocker,
                dataKey: state.dataKey, vaultID: state.records.vaultID)
            guard let changed = slots.indices.first(where: { slots[$0] != rows[$0].slot }) else { return }
            let update = try state.connection.prepare("UPDATE key_slots SET slot = ? WHERE slot_id = ?")
            try update.bind(1, slots[changed].encoded())
            try update.bind(2, rows[changed].id)
            try update.step()
        }
    }

    /// Replaces the data key with a fresh one: every slot rewrapped, every row re-sealed and the
    /// key check rewritten, in one transaction. Slots need their credentials as in
    /// ``EncryptedFileStore/rotateDataKey(credentials:dropUnmatchedSlots:)``. Other processes'
    /// handles follow through the slot that opened them.
    public func rotateDataKey(credentials: [VaultCredential] = [], dropUnmatchedSlots: Bool = false) throws {
        try rotateDataKey(credentials: credentials, dropUnmatchedSlots: dropUnmatchedSlots, progress: nil)
    }

    /// ``rotateDataKey(credentials:dropUnmatchedSlots:)``, reporting how far it has got: every row
    /// is read as stored, then each is re-sealed under the new key and written back, and
    /// `progress` is called on this thread with the rows done so far and the rows in all after
    /// each one. Nothing is committed before the last row is written.
    ///
    /// - Parameters:
    ///   - credentials: The credentials of the slots to keep besides the one that opened this handle.
    ///   - dropUnmatchedSlots: Whether to remove the slots none of them opens instead of failing.
    ///   - progress: Called with (rows done, rows in all) after each row, or `nil`.
    public func rotateDataKey(
        credentials: [VaultCredential], dropUnmatchedSlots: Bool, progress: ((_ done: Int, _ total: Int) -> Void)?
    ) throws {
        let sources = try credentials.map { credential throws in try KeySlots.source(for: credential, kdf: .default) }
        try withTransaction(writing: true) { state in
            let rows = try Self.readVaultRow(state.connection, path: path).2
            let (slots, newKey) = try KeySlots.rotated(
                rows.map(\.slot), vaultID: state.records.vaultID, unlocker: state.unlocker, sources: sources,
                dropUnmatched: dropUnmatchedSlots)
            let newRecords = VaultRecords(vaultID: state.records.vaultID, dataKey: newKey)
            // Every row as stored first (the new rows have other addresses, so they cannot be
            // written while the old ones are still being read), then one pass that re-seals and
            // writes each: the pass the progress counts.
            var stored: [(address: [UInt8], metadata: [UInt8], secret: [UInt8])] = []
            let query = try state.connection.prepare("SELECT address, metadata, secret FROM items")
            while try query.step() { stored.append((query.blob(0), query.blob(1), query.blob(2))) }
            try state.connection.execute("DELETE FROM items")
            let insert = try state.connection.prepare("INSERT INTO items (address, metadata, secret) VALUES (?, ?, ?)")
            for (done, row) in stored.enumerated() {
                let entry: VaultEntry
                do {
                    let (metadata, reserved) = try state.records.openMetadata(row.metadata, address: row.address)
                    let secret = try state.records.openSecret(row.secret, address: row.address, metadata: row.metadata)
                    entry = VaultEntry(metadata: metadata, secret: secret, unknownReservedAttributes: reserved)
                } catch let error as FormatError {
                    throw corrupt(error)
                }
                let newAddress = newRecords.address(entry.metadata.key)
                let metadata = newRecords.sealMetadata(entry, address: newAddress)
                insert.reset()
                try insert.bind(1, newAddress)
                try insert.bind(2, metadata)
                try insert.bind(3, newRecords.sealSecret(entry.secret, address: newAddress, metadata: metadata))
                try insert.step()
                progress?(done + 1, stored.count)
            }
            try Self.writeSlots(slots, state.connection)
            let check = try state.connection.prepare("UPDATE vault SET key_check = ? WHERE singleton = 1")
            try check.bind(1, newRecords.keyCheck)
            try check.step()
            if let unlocker = state.unlocker, !slots.contains(where: { unlocker.opened($0) }) { state.unlocker = nil }
            state.records = newRecords
            state.dataKey = newKey
        }
    }

    /// Checks `passphrase` against the vault's passphrase slots; throws
    /// ``LockboxError/wrongCredential(path:)`` if none opens.
    public func verifyPassphrase(_ passphrase: SecretBytes) throws {
        let source = try KeySlots.source(for: .passphrase(passphrase), kdf: .default)
        let (vaultID, _, rows) = try withTransaction(writing: false) { state in try Self.readVaultRow(state.connection, path: path) }
        try KeySlots.verify(source, rows.map(\.slot), vaultID: vaultID, path: path)
    }
}
