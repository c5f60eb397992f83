#if PostgreSQL
    import CoreMetrics
    import Foundation
    import Lockbox
    import Logging
    import PostgresNIO
    import SystemPackage

    /// A vault in PostgreSQL that many hosts share: format 2's sealed records (the same sealing,
    /// key slots and keyed addresses as ``Lockbox/SQLiteVaultStore``) in tables of the schema
    /// `lockbox`, over postgres-nio's connection pool.
    ///
    /// The key stays on the hosts: the database, its backups and replicas hold a vault ID, key
    /// slots (the data key wrapped under each credential), a key check, and one row per item with a
    /// keyed address and two sealed columns — no service, account, label or secret in clear
    /// (docs/ARCHITECTURE.md, "PostgreSQL store"). A row changed in the database, or copied to
    /// another address, fails authentication: that item's read throws
    /// ``Lockbox/LockboxError/corruptVault(path:reason:)``, never returns other data.
    ///
    /// Every call finishes within ``operationTimeout`` (default 10 s, 0.1 s to 1 hour; waiting for a
    /// connection included) or throws ``PostgresStoreError/unavailable(server:operation:waitedSeconds:)``;
    /// one connection attempt to one host is bounded by the URL's `connect_timeout` (default 10 s).
    /// With several hosts in the URL the store uses the first that matches its
    /// `target_session_attrs`, and chooses again when that server is gone (a lost connection or a
    /// timeout, then a probe that fails) or turns read-only: the call that noticed fails (a write
    /// whose connection was lost may or may not have committed), the next one goes to the server
    /// chosen anew. Call ``shutdown()`` when done: it
    /// closes the pool.
    public final class PostgresStore: AsyncSecretStore {
        /// `false`: reading an item needs the vault's passphrase or key file.
        public var isOpenToOtherProcessesOfUser: Bool { false }

        /// Where the store connects (without password).
        public let server: String
        /// The longest any call may take, waiting for a connection included.
        public let operationTimeout: Duration

        private let connector: PostgresConnector
        private let keys: Locked<Keys>
        let now: @Sendable () -> Date
        let logger: Logger
        /// Whether this store's ``shutdown()`` closes the pool (a store opened from a
        /// ``PostgresStoreService`` leaves it to the service).
        private let ownsConnector: Bool

        /// The keys of an open vault. `VaultRecords` and `SlotUnlocker` hold only byte arrays and
        /// `SecretBytes` (which is `Sendable`) and are replaced, never changed in place; they are
        /// declared `Sendable` here only because package types get no inferred conformance.
        private struct Keys: @unchecked Sendable {
            var records: VaultRecords
            var unlocker: SlotUnlocker?
        }

        private init(
            connector: PostgresConnector, records: VaultRecords, unlocker: SlotUnlocker?, owned: Bool,
            now: @escaping @Sendable () -> Date
        ) {
            self.server = connector.server
            self.operationTimeout = connector.operationTimeout
            self.connector = connector
            self.keys = Locked(Keys(records: records, unlocker: unlocker))
            self.now = now
            self.logger = connector.logger
            self.ownsConnector = owned
        }

        deinit { if ownsConnector { connector.close() } }

        /// Closes the connection pool and waits until its task has ended; later calls fail. A store
        /// opened from a ``PostgresStoreService`` leaves the pool to the service: its `run()` ends
        /// on the service group's graceful shutdown.
        public func shutdown() async {
            if ownsConnector { await connector.shutdown() }
        }

        /// The shortest and longest ``operationTimeout`` a store accepts.
        public static let operationTimeoutRange: ClosedRange<Duration> = .milliseconds(100) ... .seconds(3600)

        /// `seconds` as an ``operationTimeout``, for a value read from configuration: throws
        /// ``Lockbox/LockboxError/invalidArgument(_:)`` for NaN, an infinity, or a value outside
        /// ``operationTimeoutRange``.
        public static func operationTimeout(seconds: Double) throws -> Duration {
            guard seconds.isFinite, seconds >= 0.1, seconds <= 3600 else {
                throw LockboxError.invalidArgument("a PostgreSQL operation timeout of \(seconds) s; use 0.1 to 3600 seconds")
            }
            return .milliseconds(Int64((seconds * 1000).rounded()))
        }

        /// Throws unless `limit` is within ``operationTimeoutRange``.
        private static func validate(operationTimeout limit: Duration) throws {
            guard operationTimeoutRange.contains(limit) else {
                throw LockboxError.invalidArgument("a PostgreSQL operation timeout of \(limit); use 0.1 to 3600 seconds")
            }
        }

        // MARK: Creating and opening

        /// Creates the schema if needed (``migrateSchema(_:operationTimeout:logger:)``: the role
        /// needs to own the schema `lockbox`, or to create it, unless it is current already) and a
        /// new, empty vault in it with one key slot per credential. Throws
        /// ``Lockbox/LockboxError/vaultAlreadyExists(path:)`` if the database holds a vault already
        /// (nothing is changed then).
        ///
        /// Argon2id for passphrase slots runs on `executor`, not on the caller's task. The store
        /// runs its pool in a task of its own until ``shutdown()``; a service under a
        /// `ServiceGroup` uses ``PostgresStoreService/createStore(credentials:kdf:executor:now:)``.
        public static func create(
            _ url: PostgresConnectionURL, credentials: [VaultCredential], kdf: KDFParameters = .default,
            operationTimeout: Duration = .seconds(10), maximumConnections: Int = 16,
            executor: BlockingExecutor = .shared, now: @escaping @Sendable () -> Date = { Date() }
        ) async throws -> PostgresStore {
            try validate(operationTimeout: operationTimeout)
            let configuration = try PostgresStoreConfiguration(
                url: url, operationTimeout: operationTimeout, maximumConnections: max(1, maximumConnections)
            ).validated()
            let connector = PostgresConnector(configuration, runner: .ownTasks, logger: .lockboxDefault, metrics: nil)
            return try await create(connector: connector, credentials: credentials, kdf: kdf, owned: true, executor: executor, now: now)
        }

        /// ``create(_:credentials:kdf:operationTimeout:maximumConnections:executor:now:)`` on
        /// `connector`; with `owned`, the pool is closed when creating fails.
        static func create(
            connector: PostgresConnector, credentials: [VaultCredential], kdf: KDFParameters, owned: Bool,
            executor: BlockingExecutor, now: @escaping @Sendable () -> Date
        ) async throws -> PostgresStore {
            guard !credentials.isEmpty else {
                throw LockboxError.invalidArgument("a new vault needs at least one credential: a passphrase or a key file")
            }
            let vaultID = Sodium.randomBytes(VaultHeader.vaultIDBytes)
            let (encodedSlots, keys) = try await executor.run {
                let dataKey = SecretBytes.random(count: Sodium.aeadKeyBytes)
                let (slots, unlocker) = try KeySlots.make(for: credentials, dataKey: dataKey, vaultID: vaultID, kdf: kdf)
                return (slots.map { $0.encoded() }, Keys(records: VaultRecords(vaultID: vaultID, dataKey: dataKey), unlocker: unlocker))
            }
            let keyCheck = keys.records.keyCheck
            let store = PostgresStore(connector: connector, records: keys.records, unlocker: keys.unlocker, owned: owned, now: now)
            do {
                try await store.run("creating the vault") { store in
                    try await PostgresSchema.migrate(store.client, logger: store.logger, server: store.server)
                    try await store.client.withConnection { connection in
                        try await Self.transaction(on: connection, logger: store.logger) { connection in
                            var inserted = false
                            let rows = try await connection.query(
                                """
                                INSERT INTO lockbox.vault (format_version, vault_id, key_check)
                                VALUES (\(Int16(VaultRecords.formatVersion)), \(ByteBuffer(bytes: vaultID)), \(ByteBuffer(bytes: keyCheck)))
                                ON CONFLICT (singleton) DO NOTHING RETURNING true
                                """, logger: store.logger)
                            for try await _ in rows.decode(Bool.self) { inserted = true }
                            guard inserted else { throw LockboxError.vaultAlreadyExists(path: store.server) }
                            for (index, slot) in encodedSlots.enumerated() {
                                try await connection.query(
                                    "INSERT INTO lockbox.key_slots (slot_id, slot) VALUES (\(index), \(ByteBuffer(bytes: slot)))",
                                    logger: store.logger)
                            }
                        }
                    }
                }
            } catch {
                await store.shutdown()
                throw error
            }
            return store
        }

        /// Opens the vault in the database at `url` with the first credential that opens one of its
        /// key slots (key files first, then passphrases). The schema must be at the version this
        /// Lockbox needs: open reads it (no lock, no DDL) and throws
        /// ``PostgresStoreError/schemaNotCurrent(server:found:required:)`` if it is missing or older
        /// (the owner role migrates it: ``migrateSchema(_:operationTimeout:logger:)``). Throws
        /// ``Lockbox/LockboxError/vaultNotFound(path:)`` if the database holds no vault,
        /// ``Lockbox/LockboxError/wrongCredential(path:)`` if no credential opens a slot.
        ///
        /// The store runs its pool in a task of its own until ``shutdown()``; a service under a
        /// `ServiceGroup` uses ``PostgresStoreService`` instead, whose `run()` runs the pool.
        public static func open(
            _ url: PostgresConnectionURL, credentials: [VaultCredential],
            operationTimeout: Duration = .seconds(10), maximumConnections: Int = 16,
            executor: BlockingExecutor = .shared, now: @escaping @Sendable () -> Date = { Date() }
        ) async throws -> PostgresStore {
            try validate(operationTimeout: operationTimeout)
            return try await open(
                configuration: PostgresStoreConfiguration(
                    url: url, operationTimeout: operationTimeout, maximumConnections: max(1, maximumConnections)),
                credentials: credentials, executor: executor, now: now)
        }

        /// Opens the vault as ``open(_:credentials:operationTimeout:maximumConnections:executor:now:)``
        /// does, with every setting of `configuration` (pool sizes, idle timeout, schema policy),
        /// logging to `logger` and recording metrics with `metricsFactory`. The store runs its pool
        /// in a task of its own until ``shutdown()``: for a program without a `ServiceGroup`.
        /// - Parameters:
        ///   - configuration: the database, pool and schema policy.
        ///   - credentials: key files, keys or passphrases, tried in that order.
        ///   - logger: where the store logs (also postgres-nio's background logger).
        ///   - metricsFactory: where the store records its metrics.
        ///   - executor: where Argon2id runs for a passphrase slot.
        ///   - now: the clock of items' creation and modification times.
        public static func open(
            configuration: PostgresStoreConfiguration, credentials: [VaultCredential], logger: Logger = .lockboxDefault,
            metricsFactory: any MetricsFactory = MetricsSystem.factory, executor: BlockingExecutor = .shared,
            now: @escaping @Sendable () -> Date = { Date() }
        ) async throws -> PostgresStore {
            let configuration = try configuration.validated()
            let connector = PostgresConnector(
                configuration, runner: .ownTasks, logger: logger, metrics: PostgresMetrics(factory: metricsFactory))
            return try await open(
                connector: connector, credentials: credentials, schemaPolicy: configuration.schemaPolicy, owned: true,
                executor: executor, now: now)
        }

        /// Opens the vault over `connector`; with `owned`, the pool is closed when opening fails.
        static func open(
            connector: PostgresConnector, credentials: [VaultCredential], schemaPolicy: PostgresSchemaPolicy, owned: Bool,
            executor: BlockingExecutor, now: @escaping @Sendable () -> Date
        ) async throws -> PostgresStore {
            guard !credentials.isEmpty else {
                throw LockboxError.invalidArgument("opening a vault needs a credential: its passphrase or its key file")
            }
            let server = connector.server
            let logger = connector.logger
            do {
                let row = try await connector.run("opening the vault") { client in
                    switch schemaPolicy {
                    case .requireCurrent: try await PostgresSchema.requireCurrent(client, logger: logger, server: server)
                    case .migrateIfNeeded: try await PostgresSchema.migrate(client, logger: logger, server: server)
                    }
                    return try await readVaultRow(client, logger: logger, server: server)
                }
                let keys = try await executor.run {
                    let opened = try KeySlots.open(row.slots, vaultID: row.vaultID, credentials: credentials, path: FilePath(server))
                    return Keys(records: VaultRecords(vaultID: row.vaultID, dataKey: opened.dataKey), unlocker: opened.unlocker)
                }
                guard Sodium.constantTimeEqual(keys.records.keyCheck, row.keyCheck) else {
                    throw LockboxError.corruptVault(path: server, reason: "the key check does not match the data key the key slots hold")
                }
                return PostgresStore(connector: connector, records: keys.records, unlocker: keys.unlocker, owned: owned, now: now)
            } catch {
                if owned { await connector.shutdown() }
                throw error
            }
        }

        /// Applies every schema migration the database at `url` lacks, and nothing else: the step
        /// a deployment runs once per Lockbox upgrade as the role that owns the schema `lockbox`
        /// (`lockbox --store postgres migrate-schema`), before the application role opens the vault.
        /// Returns the schema version the database is at. Safe to run again, and from several hosts at
        /// once (an advisory lock; each migration applies exactly once).
        /// - Parameters:
        ///   - url: the database, with the owner role's user and password.
        ///   - operationTimeout: the longest the migration may take, waiting for a connection included.
        ///   - logger: where the store logs.
        @discardableResult
        public static func migrateSchema(
            _ url: PostgresConnectionURL, operationTimeout: Duration = .seconds(30), logger: Logger = .lockboxDefault
        ) async throws -> Int {
            try validate(operationTimeout: operationTimeout)
            let configuration = PostgresStoreConfiguration(url: url, operationTimeout: operationTimeout, maximumConnections: 1)
            let connector = PostgresConnector(configuration, runner: .ownTasks, logger: logger, metrics: nil)
            defer { connector.close() }
            let version = try await migrateSchema(connector: connector)
            await connector.shutdown()
            return version
        }

        /// The schema version of the database at `url` (0: no Lockbox schema there), read without a
        /// lock or DDL.
        /// - Parameters:
        ///   - url: the database.
        ///   - operationTimeout: the longest the read may take, waiting for a connection included.
        public static func schemaVersion(_ url: PostgresConnectionURL, operationTimeout: Duration = .seconds(10)) async throws -> Int {
            try validate(operationTimeout: operationTimeout)
            let configuration = PostgresStoreConfiguration(url: url, operationTimeout: operationTimeout, maximumConnections: 1)
            let connector = PostgresConnector(configuration, runner: .ownTasks, logger: .lockboxDefault, metrics: nil)
            defer { connector.close() }
            let version = try await schemaVersion(connector: connector)
            await connector.shutdown()
            return version
        }

        static func migrateSchema(connector: PostgresConnector) async throws -> Int {
            let (server, logger) = (connector.server, connector.logger)
            try await connector.run("migrating the schema") { client in
                try await PostgresSchema.migrate(client, logger: logger, server: server)
            }
            return PostgresSchema.currentVersion
        }

        static func schemaVersion(connector: PostgresConnector) async throws -> Int {
            let logger = connector.logger
            return try await connector.run("reading the schema version") { client in
                try await client.withConnection { connection in try await PostgresSchema.version(on: connection, logger: logger) }
            }
        }

        /// The vault row and its slots (`KeySlot`: parsed bytes, as `Keys` above).
        private struct VaultRow: @unchecked Sendable {
            var vaultID: [UInt8]
            var keyCheck: [UInt8]
            var slots: [KeySlot]
        }

        private static func readVaultRow(_ client: PostgresClient, logger: Logger, server: String) async throws -> VaultRow {
            try await client.withConnection { connection in
                try await transaction(on: connection, logger: logger) { connection in
                    var vault: (Int16, ByteBuffer, ByteBuffer)?
                    let rows = try await connection.query("SELECT format_version, vault_id, key_check FROM lockbox.vault", logger: logger)
                    for try await row in rows.decode((Int16, ByteBuffer, ByteBuffer).self) { vault = row }
                    guard let vault else { throw LockboxError.vaultNotFound(path: server) }
                    guard vault.0 == Int16(VaultRecords.formatVersion) else {
                        throw LockboxError.unsupportedFormatVersion(
                            path: server, found: Int(vault.0), supported: Int(VaultRecords.formatVersion))
                    }
                    var slots: [KeySlot] = []
                    for try await bytes in try await connection.query("SELECT slot FROM lockbox.key_slots ORDER BY slot_id", logger: logger)
                        .decode(ByteBuffer.self)
                    {
                        let slot = try KeySlots.parseRow(Array(bytes.readableBytesView), index: slots.count, vault: server)
                        slots.append(slot)
                    }
                    guard (1...VaultHeader.maxSlots).contains(slots.count) else {
                        throw LockboxError.corruptVault(path: server, reason: "implausible slot count \(slots.count)")
                    }
                    return VaultRow(vaultID: Array(vault.1.readableBytesView), keyCheck: Array(vault.2.readableBytesView), slots: slots)
                }
            }
        }

        // MARK: Running calls

        /// Runs `body` within ``operationTimeout`` on the server the connector chose (``client``),
        /// with postgres-nio's errors made typed; after a lost connection, a timeout or a read-only
        /// refusal the connector checks its server and chooses again if it is gone. `retryingOnce`
        /// for calls that may run twice with the same effect (``PostgresConnector/run(_:retryingOnce:_:)``).
        func run<T: Sendable>(
            _ operation: String, retryingOnce: Bool = false, _ body: @escaping @Sendable (PostgresStore) async throws -> T
        ) async throws -> T {
            try await connector.run(operation, retryingOnce: retryingOnce) { [self] _ in try await body(self) }
        }

        /// ``run(_:retryingOnce:_:)`` for a read that may run twice: on the server the running
        /// task's ``Lockbox/ReadFreshness`` allows — a standby for
        /// ``Lockbox/ReadFreshness/replicaAllowed`` when the URL says `target_session_attrs=prefer-standby`,
        /// else the server of every other call.
        func runRead<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (PostgresStore) async throws -> T) async throws -> T {
            try await connector.reads(ReadFreshness.current).run(operation, retryingOnce: true) { [self] _ in try await body(self) }
        }

        /// The pool of the server chosen for the running call.
        var client: PostgresClient { connector.client }

        /// `body`'s result, or ``PostgresStoreError/unavailable(server:operation:waitedSeconds:)``
        /// once `limit` has passed (the work is then cancelled and its result, if any, dropped).
        /// Cancelling the caller cancels the work.
        ///
        /// The work is a task of its own (a call stuck on a server that answers nothing must not
        /// hold its caller), started with `Task.immediate`: it runs on the caller's thread up to
        /// its first suspension (sending the query) instead of being queued first. The time limit
        /// is an entry in ``DeadlineKeeper/shared`` (one sleeping task for every call of the
        /// process), not a timer task per call: a per-call timer cost two more task switches per
        /// call (its start, and its wake-up when cancelled), and a dispatch timer that lived
        /// for the whole `limit`.
        static func withDeadline<T: Sendable>(
            _ limit: Duration, server: String, operation: String, _ body: @escaping @Sendable () async throws -> T
        ) async throws -> T {
            let race = DeadlineRace<T>()
            return try await withTaskCancellationHandler {
                race.attach(
                    DeadlineKeeper.shared.add(ContinuousClock.now + limit) {
                        race.finish(
                            .failure(PostgresStoreError.unavailable(server: server, operation: operation, waitedSeconds: seconds(limit))))
                    })
                race.attach(
                    Task.immediate {
                        do { race.finish(.success(try await body())) } catch {
                            race.finish(.failure(translate(error, server: server, operation: operation)))
                        }
                    })
                return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                    race.wait(continuation)
                }
            } onCancel: {
                race.finish(.failure(CancellationError()))
            }
        }

        static func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }

        /// postgres-nio's errors as ``PostgresStoreError``s (never their text: a server message can
        /// quote row values); Lockbox's own errors unchanged.
        static func translate(_ error: any Error, server: String, operation: String) -> any Error {
            switch error {
            case is LockboxError, is PostgresStoreError, is CancellationError:
                return error
            case let error as PostgresTransactionError:
                if let inner = error.closureError ?? error.beginError ?? error.commitError {
                    return translate(inner, server: server, operation: operation)
                }
                return PostgresStoreError.connectionLost(server: server, operation: operation)
            case let error as PSQLError:
                switch error.code {
                case .server:
                    let state = error.serverInfo?[.sqlState] ?? "?????"
                    // Class 57 (operator intervention: shutdown, crash) and 08 (connection exception).
                    if state.hasPrefix("57P") || state.hasPrefix("08") {
                        return PostgresStoreError.connectionLost(server: server, operation: operation)
                    }
                    // read_only_sql_transaction: a hot standby (or default_transaction_read_only).
                    if state == "25006" { return PostgresStoreError.readOnlyServer(server: server, operation: operation) }
                    return PostgresStoreError.serverRefused(server: server, operation: operation, sqlState: state)
                case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown, .poolClosed:
                    return PostgresStoreError.connectionLost(server: server, operation: operation)
                default:
                    return PostgresStoreError.serverRefused(server: server, operation: operation, sqlState: "client: \(error.code)")
                }
            default:
                return PostgresStoreError.connectionLost(server: server, operation: operation)
            }
        }

        /// `body` in one transaction on `connection`: `BEGIN`, `body`, `COMMIT`; the result only once
        /// `COMMIT` has returned (with a synchronous standby: once the standby has the commit).
        ///
        /// Not postgres-nio's `withTransaction`: after an error it sends `ROLLBACK` whatever the error
        /// was, and on a connection whose channel has closed (a terminated backend, a crashed
        /// server) that query never completes — `PostgresConnection.query` writes it into the
        /// channel with no write promise, and once the closed channel's pipeline has dropped
        /// postgres-nio's handler the query's own promise is never fulfilled. The call then hung until
        /// its operation timeout instead of failing with `connectionLost`, whenever the `ROLLBACK`
        /// lost the race against the pipeline's teardown. A lost connection needs no `ROLLBACK` (the
        /// server rolls back a transaction whose connection ends), so none is sent then.
        static func transaction<T: Sendable>(
            on connection: PostgresConnection, logger: Logger, isolation: isolated (any Actor)? = #isolation,
            _ body: (PostgresConnection) async throws -> T
        ) async throws -> T {
            try await connection.query("BEGIN", logger: logger)
            let value: T
            do {
                value = try await body(connection)
            } catch {
                if !isConnectionLoss(error) && !connection.isClosed {
                    _ = try? await connection.query("ROLLBACK", logger: logger)
                }
                throw error
            }
            try await connection.query("COMMIT", logger: logger)
            return value
        }

        /// Whether `error` says the connection ended (the server closed it, or the network did).
        static func isConnectionLoss(_ error: any Error) -> Bool {
            switch error {
            case let error as PSQLError:
                switch error.code {
                case .server:
                    let state = error.serverInfo?[.sqlState] ?? ""
                    return state.hasPrefix("57P") || state.hasPrefix("08")
                case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown, .poolClosed:
                    return true
                default:
                    return false
                }
            case let error as PostgresStoreError:
                if case .connectionLost = error { return true }
                return false
            default:
                return false
            }
        }

        // MARK: Keys

        var records: VaultRecords { keys.withLock { $0.records } }

        /// Thrown inside a call whose vault row names another data key (rotated by another host).
        private struct StaleKeys: Error {}

        private func checkKey(_ keyCheck: ByteBuffer?, _ records: VaultRecords) throws {
            guard let keyCheck else { throw LockboxError.corruptVault(path: server, reason: "the vault row is missing") }
            guard Sodium.constantTimeEqual(Array(keyCheck.readableBytesView), records.keyCheck) else { throw StaleKeys() }
        }

        /// Runs `body` with the current keys; if the vault's data key has changed (another host
        /// rotated it), reopens it with the slot that opened this handle and runs `body` once more.
        private func withKeys<T: Sendable>(_ body: (VaultRecords) async throws -> T) async throws -> T {
            do {
                return try await body(records)
            } catch is StaleKeys {
                try await reloadKeys()
                do { return try await body(records) } catch is StaleKeys {
                    throw LockboxError.credentialsChanged(path: server)
                }
            }
        }

        private func reloadKeys() async throws {
            let row = try await Self.readVaultRow(client, logger: logger, server: server)
            let unlocker = keys.withLock { $0.unlocker }
            guard let dataKey = KeySlots.reopen(row.slots, vaultID: row.vaultID, with: unlocker) else {
                throw LockboxError.credentialsChanged(path: server)
            }
            let records = VaultRecords(vaultID: row.vaultID, dataKey: dataKey)
            guard Sodium.constantTimeEqual(records.keyCheck, row.keyCheck) else {
                throw LockboxError.corruptVault(path: server, reason: "the key check does not match the data key the key slots hold")
            }
            keys.withLock { $0.records = records }
        }

        func opened(_ records: VaultRecords, address: [UInt8], metadata: ByteBuffer, secret: ByteBuffer?) throws -> StoredItem {
            let metadataColumn = Array(metadata.readableBytesView)
            do {
                let (metadata, _) = try records.openMetadata(metadataColumn, address: address)
                let secret = try secret.map {
                    try records.openSecret(Array($0.readableBytesView), address: address, metadata: metadataColumn)
                }
                return StoredItem(metadata: metadata, secret: secret ?? SecretBytes(count: 0) { _ in })
            } catch let error as FormatError {
                throw LockboxError.corruptVault(path: server, reason: error.reason)
            }
        }

        /// The sealed metadata and secret columns of `secret` stored under `key` with `options`
        /// (`address` is `key`'s keyed address under `records`).
        func sealed(
            _ secret: SecretBytes, for key: ItemKey, options: ItemOptions, created: Date, modified: Date,
            address: [UInt8], _ records: VaultRecords
        ) -> (metadata: [UInt8], secret: [UInt8]) {
            let metadata = ItemMetadata(key: key, options: options, created: created, modified: modified)
            let sealedMetadata = records.sealMetadata(VaultEntry(metadata: metadata, secret: secret), address: address)
            return (sealedMetadata, records.sealSecret(secret, address: address, metadata: sealedMetadata))
        }

        /// The item under `key`, its secret opened only when `withSecret`: one statement, the item's
        /// row by primary key, when there is one and it opens.
        ///
        /// The address is keyed by the data key, and a data-key rotation moves every row to the new
        /// key's addresses in the transaction that changes the key check (docs/ARCHITECTURE.md,
        /// "PostgreSQL store"): a row found at this handle's address was written under this
        /// handle's key, so the read needs no key check. No row there means no such item, or a key
        /// rotated by another host: a second statement reads the vault row's key check to tell
        /// which (the handle then reopens the key and reads again). A row that fails
        /// authentication is damaged (``Lockbox/LockboxError/corruptVault(path:reason:)``) unless
        /// the key check has changed meanwhile.
        private func read(_ key: ItemKey, withSecret: Bool) async throws -> StoredItem? {
            try await withKeys { records in
                let address = records.address(key)
                // The secret column only when asked for: nil secret, nothing opened.
                let found: (metadata: ByteBuffer, secret: ByteBuffer?)?
                if withSecret {
                    found = try await PostgresStatements.row(
                        PostgresStatements.ReadItem(address: ByteBuffer(bytes: address)), on: client, logger: logger
                    ).map { ($0.0, $0.1) }
                } else {
                    found = try await PostgresStatements.row(
                        PostgresStatements.ReadItemMetadata(address: ByteBuffer(bytes: address)), on: client, logger: logger
                    ).map { ($0, nil) }
                }
                guard let found else {
                    try await checkCurrentKey(records)
                    return nil
                }
                do {
                    return try opened(records, address: address, metadata: found.metadata, secret: found.secret)
                } catch {
                    try await checkCurrentKey(records)
                    throw error
                }
            }
        }

        /// Throws `StaleKeys` if the vault row's key check is not `records`' (another host rotated
        /// the data key), ``Lockbox/LockboxError/corruptVault(path:reason:)`` if there is no vault row.
        private func checkCurrentKey(_ records: VaultRecords) async throws {
            let keyCheck = try await PostgresStatements.row(PostgresStatements.ReadKeyCheck(), on: client, logger: logger)
            try checkKey(keyCheck, records)
        }

        /// Runs `body` in one transaction that first takes a share lock on the vault row (a data-key
        /// rotation, which updates it, waits) and checks its key.
        func writing<T: Sendable>(_ body: (PostgresConnection, VaultRecords) async throws -> T) async throws -> T {
            try await withKeys { records in
                try await client.withConnection { connection in
                    try await Self.transaction(on: connection, logger: logger) { connection in
                        var keyCheck: ByteBuffer?
                        for try await value in try await connection.query("SELECT key_check FROM lockbox.vault FOR SHARE", logger: logger)
                            .decode(ByteBuffer.self)
                        { keyCheck = value }
                        try checkKey(keyCheck, records)
                        return try await body(connection, records)
                    }
                }
            }
        }

        // MARK: AsyncSecretStore

        /// The secret under `key`, or `nil`. Throws ``Lockbox/LockboxError/corruptVault(path:reason:)``
        /// if its row fails authentication.
        public func get(_ key: ItemKey) async throws -> SecretBytes? {
            try await runRead("reading an item") { store in try await store.read(key, withSecret: true)?.secret }
        }

        /// The metadata of the item under `key`, or `nil`; no secret is decrypted.
        public func metadata(_ key: ItemKey) async throws -> ItemMetadata? {
            try await runRead("reading an item's metadata") { store in
                try await store.read(key, withSecret: false)?.metadata
            }
        }

        /// The item under `key` with its secret.
        public func item(_ key: ItemKey) async throws -> StoredItem? {
            try await runRead("reading an item") { store in try await store.read(key, withSecret: true) }
        }

        /// Stores `secret` under `key`, committed (with a synchronous standby: on the standby) before
        /// this returns.
        ///
        /// One round trip when this handle knows the item's current row (it wrote or found it last):
        /// `CALL lockbox.put_item`, which checks the key, replaces the row only if it still holds the
        /// sealed metadata this handle saw (so the creation time sealed in it is kept), and COMMITs
        /// before it answers. Otherwise, or when another host changed the row since, the answer
        /// carries the row's current metadata and the call is repeated with it: two round trips.
        /// (The statement is prepared on each pooled connection's first use: one more round trip
        /// then.)
        /// Never an autocommit statement whose result is taken as the acknowledgement: its rows
        /// reach the client before the implicit commit has reached the synchronous standby
        /// (docs/ARCHITECTURE.md, "Acknowledged only when durable").
        public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) async throws {
            try await set([ItemWrite(secret, for: key, options: options)])
        }

        /// Stores every write in one transaction: all or none. Later writes to the same key win.
        /// One write is one call of `lockbox.put_item` (``set(_:for:options:)``).
        public func set(_ writes: [ItemWrite]) async throws {
            for write in writes { try ItemLimits.validate(write.key, options: write.options, secretCount: write.secret.count) }
            guard !writes.isEmpty else { return }
            let time = VaultPayload.date(milliseconds: VaultPayload.milliseconds(now()))
            if writes.count == 1, let write = writes.first {
                try await run("writing an item", retryingOnce: true) { store in try await store.put(write, at: time) }
                return
            }
            try await run("writing items") { store in
                try await store.writing { connection, records in
                    try await store.upsert(writes, at: time, on: connection, records)
                }
            }
        }

        /// The sealed metadata of an item's row as this handle last wrote or read it, and the
        /// creation time sealed in it: what ``put(_:at:)`` expects to find there.
        private struct KnownRow: Sendable {
            var metadata: [UInt8]
            var created: Date
        }

        /// How many rows ``knownRows`` remembers before it starts over (a few hundred bytes each).
        static let knownRowLimit = 4096

        private let knownRows = Locked([[UInt8]: KnownRow]())

        private func remember(_ address: [UInt8], _ row: KnownRow?) {
            knownRows.withLock { rows in
                guard let row else {
                    rows[address] = nil
                    return
                }
                if rows.count >= Self.knownRowLimit && rows[address] == nil { rows.removeAll(keepingCapacity: true) }
                rows[address] = row
            }
        }

        /// One write by compare-and-set (`CALL lockbox.put_item`): sealed with the creation time of
        /// the row this handle expects, sent with that row's sealed metadata; if the row holds
        /// something else, sealed again with what it holds and sent again. After a few lost races
        /// (other hosts writing the same item all the time) the write takes the row lock instead
        /// (``writing(_:)``, ``upsert(_:at:on:_:)``).
        private func put(_ write: ItemWrite, at time: Date) async throws {
            try await withKeys { records in
                let address = records.address(write.key)
                let addressBytes = ByteBuffer(bytes: address)
                let keyCheck = ByteBuffer(bytes: records.keyCheck)
                var expected = knownRows.withLock { $0[address] }
                for _ in 0..<4 {
                    let columns = sealed(
                        write.secret, for: write.key, options: write.options, created: expected?.created ?? time, modified: time,
                        address: address, records)
                    let answer = try await PostgresStatements.row(
                        PostgresStatements.PutItem(
                            address: addressBytes, keyCheck: keyCheck, expectedMetadata: expected.map { ByteBuffer(bytes: $0.metadata) },
                            metadata: ByteBuffer(bytes: columns.metadata), secret: ByteBuffer(bytes: columns.secret)),
                        on: client, logger: logger)
                    switch answer?.0 {
                    case 0?:
                        remember(address, KnownRow(metadata: columns.metadata, created: expected?.created ?? time))
                        return
                    case 1?:
                        expected = try answer?.1.map { found in
                            KnownRow(
                                metadata: Array(found.readableBytesView),
                                created: try opened(records, address: address, metadata: found, secret: nil).metadata.created)
                        }
                        remember(address, expected)
                    case 2?:
                        remember(address, nil)
                        throw StaleKeys()
                    case 3?:
                        throw LockboxError.corruptVault(path: server, reason: "the vault row is missing")
                    default:
                        throw LockboxError.corruptVault(path: server, reason: "the item writer returned no outcome")
                    }
                }
                remember(address, nil)
                try await writing { connection, current in try await upsert([write], at: time, on: connection, current) }
            }
        }

        /// Seals and stores every write on `connection`, inside the caller's transaction
        /// (``writing(_:)``); an item written before keeps its creation time.
        func upsert(_ writes: [ItemWrite], at time: Date, on connection: PostgresConnection, _ records: VaultRecords) async throws {
            for write in writes {
                let address = records.address(write.key)
                let addressBytes = ByteBuffer(bytes: address)
                var existing: ByteBuffer?
                for try await column in try await connection.query(
                    "SELECT metadata FROM lockbox.items WHERE address = \(addressBytes) FOR UPDATE", logger: logger
                ).decode(ByteBuffer.self) { existing = column }
                let created = try existing.map { try opened(records, address: address, metadata: $0, secret: nil).metadata.created }
                let columns = sealed(
                    write.secret, for: write.key, options: write.options, created: created ?? time, modified: time,
                    address: address, records)
                try await connection.query(
                    """
                    INSERT INTO lockbox.items (address, metadata, secret)
                    VALUES (\(addressBytes), \(ByteBuffer(bytes: columns.metadata)), \(ByteBuffer(bytes: columns.secret)))
                    ON CONFLICT (address) DO UPDATE SET metadata = EXCLUDED.metadata, secret = EXCLUDED.secret
                    """, logger: logger)
                // Before the commit: should it not come, the next put finds another row and asks again.
                remember(address, KnownRow(metadata: columns.metadata, created: created ?? time))
            }
        }

        /// Removes the item under `key`; returns whether there was one.
        @discardableResult
        public func delete(_ key: ItemKey) async throws -> Bool {
            try await !delete([key]).isEmpty
        }

        /// Removes every key's item in one transaction; returns the keys that held one.
        @discardableResult
        public func delete(_ keys: [ItemKey]) async throws -> [ItemKey] {
            guard !keys.isEmpty else { return [] }
            return try await run("deleting items") { store in
                try await store.writing { connection, records in
                    var removed: [ItemKey] = []
                    for key in keys {
                        let rows = try await connection.query(
                            "DELETE FROM lockbox.items WHERE address = \(ByteBuffer(bytes: records.address(key))) RETURNING true",
                            logger: store.logger)
                        var hit = false
                        for try await _ in rows.decode(Bool.self) { hit = true }
                        if hit { removed.append(key) }
                    }
                    return removed
                }
            }
        }

        /// Every item's metadata (or one service's), sorted by service then account; no secret is
        /// decrypted. One statement: one snapshot.
        public func list(service: String?) async throws -> [ItemMetadata] {
            try await runRead("listing items") { store in
                try await store.withKeys { records in
                    var result: [ItemMetadata] = []
                    let rows = try await store.client.query(
                        "SELECT (SELECT key_check FROM lockbox.vault), address, metadata FROM lockbox.items", logger: store.logger)
                    for try await (keyCheck, address, metadata) in rows.decode((ByteBuffer?, ByteBuffer, ByteBuffer).self) {
                        try store.checkKey(keyCheck, records)
                        let item = try store.opened(records, address: Array(address.readableBytesView), metadata: metadata, secret: nil)
                        if service == nil || item.metadata.key.service == service { result.append(item.metadata) }
                    }
                    return result.sortedForListing()
                }
            }
        }

        /// Removes every item of `service` in one transaction; returns how many.
        @discardableResult
        public func wipe(service: String) async throws -> Int {
            try await run("wiping a service") { store in
                try await store.writing { connection, records in
                    var doomed: [ByteBuffer] = []
                    let rows = try await connection.query("SELECT address, metadata FROM lockbox.items FOR UPDATE", logger: store.logger)
                    for try await (address, metadata) in rows.decode((ByteBuffer, ByteBuffer).self) {
                        let item = try store.opened(records, address: Array(address.readableBytesView), metadata: metadata, secret: nil)
                        if item.metadata.key.service == service { doomed.append(address) }
                    }
                    for address in doomed {
                        try await connection.query("DELETE FROM lockbox.items WHERE address = \(address)", logger: store.logger)
                    }
                    return doomed.count
                }
            }
        }

        /// Removes every item; returns how many.
        @discardableResult
        public func wipeAll() async throws -> Int {
            try await run("wiping the vault") { store in
                try await store.writing { connection, _ in
                    var count = 0
                    let rows = try await connection.query(
                        "WITH removed AS (DELETE FROM lockbox.items RETURNING 1) SELECT count(*)::int8 FROM removed", logger: store.logger)
                    for try await removed in rows.decode(Int.self) { count = removed }
                    return count
                }
            }
        }
    }

    /// The connection side of a ``PostgresStore``: which server of the URL's host list its calls go
    /// to, and the connection pool to it.
    ///
    /// The first call chooses a server (``PostgresConnectionURL/TargetSessionAttributes``): hosts in
    /// the URL's order, each probed with one connection of its own (bounded by `connect_timeout`)
    /// that asks `pg_is_in_recovery()` and `transaction_read_only`; the first that fits gets a pool.
    /// One URL host with `target_session_attrs=any` is not probed (the pool's connection is the
    /// probe). Concurrent calls share one choice. A call that loses its connection or times out makes
    /// the connector check that pool's server (one probe; calls starting meanwhile wait for the
    /// verdict): a server that is gone or no longer fits has its pool retired, so the next call
    /// chooses again — after a failover, the promoted standby. A call refused as read-only (SQLSTATE
    /// 25006: a demoted primary) retires the pool at once. No host fits: the choice is tried again
    /// every 100-250 ms until the call's time runs out
    /// (``PostgresStoreError/unavailable(server:operation:waitedSeconds:)``).
    final class PostgresConnector: Sendable {
        /// A pool to one server; `generation` tells a retired one from its successor.
        struct Route: Sendable {
            let client: PostgresClient
            /// Ends the pool's `run()`.
            let stop: @Sendable () -> Void
            /// The task running the pool, when the connector runs it itself (``Runner/ownTasks``).
            let runTask: Task<Void, Never>?
            let host: PostgresConnectionURL.Host
            let generation: Int
            /// Opens when the pool's `run()` is about to start; fails when the pool closes first.
            let started: StartGate
        }

        /// Who runs the pools' `PostgresClient.run()`.
        enum Runner: Sendable {
            /// A ``PostgresStoreService``'s `run()`.
            case service(ClientRunner)
            /// A task per pool, started here and ended by ``shutdown()`` (a store opened without a
            /// service).
            case ownTasks
        }

        private struct State {
            var route: Route?
            var choosing: Task<Route, any Error>?
            /// A check of the current route after a call on it failed (``suspect(_:)``).
            var checking: Task<Void, Never>?
            var generation = 0
            var closed = false
            var retired: [Task<Void, Never>] = []
        }

        /// The route of the call running in this task (set by ``run(_:_:)``).
        @TaskLocal private static var callRoute: Route?

        let url: PostgresConnectionURL
        let server: String
        let operationTimeout: Duration
        let logger: Logger
        private let configuration: PostgresStoreConfiguration
        private let runner: Runner
        private let metrics: PostgresMetrics?
        private let state = Locked(State())
        /// With `target_session_attrs=prefer-standby`, the connector of reads that may be stale
        /// (on a standby while one is up); this one then takes everything else, as `read-write`.
        private let replicaReads: PostgresConnector?
        /// What this connector's calls are, for its log lines (with `prefer-standby`).
        private let purpose: String?

        /// A connector for `configuration`'s database; with `target_session_attrs=prefer-standby`,
        /// one for writes and the latest state (`read-write`) with one for stale-tolerant reads
        /// (``reads(_:)``).
        convenience init(_ configuration: PostgresStoreConfiguration, runner: Runner, logger: Logger, metrics: PostgresMetrics?) {
            guard configuration.url.targetSessionAttributes == .preferStandby else {
                self.init(configuration, runner: runner, logger: logger, metrics: metrics, purpose: nil, replicaReads: nil)
                return
            }
            var writes = configuration
            writes.url.targetSessionAttributes = .readWrite
            let reads = PostgresConnector(
                configuration, runner: runner, logger: logger, metrics: metrics, purpose: "for reads that may be stale", replicaReads: nil)
            self.init(
                writes, runner: runner, logger: logger, metrics: metrics, purpose: "for writes and the latest state", replicaReads: reads)
        }

        private init(
            _ configuration: PostgresStoreConfiguration, runner: Runner, logger: Logger, metrics: PostgresMetrics?, purpose: String?,
            replicaReads: PostgresConnector?
        ) {
            self.configuration = configuration
            url = configuration.url
            server = url.description
            operationTimeout = configuration.operationTimeout
            self.runner = runner
            self.logger = logger
            self.metrics = metrics
            self.purpose = purpose
            self.replicaReads = replicaReads
        }

        /// The connector for a read of `freshness`: the stale-tolerant one (``replicaReads``) for
        /// ``Lockbox/ReadFreshness/replicaAllowed`` when the URL asks for `prefer-standby`, else this one.
        func reads(_ freshness: ReadFreshness) -> PostgresConnector {
            freshness == .replicaAllowed ? (replicaReads ?? self) : self
        }

        /// The pool of the running call's server. Outside ``run(_:_:)`` (never in this module): the
        /// current one, or if there is none a pool that never runs (its calls wait for the caller's
        /// deadline, as if the server did not answer).
        var client: PostgresClient {
            if let route = Self.callRoute { return route.client }
            if let route = state.withLock({ $0.route }) { return route.client }
            return PostgresClient(configuration: configuration(for: url.hosts[0]))
        }

        /// `body` with the chosen server's pool, within ``operationTimeout``, errors typed
        /// (``PostgresStore/translate(_:server:operation:)``).
        ///
        /// `retryingOnce`: `body` may run twice with the same effect (a read; a write of a given
        /// value). Then a lost connection does not end the call: the server is checked (as after any
        /// lost connection; a failover retires its pool) and `body` runs once more, on the server
        /// chosen then, within what is left of the same ``operationTimeout``. So a call that was
        /// in flight when its primary died completes on the promoted standby, rather than failing
        /// and leaving its caller to wait and try again.
        func run<T: Sendable>(
            _ operation: String, retryingOnce: Bool = false, _ body: @escaping @Sendable (PostgresClient) async throws -> T
        ) async throws -> T {
            let routeSeen = Locked<Route?>(nil)
            let started = ContinuousClock.now
            do {
                let value = try await PostgresStore.withDeadline(operationTimeout, server: server, operation: operation) { [self] in
                    var retried = !retryingOnce
                    while true {
                        let route = try await chosenRoute(operation)
                        routeSeen.withLock { $0 = route }
                        // No lease from a pool whose run() has not started (postgres-nio warns, and
                        // nothing answers until it runs): wait for it, within the deadline.
                        if !route.started.isOpen {
                            do { try await route.started.wait() } catch is StartGate.Closed {
                                throw PostgresStoreError.notRunning(server: server, operation: operation)
                            }
                        }
                        do {
                            return try await Self.$callRoute.withValue(route) { try await body(route.client) }
                        } catch let error where !retried && PostgresStore.isConnectionLoss(error) {
                            retried = true
                            suspect(route)
                        }
                    }
                }
                metrics?.record(operation: operation, outcome: "ok", duration: ContinuousClock.now - started)
                return value
            } catch var error {
                // Out of time while the pool never started: say that, not "unreachable".
                if case .unavailable? = error as? PostgresStoreError, let route = routeSeen.withLock({ $0 }), !route.started.isOpen {
                    error = PostgresStoreError.notRunning(server: server, operation: operation)
                }
                let code = (error as? any LockboxCodedError)?.code.rawValue ?? "\(type(of: error))"
                metrics?.record(operation: operation, outcome: code, duration: ContinuousClock.now - started)
                logger.debug(
                    "PostgreSQL store: \(operation) failed",
                    metadata: ["lockbox.server": "\(server)", "lockbox.error-code": "\(code)"])
                if let route = routeSeen.withLock({ $0 }) {
                    switch error as? PostgresStoreError {
                    case .connectionLost?, .unavailable?: suspect(route)
                    case .readOnlyServer?: retire(route)
                    default: break
                    }
                }
                throw error
            }
        }

        /// A call on `route` lost its connection or ran out of time: the server may be gone, or
        /// only that connection or that call. One probe (bounded by `connect_timeout`) decides; the
        /// route is retired only if its server no longer fits, so one terminated backend or one slow
        /// statement does not close the pool under the other calls. Calls that start meanwhile wait
        /// for the verdict.
        private func suspect(_ route: Route) {
            state.withLock { state in
                guard state.route?.generation == route.generation, state.checking == nil, !state.closed else { return }
                state.checking = Task { [self] in
                    let deadline = ContinuousClock.now + url.connectTimeout
                    if await !fits(route.host, until: deadline) { retire(route) }
                    self.state.withLock { $0.checking = nil }
                }
            }
        }

        /// The current route, or a new one chosen (one choice at a time, shared).
        private func chosenRoute(_ operation: String) async throws -> Route {
            if let checking = state.withLock({ $0.checking }) { await checking.value }
            let (route, choosing): (Route?, Task<Route, any Error>?) = try state.withLock { state in
                if state.closed { throw PostgresStoreError.notRunning(server: server, operation: operation) }
                if let route = state.route { return (route, nil) }
                if let choosing = state.choosing { return (nil, choosing) }
                let task = Task { [self] in try await choose() }
                state.choosing = task
                return (nil, task)
            }
            if let route { return route }
            guard let choosing else { throw PostgresStoreError.notRunning(server: server, operation: operation) }
            // The choice goes on if this call times out: the next call finds it made or under way.
            return try await choosing.value
        }

        /// Tries the hosts in order until one fits, for at most ``operationTimeout``.
        private func choose() async throws -> Route {
            defer { state.withLock { $0.choosing = nil } }
            let deadline = ContinuousClock.now + operationTimeout
            var pause = Duration.milliseconds(100)
            while true {
                // prefer-standby: the first standby; failing that, the first server that answered.
                var answered: PostgresConnectionURL.Host?
                for host in url.hosts {
                    guard ContinuousClock.now < deadline else { break }
                    if url.hosts.count == 1 && url.targetSessionAttributes == .any {
                        return try install(host)
                    }
                    guard let found = await probe(host, until: deadline) else { continue }
                    if url.targetSessionAttributes == .preferStandby {
                        if found.inRecovery { return try install(host) }
                        if answered == nil { answered = host }
                    } else if fits(found) {
                        return try install(host)
                    }
                }
                if let answered { return try install(answered) }
                guard ContinuousClock.now + pause < deadline else {
                    throw PostgresStoreError.unavailable(
                        server: server, operation: "choosing a server", waitedSeconds: Self.seconds(operationTimeout))
                }
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .milliseconds(250))
            }
        }

        /// What a probe found on a server: whether it is a standby, whether it refuses writes.
        private struct ServerState: Sendable {
            var inRecovery: Bool
            var readOnly: Bool
        }

        /// Whether a server in `state` matches `target_session_attrs` (`prefer-standby`: any that
        /// answers; the standby is preferred when choosing).
        private func fits(_ state: ServerState) -> Bool {
            switch url.targetSessionAttributes {
            case .any, .preferStandby: true
            case .primary: !state.inRecovery
            case .readWrite: !state.inRecovery && !state.readOnly
            }
        }

        /// Whether `host` accepts a connection and matches `target_session_attrs` (one probe
        /// connection, closed after).
        private func fits(_ host: PostgresConnectionURL.Host, until deadline: ContinuousClock.Instant) async -> Bool {
            guard let state = await probe(host, until: deadline) else { return false }
            return fits(state)
        }

        /// What `host` is, if it accepts a connection (one probe connection, closed after); for
        /// `target_session_attrs=any`, only whether it answers.
        private func probe(_ host: PostgresConnectionURL.Host, until deadline: ContinuousClock.Instant) async -> ServerState? {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return nil }
            // After a failure, a single `any` host is probed too: can it be reached at all?
            let wanted = url.targetSessionAttributes
            let logger = logger
            let limit = min(remaining, url.connectTimeout)
            do {
                let tls: PostgresConnection.Configuration.TLS =
                    switch url.tlsMode {
                    case .disable: .disable
                    case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
                    case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
                    }
                var configuration = PostgresConnection.Configuration(
                    host: host.name, port: host.port, username: url.user, password: url.password, database: url.database, tls: tls)
                configuration.options.connectTimeout = TimeAmount.nanoseconds(Int64(Self.seconds(limit) * 1e9))
                let probe = configuration
                return try await PostgresStore.withDeadline(limit, server: host.description, operation: "probing the server") {
                    let connection = try await PostgresConnection.connect(configuration: probe, id: 0, logger: logger)
                    do {
                        var state: ServerState? = wanted == .any ? ServerState(inRecovery: false, readOnly: false) : nil
                        if state == nil {
                            let rows = try await connection.query(
                                "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'", logger: logger)
                            for try await (inRecovery, readOnly) in rows.decode((Bool, Bool).self) {
                                state = ServerState(inRecovery: inRecovery, readOnly: readOnly)
                            }
                        }
                        try? await connection.close()
                        return state
                    } catch {
                        try? await connection.close()
                        throw error
                    }
                }
            } catch {
                return nil
            }
        }

        private func install(_ host: PostgresConnectionURL.Host) throws -> Route {
            let client = PostgresClient(configuration: configuration(for: host), backgroundLogger: logger)
            let route = try state.withLock { state in
                guard !state.closed else { throw PostgresStoreError.notRunning(server: server, operation: "choosing a server") }
                state.generation += 1
                let route: Route
                let started = StartGate()
                switch runner {
                case .service(let runner):
                    route = Route(
                        client: client, stop: runner.start(client, started: started), runTask: nil, host: host,
                        generation: state.generation,
                        started: started)
                case .ownTasks:
                    let task = Task {
                        started.open()
                        await client.run()
                    }
                    route = Route(
                        client: client, stop: { task.cancel() }, runTask: task, host: host, generation: state.generation, started: started)
                }
                state.route = route
                return route
            }
            logger.info(
                "PostgreSQL store: using \(host)\(purpose.map { " " + $0 } ?? "")",
                metadata: [
                    "lockbox.server": "\(host)", "lockbox.target-session-attrs": "\(url.targetSessionAttributes.rawValue)",
                ])
            return route
        }

        /// Stops using `route` (if it is still the current one): its pool closes, the next call chooses.
        private func retire(_ route: Route) {
            let retired = state.withLock { state in
                guard state.route?.generation == route.generation else { return false }
                state.route = nil
                route.stop()
                // Kept so that shutdown waits for them; only the last few (older ones, cancelled long
                // ago, have finished), so a service whose database flaps for months does not grow.
                if let task = route.runTask { state.retired = state.retired.suffix(7) + [task] }
                return true
            }
            if retired {
                logger.warning(
                    "PostgreSQL store: \(route.host) is gone or no longer fits target_session_attrs; choosing again",
                    metadata: ["lockbox.server": "\(route.host)"])
            }
        }

        private func configuration(for host: PostgresConnectionURL.Host) -> PostgresClient.Configuration {
            let tls: PostgresClient.Configuration.TLS =
                switch url.tlsMode {
                case .disable: .disable
                case .prefer: .prefer(.makeClientConfiguration())
                case .require: .require(.makeClientConfiguration())
                }
            var configuration = PostgresClient.Configuration(
                host: host.name, port: host.port, username: url.user, password: url.password, database: url.database, tls: tls)
            configuration.options.connectTimeout = url.connectTimeout
            configuration.options.maximumConnections = self.configuration.maximumConnections
            configuration.options.minimumConnections = self.configuration.minimumConnections
            configuration.options.connectionIdleTimeout = self.configuration.connectionIdleTimeout
            return configuration
        }

        /// Closes every pool without waiting (for `deinit`); returns their tasks.
        @discardableResult
        func close() -> [Task<Void, Never>] {
            let readTasks = replicaReads?.close() ?? []
            let tasks = state.withLock { state in
                state.closed = true
                state.choosing?.cancel()
                state.checking?.cancel()
                state.route?.stop()
                // Calls waiting for a pool that never started: it never will.
                state.route?.started.close()
                let tasks = state.retired + (state.route?.runTask.map { [$0] } ?? [])
                state.route = nil
                state.retired = []
                return tasks
            }
            for task in tasks { task.cancel() }
            return tasks + readTasks
        }

        /// Closes every pool and waits until they are closed.
        func shutdown() async {
            for task in close() { await task.value }
        }

        static func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
    }

    /// The first of a call's work, its deadline and its caller's cancellation to finish resumes the
    /// caller; the work is cancelled and the deadline removed.
    private final class DeadlineRace<T: Sendable>: Sendable {
        private struct State {
            var continuation: CheckedContinuation<T, any Error>?
            var pending: Result<T, any Error>?
            var work: Task<Void, Never>?
            var deadline: DeadlineKeeper.Token?
            var done = false
        }

        private let state = Locked(State())

        /// The call's work (cancelled at once if the race is over already).
        func attach(_ work: Task<Void, Never>) {
            let over = state.withLock { state in
                if !state.done { state.work = work }
                return state.done
            }
            if over { work.cancel() }
        }

        /// The call's deadline (removed at once if the race is over already).
        func attach(_ deadline: DeadlineKeeper.Token) {
            let over = state.withLock { state in
                if !state.done { state.deadline = deadline }
                return state.done
            }
            if over { DeadlineKeeper.shared.remove(deadline) }
        }

        /// Resumes `continuation` with the outcome, now if there is one already.
        func wait(_ continuation: CheckedContinuation<T, any Error>) {
            let early: Result<T, any Error>? = state.withLock { state in
                if let pending = state.pending {
                    state.pending = nil
                    return pending
                }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(with: early) }
        }

        func finish(_ result: Result<T, any Error>) {
            let (continuation, work, deadline): (CheckedContinuation<T, any Error>?, Task<Void, Never>?, DeadlineKeeper.Token?) =
                state.withLock { state in
                    guard !state.done else { return (nil, nil, nil) }
                    state.done = true
                    defer { (state.work, state.deadline, state.continuation) = (nil, nil, nil) }
                    // Finished before wait (cancelled early, or a very fast body): wait resumes.
                    if state.continuation == nil { state.pending = result }
                    return (state.continuation, state.work, state.deadline)
                }
            work?.cancel()
            if let deadline { DeadlineKeeper.shared.remove(deadline) }
            continuation?.resume(with: result)
        }
    }

    /// Opens once, when a pool's `run()` is about to start, or closes, when the pool closes before
    /// that: calls wait for it rather than lease a connection from a pool that is not running.
    final class StartGate: Sendable {
        /// The pool closed before its `run()` started.
        struct Closed: Error {}

        private struct State {
            var settled: Bool?
            var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
            var next: UInt64 = 0
        }

        private let state = Locked(State())

        /// Whether the pool's `run()` has started.
        var isOpen: Bool { state.withLock { $0.settled == true } }

        /// The pool's `run()` starts: every waiting call goes on.
        func open() { settle(true) }

        /// The pool closed first: every waiting call throws ``Closed``.
        func close() { settle(false) }

        private func settle(_ open: Bool) {
            let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
                guard state.settled == nil else { return [] }
                state.settled = open
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters {
                if open { waiter.resume() } else { waiter.resume(throwing: Closed()) }
            }
        }

        /// Returns once the gate has opened; throws ``Closed`` if it closed, `CancellationError`
        /// if the calling task is cancelled first.
        func wait() async throws {
            let id = state.withLock { state -> UInt64 in
                state.next += 1
                return state.next
            }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let settled: Bool?? = state.withLock { state in
                        if let settled = state.settled { return .some(settled) }
                        if Task.isCancelled { return .some(nil) }
                        state.waiters[id] = continuation
                        return .none
                    }
                    switch settled {
                    case .none: break
                    case .some(true): continuation.resume()
                    case .some(false): continuation.resume(throwing: Closed())
                    case .some(nil): continuation.resume(throwing: CancellationError())
                    }
                }
            } onCancel: {
                let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.resume(throwing: CancellationError())
            }
        }
    }

    /// The time limits of the calls in flight in this process, and one task that sleeps until the
    /// earliest and ends the calls whose time has run out: the timer of
    /// ``PostgresStore/withDeadline(_:server:operation:_:)``. Adding and removing a limit take a
    /// lock and no task; the task is started when a limit earlier than the one it sleeps until
    /// is added (or none sleeps), and ends when no limit is left at its wake-up. With one
    /// operation timeout for all calls it wakes about once per timeout.
    final class DeadlineKeeper: Sendable {
        /// The keeper of the process.
        static let shared = DeadlineKeeper()

        /// A limit added, to remove it when its call has finished.
        struct Token: Sendable {
            fileprivate let id: UInt64
        }

        private struct Entry {
            let deadline: ContinuousClock.Instant
            let expire: @Sendable () -> Void
        }

        private struct State {
            var entries: [UInt64: Entry] = [:]
            var lastID: UInt64 = 0
            /// When the sleeping task wakes (`nil`: none sleeps), and which one it is.
            var wake: ContinuousClock.Instant?
            var sleeper: (generation: UInt64, task: Task<Void, Never>)?
            var generation: UInt64 = 0
        }

        private let state = Locked(State())

        /// Calls `expire` once `deadline` has passed, unless the limit is removed before.
        func add(_ deadline: ContinuousClock.Instant, expire: @escaping @Sendable () -> Void) -> Token {
            let (token, replaced): (Token, Task<Void, Never>?) = state.withLock { state in
                state.lastID &+= 1
                state.entries[state.lastID] = Entry(deadline: deadline, expire: expire)
                let token = Token(id: state.lastID)
                if let wake = state.wake, wake <= deadline { return (token, nil) }
                let replaced = state.sleeper?.task
                state.generation &+= 1
                let generation = state.generation
                state.wake = deadline
                state.sleeper = (generation, Task { [self] in await sleep(until: deadline, generation: generation) })
                return (token, replaced)
            }
            replaced?.cancel()
            return token
        }

        /// Removes a limit whose call has finished.
        func remove(_ token: Token) {
            state.withLock { _ = $0.entries.removeValue(forKey: token.id) }
        }

        private func sleep(until deadline: ContinuousClock.Instant, generation: UInt64) async {
            var deadline = deadline
            while true {
                // Cancelled: a limit earlier than `deadline` came, and a new task sleeps until it.
                guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
                let now = ContinuousClock.now
                let (expired, next): ([@Sendable () -> Void], ContinuousClock.Instant?) = state.withLock { state in
                    guard state.sleeper?.generation == generation else { return ([], nil) }
                    var expired: [@Sendable () -> Void] = []
                    var next: ContinuousClock.Instant?
                    for (id, entry) in state.entries {
                        if entry.deadline <= now {
                            expired.append(entry.expire)
                            state.entries[id] = nil
                        } else if next.map({ entry.deadline < $0 }) ?? true {
                            next = entry.deadline
                        }
                    }
                    state.wake = next
                    if next == nil { state.sleeper = nil }
                    return (expired, next)
                }
                for expire in expired { expire() }
                guard let next else { return }
                deadline = next
            }
        }
    }
#endif
