#if PostgreSQL
    import Foundation
    import Lockbox
    import SystemPackage
    import Testing
    @testable import LockboxPostgres
    @testable import LockboxTestSupport
    #if canImport(Glibc)
        import Glibc
    #endif

    // The database unreachable (refused, and a server that accepts and never
    // answers) and the primary killed under 8 writer processes. Run inside scripts/dev/postgres-session.sh
    // like PostgresStoreTests; these use their own database (the unreachable tests) or their own
    // primary and standby (the failover test), so they run beside that suite.

    /// A loopback TCP forwarder to a PostgreSQL port, in its own process (python3), that the test
    /// can stop (SIGSTOP: connections stay open, nothing answers, new connections complete the
    /// handshake and hang — a blackhole), resume, or kill (connection refused).
    private final class Forwarder {
        let port: Int
        let target: Int
        private var process: Process?

        private static let code = """
            import socket, sys, threading
            listen_port, target_port = int(sys.argv[1]), int(sys.argv[2])
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", listen_port))
            server.listen(128)
            print("ready", flush=True)
            def pipe(source, sink):
                try:
                    while True:
                        data = source.recv(65536)
                        if not data:
                            break
                        sink.sendall(data)
                except OSError:
                    pass
                for end in (source, sink):
                    try:
                        end.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            while True:
                client, _ = server.accept()
                try:
                    upstream = socket.create_connection(("127.0.0.1", target_port))
                except OSError:
                    client.close()
                    continue
                threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
                threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
            """

        init(port: Int, target: Int) {
            self.port = port
            self.target = target
        }

        /// Starts forwarding (again) and returns once it listens.
        func start() throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", Self.code, String(port), String(target)]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            self.process = process
            let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            guard line.hasPrefix("ready") else { throw LockboxError.invalidArgument("the forwarder did not start: \(line)") }
        }

        func signal(_ number: Int32) {
            if let process { kill(process.processIdentifier, number) }
        }

        /// SIGSTOP, then waits until every thread of the forwarder is stopped. `kill` returns before
        /// that: the kernel wakes one thread to start the group stop, and until it runs, the others
        /// still forward (seen in CI on a loaded machine: a "blackhole" get answered).
        func blackhole() throws {
            guard let process else { throw LockboxError.invalidArgument("the forwarder is not running") }
            let pid = process.processIdentifier
            kill(pid, SIGSTOP)
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if try Self.allThreadsStopped(pid) { return }
                usleep(1_000)
            }
            throw LockboxError.invalidArgument("the forwarder's threads did not all stop within 10 s")
        }

        /// Whether every task of `pid` is in state T (stopped), from /proc/PID/task/*/stat.
        private static func allThreadsStopped(_ pid: pid_t) throws -> Bool {
            let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
            guard !tasks.isEmpty else { return false }
            for task in tasks {
                let stat = try String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8)
                // The state follows the command name in parentheses, which may itself hold ") ".
                guard let close = stat.range(of: ") ", options: .backwards),
                    stat[close.upperBound...].first == "T"
                else { return false }
            }
            return true
        }

        /// SIGKILL: its sockets close, its port refuses connections.
        func stop() {
            guard let process else { return }
            kill(process.processIdentifier, SIGCONT)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            self.process = nil
        }

        deinit { stop() }
    }

    private func elapsed(since start: ContinuousClock.Instant) -> Duration { ContinuousClock.now - start }

    @Suite(.serialized)
    struct PostgresUnreachableTests {
        private static let key = SecretBytes(count: 32) { buffer in
            for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: index &* 11 &+ 5) }
        }

        @Test func timeoutsAreValidated() async throws {
            for bad in [Double.nan, .infinity, -.infinity, 0, 0.05, -1, 3600.5, 1e300] {
                let error = #expect(throws: LockboxError.self, "\(bad)") { try PostgresStore.operationTimeout(seconds: bad) }
                #expect(error?.code == .invalidArgument)
            }
            #expect(try PostgresStore.operationTimeout(seconds: 2.5) == .milliseconds(2500))
            #expect(try PostgresStore.operationTimeout(seconds: 3600) == .seconds(3600))
            // Refused before any connection is tried, for every entry point.
            let url = try PostgresConnectionURL(parsing: "postgresql://u@127.0.0.1:1/d")
            for bad in [Duration.zero, .milliseconds(99), .seconds(3601), .seconds(-1)] {
                #expect(
                    lockbox(await caught { _ = try await PostgresStore.open(url, credentials: [.key(Self.key)], operationTimeout: bad) })
                        == .invalidArgument)
                #expect(
                    lockbox(await caught { _ = try await PostgresStore.create(url, credentials: [.key(Self.key)], operationTimeout: bad) })
                        == .invalidArgument)
                #expect(lockbox(await caught { _ = try await PostgresStore.migrateSchema(url, operationTimeout: bad) }) == .invalidArgument)
            }
        }

        @Test func multiHostURLsParseAndMalformedOnesAreRefused() throws {
            let url = try PostgresConnectionURL(
                parsing: "postgres://app:pw@db1:5433,[::1]:6000,db3/vault?target_session_attrs=read-write&connect_timeout=2")
            #expect(url.hosts == [.init("db1", port: 5433), .init("::1", port: 6000), .init("db3")])
            #expect(url.host == "db1" && url.port == 5433 && url.targetSessionAttributes == .readWrite && url.connectTimeout == .seconds(2))
            #expect(url.description == "postgresql://app@db1:5433,[::1]:6000,db3:5432/vault")
            #expect(try PostgresConnectionURL(parsing: "postgresql://u@h/d").targetSessionAttributes == .any)
            #expect(
                try PostgresConnectionURL(parsing: "postgresql://u@h1,h2/d?target_session_attrs=primary").targetSessionAttributes
                    == .primary)
            let seventeen = (1...17).map { "h\($0)" }.joined(separator: ",")
            for bad in [
                "postgresql://u@h1:1,/d", "postgresql://u@,h2/d", "postgresql://u@h1,,h2/d", "postgresql://u@h1:x,h2/d",
                "postgresql://u@h1,h2:0/d", "postgresql://u@h1,[::1/d", "postgresql://u@h1,[::1]x/d", "postgresql://u@h1,:5432/d",
                "postgresql://u@h1,h2/d?target_session_attrs=standby", "postgresql://u@h1,h2/d?target_session_attrs=",
                "postgresql://u@\(seventeen)/d",
            ] {
                let error = #expect(throws: LockboxError.self, "\(bad)") { try PostgresConnectionURL(parsing: bad) }
                #expect(error?.code == .invalidArgument, "\(bad)")
            }
        }

        /// Through a forwarder: refused, then back; a blackhole (open store and new store), then
        /// back; the connection cut and the port refused, then back. Each failure is typed and within
        /// the bound; each time the server is back, the same store works again.
        @Test func anUnreachableDatabaseFailsInBoundedTimeAndTheStoreWorksOnceItIsBack() async throws {
            guard let cluster = try Cluster.given("unreachable database", urlVariable: "LOCKBOX_TEST_POSTGRES_URL_FILE") else { return }
            _ = try cluster.psql("DROP DATABASE IF EXISTS lockbox_unreachable WITH (FORCE)")
            _ = try cluster.psql("CREATE DATABASE lockbox_unreachable OWNER lockbox")
            let forwarder = Forwarder(port: try freePort(), target: cluster.url.port)
            var url = cluster.url
            url.database = "lockbox_unreachable"
            url.port = forwarder.port
            url.tlsMode = .disable
            url.connectTimeout = .seconds(1)
            let bound = Duration.seconds(2)
            let slack = Duration.seconds(3)
            let item = ItemKey(service: "s", account: "a")
            // The schema made beforehand, straight to the server, as a deployment migrates once: the
            // calls under test, through the forwarder, then only read its version (the bound is for
            // them, not for a first migration's DDL through a Python relay on a busy machine).
            var direct = cluster.url
            direct.database = "lockbox_unreachable"
            try await PostgresStore.migrateSchema(direct)

            func expectUnavailable(_ what: String, _ body: () async throws -> Void) async {
                let start = ContinuousClock.now
                let error = await caught(body)
                let waited = elapsed(since: start)
                if case .unavailable(let server, _, let seconds)? = error as? PostgresStoreError {
                    #expect(server == url.description && seconds == 2, "\(what)")
                } else {
                    Issue.record("\(what): expected unavailable, got \(String(describing: error))")
                }
                #expect(waited < bound + slack, "\(what): waited \(waited)")
            }

            // Refused: nothing listens.
            await expectUnavailable("create, refused") {
                _ = try await PostgresStore.create(url, credentials: [.key(Self.key)], operationTimeout: bound)
            }
            try forwarder.start()
            let store = try await PostgresStore.create(url, credentials: [.key(Self.key)], kdf: cheapKDF, operationTimeout: bound)
            try await store.set(secret("before"), for: item, options: ItemOptions())

            // A blackhole: the open store's connection and new connections get no answer.
            try forwarder.blackhole()
            await expectUnavailable("get, blackhole") { _ = try await store.get(item) }
            await expectUnavailable("set, blackhole") { try await store.set(secret("lost"), for: item, options: ItemOptions()) }
            await expectUnavailable("open, blackhole") {
                _ = try await PostgresStore.open(url, credentials: [.key(Self.key)], operationTimeout: bound)
            }
            forwarder.signal(SIGCONT)
            // The set above timed out before the server saw it, or committed: either way the store
            // reads a whole value, and works again.
            #expect(["before", "lost"].contains(text(try await store.get(item))))
            try await store.set(secret("after blackhole"), for: item, options: ItemOptions())
            #expect(text(try await store.get(item)) == "after blackhole")

            // The connection cut, the port refusing: a typed error within the bound.
            forwarder.stop()
            let start = ContinuousClock.now
            let error = await caught { _ = try await store.get(item) }
            #expect(elapsed(since: start) < bound + slack)
            switch error as? PostgresStoreError {
            case .connectionLost?, .unavailable?: break
            default: Issue.record("after the cut: expected connectionLost or unavailable, got \(String(describing: error))")
            }
            await expectUnavailable("get, refused") { _ = try await store.get(item) }
            #expect(!"\(String(describing: error))".contains(cluster.url.password ?? "no password"))
            try forwarder.start()
            #expect(text(try await store.get(item)) == "after blackhole")
            try await store.set(secret("after refusal"), for: item, options: ItemOptions())
            #expect(text(try await store.get(item)) == "after refusal")
            await store.shutdown()
            forwarder.stop()
            _ = try cluster.psql("DROP DATABASE IF EXISTS lockbox_unreachable WITH (FORCE)")
        }
    }

    /// The error `body` throws, or `nil`.
    private func caught(_ body: () async throws -> Void) async -> (any Error)? {
        do {
            try await body()
            return nil
        } catch {
            return error
        }
    }

    private func lockbox(_ error: (any Error)?) -> LockboxError.Code? { (error as? LockboxError)?.code }

    /// The writer processes' executable, next to the test bundle (built by `swift build --build-tests`).
    private let loadBinary = builtExecutable("LockboxPostgresLoad")

    @Suite
    struct PostgresFailoverTests {
        /// An acknowledged write of a writer's log: its account, its secret in hex, and when its
        /// call returned (CLOCK_MONOTONIC, nanoseconds).
        private struct Acknowledged {
            var account: String
            var hex: String
            var at: Int64
        }

        /// The lines of `file` (the writer's log: "ACCOUNT HEX NANOSECONDS"), complete ones only.
        private func acknowledged(_ file: String) -> [Acknowledged] {
            guard let data = FileManager.default.contents(atPath: file) else { return [] }
            let text = String(decoding: data, as: UTF8.self)
            return text.split(separator: "\n", omittingEmptySubsequences: true).compactMap { line in
                let parts = line.split(separator: " ")
                guard parts.count == 3, let at = Int64(parts[2]) else { return nil }
                return Acknowledged(account: String(parts[0]), hex: String(parts[1]), at: at)
            }
        }

        /// CLOCK_MONOTONIC in nanoseconds: the clock of the writers' logs.
        private func monotonicNanoseconds() -> Int64 {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        }

        @Test func theStandbyPromotedAfterThePrimaryIsKilledHasEveryAcknowledgedWrite() async throws {
            guard let pair = try Cluster.given("failover", urlVariable: "LOCKBOX_TEST_POSTGRES_FAILOVER_PAIR_URL_FILE") else { return }
            #expect(pair.url.hosts.count == 2 && pair.url.targetSessionAttributes == .readWrite)
            let folder = FilePath(NSTemporaryDirectory()).appending("lockbox-pg-failover-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(
                atPath: folder.string, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            let keyFile = folder.appending("key")
            _ = FileManager.default.createFile(
                atPath: keyFile.string, contents: Data((0..<32).map { _ in UInt8.random(in: 0...255) }),
                attributes: [.posixPermissions: 0o600])
            let store = try await PostgresStore.create(pair.url, credentials: [.keyFile(keyFile)], kdf: cheapKDF)
            await store.shutdown()

            // 4 writer processes, each writing its own items one after another.
            let stopFile = folder.appending("stop").string
            let writers = 4
            var processes: [(Process, Pipe)] = []
            for writer in 0..<writers {
                let process = Process()
                process.executableURL = loadBinary
                process.arguments = [
                    "write", "--url-file", pair.urlFile.string, "--key-file", keyFile.string, "--writer", String(writer),
                    "--log", folder.appending("w\(writer).log").string, "--stop-file", stopFile, "--operation-timeout", "3",
                ]
                let output = Pipe()
                process.standardOutput = output
                try process.run()
                processes.append((process, output))
            }
            defer {
                _ = FileManager.default.createFile(atPath: stopFile, contents: nil)
                for (process, _) in processes where process.isRunning { process.terminate() }
            }
            func counts() -> [Int] { (0..<writers).map { acknowledged(folder.appending("w\($0).log").string).count } }
            func waitUntil(_ what: String, seconds: Int, _ condition: ([Int]) -> Bool) async throws {
                for _ in 0..<(seconds * 10) {
                    if condition(counts()) { return }
                    try await Task.sleep(for: .milliseconds(100))
                }
                Issue.record("\(what): not within \(seconds) s (acknowledged per writer: \(counts()))")
                throw CancellationError()
            }
            try await waitUntil("every writer writing", seconds: 90) { $0.allSatisfy { $0 >= 10 } }

            // The primary crashes mid-stream; the synchronous standby is promoted.
            try pair.control(["kill", "failover-primary"])
            let atKill = counts()
            try await Task.sleep(for: .milliseconds(500))
            try pair.control(["promote", "failover-standby"])
            let promoted = monotonicNanoseconds()
            let atPromotion = counts()
            try await waitUntil("every writer resuming on the promoted standby", seconds: 90) { now in
                zip(now, atPromotion).allSatisfy { $0 >= $1 + 10 }
            }
            // Time from the promotion's end to each writer's first acknowledged write after it, by
            // the times the writers logged: not by when this process polled their logs, which can
            // run late while the other tests running beside this one hold its threads.
            let resumedSeconds: [Double] = (0..<writers).map { writer in
                let after: [Int64] = acknowledged(folder.appending("w\(writer).log").string).map(\.at).filter { $0 >= promoted }
                guard let first = after.min() else { return .nan }
                return Double(first - promoted) / 1e9
            }
            FileHandle.standardError.write(
                Data(
                    "failover: first acknowledged write after promotion, per writer (s): \(resumedSeconds.map { String(format: "%.2f", $0) })\n"
                        .utf8))
            // Bounded by the failover, not by the calls' timeout: a write in flight when the primary
            // died is retried on the promoted standby (or fails at once and the writer's next one
            // goes there), and the store chooses the promoted standby within a probe interval.
            #expect(resumedSeconds.allSatisfy { $0 <= 5 }, "first write after promotion per writer (s): \(resumedSeconds)")
            _ = FileManager.default.createFile(atPath: stopFile, contents: nil)
            var summaries: [String] = []
            for (process, output) in processes {
                summaries.append(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
                process.waitUntilExit()
                #expect(process.terminationStatus == 0)
            }
            // A write that failed while there was no primary failed with a typed error (writes in
            // flight are retried once, so a run may see none).
            #expect(!summaries.contains { $0.contains("other") }, "\(summaries)")

            // Every acknowledged write is on the new primary, byte for byte; every row there opens.
            let survivor = try await PostgresStore.open(pair.url, credentials: [.keyFile(keyFile)])
            var checked = 0
            for writer in 0..<writers {
                for write in acknowledged(folder.appending("w\(writer).log").string) {
                    let stored = try await survivor.get(ItemKey(service: "failover", account: write.account))
                    let storedHex = stored.map { $0.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() } }
                    #expect(
                        storedHex == write.hex,
                        "\(write.account): acknowledged, but \(stored == nil ? "missing" : "different") after failover")
                    checked += 1
                }
            }
            let listed = try await survivor.list(service: "failover")
            #expect(listed.count >= checked && checked > atKill.reduce(0, +))
            await survivor.shutdown()
            // The old primary is gone: what was read came from the promoted standby.
            #expect(try pair.psql("SELECT pg_is_in_recovery()", on: "failover-standby").hasPrefix("f"))
            FileHandle.standardError.write(
                Data(
                    "failover: \(checked) acknowledged writes checked (\(atKill.reduce(0, +)) before the kill); \(summaries.joined())".utf8)
            )
        }
    }
#endif
