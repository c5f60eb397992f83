#if PostgreSQL
    // Load for the PostgreSQL store, as separate processes: the failover test's writers and the
    // benchmark of scripts/bench/bench-postgres.sh. Not a user tool: its arguments name files (a URL file,
    // a key file), never a password or a key.
    //
    //   LockboxPostgresLoad write --url-file F --key-file K --writer N --log L --stop-file S [--operation-timeout SECONDS]
    //       Opens the vault at F with the key file K and writes items (service "failover", account
    //       "wN-I", a random 16-2047-byte secret) one after another until S exists; after each
    //       acknowledged write (the call returned), appends "ACCOUNT HEX NANOSECONDS\n" to L in one
    //       write(2), NANOSECONDS being CLOCK_MONOTONIC when the call returned (one clock for every
    //       process of the machine, so a test can time the writes without polling for them).
    //       A failed write is retried with the same secret. Prints one summary line and exits 0.
    //   LockboxPostgresLoad bench --url-file F [--clients 1,16,64] [--seconds S] [--rounds R] [--items N]
    //       Creates a vault (the database must hold none) and a plain table (service, account,
    //       secret in clear), fills both with N items, then for each client count runs get and set
    //       three ways: through PostgresStore; on the plain table with one prepared statement each
    //       (a bare SELECT by key, an autocommit upsert: the peer, as an application would send
    //       them); and with the same statements sent by postgres-nio's query() (unnamed: parsed and
    //       planned on every call). Paired: R rounds, each running the three for S seconds one after
    //       another (the order rotating from round to round), so a change of the machine's load
    //       meets all three; a ratio is taken per round and the median is printed with the smallest
    //       and largest. Throughput and p50/p99 latency, as a Markdown table.
    //   LockboxPostgresLoad capacity --url-file F [--clients 1,8,64] [--seconds S] [--items N] [--profiles P]
    //       Creates a vault, fills it with N items and P PIN profiles (the server preset's hash),
    //       prints the tables' sizes per row, then for each client count measures for S seconds:
    //       get, set, a right PIN verified (PinGuard, server preset), a guess counted alone
    //       (beginPinAttempt, the database's part of a wrong PIN), a refresh lease taken and
    //       released. Throughput and p50/p99 latency, as a Markdown table.
    import Foundation
    import Lockbox
    import LockboxPostgres
    import Logging
    import PostgresNIO
    import SystemPackage
    #if canImport(Glibc)
        import Glibc
    #endif

    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("LockboxPostgresLoad: \(message)\n".utf8))
        exit(2)
    }

    /// `--name value` pairs.
    func options(_ arguments: ArraySlice<String>) -> [String: String] {
        var result: [String: String] = [:]
        var rest = arguments
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst() else { fail("expected --NAME VALUE, got \(name)") }
            result[String(name.dropFirst(2))] = value
        }
        return result
    }

    func required(_ options: [String: String], _ name: String) -> String {
        guard let value = options[name] else { fail("--\(name) is required") }
        return value
    }

    func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    func randomSecret() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<Int.random(in: 16...2047)).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    func write(_ options: [String: String]) async {
        let url: PostgresConnectionURL
        do { url = try PostgresConnectionURL.read(fromFile: FilePath(required(options, "url-file"))) } catch { fail("\(error)") }
        let keyFile = FilePath(required(options, "key-file"))
        guard let writer = Int(required(options, "writer")) else { fail("--writer takes a number") }
        let stopFile = required(options, "stop-file")
        let timeout: Duration
        do { timeout = try PostgresStore.operationTimeout(seconds: Double(options["operation-timeout"] ?? "3") ?? .nan) } catch {
            fail("\(error)")
        }
        let log = open(required(options, "log"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard log >= 0 else { fail("cannot open the log") }
        func stopped() -> Bool { access(stopFile, F_OK) == 0 }

        var store: PostgresStore?
        var acked = 0
        var failures: [String: Int] = [:]
        var pending = randomSecret()
        while !stopped() {
            do {
                if store == nil { store = try await PostgresStore.open(url, credentials: [.keyFile(keyFile)], operationTimeout: timeout) }
                guard let open = store else { continue }
                let account = "w\(writer)-\(acked)"
                try await open.set(
                    SecretBytes(copying: pending), for: ItemKey(service: "failover", account: account), options: ItemOptions())
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let line = Array("\(account) \(hex(pending)) \(Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))\n".utf8)
                guard line.withUnsafeBytes({ Glibc.write(log, $0.baseAddress, $0.count) }) == line.count else { fail("writing the log") }
                acked += 1
                pending = randomSecret()
            } catch {
                let kind: String =
                    switch error {
                    case let error as PostgresStoreError:
                        switch error {
                        case .unavailable: "unavailable"
                        case .connectionLost: "connectionLost"
                        case .serverRefused(_, _, let state): "serverRefused-\(state)"
                        case .readOnlyServer: "readOnlyServer"
                        case .notRunning: "notRunning"
                        case .schemaTooNew: "schemaTooNew"
                        case .schemaNotCurrent: "schemaNotCurrent"
                        }
                    case let error as LockboxError: "lockbox-\(error.code)"
                    default: "other"
                    }
                failures[kind, default: 0] += 1
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        await store?.shutdown()
        close(log)
        print(
            "writer \(writer): acknowledged \(acked), failed calls \(failures.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))"
        )
    }

    /// Latencies in nanoseconds of one run.
    struct Run {
        var count = 0
        var latencies: [Int64] = []
        var seconds = 0.0
        var throughput: Double { Double(count) / seconds }
        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return .nan }
            let sorted = latencies.sorted()
            return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1e6
        }
    }

    /// `clients` tasks calling `operation` for `seconds`.
    func measure(clients: Int, seconds: Double, _ operation: @escaping @Sendable (Int) async throws -> Void) async throws -> Run {
        let start = ContinuousClock.now
        let end = start + .milliseconds(Int64(seconds * 1000))
        let runs = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for client in 0..<clients {
                group.addTask {
                    var latencies: [Int64] = []
                    var index = client
                    while ContinuousClock.now < end {
                        let began = ContinuousClock.now
                        try await operation(index)
                        let took = ContinuousClock.now - began
                        latencies.append(took.components.seconds * 1_000_000_000 + took.components.attoseconds / 1_000_000_000)
                        index &+= 7919
                    }
                    return latencies
                }
            }
            var all: [Int64] = []
            for try await latencies in group { all += latencies }
            return all
        }
        let elapsed = ContinuousClock.now - start
        return Run(
            count: runs.count, latencies: runs, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// A new vault for the bench and capacity modes: a fixed test key and the cheapest KDF (no
    /// passphrase slot is measured), a pool of `connections`.
    /// The plain table's SELECT by key, prepared (the `get` peer).
    struct PlainSelect: PostgresPreparedStatement {
        static let name = "bench_plain_select"
        static let sql = "SELECT secret FROM bench_plain WHERE service = $1 AND account = $2"
        static let bindingDataTypes: [PostgresDataType] = [.text, .text]
        typealias Row = ByteBuffer

        var service: String
        var account: String

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(service)
            bindings.append(account)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// The plain table's autocommit upsert, prepared (the `set` peer).
    struct PlainUpsert: PostgresPreparedStatement {
        static let name = "bench_plain_upsert"
        static let sql = """
            INSERT INTO bench_plain VALUES ($1, $2, $3) ON CONFLICT (service, account) DO UPDATE SET secret = EXCLUDED.secret
            """
        static let bindingDataTypes: [PostgresDataType] = [.text, .text, .bytea]
        typealias Row = ()

        var service: String
        var account: String
        var secret: ByteBuffer

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 3)
            bindings.append(service)
            bindings.append(account)
            bindings.append(secret)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {}
    }

    func benchVault(_ url: PostgresConnectionURL, connections: Int) async throws -> PostgresStore {
        let key = SecretBytes(copying: Array(repeating: UInt8(0x5A), count: 32))
        let kdf = try KDFParameters(opsLimit: 1, memoryLimitBytes: 8 * 1024)
        return try await PostgresStore.create(url, credentials: [.key(key)], kdf: kdf, maximumConnections: connections)
    }

    func bench(_ options: [String: String]) async throws {
        let url = try PostgresConnectionURL.read(fromFile: FilePath(required(options, "url-file")))
        let clientCounts = (options["clients"] ?? "1,16,64").split(separator: ",").compactMap { Int($0) }
        let seconds = Double(options["seconds"] ?? "1") ?? 1
        let items = Int(options["items"] ?? "1000") ?? 1000
        let rounds = Int(options["rounds"] ?? "5") ?? 5
        guard seconds.isFinite, seconds > 0, items > 0, rounds > 0, !clientCounts.isEmpty, clientCounts.allSatisfy({ $0 > 0 }) else {
            fail("bad numbers")
        }
        let connections = 16
        let store = try await benchVault(url, connections: connections)
        let secret = Array(repeating: UInt8(0x42), count: 64)

        var configuration = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password, database: url.database, tls: .disable)
        configuration.options.maximumConnections = connections
        let plain = PostgresClient(configuration: configuration)
        let runTask = Task { await plain.run() }
        defer { runTask.cancel() }
        let logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        try await plain.query("DROP TABLE IF EXISTS bench_plain", logger: logger)
        try await plain.query(
            "CREATE TABLE bench_plain (service text, account text, secret bytea NOT NULL, PRIMARY KEY (service, account))", logger: logger)

        let keys = (0..<items).map { ItemKey(service: "bench", account: "item-\($0)") }
        try await store.set(keys.map { ItemWrite(SecretBytes(copying: secret), for: $0) })
        for key in keys {
            try await plain.query(
                "INSERT INTO bench_plain VALUES (\(key.service), \(key.account), \(ByteBuffer(bytes: secret)))", logger: logger)
        }

        print(
            "| clients | operation | Lockbox ops/s | plain, prepared ops/s | plain, query() ops/s | ratio to prepared, median (min-max) | ratio to query(), median (min-max) | Lockbox p50 / p99 ms | prepared p50 / p99 ms | query() p50 / p99 ms |"
        )
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for clients in clientCounts {
            for operation in ["get", "set"] {
                let variants: [@Sendable (Int) async throws -> Void]
                if operation == "get" {
                    variants = [
                        { index in
                            guard try await store.get(keys[index % items]) != nil else { fail("an item is missing") }
                        },
                        { index in
                            let key = keys[index % items]
                            var found = false
                            for try await _ in try await plain.execute(
                                PlainSelect(service: key.service, account: key.account), logger: logger)
                            { found = true }
                            guard found else { fail("a plain row is missing") }
                        },
                        { index in
                            let key = keys[index % items]
                            var found = false
                            for try await _ in try await plain.query(
                                "SELECT secret FROM bench_plain WHERE service = \(key.service) AND account = \(key.account)", logger: logger
                            ).decode(ByteBuffer.self) { found = true }
                            guard found else { fail("a plain row is missing") }
                        },
                    ]
                } else {
                    variants = [
                        { index in
                            try await store.set(SecretBytes(copying: secret), for: keys[index % items], options: ItemOptions())
                        },
                        { index in
                            let key = keys[index % items]
                            for try await _ in try await plain.execute(
                                PlainUpsert(service: key.service, account: key.account, secret: ByteBuffer(bytes: secret)), logger: logger)
                            {}
                        },
                        { index in
                            let key = keys[index % items]
                            try await plain.query(
                                """
                                INSERT INTO bench_plain VALUES (\(key.service), \(key.account), \(ByteBuffer(bytes: secret)))
                                ON CONFLICT (service, account) DO UPDATE SET secret = EXCLUDED.secret
                                """, logger: logger)
                        },
                    ]
                }
                var totals = [Run](repeating: Run(), count: 3)
                var ratios: [[Double]] = [[], []]
                for round in 0..<rounds {
                    var runs = [Run](repeating: Run(), count: 3)
                    for step in 0..<3 {
                        let which = (round + step) % 3
                        runs[which] = try await measure(clients: clients, seconds: seconds, variants[which])
                    }
                    for which in 0..<3 {
                        totals[which].count += runs[which].count
                        totals[which].seconds += runs[which].seconds
                        totals[which].latencies += runs[which].latencies
                    }
                    ratios[0].append(runs[1].throughput / runs[0].throughput)
                    ratios[1].append(runs[2].throughput / runs[0].throughput)
                }
                func format(_ value: Double) -> String { String(format: "%.2f", value) }
                func latency(_ run: Run) -> String { "\(format(run.percentile(0.5))) / \(format(run.percentile(0.99)))" }
                func ratio(_ values: [Double]) -> String {
                    let sorted = values.sorted()
                    return "\(format(sorted[sorted.count / 2]))× (\(format(sorted[0]))-\(format(sorted[sorted.count - 1])))"
                }
                print(
                    "| \(clients) | \(operation) | \(Int(totals[0].throughput)) | \(Int(totals[1].throughput)) | \(Int(totals[2].throughput)) | "
                        + "\(ratio(ratios[0])) | \(ratio(ratios[1])) | \(latency(totals[0])) | \(latency(totals[1])) | \(latency(totals[2])) |"
                )
            }
        }
        await store.shutdown()
    }

    func capacity(_ options: [String: String]) async throws {
        let url = try PostgresConnectionURL.read(fromFile: FilePath(required(options, "url-file")))
        let clientCounts = (options["clients"] ?? "1,8,64").split(separator: ",").compactMap { Int($0) }
        let seconds = Double(options["seconds"] ?? "5") ?? 5
        let items = Int(options["items"] ?? "10000") ?? 10000
        let profileCount = Int(options["profiles"] ?? "64") ?? 64
        guard seconds.isFinite, seconds > 0, items > 0, profileCount > 0, !clientCounts.isEmpty, clientCounts.allSatisfy({ $0 > 0 }) else {
            fail("bad numbers")
        }
        let connections = 16
        let store = try await benchVault(url, connections: connections)
        let secret = Array(repeating: UInt8(0x42), count: 64)
        let keys = (0..<items).map { ItemKey(service: "capacity", account: "user-\($0)") }
        for start in stride(from: 0, to: items, by: 1000) {
            try await store.set(keys[start..<min(items, start + 1000)].map { ItemWrite(SecretBytes(copying: secret), for: $0) })
        }
        let guard_ = PinGuard(store: store, preset: .server)
        let profiles = (0..<profileCount).map { PinProfile(service: "capacity", name: "profile-\($0)") }
        let pin = SecretBytes(copying: Array("5073".utf8))
        for profile in profiles { try await guard_.set(profile, pin: pin) }
        let lockout = try LockoutPolicy(delays: [0], disableAfter: 100)

        var plain = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password, database: url.database, tls: .disable)
        plain.options.maximumConnections = 1
        let sizes = PostgresClient(configuration: plain)
        let runTask = Task { await sizes.run() }
        defer { runTask.cancel() }
        let logger = Logger(label: "capacity", factory: { _ in SwiftLogNoOpLogHandler() })
        print("| table | rows | bytes (heap + index + TOAST) | bytes per row |")
        print("|---|---:|---:|---:|")
        for table in ["items", "key_slots", "vault", "pin_attempts", "refresh_leases"] {
            for try await (rows, bytes) in try await sizes.query(
                "SELECT (SELECT count(*) FROM lockbox.\(unescaped: table))::int8, pg_total_relation_size('lockbox.\(unescaped: table)')::int8",
                logger: logger
            ).decode((Int, Int).self) {
                print("| \(table) | \(rows) | \(bytes) | \(rows > 0 ? String(bytes / rows) : "–") |")
            }
        }
        print("")

        let operations: [(String, @Sendable (Int) async throws -> Void)] = [
            ("get", { index in guard try await store.get(keys[index % items]) != nil else { fail("an item is missing") } }),
            ("set", { index in try await store.set(SecretBytes(copying: secret), for: keys[index % items], options: ItemOptions()) }),
            ("PIN verify, right PIN, server preset", { index in try await guard_.verify(profiles[index % profileCount], pin: pin) }),
            (
                "PIN guess counted (beginPinAttempt alone)",
                { index in
                    _ = try await store.beginPinAttempt(ItemKey(service: "capacity-guess", account: "g\(index % items)"), lockout: lockout)
                    if index % 50 == 49 {
                        try await store.recordPinSuccess(ItemKey(service: "capacity-guess", account: "g\(index % items)"))
                    }
                }
            ),
            (
                "refresh lease taken and released",
                { index in
                    let key = ItemKey(service: "capacity-lease", account: "l\(index)")
                    guard let lease = try await store.acquireRefreshLease(key, for: .seconds(60)) else { fail("a lease was held") }
                    try await store.releaseRefreshLease(lease)
                }
            ),
        ]
        print("| clients | operation | ops/s | p50 / p99 ms |")
        print("|---:|---|---:|---:|")
        for clients in clientCounts {
            for (name, operation) in operations {
                let run = try await measure(clients: clients, seconds: seconds, operation)
                func format(_ value: Double) -> String { String(format: "%.2f", value) }
                print(
                    "| \(clients) | \(name) | \(format(run.throughput)) | \(format(run.percentile(0.5))) / \(format(run.percentile(0.99))) |"
                )
            }
        }
        await store.shutdown()
    }

    let arguments = CommandLine.arguments.dropFirst()
    switch arguments.first {
    case "write": await write(options(arguments.dropFirst()))
    case "bench":
        do { try await bench(options(arguments.dropFirst())) } catch { fail("\(error)") }
    case "capacity":
        do { try await capacity(options(arguments.dropFirst())) } catch { fail("\(error)") }
    default: fail("usage: LockboxPostgresLoad write|bench|capacity --OPTION VALUE…")
    }
#else
    #if canImport(Glibc)
        import Glibc
    #endif

    // A helper of the PostgreSQL tests and benchmark: nothing to do without the `PostgreSQL` trait.
    let message = "this program needs the package's PostgreSQL trait (swift build --traits PostgreSQL)\n"
    _ = message.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    exit(2)
#endif
