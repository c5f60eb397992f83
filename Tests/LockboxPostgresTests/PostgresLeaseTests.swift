#if PostgreSQL
    import Foundation
    import Lockbox
    import Testing
    @testable import LockboxPostgres
    #if canImport(Glibc)
        import Glibc
    #endif

    // Token refreshes across hosts: each "host" is a separate process
    // (LockboxPostgresWorker refresh) sharing nothing with the others but the database; the token
    // endpoint is a file each call appends its PID to. In an extension of PostgresStoreTests so they
    // run serialised with the suite's other tests (each empties the database).

    private let service = "fleet.example"
    private let account = "api"

    /// A fresh file for the token endpoint's log of calls, and the PIDs it holds.
    private struct EndpointLog {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("lockbox-endpoint-\(UUID().uuidString)").path
        var calls: [String] {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
    }

    extension PostgresStoreTests {
        /// Stores tokens that expired a minute ago.
        private func storeExpiredTokens(_ store: PostgresStore) async throws {
            try await TokenRefresher(store: store).save(
                TokenSet(accessToken: secret("stale"), refreshToken: secret("refresh-1"), expiresAt: Date().addingTimeInterval(-60)),
                service: service, account: account)
        }

        /// The token each worker printed and how long it waited, in milliseconds.
        private func answers(_ lines: [String]) -> [(token: String, waited: Int)] {
            lines.compactMap { line in
                let fields = line.split(separator: " ")
                guard fields.count == 4, fields[0] == "token", fields[2] == "waited", let waited = Int(fields[3]) else { return nil }
                return (String(fields[1]), waited)
            }
        }

        @Test func eightHostsFindingTheSameExpiredTokenCallTheEndpointOnce() async throws {
            guard let cluster = try Cluster.current("8 hosts refreshing") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            try await storeExpiredTokens(store)
            let endpoint = EndpointLog()
            defer { try? FileManager.default.removeItem(atPath: endpoint.path) }
            let startAt = String(Date().timeIntervalSince1970 + 3)
            NetworkHosts.require(8)
            let workers = try (0..<8).map { host in
                try startWorker(
                    ["refresh", cluster.urlFile.string, service, account, startAt, endpoint.path, "0", "30000"], pin: "-", host: host)
            }
            let got = answers(workers.flatMap { finish($0) })
            #expect(got.count == 8)
            #expect(endpoint.calls.count == 1, "one call to the token endpoint for 8 hosts")
            let caller = try #require(endpoint.calls.first)
            #expect(Set(got.map(\.token)) == ["fresh-\(caller)"], "every host got the one refreshed token")
            #expect(text(try await TokenRefresher(store: store).load(service: service, account: account)?.accessToken) == "fresh-\(caller)")
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.refresh_leases") == "0\n", "the lease ended with the write")
            let waits = got.map(\.waited).sorted()
            let isolation = NetworkHosts.current.namespaces.count >= 8 ? "each in its own network namespace" : "plain processes"
            print("refresh across 8 hosts (\(isolation)): 1 endpoint call; waits (ms) \(waits)")
        }

        @Test func aRefresherThatDiesLeavesItsLeaseToExpireAndAnotherHostRefreshes() async throws {
            guard let cluster = try Cluster.current("refresher dies") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            try await storeExpiredTokens(store)
            let endpoint = EndpointLog()
            defer { try? FileManager.default.removeItem(atPath: endpoint.path) }
            let now = String(Date().timeIntervalSince1970)
            let hanging = try startWorker(
                ["refresh", cluster.urlFile.string, service, account, now, endpoint.path, "1", "2000"], pin: "-", host: 7)
            for _ in 0..<400 where endpoint.calls.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            #expect(endpoint.calls == [String(hanging.0.processIdentifier)], "the first host holds the lease and is calling the endpoint")
            kill(hanging.0.processIdentifier, SIGKILL)
            hanging.0.waitUntilExit()
            #expect(hanging.0.terminationReason == .uncaughtSignal)
            #expect(
                text(try await store.get(ItemKey(service: service, account: account))).map { $0.contains("stale") } == true,
                "nothing half-written: the old tokens are still whole")
            let workers = try (0..<3).map { host in
                try startWorker(
                    ["refresh", cluster.urlFile.string, service, account, now, endpoint.path, "0", "2000"], pin: "-", host: host)
            }
            let got = answers(workers.flatMap { finish($0) })
            #expect(got.count == 3)
            #expect(endpoint.calls.count == 2, "the dead host's call and one more, once its lease ran out")
            let second = try #require(endpoint.calls.last)
            #expect(Set(got.map(\.token)) == ["fresh-\(second)"])
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.refresh_leases") == "0\n")
        }

        @Test func aRejectedRefreshUnderTheLeaseSignsOutAndALiveLeaseIsWaitedForUpToTheTimeout() async throws {
            guard let cluster = try Cluster.current("refresh rejected, lease held") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            try await storeExpiredTokens(store)
            // Another host holds a live lease: this host waits for its tokens, then gives up (vaultBusy).
            let key = ItemKey(service: service, account: account)
            let other = try #require(try await store.acquireRefreshLease(key, for: .seconds(30)))
            let calls = Locked(0)
            let patient = TokenRefresher(store: store, lockTimeout: .milliseconds(300))
            do {
                _ = try await patient.validAccessToken(service: service, account: account) { current in
                    calls.withLock { $0 += 1 }
                    return current
                }
                Issue.record("expected vaultBusy")
            } catch LockboxError.vaultBusy(_, let waited) {
                #expect(waited >= 0.3)
            }
            #expect(calls.withLock { $0 } == 0, "no endpoint call while another host holds the lease")
            try await store.releaseRefreshLease(other)
            // The endpoint rejects the refresh token: the tokens are cleared and the lease ended.
            do {
                _ = try await TokenRefresher(store: store).validAccessToken(service: service, account: account) { _ in
                    throw TokenRefreshError.rejected("invalid_grant")
                }
                Issue.record("expected sessionExpired")
            } catch LockboxError.sessionExpired(let gotService, let gotAccount) {
                #expect(gotService == service && gotAccount == account)
            }
            #expect(try await store.get(key) == nil)
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.refresh_leases") == "0\n")
        }

        @Test func aLeaseTakenOverAfterItExpiredStoresNothing() async throws {
            guard let cluster = try Cluster.current("fenced refresh") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            let key = ItemKey(service: service, account: account)
            try await store.set(secret("old"), for: key, options: ItemOptions(kind: .token))
            let first = try #require(try await store.acquireRefreshLease(key, for: .seconds(2)))
            #expect(try await store.acquireRefreshLease(key, for: .seconds(30)) == nil, "live: nobody else gets it")
            try await Task.sleep(for: .milliseconds(2200))
            let second = try #require(try await store.acquireRefreshLease(key, for: .seconds(30)), "expired: taken over")
            #expect(second.fence > first.fence)
            #expect(try await store.completeRefresh(first, storing: secret("late"), for: key, options: ItemOptions(kind: .token)) == false)
            #expect(text(try await store.get(key)) == "old", "the stalled holder stored nothing")
            try await store.releaseRefreshLease(first)
            #expect(
                try cluster.psql("SELECT count(*) FROM lockbox.refresh_leases") == "1\n", "releasing a lost lease leaves the new holder's")
            #expect(try await store.completeRefresh(second, storing: secret("new"), for: key, options: ItemOptions(kind: .token)))
            #expect(text(try await store.get(key)) == "new")
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.refresh_leases") == "0\n")
            // The lease table holds a keyed address, a fence and an expiry: no name.
            let third = try #require(try await store.acquireRefreshLease(key, for: .seconds(30)))
            let dump = try cluster.psql("SELECT encode(address, 'escape'), fence, expires_at FROM lockbox.refresh_leases")
            #expect(!dump.contains(service) && !dump.contains(account))
            try await store.releaseRefreshLease(third)
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.refresh_leases") == "0\n")
            for bad in [Duration.zero, .seconds(86_401)] {
                await #expect(throws: LockboxError.self) { _ = try await store.acquireRefreshLease(key, for: bad) }
            }
        }
    }
#endif
