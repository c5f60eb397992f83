#if PostgreSQL
    import Foundation
    import Lockbox
    import SystemPackage
    import Testing
    @testable import LockboxPostgres
    #if canImport(Glibc)
        import Glibc
    #endif

    // Nothing acknowledged before it is durable: every call whose result a host acts on (a PIN
    // guess counted, a refresh lease taken, a first write, a conditional write, a plain write) is
    // started while the synchronous standby is SIGSTOPped, so its commit waits for the standby with
    // the statement done. The primary is SIGKILLed at exactly that point and the standby promoted.
    // The standby was stopped from before the calls until after the primary died, so none of
    // their commits was ever confirmed: no call may return a result, before or after the kill (it
    // fails with a lost connection), but for the plain write, which a lost connection retries once
    // on the server chosen anew: it may return after the kill, from the promoted standby. Whatever
    // returned must be on the promoted standby. The pair is rebuilt (the old primary cloned as the
    // new one's synchronous standby) and the round repeated: LOCKBOX_TEST_POSTGRES_HAZARD_REPETITIONS
    // times (default 2).
    // Runs inside scripts/dev/postgres-session.sh, on its hazard pair, which no other test uses.

    /// What one call of a round did, and when.
    private enum Outcome: Sendable {
        case pending
        case returned(String, before: Bool)
        case failed(String)
    }

    extension Cluster {
        /// The session's control command, as ``control(_:)``, but reaped with a blocking `waitpid`
        /// rather than Foundation's `Process`, which waits for a SIGCHLD the test environment may
        /// block (a `rebuild`, which starts a server, was seen never to be reaped). Output goes to a
        /// file, so no server it starts can hold a pipe open.
        func spawnControl(_ arguments: [String]) throws {
            let log = FilePath(NSTemporaryDirectory()).appending("lockbox-ctl-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log").string
            defer { unlink(log) }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
            let argv = ([ctl] + arguments).map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            var pid: pid_t = 0
            let spawned = posix_spawn(&pid, ctl, &actions, nil, argv, environ)
            guard spawned == 0 else { throw LockboxError.invalidArgument("\(arguments.first ?? "ctl"): posix_spawn failed (\(spawned))") }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            guard status == 0 else {
                let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw LockboxError.invalidArgument("\(arguments.first ?? "ctl") failed (status \(status)): \(output)")
            }
        }
    }

    private let hazardLockout: LockoutPolicy = {
        do { return try LockoutPolicy(delays: [0], disableAfter: 100) } catch { fatalError("bad test lockout") }
    }()

    // In the serialized suite of the unreachable-database test: the rounds' base backups and
    // failovers load the machine, and that test holds calls to a 2 s bound.
    extension PostgresUnreachableTests {

        @Test func noCallReturnsBeforeTheStandbyHasItsCommitAndNothingReturnedIsLostInAFailover() async throws {
            guard let pair = try Cluster.given("hazard points", urlVariable: "LOCKBOX_TEST_POSTGRES_HAZARD_PAIR_URL_FILE") else { return }
            let environment = ProcessInfo.processInfo.environment
            let repetitions = Int(environment["LOCKBOX_TEST_POSTGRES_HAZARD_REPETITIONS"] ?? "") ?? 2
            var primary = "hazard-primary"
            var standby = "hazard-standby"
            _ = try pair.psql("DROP SCHEMA IF EXISTS lockbox CASCADE", on: primary)
            let store = try await PostgresStore.create(
                pair.url, credentials: [.key(PostgresStoreTests.key)], kdf: cheapKDF, operationTimeout: .seconds(60))
            defer { Task { await store.shutdown() } }

            var violations: [String] = []
            var results = (acknowledged: 0, failed: 0)
            for round in 0..<repetitions {
                let pin = ItemKey(service: "hazard", account: "pin-\(round)")
                let lease = ItemKey(service: "hazard", account: "tokens-\(round)")
                let device = ItemKey(service: "hazard", account: "device-\(round)")
                let guarded = ItemKey(service: "hazard", account: "guarded-\(round)")
                let plain = ItemKey(service: "hazard", account: "plain-\(round)")
                try await store.set(secret("old-\(round)"), for: guarded, options: ItemOptions())

                try pair.spawnControl(["stop", standby])
                let killed = Locked(false)
                let outcomes = Locked([String: Outcome]())
                func launch(_ name: String, _ body: @escaping @Sendable () async throws -> String) -> Task<Void, Never> {
                    outcomes.withLock { $0[name] = .pending }
                    return Task {
                        let outcome: Outcome
                        do {
                            let result = try await body()
                            outcome = .returned(result, before: !killed.withLock { $0 })
                        } catch {
                            outcome = .failed("\(error)")
                        }
                        outcomes.withLock { $0[name] = outcome }
                    }
                }
                let tasks = [
                    launch("pin") {
                        let decision = try await store.beginPinAttempt(pin, lockout: hazardLockout)
                        return "evaluate=\(decision.evaluate) failures=\(decision.failures)"
                    },
                    launch("lease") {
                        guard let taken = try await store.acquireRefreshLease(lease, for: .seconds(3600)) else { return "none" }
                        return "fence=\(taken.fence)"
                    },
                    launch("device") {
                        let other = try await store.setIfAbsent(secret("id-\(round)"), for: device, options: ItemOptions())
                        return other.map { "found \(text($0) ?? "")" } ?? "inserted"
                    },
                    launch("guarded") {
                        let wrote = try await store.set(
                            secret("new-\(round)"), for: guarded, options: ItemOptions(), ifCurrent: secret("old-\(round)"))
                        return "wrote=\(wrote)"
                    },
                    launch("plain") {
                        try await store.set(secret("plain-\(round)"), for: plain, options: ItemOptions())
                        return "written"
                    },
                ]
                // Every call's commit waiting for the stopped standby: the statements are done.
                var waiting = 0
                for _ in 0..<300 {
                    waiting =
                        Int(
                            try pair.psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'", on: primary)
                                .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
                    if waiting >= tasks.count { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(waiting == tasks.count, "round \(round): \(waiting) of \(tasks.count) commits waiting for the standby")
                // Time for a result the server did send to reach its caller (an autocommit statement's
                // row is sent before its commit waits for the standby).
                try await Task.sleep(for: .seconds(1))
                for (name, outcome) in outcomes.withLock({ $0 }) {
                    if case .returned(let result, _) = outcome {
                        violations.append("round \(round): \(name) returned \(result) while its commit waited for the standby")
                    }
                }
                killed.withLock { $0 = true }
                try pair.spawnControl(["kill", primary])
                try pair.spawnControl(["cont", standby])
                try pair.spawnControl(["promote", standby])
                for task in tasks { await task.value }

                // Whatever a call returned is on the promoted standby.
                let seen = outcomes.withLock { $0 }
                for (name, outcome) in seen.sorted(by: { $0.key < $1.key }) {
                    switch outcome {
                    case .pending:
                        violations.append("round \(round): \(name) never finished")
                    case .failed(let error):
                        results.failed += 1
                        #expect(error.contains("connection") || error.contains("did not complete"), "round \(round): \(name): \(error)")
                    case .returned(let result, let before):
                        // The standby was stopped from before the call until after the primary died:
                        // no commit of this round was ever confirmed, so no call may have returned —
                        // except a plain write after the kill: it is written again on the promoted
                        // standby (a lost connection retries it once), and must be there.
                        results.acknowledged += 1
                        if before || name != "plain" {
                            violations.append(
                                "round \(round): \(name) returned \(result) (\(before ? "before" : "after") the kill) "
                                    + "although its commit never reached the standby before the primary died")
                        }
                        switch name {
                        case "pin":
                            let state = try await store.pinAttempts(pin)
                            if result.hasPrefix("evaluate=true") && state.failures < 1 {
                                violations.append("round \(round): a guess evaluated (\(result)) but not counted after failover")
                            }
                        case "lease":
                            if result != "none", try await store.acquireRefreshLease(lease, for: .seconds(1)) != nil {
                                violations.append("round \(round): lease \(result) handed out, then taken again after failover")
                            }
                        case "device":
                            let stored = text(try await store.get(device))
                            let expected = result == "inserted" ? "id-\(round)" : String(result.dropFirst("found ".count))
                            if stored != expected {
                                violations.append("round \(round): device ID \(result), but \(stored ?? "none") after failover")
                            }
                        case "guarded":
                            if result == "wrote=true", text(try await store.get(guarded)) != "new-\(round)" {
                                violations.append("round \(round): conditional write acknowledged, undone after failover")
                            }
                        default:
                            if text(try await store.get(plain)) != "plain-\(round)" {
                                violations.append("round \(round): write acknowledged, missing after failover")
                            }
                        }
                    }
                }
                let summary = seen.sorted(by: { $0.key < $1.key }).map { name, outcome in
                    switch outcome {
                    case .pending: "\(name): pending"
                    case .failed(let error): "\(name): \(error.contains("connection") ? "connection lost" : error)"
                    case .returned(let result, _): "\(name): \(result)"
                    }
                }
                FileHandle.standardError.write(Data("hazard round \(round): \(summary.joined(separator: "; "))\n".utf8))
                // The pair whole again, roles swapped.
                try pair.spawnControl(["rebuild", primary, standby])
                swap(&primary, &standby)
            }
            #expect(violations.isEmpty, "\(violations)")
            FileHandle.standardError.write(
                Data(
                    """
                    hazard points: \(repetitions) failovers, \(repetitions * 5) calls at their commit; \(results.failed) failed (connection lost), \
                    \(results.acknowledged) returned after the failover; \(violations.count) acknowledged before durable or lost

                    """.utf8))
        }
    }
#endif
