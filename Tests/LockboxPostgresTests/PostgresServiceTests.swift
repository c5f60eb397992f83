#if PostgreSQL
    import Foundation
    import InMemoryLogging
    import Lockbox
    import Logging
    import MetricsTestKit
    import ServiceLifecycle
    import Testing
    @testable import LockboxPostgres

    // PostgresStoreService as a service runs it: in a ServiceGroup, with the service's logger and
    // metrics factory, stopped by a graceful shutdown.

    extension PostgresStoreTests {
        /// A store opened before the group runs waits for `run()` (no "run() hasn't been called"
        /// from postgres-nio); calls go through the pool `run()` runs; the store logs and records
        /// metrics where the service says; a graceful shutdown makes `run()` return, and later
        /// calls fail with ``PostgresStoreError/notRunning(server:operation:)``.
        @Test func theServiceRunsItsPoolInAServiceGroupLogsMetricsAndStopsGracefully() async throws {
            guard let cluster = try Cluster.current("PostgresStoreService in a ServiceGroup") else { return }
            let logs = InMemoryLogHandler()
            var logger = Logger(label: "lockbox.postgres.test", factory: { _ in logs })
            logger.logLevel = .debug
            let metrics = TestMetrics()
            let service = try PostgresStoreService(
                configuration: PostgresStoreConfiguration(url: cluster.url, operationTimeout: .seconds(20), schemaPolicy: .migrateIfNeeded),
                logger: logger, metricsFactory: metrics)

            // Called before the group runs: it waits for run() rather than lease from a pool not running.
            let early = Task { try await service.createStore(credentials: [.key(Self.key)], kdf: cheapKDF) }
            try await Task.sleep(for: .milliseconds(500))
            #expect(try cluster.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'lockbox'") == "0\n", "nothing sent before run()")

            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(services: [.init(service: service)], logger: logger))
            let running = Task { try await group.run() }
            let store = try await early.value
            let key = ItemKey(service: "api.example", account: "svc")
            try await store.set(secret("through the service"), for: key, options: ItemOptions())
            #expect(text(try await store.get(key)) == "through the service")
            #expect(try await store.list(service: nil).map(\.account) == ["svc"])

            await group.triggerGracefulShutdown()
            try await running.value
            let after = await thrown { try await store.get(key) }
            #expect(
                after as? PostgresStoreError == .notRunning(server: service.server, operation: "reading an item"),
                "\(String(describing: after))")
            #expect("\(after.map { "\($0)" } ?? "")".contains("PostgresStoreService.run() has not started or has returned"))

            // The store's log lines reached the service's logger; postgres-nio never leased early.
            let messages = logs.entries.map { "\($0.message)" }
            #expect(messages.contains("PostgreSQL store: running"), "\(messages)")
            #expect(messages.contains { $0.hasPrefix("PostgreSQL store: using ") }, "\(messages)")
            #expect(messages.contains("PostgreSQL store: stopped"), "\(messages)")
            #expect(messages.contains("PostgreSQL store: reading an item failed"), "the failed call at debug: \(messages)")
            #expect(!messages.contains { $0.contains("hasn't been called") }, "\(messages)")

            // Its metrics reached the service's factory.
            let writes = try metrics.expectTimer(
                "lockbox_postgres_operation_duration", [("operation", "writing an item"), ("outcome", "ok")])
            #expect(writes.values.count == 1 && writes.values.allSatisfy { $0 > 0 })
            #expect(
                try metrics.expectCounter("lockbox_postgres_operations", [("operation", "reading an item"), ("outcome", "ok")])
                    .totalValue == 1)
            #expect(
                try metrics.expectCounter(
                    "lockbox_postgres_operations", [("operation", "reading an item"), ("outcome", "postgres-not-running")]
                ).totalValue == 1)
        }

        /// A service whose `run()` never starts: a call waits its operation timeout and then says
        /// the pool is not running (not "unreachable"), having sent nothing.
        @Test func aCallToAServiceThatNeverRunsFailsClearlyAfterItsTimeout() async throws {
            guard let cluster = try Cluster.current("PostgresStoreService never run") else { return }
            let service = try PostgresStoreService(
                configuration: PostgresStoreConfiguration(url: cluster.url, operationTimeout: .seconds(1), schemaPolicy: .migrateIfNeeded),
                logger: Logger(label: "test"))
            let started = ContinuousClock.now
            let error = await thrown { try await service.schemaVersion() }
            #expect(error as? PostgresStoreError == .notRunning(server: service.server, operation: "reading the schema version"))
            #expect(ContinuousClock.now - started < .seconds(5), "bounded by the operation timeout")
        }
    }
#endif
