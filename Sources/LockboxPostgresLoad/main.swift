#if PostgreSQL
    // Load for the PostgreSQL store, as separate processes: the failover test's writers and the
    // benchmark of scripts/bench/bench-postgres.sh. Not a user tool: its arguments name files (a URL file,
    // a key file), never a password or a key.
    //
    //   LockboxPostgresLoad write --url-file F --key-file K --writer N --log L --stop-file S [--operation-timeout SECONDS]
    //       Opens the vault at F with the key file K and writes items (service "failover", account
    //       "wN-I", a random 16-2047-byte secret) one after another until S exists; after each
    //       acknowledged write (the call returned), appends "ACCOUNT HEX\n" to L in one write(2).
    //       A failed write is retried with the same secret. Prints one summary line and exits 0.
    //   LockboxPostgresLoad bench --url-file F [--clients 1,16,64] [--seconds S] [--items N]
    //       Creates a vault (the database must hold none) and a plain table (service, account,
    //       secret in clear), fills both with N items, then for each client count runs get and set
    //       for S seconds three ways: through PostgresStore; on the plain table with the store's
    //       statements (get: one SELECT joined with the vault row; set: a transaction that locks the
    //       vault row, then the item's row, then upserts); on the plain table with one statement
    //       each. Throughput and p50/p99 latency, as a Markdown table with the overhead ratios.
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
                let line = Array("\(account) \(hex(pending))\n".utf8)
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

    func bench(_ options: [String: String]) async throws {
        let url = try PostgresConnectionURL.read(fromFile: FilePath(required(options, "url-file")))
        let clientCounts = (options["clients"] ?? "1,16,64").split(separator: ",").compactMap { Int($0) }
        let seconds = Double(options["seconds"] ?? "5") ?? 5
        let items = Int(options["items"] ?? "1000") ?? 1000
        guard seconds.isFinite, seconds > 0, items > 0, !clientCounts.isEmpty, clientCounts.allSatisfy({ $0 > 0 }) else {
            fail("bad numbers")
        }
        let connections = 16
        let key = SecretBytes(copying: Array(repeating: UInt8(0x5A), count: 32))
        let kdf = try KDFParameters(opsLimit: 1, memoryLimitBytes: 8 * 1024)
        let store = try await PostgresStore.create(url, credentials: [.key(key)], kdf: kdf, maximumConnections: connections)
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
            "| clients | operation | Lockbox ops/s | plain, same statements ops/s | plain, one statement ops/s | ratio to same statements | ratio to one statement | Lockbox p50 / p99 ms | same statements p50 / p99 ms | one statement p50 / p99 ms |"
        )
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for clients in clientCounts {
            for operation in ["get", "set"] {
                let encrypted: Run
                let shaped: Run
                let unencrypted: Run
                if operation == "get" {
                    encrypted = try await measure(clients: clients, seconds: seconds) { index in
                        guard try await store.get(keys[index % items]) != nil else { fail("an item is missing") }
                    }
                    shaped = try await measure(clients: clients, seconds: seconds) { index in
                        let key = keys[index % items]
                        var found = false
                        for try await (_, secret) in try await plain.query(
                            """
                            SELECT v.key_check, p.secret FROM lockbox.vault v
                            LEFT JOIN bench_plain p ON p.service = \(key.service) AND p.account = \(key.account)
                            """, logger: logger
                        ).decode((ByteBuffer, ByteBuffer?).self) { found = secret != nil }
                        guard found else { fail("a plain row is missing") }
                    }
                    unencrypted = try await measure(clients: clients, seconds: seconds) { index in
                        let key = keys[index % items]
                        var found = false
                        for try await _ in try await plain.query(
                            "SELECT secret FROM bench_plain WHERE service = \(key.service) AND account = \(key.account)", logger: logger
                        ).decode(ByteBuffer.self) { found = true }
                        guard found else { fail("a plain row is missing") }
                    }
                } else {
                    encrypted = try await measure(clients: clients, seconds: seconds) { index in
                        try await store.set(SecretBytes(copying: secret), for: keys[index % items], options: ItemOptions())
                    }
                    shaped = try await measure(clients: clients, seconds: seconds) { index in
                        let key = keys[index % items]
                        try await plain.withTransaction(logger: logger) { connection in
                            for try await _ in try await connection.query("SELECT key_check FROM lockbox.vault FOR SHARE", logger: logger)
                                .decode(ByteBuffer.self)
                            {}
                            for try await _ in try await connection.query(
                                "SELECT secret FROM bench_plain WHERE service = \(key.service) AND account = \(key.account) FOR UPDATE",
                                logger: logger
                            ).decode(ByteBuffer.self) {}
                            try await connection.query(
                                """
                                INSERT INTO bench_plain VALUES (\(key.service), \(key.account), \(ByteBuffer(bytes: secret)))
                                ON CONFLICT (service, account) DO UPDATE SET secret = EXCLUDED.secret
                                """, logger: logger)
                        }
                    }
                    unencrypted = try await measure(clients: clients, seconds: seconds) { index in
                        let key = keys[index % items]
                        try await plain.query(
                            """
                            INSERT INTO bench_plain VALUES (\(key.service), \(key.account), \(ByteBuffer(bytes: secret)))
                            ON CONFLICT (service, account) DO UPDATE SET secret = EXCLUDED.secret
                            """, logger: logger)
                    }
                }
                func format(_ value: Double) -> String { String(format: "%.2f", value) }
                func latency(_ run: Run) -> String { "\(format(run.percentile(0.5))) / \(format(run.percentile(0.99)))" }
                print(
                    "| \(clients) | \(operation) | \(Int(encrypted.throughput)) | \(Int(shaped.throughput)) | \(Int(unencrypted.throughput)) | "
                        + "\(format(shaped.throughput / encrypted.throughput))× | \(format(unencrypted.throughput / encrypted.throughput))× | "
                        + "\(latency(encrypted)) | \(latency(shaped)) | \(latency(unencrypted)) |")
            }
        }
        await store.shutdown()
    }

    let arguments = CommandLine.arguments.dropFirst()
    switch arguments.first {
    case "write": await write(options(arguments.dropFirst()))
    case "bench":
        do { try await bench(options(arguments.dropFirst())) } catch { fail("\(error)") }
    default: fail("usage: LockboxPostgresLoad write|bench --OPTION VALUE…")
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
