#if PostgreSQL
    import Foundation
    import Lockbox
    import Testing
    @testable import LockboxPostgres

    // Which server a call goes to: writes refused by a hot standby, and reads routed to it.

    /// The standby of scripts/dev/postgres-session.sh, or `nil` (recorded when required).
    private func standbyCluster(_ test: String) throws -> Cluster? {
        try Cluster.given(test, urlVariable: "LOCKBOX_TEST_POSTGRES_STANDBY_URL_FILE")
    }

    /// Opens the vault at `url` once the standby has replayed it (the synchronous standby has every
    /// acknowledged commit on disk, not necessarily applied: `synchronous_commit = on`).
    private func openWhenReplayed(_ url: PostgresConnectionURL) async throws -> PostgresStore {
        var attempts = 0
        while true {
            do {
                return try await PostgresStore.open(url, credentials: [.key(PostgresStoreTests.key)], operationTimeout: .seconds(5))
            } catch {
                attempts += 1
                guard attempts < 50 else { throw error }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    extension PostgresStoreTests {
        /// Every kind of write sent to a hot standby fails with ``PostgresStoreError/readOnlyServer(server:operation:)``
        /// (its own code, `postgres-read-only`), and nothing is written; reads there work.
        @Test func everyWriteOnAStandbyIsAReadOnlyServerErrorAndWritesNothing() async throws {
            guard let cluster = try Cluster.current("writes on a standby"), let standby = try standbyCluster("writes on a standby")
            else { return }
            let primary = try await makeStore(cluster)
            let key = ItemKey(service: "db", account: "app")
            try await primary.set(secret("on-primary"), for: key, options: ItemOptions())
            let onStandby = try await openWhenReplayed(standby.url)
            var read = try await onStandby.get(key)
            for _ in 0..<50 where read == nil {
                try await Task.sleep(for: .milliseconds(100))
                read = try await onStandby.get(key)
            }
            #expect(text(read) == "on-primary", "a read on the standby works")

            let server = standby.url.description
            let writes: [(String, @Sendable () async throws -> Void)] = [
                ("writing an item", { try await onStandby.set(secret("on-standby"), for: key, options: ItemOptions()) }),
                (
                    "writing items",
                    {
                        try await onStandby.set([
                            ItemWrite(secret("a"), for: ItemKey(service: "s", account: "a"), options: ItemOptions()),
                            ItemWrite(secret("b"), for: ItemKey(service: "s", account: "b"), options: ItemOptions()),
                        ])
                    }
                ),
                ("deleting items", { _ = try await onStandby.delete(key) }),
                (
                    "creating an item",
                    { _ = try await onStandby.setIfAbsent(secret("id"), for: ItemKey(service: "d", account: "id"), options: ItemOptions()) }
                ),
                (
                    "counting a PIN attempt",
                    {
                        _ = try await onStandby.beginPinAttempt(
                            ItemKey(service: "pin", account: "max"), lockout: try LockoutPolicy(delays: [0]))
                    }
                ),
                ("taking a refresh lease", { _ = try await onStandby.acquireRefreshLease(key, for: .seconds(30)) }),
            ]
            for (operation, write) in writes {
                let error = await thrown { try await write() }
                #expect(
                    error as? PostgresStoreError == .readOnlyServer(server: server, operation: operation),
                    "\(operation): \(String(describing: error))")
                #expect((error as? PostgresStoreError)?.code.rawValue == "postgres-read-only")
                #expect("\(error.map { "\($0)" } ?? "")".contains("writes need the primary"))
            }
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.items") == "1\n", "nothing was written")
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.pin_attempts") == "0\n")
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.refresh_leases") == "0\n")
            #expect(text(try await primary.get(key)) == "on-primary")
            // The handle still reads after the refusals.
            #expect(text(try await onStandby.get(key)) == "on-primary")
            await onStandby.shutdown()
            await primary.shutdown()
        }
    }

    /// `primary`'s URL listing both hosts, primary first, with `attributes`.
    private func bothHosts(
        _ primary: Cluster, _ standby: Cluster, _ attributes: PostgresConnectionURL.TargetSessionAttributes
    ) -> PostgresConnectionURL {
        var url = primary.url
        url.hosts = [primary.url.hosts[0], standby.url.hosts[0]]
        url.targetSessionAttributes = attributes
        return url
    }

    /// The statements (backend and start time) of the vault's role on `node` that were the last of
    /// their backend and read `lockbox.items`: a new entry is a new such statement, on a new
    /// connection or a pooled one.
    private func itemReaders(_ cluster: Cluster, on node: String) throws -> Set<String> {
        let rows = try cluster.psql(
            """
            SELECT pid || '@' || query_start FROM pg_stat_activity WHERE usename = '\(cluster.url.user)' AND query LIKE '%lockbox.items%'
            AND query NOT LIKE '%pg_stat_activity%'
            """, on: node)
        return Set(rows.split(separator: "\n").map(String.init))
    }

    extension PostgresStoreTests {
        /// With `target_session_attrs=prefer-standby`, one handle sends a `Vault`'s reads to the
        /// standby (its statement shows in the standby's `pg_stat_activity`, not the primary's) and
        /// its writes to the primary; a read that needs the latest state (outside
        /// `ReadFreshness.allowingReplica`) goes to the primary; without `prefer-standby` (the
        /// default) reads stay on the primary too.
        @Test func readsGoToTheStandbyAndWritesToThePrimaryWithinOneHandle() async throws {
            guard let cluster = try Cluster.current("read routing"), let standby = try standbyCluster("read routing") else { return }
            let key = ItemKey(service: "db", account: "app")
            let writer = try await makeStore(cluster)
            try await writer.set(secret("v1"), for: key, options: ItemOptions())
            await writer.shutdown()
            let replayed = try await openWhenReplayed(standby.url)
            for _ in 0..<50 where try await replayed.get(key) == nil { try await Task.sleep(for: .milliseconds(100)) }
            await replayed.shutdown()

            // The default (read-write with both hosts): every read on the primary.
            let plain = try await PostgresStore.open(bothHosts(cluster, standby, .readWrite), credentials: [.key(Self.key)])
            var before = try (itemReaders(cluster, on: "primary"), itemReaders(cluster, on: "standby"))
            #expect(try await Vault(store: plain).string(service: "db", account: "app") == "v1")
            #expect(try itemReaders(cluster, on: "standby").subtracting(before.1).isEmpty, "no read on the standby by default")
            #expect(!(try itemReaders(cluster, on: "primary").subtracting(before.0).isEmpty), "the read on the primary")
            await plain.shutdown()

            // prefer-standby: the Vault's reads on the standby, nothing of them on the primary.
            let routed = try await PostgresStore.open(bothHosts(cluster, standby, .preferStandby), credentials: [.key(Self.key)])
            let vault = Vault(store: routed)
            before = try (itemReaders(cluster, on: "primary"), itemReaders(cluster, on: "standby"))
            #expect(try await vault.string(service: "db", account: "app") == "v1")
            #expect(try await vault.list().map(\.account) == ["app"])
            #expect(try await vault.metadata(service: "db", account: "app") != nil)
            let standbyReaders = try itemReaders(cluster, on: "standby").subtracting(before.1)
            #expect(!standbyReaders.isEmpty, "the reads were served by the standby")
            #expect(try cluster.psql("SELECT pg_is_in_recovery()", on: "standby") == "t\n")
            #expect(try itemReaders(cluster, on: "primary").subtracting(before.0).isEmpty, "no read on the primary")

            // A write through the same handle lands on the primary (the standby would refuse it).
            try await vault.set("v2", service: "db", account: "app")
            let check = try await PostgresStore.open(cluster.url, credentials: [.key(Self.key)])
            #expect(text(try await check.get(key)) == "v2", "written on the primary")
            await check.shutdown()

            // A read of the store's own, outside allowingReplica: the latest state, on the primary.
            before.0 = try itemReaders(cluster, on: "primary")
            #expect(text(try await routed.get(key)) == "v2")
            #expect(!(try itemReaders(cluster, on: "primary").subtracting(before.0).isEmpty), "a latest-state read on the primary")
            // Inside allowingReplica the store's reads go to the standby, which has v2 once replayed.
            var replica = try await ReadFreshness.allowingReplica { try await routed.get(key) }
            for _ in 0..<50 where text(replica) != "v2" {
                try await Task.sleep(for: .milliseconds(100))
                replica = try await ReadFreshness.allowingReplica { try await routed.get(key) }
            }
            #expect(text(replica) == "v2")
            // PIN attempt counts never go to the standby: counted on the primary.
            let decision = try await routed.beginPinAttempt(
                ItemKey(service: "pin", account: "max"), lockout: try LockoutPolicy(delays: [0]))
            #expect(decision.evaluate && decision.failures == 1)
            #expect(try cluster.psql("SELECT failures FROM lockbox.pin_attempts") == "1\n")
            await routed.shutdown()
        }

        /// A URL with `target_session_attrs=prefer-standby` parses; unknown values are refused with the list.
        @Test func preferStandbyParsesAndUnknownAttributesAreRefused() throws {
            let url = try PostgresConnectionURL(parsing: "postgresql://u@a:5432,b:5433/db?target_session_attrs=prefer-standby")
            #expect(url.targetSessionAttributes == .preferStandby && url.hosts.count == 2)
            #expect(throws: LockboxError.self) { try PostgresConnectionURL(parsing: "postgresql://u@a/db?target_session_attrs=standby") }
            do {
                _ = try PostgresConnectionURL(parsing: "postgresql://u@a/db?target_session_attrs=standby")
            } catch {
                #expect("\(error)".contains("prefer-standby"))
            }
        }
    }
#endif
