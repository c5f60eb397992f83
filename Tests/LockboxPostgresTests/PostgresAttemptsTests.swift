#if PostgreSQL
    import Foundation
    import Lockbox
    import LockboxTesting
    import Testing
    @testable import LockboxPostgres
    @testable import LockboxTestSupport
    #if canImport(Glibc)
        import Glibc
    #endif

    // PIN lockouts across hosts: each "host" is a separate process
    // (LockboxPostgresWorker) that shares nothing with the others but the database. In an extension of
    // PostgresStoreTests so they run serialised with the suite's other tests (each empties the database).

    /// The worker executable beside the test product.
    let worker = builtExecutable("LockboxPostgresWorker")

    /// The hosts of the cross-host tests, when scripts/dev/postgres-session.sh made them (`--hosts N`):
    /// a network namespace each, whose only way out is a veth link to the primary, and the URL file
    /// of the primary at that link's address. Empty where namespaces could not be made; the tests
    /// then run their workers as plain processes, and fail if LOCKBOX_REQUIRE_NETNS=1 (scripts/test.sh
    /// sets it where it could make one).
    struct NetworkHosts {
        let namespaces: [String]
        let urlFiles: [String]

        static let current: NetworkHosts = {
            let environment = ProcessInfo.processInfo.environment
            let namespaces = (environment["LOCKBOX_TEST_POSTGRES_NETNS"] ?? "").split(separator: " ").map(String.init)
            let urlFiles = (environment["LOCKBOX_TEST_POSTGRES_HOST_URL_FILES"] ?? "").split(separator: " ").map(String.init)
            return NetworkHosts(namespaces: namespaces.count == urlFiles.count ? namespaces : [], urlFiles: urlFiles)
        }()

        /// Records a failure when namespaces are required and there are not `count`.
        static func require(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
            guard current.namespaces.count < count else { return }
            if ProcessInfo.processInfo.environment["LOCKBOX_REQUIRE_NETNS"] == "1" {
                Issue.record(
                    "LOCKBOX_REQUIRE_NETNS=1: \(count) hosts need \(count) network namespaces, the session made \(current.namespaces.count)",
                    sourceLocation: sourceLocation)
            } else {
                FileHandle.standardError.write(
                    Data(
                        "NOTE: hosts as plain processes, not in network namespaces (run scripts/dev/postgres-session.sh --hosts \(count) as root)\n"
                            .utf8))
            }
        }
    }

    /// Starts a worker with `arguments`; the vault passphrase and `pin` go to its stdin. With
    /// `host`, in that host's network namespace (when there is one), its URL file (the second
    /// argument) replaced by the host's: the worker reaches the primary over its own link.
    func startWorker(_ arguments: [String], pin: String, host: Int? = nil) throws -> (Process, Pipe) {
        let process = Process()
        let hosts = NetworkHosts.current
        if let host, host < hosts.namespaces.count, arguments.count > 1 {
            var arguments = arguments
            arguments[1] = hosts.urlFiles[host]
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["ip", "netns", "exec", hosts.namespaces[host], worker.path] + arguments
        } else {
            process.executableURL = worker
            process.arguments = arguments
        }
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data("fleet words\n\(pin)\n".utf8))
        try input.fileHandleForWriting.close()
        return (process, output)
    }

    /// Waits for a worker and returns its output lines; records a failure if it did not exit 0.
    func finish(_ worker: (Process, Pipe), sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        let data = worker.1.fileHandleForReading.readDataToEndOfFile()
        worker.0.waitUntilExit()
        #expect(worker.0.terminationStatus == 0, "worker exit status", sourceLocation: sourceLocation)
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    private let profile = PinProfile(service: "fleet.example", name: "ops")

    /// Runs `command` in network namespace `namespace`; its exit status and standard output.
    private func inNamespace(_ namespace: String, _ command: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["ip", "netns", "exec", namespace] + command
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// A TCP connection attempt from inside a namespace: prints "ok", or "failed ERRNO".
    private let connectProbe = """
        import socket, sys
        try:
            socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close(); print("ok")
        except OSError as error:
            print("failed", error.errno)
        """

    extension PostgresStoreTests {
        @Test func eachHostsNamespaceReachesThePrimaryOverItsOwnLinkAndNothingElse() throws {
            guard let cluster = try Cluster.current("hosts in network namespaces") else { return }
            NetworkHosts.require(8)
            let hosts = NetworkHosts.current
            for (index, namespace) in hosts.namespaces.enumerated() {
                let link = try PostgresConnectionURL.read(fromFile: FilePath(hosts.urlFiles[index]))
                let port = String(cluster.url.port)
                // Its interfaces: its own loopback and one link.
                let (status, addresses) = try inNamespace(namespace, ["ip", "-o", "-4", "addr", "show"])
                #expect(status == 0 && addresses.split(separator: "\n").count == 2, "\(namespace): \(addresses)")
                #expect(
                    try inNamespace(namespace, ["python3", "-c", connectProbe, link.host, port]).1 == "ok\n", "the primary over the link")
                #expect(
                    try inNamespace(namespace, ["python3", "-c", connectProbe, "127.0.0.1", port]).1.hasPrefix("failed"),
                    "the machine's loopback, where the primary also listens, is not this host's")
                for other in hosts.urlFiles.indices where other != index {
                    let otherLink = try PostgresConnectionURL.read(fromFile: FilePath(hosts.urlFiles[other]))
                    #expect(
                        try inNamespace(namespace, ["python3", "-c", connectProbe, otherLink.host, port]).1.hasPrefix("failed"),
                        "\(namespace) has no route to another host's link")
                }
            }
        }

        /// Sets the profile's PIN "5073" under `lockout` with a cheap hash.
        private func setPin(_ store: PostgresStore, lockout: LockoutPolicy) async throws {
            let guard_ = PinGuard(store: store, preset: PinPreset(hashParameters: cheapKDF, failureRecording: .afterComparing))
            try await guard_.set(profile, pin: secret("5073"), lockout: lockout)
        }

        /// The counts in the database, as psql shows them.
        private func storedCounts(_ cluster: Cluster) throws -> [Int] {
            try cluster.psql("SELECT failures FROM lockbox.pin_attempts").split(separator: "\n").compactMap { Int($0) }
        }

        @Test func eightHostsGuessingInParallelAreEachCountedAndStopAtThePolicy() async throws {
            guard let cluster = try Cluster.current("8 hosts guessing") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            // No delays, disabled after 10: every guess up to the 10th is evaluated, none after.
            try await setPin(store, lockout: LockoutPolicy(delays: [0], disableAfter: 10))
            NetworkHosts.require(8)
            let workers = try (0..<8).map { host in
                try startWorker(["pin-guesses", cluster.urlFile.string, profile.service, profile.name, "3", "0"], pin: "1111", host: host)
            }
            let lines = workers.flatMap { finish($0) }
            #expect(lines.count == 24)
            let counted = lines.filter { $0.hasPrefix("wrong ") }.compactMap { Int($0.dropFirst(6)) }.sorted()
            // Each evaluated guess got its own count: none was lost to a concurrent one.
            #expect(counted == Array(1...9))
            #expect(lines.filter { $0 == "disabled" }.count == 15)  // the 10th evaluated guess disables, 14 are refused
            #expect(try storedCounts(cluster) == [10])
            // The right PIN is refused too now; a reset (a higher authority) clears the count.
            let guard_ = PinGuard(store: store, preset: PinPreset(hashParameters: cheapKDF, failureRecording: .afterComparing))
            #expect(lockboxCode(await thrown { try await guard_.verify(profile, pin: secret("5073")) }) == .pinDisabled)
            #expect(try await guard_.status(profile).disabled)
            try await guard_.reset(profile)
            try await guard_.verify(profile, pin: secret("5073"))
            #expect(try storedCounts(cluster) == [])
        }

        @Test func theDatabaseClockDecidesTheDelayNotAHostClock() async throws {
            guard let cluster = try Cluster.current("lockout clock") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            // 4 free tries, then an hour.
            try await setPin(store, lockout: LockoutPolicy(delays: [0, 0, 0, 3600]))
            NetworkHosts.require(8)
            let workers = try (0..<8).map { host in
                try startWorker(["pin-guesses", cluster.urlFile.string, profile.service, profile.name, "2", "0"], pin: "1111", host: host)
            }
            let lines = workers.flatMap { finish($0) }
            #expect(lines.filter { $0.hasPrefix("wrong ") }.count == 4)
            #expect(lines.filter { $0 == "locked" }.count == 12)
            #expect(try storedCounts(cluster) == [4])
            // A host whose clocks read ten days ahead is refused all the same, even the right PIN.
            let ahead = try startWorker(["pin-guesses", cluster.urlFile.string, profile.service, profile.name, "1", "864000"], pin: "5073")
            #expect(finish(ahead) == ["locked"])
            let guard_ = PinGuard(store: store, preset: PinPreset(hashParameters: cheapKDF, failureRecording: .afterComparing))
            let status = try await guard_.status(profile)
            #expect(status.failures == 4 && status.lockedUntil != nil)
            // An hour passes on the database's clock: the right PIN is evaluated and clears the count.
            _ = try cluster.psql("UPDATE lockbox.pin_attempts SET last_attempt = last_attempt - interval '3601 seconds'")
            try await guard_.verify(profile, pin: secret("5073"))
            #expect(try storedCounts(cluster) == [])
            // The database's clock set back (a last attempt in its future): the delay restarts from now.
            for _ in 0..<4 { _ = await thrown { try await guard_.verify(profile, pin: secret("1111")) } }
            _ = try cluster.psql("UPDATE lockbox.pin_attempts SET last_attempt = clock_timestamp() + interval '1 day'")
            let refused = await thrown { try await guard_.verify(profile, pin: secret("5073")) }
            guard case LockboxError.pinLockedOut(_, _, let seconds)? = refused else {
                Issue.record("expected a lockout, got \(String(describing: refused))")
                return
            }
            #expect(seconds > 3500 && seconds <= 3600)
        }

        @Test func aGuessIsCountedEvenIfItsHostDiesWhileHashing() async throws {
            guard let cluster = try Cluster.current("host dies mid-hash") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            try await setPin(store, lockout: .default)
            let hanging = try startWorker(["pin-hang", cluster.urlFile.string, profile.service, profile.name], pin: "5073", host: 7)
            // The guess is counted before the hash begins; wait for the count, then kill the host.
            var counts: [Int] = []
            for _ in 0..<200 where counts.isEmpty {
                counts = try storedCounts(cluster)
                if counts.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(counts == [1])
            #expect(hanging.0.isRunning)
            kill(hanging.0.processIdentifier, SIGKILL)
            hanging.0.waitUntilExit()
            #expect(hanging.0.terminationReason == .uncaughtSignal)
            // The next wrong guess is the second failure: the dead host's guess stayed counted.
            let next = try startWorker(
                ["pin-guesses", cluster.urlFile.string, profile.service, profile.name, "1", "0"], pin: "1111", host: 0)
            #expect(finish(next) == ["wrong 2"])
        }

        @Test func eightHostsUsingADeviceIDForTheFirstTimeAgreeOnOne() async throws {
            guard let cluster = try Cluster.current("8 first uses") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            // All eight ask at the same moment, once their stores are open.
            let startAt = String(Date().timeIntervalSince1970 + 3)
            NetworkHosts.require(8)
            let workers = try (0..<8).map { host in
                try startWorker(["device-id", cluster.urlFile.string, "fleet.example", "device-id", startAt], pin: "-", host: host)
            }
            let ids = workers.flatMap { finish($0) }
            #expect(ids.count == 8)
            #expect(Set(ids).count == 1)
            let stored = try await DeviceIdentity(store: store).deviceID(service: "fleet.example")
            #expect(ids.first == stored.uuidString)
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.items") == "1\n")
            // The store's first write, directly: the second caller gets the first one's secret back.
            let key = ItemKey(service: "fleet.example", account: "other")
            #expect(try await store.setIfAbsent(secret("first"), for: key, options: ItemOptions()) == nil)
            #expect(text(try await store.setIfAbsent(secret("second"), for: key, options: ItemOptions())) == "first")
            #expect(text(try await store.get(key)) == "first")
        }

        @Test func eightHostsChangingOnePinAtOnceLeaveOneChangeAndNoneUndone() async throws {
            guard let cluster = try Cluster.current("8 PIN changes") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            try await setPin(store, lockout: LockoutPolicy(delays: [0], disableAfter: 50))
            let startAt = String(Date().timeIntervalSince1970 + 3)
            NetworkHosts.require(8)
            let newPins = (0..<8).map { "39\($0)7\($0)" }
            let workers = try (0..<8).map { host in
                try startWorker(
                    ["pin-change", cluster.urlFile.string, profile.service, profile.name, startAt], pin: "5073\n\(newPins[host])",
                    host: host)
            }
            let lines = workers.map { finish($0) }
            let winners = lines.indices.filter { lines[$0] == ["changed"] }
            // One change reported done; each other host then found the old PIN wrong, as it would
            // one after the other on one host (without the conditional write: several "changed").
            #expect(winners.count == 1, "\(lines)")
            #expect(lines.allSatisfy { $0 == ["changed"] || $0.first?.hasPrefix("wrong ") == true }, "\(lines)")
            let guard_ = PinGuard(store: store, preset: PinPreset(hashParameters: cheapKDF, failureRecording: .afterComparing))
            if let winner = winners.first {
                try await guard_.verify(profile, pin: secret(newPins[winner]))
                for loser in lines.indices where loser != winner {
                    await #expect(throws: LockboxError.self) { try await guard_.verify(profile, pin: secret(newPins[loser])) }
                }
            }
            // Reset leaves the PIN record alone (the counts are in the ledger).
            let fingerprint = try await guard_.fingerprint(profile)
            try await guard_.reset(profile)
            #expect(try await guard_.fingerprint(profile) == fingerprint)
            #expect(try storedCounts(cluster) == [], "the count row deleted")

            // Two hosts setting a PIN for a profile that has none: the first write wins, the other is told.
            let fresh = PinProfile(service: "fleet.example", name: "new")
            let other = try await PostgresStore.open(cluster.url, credentials: [.key(Self.key)])
            defer { Task { await other.shutdown() } }
            let folders = try (0..<2).map { index -> FilePath in
                let folder = FilePath(NSTemporaryDirectory()).appending("lockbox-host-\(index)-\(UUID().uuidString)")
                try FileManager.default.createDirectory(atPath: folder.string, withIntermediateDirectories: true)
                return folder
            }
            defer { for folder in folders { try? FileManager.default.removeItem(atPath: folder.string) } }
            let guards = zip([store, other], folders).map { host, folder in
                PinGuard(store: host, preset: PinPreset(hashParameters: cheapKDF, failureRecording: .afterComparing), lockDirectory: folder)
            }
            async let first: Bool = (try? await guards[0].set(fresh, pin: secret("4825"))) != nil
            async let second: Bool = (try? await guards[1].set(fresh, pin: secret("7391"))) != nil
            let outcomes = await [first, second]
            #expect(outcomes.filter { $0 }.count == 1, "one set succeeds: \(outcomes)")
            try await guards[0].verify(fresh, pin: secret(outcomes[0] ? "4825" : "7391"))
        }
    }

    extension PostgresStoreTests {
        /// The PostgreSQL ledger's `begin_pin_attempt` against the table every lockout decision must
        /// give (LockboxTesting's `LockoutDecisionCases`, which `LockoutPolicy.decide` passes too),
        /// called with the limit `PostgresStore` passes (the policy's `evaluationLimit`): the two
        /// implementations of the rule cannot drift apart.
        @Test func theLedgerFunctionAgreesWithTheLockoutDecisionTable() async throws {
            guard let cluster = try Cluster.current("lockout table") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            for testCase in LockoutDecisionCases.all {
                _ = try cluster.psql("DELETE FROM lockbox.pin_attempts")
                if testCase.failures > 0 {
                    let last = testCase.secondsSinceLastAttempt.map { "clock_timestamp() - interval '\($0) seconds'" } ?? "NULL"
                    _ = try cluster.psql(
                        "INSERT INTO lockbox.pin_attempts (address, failures, last_attempt) VALUES ('\\x\(String(repeating: "ab", count: 32))', \(testCase.failures), \(last))"
                    )
                }
                let delays = testCase.policy.delays.map { String($0) }.joined(separator: ",")
                let answer = try cluster.psql(
                    """
                    SELECT evaluate, coalesce(extract(epoch FROM locked_until - decided_at)::text, '') FROM lockbox.begin_pin_attempt(
                        '\\x\(String(repeating: "ab", count: 32))', ARRAY[\(delays)]::float8[], \(testCase.policy.evaluationLimit))
                    """
                ).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|", omittingEmptySubsequences: false)
                let evaluate = answer.first == "t"
                let remaining = answer.count > 1 ? Double(answer[1]) : nil
                switch testCase.expected {
                case .evaluate:
                    #expect(evaluate, "\(testCase): the database answered \(answer)")
                case .disabled, .wipe:
                    // A refusal without a delay; PinGuard tells the two apart by the count.
                    #expect(!evaluate && remaining == nil, "\(testCase): the database answered \(answer)")
                case .wait(let seconds):
                    #expect(!evaluate && remaining.map { abs($0 - seconds) < 1 } == true, "\(testCase): the database answered \(answer)")
                }
            }
        }
    }
#endif
