#if PostgreSQL
    import CoreMetrics
    import Foundation
    import Lockbox
    import Logging
    import PostgresNIO
    import ServiceLifecycle

    /// What to do on open when the database's Lockbox schema is not at the version this Lockbox
    /// needs (docs/POSTGRES.md, "Two roles").
    public enum PostgresSchemaPolicy: Sendable, Equatable {
        /// Read the schema version (no lock, no DDL) and fail with
        /// ``PostgresStoreError/schemaNotCurrent(server:found:required:)`` unless it is current: the
        /// application role needs only DML and EXECUTE, and the owner role migrates the schema
        /// apart from use (``PostgresStore/migrateSchema(_:operationTimeout:logger:)``,
        /// `lockbox --store postgres migrate-schema`). The default.
        case requireCurrent
        /// Apply the missing migrations on open, as the role that opens (which then needs to own
        /// the schema `lockbox`, or to be allowed to create it). For a single-role deployment that
        /// accepts DDL from the application, and for tests.
        case migrateIfNeeded
    }

    /// How a ``PostgresStoreService`` (or a store opened without one) reaches its database: the
    /// server, the pool's size and timeouts, and what to do with an older schema.
    public struct PostgresStoreConfiguration: Sendable {
        /// The database: hosts, name, user, password, `connect_timeout`, `target_session_attrs`.
        public var url: PostgresConnectionURL
        /// The longest any call may take, waiting for a connection included (0.1 s to 1 hour;
        /// ``PostgresStore/operationTimeoutRange``).
        public var operationTimeout: Duration
        /// The most connections the pool keeps open to the chosen server.
        public var maximumConnections: Int
        /// The connections the pool keeps open even when idle (at most ``maximumConnections``).
        public var minimumConnections: Int
        /// How long an idle connection above ``minimumConnections`` stays open.
        public var connectionIdleTimeout: Duration
        /// What open does with a schema that is missing or older than this Lockbox needs.
        public var schemaPolicy: PostgresSchemaPolicy

        /// A configuration for the database `url` names.
        /// - Parameters:
        ///   - url: the database.
        ///   - operationTimeout: the longest any call may take, waiting for a connection included.
        ///   - maximumConnections: the most connections the pool keeps open.
        ///   - minimumConnections: the connections kept open even when idle.
        ///   - connectionIdleTimeout: how long an idle connection above the minimum stays open.
        ///   - schemaPolicy: what open does with a missing or older schema.
        public init(
            url: PostgresConnectionURL, operationTimeout: Duration = .seconds(10), maximumConnections: Int = 16,
            minimumConnections: Int = 0, connectionIdleTimeout: Duration = .seconds(60),
            schemaPolicy: PostgresSchemaPolicy = .requireCurrent
        ) {
            self.url = url
            self.operationTimeout = operationTimeout
            self.maximumConnections = maximumConnections
            self.minimumConnections = minimumConnections
            self.connectionIdleTimeout = connectionIdleTimeout
            self.schemaPolicy = schemaPolicy
        }

        /// Throws ``Lockbox/LockboxError/invalidArgument(_:)`` for a timeout outside
        /// ``PostgresStore/operationTimeoutRange`` or pool sizes that do not fit together.
        func validated() throws -> PostgresStoreConfiguration {
            guard PostgresStore.operationTimeoutRange.contains(operationTimeout) else {
                throw LockboxError.invalidArgument("a PostgreSQL operation timeout of \(operationTimeout); use 0.1 to 3600 seconds")
            }
            guard maximumConnections >= 1, minimumConnections >= 0, minimumConnections <= maximumConnections else {
                throw LockboxError.invalidArgument(
                    "a PostgreSQL pool of \(minimumConnections) to \(maximumConnections) connections; use at least 1, and a minimum no larger than the maximum"
                )
            }
            guard connectionIdleTimeout > .zero else {
                throw LockboxError.invalidArgument("a PostgreSQL connection idle timeout of \(connectionIdleTimeout); use more than 0")
            }
            return self
        }
    }

    /// The PostgreSQL store's connection pool as a swift-service-lifecycle `Service`, for a
    /// service that runs under a `ServiceGroup` (Hummingbird, Vapor): the pool's `PostgresClient`
    /// runs inside ``run()`` and nowhere else, stops on graceful shutdown, logs to the service's
    /// `Logger` and records its metrics with the service's `MetricsFactory`.
    ///
    /// Put it in the group before the services that use it (a `ServiceGroup` shuts services down
    /// in reverse order: the HTTP server stops taking requests, then the pool closes), and open the
    /// vault through it (``openStore(credentials:executor:now:)``): the calls of every store opened
    /// from it share its pool, and wait for ``run()`` to have started (within the
    /// operation timeout; if it has not started by then they fail with
    /// ``PostgresStoreError/notRunning(server:operation:)``). After ``run()`` has returned, calls fail
    /// with ``PostgresStoreError/notRunning(server:operation:)``.
    ///
    /// A program without a `ServiceGroup` (the `lockbox` command) uses
    /// ``PostgresStore/open(_:credentials:operationTimeout:maximumConnections:executor:now:)``
    /// instead, whose store runs its pool in a task of its own until
    /// ``PostgresStore/shutdown()``.
    ///
    /// Log records (label of the given logger): which server the pool uses and why it changes, at
    /// `info` and `warning`; each call's failure at `debug`, with its operation and error code,
    /// never a query's parameters. Metrics: `lockbox_postgres_operation_duration` (a timer) and
    /// `lockbox_postgres_operations` (a counter), each with the dimensions `operation` and
    /// `outcome` (`ok` or an error code).
    public final class PostgresStoreService: Service, Sendable {
        /// How the service reaches its database.
        public let configuration: PostgresStoreConfiguration
        /// Where the service connects (without password).
        public var server: String { connector.server }

        let connector: PostgresConnector
        private let runner: ClientRunner
        private let logger: Logger

        /// A service for the database `configuration` names; nothing connects before ``run()``.
        /// Throws ``Lockbox/LockboxError/invalidArgument(_:)`` for a configuration out of range.
        /// - Parameters:
        ///   - configuration: the database, pool and schema policy.
        ///   - logger: where the store logs (also postgres-nio's background logger).
        ///   - metricsFactory: where the store records its metrics.
        public init(
            configuration: PostgresStoreConfiguration, logger: Logger, metricsFactory: any MetricsFactory = MetricsSystem.factory
        ) throws {
            self.configuration = try configuration.validated()
            let runner = ClientRunner()
            self.runner = runner
            self.logger = logger
            connector = PostgresConnector(
                configuration, runner: .service(runner), logger: logger, metrics: PostgresMetrics(factory: metricsFactory))
        }

        /// Runs the pool until the task is cancelled or a graceful shutdown is triggered; then
        /// closes its connections and returns.
        public func run() async throws {
            logger.info("PostgreSQL store: running", metadata: ["lockbox.server": "\(server)"])
            let runner = runner
            await cancelWhenGracefulShutdown {
                await withDiscardingTaskGroup { group in
                    for await client in runner.clients {
                        group.addTask { await client.runUntilStopped() }
                    }
                }
            }
            runner.finish()
            await connector.shutdown()
            logger.info("PostgreSQL store: stopped", metadata: ["lockbox.server": "\(server)"])
        }

        /// Opens the vault with the first credential that opens one of its key slots, checking the
        /// schema as ``PostgresStoreConfiguration/schemaPolicy`` says. The store uses this
        /// service's pool; its ``PostgresStore/shutdown()`` leaves the pool to the service.
        /// - Parameters:
        ///   - credentials: key files, keys or passphrases, tried in that order.
        ///   - executor: where Argon2id runs for a passphrase slot.
        ///   - now: the clock of items' creation and modification times.
        public func openStore(
            credentials: [VaultCredential], executor: BlockingExecutor = .shared, now: @escaping @Sendable () -> Date = { Date() }
        ) async throws -> PostgresStore {
            try await PostgresStore.open(
                connector: connector, credentials: credentials, schemaPolicy: configuration.schemaPolicy, owned: false,
                executor: executor, now: now)
        }

        /// Creates a new, empty vault with one key slot per credential (applying the schema's
        /// missing migrations first, as the owner role does). The store uses this service's pool.
        /// - Parameters:
        ///   - credentials: one key slot each.
        ///   - kdf: the Argon2id cost of passphrase slots.
        ///   - executor: where Argon2id runs.
        ///   - now: the clock of items' creation and modification times.
        public func createStore(
            credentials: [VaultCredential], kdf: KDFParameters = .default, executor: BlockingExecutor = .shared,
            now: @escaping @Sendable () -> Date = { Date() }
        ) async throws -> PostgresStore {
            try await PostgresStore.create(
                connector: connector, credentials: credentials, kdf: kdf, owned: false, executor: executor, now: now)
        }

        /// Applies every schema migration the database lacks (as the schema's owner role) and
        /// returns the version it is at.
        @discardableResult
        public func migrateSchema() async throws -> Int {
            try await PostgresStore.migrateSchema(connector: connector)
        }

        /// The schema version the database is at (0: no Lockbox schema), read without a lock or DDL.
        public func schemaVersion() async throws -> Int {
            try await PostgresStore.schemaVersion(connector: connector)
        }
    }

    /// Hands the pools a ``PostgresConnector`` makes to the ``PostgresStoreService/run()`` that runs them.
    final class ClientRunner: Sendable {
        /// One pool to run, until its route is retired or the service stops.
        struct Run: Sendable {
            let client: PostgresClient
            let stopped: AsyncStream<Void>
            let started: StartGate

            func runUntilStopped() async {
                await withDiscardingTaskGroup { group in
                    group.addTask {
                        // Calls made before now waited for this (PostgresConnector.run).
                        started.open()
                        await client.run()
                    }
                    // Ends when the route is retired, or when the service's task is cancelled.
                    for await _ in stopped {}
                    group.cancelAll()
                }
            }
        }

        let clients: AsyncStream<Run>
        private let continuation: AsyncStream<Run>.Continuation

        init() { (clients, continuation) = AsyncStream<Run>.makeStream() }

        /// Queues `client` for ``PostgresStoreService/run()``, which opens `started` as it runs it;
        /// the closure returned stops it.
        func start(_ client: PostgresClient, started: StartGate) -> @Sendable () -> Void {
            let (stopped, stop) = AsyncStream<Void>.makeStream()
            continuation.yield(Run(client: client, stopped: stopped, started: started))
            return { stop.finish() }
        }

        /// No more pools: ``PostgresStoreService/run()`` returns once the running ones have stopped.
        func finish() { continuation.finish() }
    }

    /// The store's metrics (labels in docs/PERFORMANCE.md, "Metrics").
    final class PostgresMetrics: Sendable {
        private let factory: any MetricsFactory
        private let timers = Locked<[String: CoreMetrics.Timer]>([:])
        private let counters = Locked<[String: Counter]>([:])

        init(factory: any MetricsFactory) { self.factory = factory }

        /// Records one call: its duration and its outcome (`ok` or an error code).
        func record(operation: String, outcome: String, duration: Duration) {
            let dimensions = [("operation", operation), ("outcome", outcome)]
            let key = "\(operation)|\(outcome)"
            let factory = factory
            let timer = timers.withLock { timers in
                if let timer = timers[key] { return timer }
                let timer = CoreMetrics.Timer(label: "lockbox_postgres_operation_duration", dimensions: dimensions, factory: factory)
                timers[key] = timer
                return timer
            }
            let counter = counters.withLock { counters in
                if let counter = counters[key] { return counter }
                let counter = Counter(label: "lockbox_postgres_operations", dimensions: dimensions, factory: factory)
                counters[key] = counter
                return counter
            }
            timer.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
            counter.increment()
        }
    }
#endif
