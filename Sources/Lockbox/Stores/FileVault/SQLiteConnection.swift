import CSQLite
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// One connection to a SQLite database, with the settings a vault needs and errors as
/// ``LockboxError``: a thin typed wrapper over Debian's libsqlite3 (docs/ARCHITECTURE.md,
/// "SQLite access").
///
/// Every connection runs with:
/// - `journal_mode=WAL`: readers never block the writer, and a commit appends to the log;
/// - `synchronous=FULL`: each commit is fsynced before it returns, so an acknowledged write
///   survives a crash of the process or of the machine (NORMAL would lose the last commits on
///   power loss);
/// - `secure_delete=ON`: deleted and overwritten rows are zeroed in the file;
/// - `busy_timeout`: a writer waits this long for another process's write lock, then fails with
///   ``LockboxError/vaultBusy(path:waitedSeconds:)``;
/// - defensive mode, triggers and views disabled, `trusted_schema=OFF`, no extension loading:
///   nothing stored in the file runs (a trigger planted in a vault never fires, a view is never
///   expanded), and the file's schema cannot be rewritten through the connection;
/// - a length limit (``maximumValueBytes``): no string, BLOB or row larger than the format
///   allows is ever loaded into memory; a larger one is a damaged vault;
/// - `cell_size_check=ON`: corruption is detected earlier; `mmap_size=0` keeps reads as `read`
///   calls, so a file truncated underneath gives an error, not a SIGBUS.
///
/// Not thread-safe: the owner serialises calls (SQLite's own locking serialises processes).
package final class SQLiteConnection {
    /// The database file.
    package let path: FilePath
    /// The longest string, BLOB or row the connection loads: a 16 MiB secret sealed, next to the
    /// largest metadata an item can have (``ItemLimits``), with room to spare. Anything longer
    /// is not a row Lockbox wrote, and reading it fails as a damaged vault before it is loaded.
    package static let maximumValueBytes = 20 << 20
    private let busyTimeout: Duration
    private var handle: OpaquePointer?
    /// Statements prepared once and reused (``withStatement(_:_:)``), by their SQL.
    private var statements: [String: SQLiteStatement] = [:]
    /// The SQL of cached statements running now: a nested use of the same SQL gets its own.
    private var statementsInUse: Set<String> = []
    /// The file this connection counts as open in ``DatabaseFileDescriptors``.
    private var countedFile: DatabaseFileDescriptors.FileID?

    /// Opens (or, with `create`, creates with mode 0600) the database at `path`.
    package convenience init(path: FilePath, create: Bool, busyTimeout: Duration) throws {
        try self.init(path: path, create: create, busyTimeout: busyTimeout, file: nil)
    }

    /// Opens the database at `path` read-only (``ReadOnlyAccess``).
    package convenience init(path: FilePath, readOnly: ReadOnlyAccess, busyTimeout: Duration) throws {
        try self.init(path: path, create: false, busyTimeout: busyTimeout, file: nil, readOnly: readOnly)
    }

    /// Opens the database Lockbox already opened and checked as `file`, through its descriptor
    /// (``SQLiteFileAdoption``): the file is not opened a second time. With `readOnly`, the
    /// connection never writes to the database or beside it (``ReadOnlyAccess``).
    package convenience init(file: OpenedDatabaseFile, busyTimeout: Duration, readOnly: ReadOnlyAccess? = nil) throws {
        try self.init(path: file.path, create: false, busyTimeout: busyTimeout, file: file, readOnly: readOnly)
    }

    /// How a read-only connection reads a database in WAL mode, whose readers normally share an
    /// index (`-shm`) they create beside it — which a read-only or full file system does not allow.
    package enum ReadOnlyAccess {
        /// The `-shm` beside the database exists: it is used read-only, with the log (`-wal`), so
        /// writes another process committed to the log are read too.
        case sharedIndex
        /// No `-shm` and an empty or absent log: the database file alone holds every committed
        /// write, and is read as immutable (SQLite's `immutable=1`: no locks, no side files).
        case immutable
    }

    private init(path: FilePath, create: Bool, busyTimeout: Duration, file: OpenedDatabaseFile?, readOnly: ReadOnlyAccess? = nil) throws {
        self.path = path
        self.busyTimeout = busyTimeout
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE
        flags |= readOnly == nil ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
        if create { flags |= SQLITE_OPEN_CREATE }
        let name = readOnly.map { Self.uri(path, immutable: $0 == .immutable) } ?? path.string
        var db: OpaquePointer?
        var offer: UInt64?
        var descriptor: FileDescriptor?
        if let file { descriptor = file.take() }
        // Counted before SQLite opens it: a descriptor of the file closed meanwhile is parked.
        countedFile =
            descriptor.flatMap { DatabaseFileDescriptors.FileID(descriptor: $0.rawValue) }
            ?? DatabaseFileDescriptors.FileID(path: path)
        if let countedFile { DatabaseFileDescriptors.connectionOpening(countedFile) }
        if let file, let descriptor {
            offer = SQLiteFileAdoption.offer(descriptor, path: path, readWrite: file.readWrite)
            if offer == nil { DatabaseFileDescriptors.close(descriptor, readWrite: file.readWrite) }
        }
        let status = sqlite3_open_v2(name, &db, flags, nil)
        if let offer { SQLiteFileAdoption.withdraw(offer) }
        handle = db
        if countedFile == nil, status == SQLITE_OK, let id = DatabaseFileDescriptors.FileID(path: path) {
            countedFile = id
            DatabaseFileDescriptors.connectionOpening(id)
        }
        guard status == SQLITE_OK else {
            let error = Self.error(
                status, message: db.map { String(cString: sqlite3_errmsg($0)) } ?? "", systemErrno: sqlite3_system_errno(db),
                path: path, busyTimeout: busyTimeout, operation: "opening the vault")
            sqlite3_close_v2(db)
            handle = nil
            if let countedFile { DatabaseFileDescriptors.connectionClosed(countedFile) }
            countedFile = nil
            throw error
        }
        let milliseconds = busyTimeout.components.seconds * 1000 + busyTimeout.components.attoseconds / 1_000_000_000_000_000
        sqlite3_busy_timeout(db, Int32(clamping: milliseconds))
        // Before anything reads the schema: nothing a hostile file holds may run.
        let distrust = lockbox_sqlite_distrust_file(db, Int32(Self.maximumValueBytes))
        guard distrust == SQLITE_OK else { throw failure(distrust, operation: "configuring the connection to the vault") }
        try execute("PRAGMA cell_size_check=ON; PRAGMA mmap_size=0; PRAGMA secure_delete=ON;")
    }

    deinit {
        // Cached statements are finalised first, so the close is not deferred behind them.
        statements.removeAll()
        // Closing the last connection checkpoints the log into the database and removes it.
        sqlite3_close_v2(handle)
        if let countedFile { DatabaseFileDescriptors.connectionClosed(countedFile) }
    }

    /// The `file:` URI SQLite opens `path` by, read-only (every byte but letters, digits and
    /// `/-._~` percent-encoded, so no character of the path reads as a URI's query or fragment).
    private static func uri(_ path: FilePath, immutable: Bool) -> String {
        var text = "file:"
        for byte in path.string.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "/"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                text.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                text += "%" + [byte].hexString
            }
        }
        return text + (immutable ? "?mode=ro&immutable=1" : "?mode=ro")
    }

    /// Switches the database to WAL with durable commits; returns nothing but throws if SQLite
    /// would not (a file system without shared memory, say).
    package func useWriteAheadLog() throws {
        let mode = try queryText("PRAGMA journal_mode=WAL")
        guard mode?.lowercased() == "wal" else {
            throw LockboxError.io(
                operation: "switching the vault to write-ahead logging (SQLite answered \(mode ?? "nothing"))", path: path.string,
                errno: .notSupported)
        }
        try execute("PRAGMA synchronous=FULL")
    }

    /// Runs one or more statements that return no rows.
    package func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        guard status == SQLITE_OK else {
            throw failure(status, message: message.map { String(cString: $0) }, operation: "running \(Self.verb(sql))")
        }
    }

    /// The first column of the first row of `sql`, as text.
    package func queryText(_ sql: String) throws -> String? {
        let statement = try prepare(sql)
        return try statement.step() ? statement.text(0) : nil
    }

    /// The first column of the first row of `sql`, as an integer.
    package func queryInteger(_ sql: String) throws -> Int64? {
        let statement = try prepare(sql)
        return try statement.step() ? statement.integer(0) : nil
    }

    /// Runs `body` with the statement for `sql`, prepared on first use and reused by every later
    /// call on this connection (parsing and planning a statement costs more than running a
    /// point query), then resets it (bindings cleared, its read snapshot released). The statement
    /// must not escape `body`.
    package func withStatement<T>(_ sql: String, _ body: (SQLiteStatement) throws -> T) throws -> T {
        guard !statementsInUse.contains(sql) else { return try body(try prepare(sql)) }
        let statement: SQLiteStatement
        if let cached = statements[sql] {
            statement = cached
        } else {
            statement = try prepare(sql, persistent: true)
            statements[sql] = statement
        }
        statementsInUse.insert(sql)
        defer {
            statement.reset()
            statementsInUse.remove(sql)
        }
        return try body(statement)
    }

    /// How many statements ``withStatement(_:_:)`` holds prepared.
    package var cachedStatementCount: Int { statements.count }

    /// A prepared statement; bind, step, read columns. Valid while this connection lives.
    /// `persistent`: kept for long (``withStatement(_:_:)``), which SQLite allocates for.
    package func prepare(_ sql: String, persistent: Bool = false) throws -> SQLiteStatement {
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0, &statement, nil)
        guard status == SQLITE_OK, let statement else {
            throw failure(status, operation: "preparing \(Self.verb(sql))")
        }
        return SQLiteStatement(statement, connection: self)
    }

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` (takes the write lock at once, waiting up
    /// to the busy timeout) when `writing`, else a deferred read transaction (one consistent
    /// snapshot). Commits if `body` returns, rolls back if it throws.
    package func transaction<T>(writing: Bool, _ body: () throws -> T) throws -> T {
        try run(writing ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        let result: T
        do {
            result = try body()
        } catch {
            try? run("ROLLBACK")
            throw error
        }
        do {
            try run("COMMIT")
        } catch {
            try? run("ROLLBACK")
            throw error
        }
        return result
    }

    /// Runs one cached statement that returns no rows.
    private func run(_ sql: String) throws {
        try withStatement(sql) { statement in _ = try statement.step() }
    }

    /// Whether SQLite opened the database read-only (it does so by itself when the file cannot be
    /// opened for writing).
    package var isReadOnly: Bool { sqlite3_db_readonly(handle, "main") == 1 }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes64(handle)) }

    /// The ``LockboxError`` for SQLite result `status` on this connection.
    func failure(_ status: Int32, message: String? = nil, operation: String) -> LockboxError {
        Self.error(
            status, message: message ?? String(cString: sqlite3_errmsg(handle)), systemErrno: sqlite3_system_errno(handle),
            path: path, busyTimeout: busyTimeout, operation: operation)
    }

    private static func error(
        _ status: Int32, message: String, systemErrno: Int32, path: FilePath, busyTimeout: Duration, operation: String
    ) -> LockboxError {
        switch status & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return .vaultBusy(path: path.string, waitedSeconds: Double(busyTimeout.components.seconds))
        case SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FORMAT:
            return .corruptVault(path: path.string, reason: "the database is damaged (SQLite: \(message))")
        case SQLITE_CONSTRAINT:
            // No write of Lockbox's breaks the documented schema's constraints.
            return .corruptVault(path: path.string, reason: "a constraint in the database refused a write (SQLite: \(message))")
        case SQLITE_TOOBIG:
            return .corruptVault(path: path.string, reason: "a value in the database is larger than the format allows")
        case SQLITE_CANTOPEN:
            return .io(operation: operation, path: path.string, errno: Errno(rawValue: systemErrno != 0 ? systemErrno : ENOENT))
        case SQLITE_FULL:
            return .io(operation: operation, path: path.string, errno: .noSpace)
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH:
            return .io(operation: operation, path: path.string, errno: .permissionDenied)
        case SQLITE_NOMEM:
            return .io(operation: operation, path: path.string, errno: .noMemory)
        default:
            return .io(operation: "\(operation) (SQLite: \(message))", path: path.string, errno: .ioError)
        }
    }

    /// The first word of a statement, for error messages (never its parameters: none are inlined).
    private static func verb(_ sql: String) -> String {
        String(sql.split(separator: " ").first ?? "a statement")
    }
}

/// A prepared statement of a ``SQLiteConnection``. Finalised when released. Used only while its
/// connection lives (the connection caches statements, so this reference cannot be strong).
package final class SQLiteStatement {
    private let statement: OpaquePointer
    private unowned let connection: SQLiteConnection

    fileprivate init(_ statement: OpaquePointer, connection: SQLiteConnection) {
        self.statement = statement
        self.connection = connection
    }

    deinit { sqlite3_finalize(statement) }

    /// Binds a BLOB (copied by SQLite) to parameter `index` (1-based).
    package func bind(_ index: Int32, _ bytes: [UInt8]) throws {
        let status = bytes.withUnsafeBytes { buffer in
            // An empty array may have no base address; SQLite needs a non-null pointer for a
            // zero-length BLOB (null would bind NULL).
            sqlite3_bind_blob64(
                statement, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(buffer.count), lockbox_sqlite_transient())
        }
        try check(status, "binding a value")
    }

    /// Binds an integer to parameter `index` (1-based).
    package func bind(_ index: Int32, _ value: Int64) throws {
        try check(sqlite3_bind_int64(statement, index, value), "binding a value")
    }

    /// Binds text to parameter `index` (1-based).
    package func bind(_ index: Int32, text: String) throws {
        try check(sqlite3_bind_text(statement, index, text, -1, lockbox_sqlite_transient()), "binding a value")
    }

    /// Advances to the next row: `true` if there is one, `false` when done.
    @discardableResult
    package func step() throws -> Bool {
        let status = sqlite3_step(statement)
        switch status {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.failure(status, operation: "reading or writing the vault")
        }
    }

    /// Resets the statement to run again, with its bindings cleared.
    package func reset() {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    /// Column `index` (0-based) as bytes; empty for NULL.
    package func blob(_ index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, index))
        guard count > 0, let pointer = sqlite3_column_blob(statement, index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Column `index` (0-based) as an integer.
    package func integer(_ index: Int32) -> Int64 { sqlite3_column_int64(statement, index) }

    /// Column `index` (0-based) as text, or `nil` for NULL.
    package func text(_ index: Int32) -> String? {
        guard let pointer = sqlite3_column_text(statement, index) else { return nil }
        return String(cString: pointer)
    }

    /// Whether column `index` (0-based) holds a BLOB (not NULL, an integer or text).
    package func isBlob(_ index: Int32) -> Bool { sqlite3_column_type(statement, index) == SQLITE_BLOB }

    private func check(_ status: Int32, _ operation: String) throws {
        guard status == SQLITE_OK else { throw connection.failure(status, operation: operation) }
    }
}
