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

    // `lockbox --store postgres` and `migrate` both ways, run as users run them:
    // the `lockbox` binary, which hands these command lines over to `lockbox-postgres` beside it.

    /// What one `lockbox` run did.
    private struct Run {
        var status: Int32
        var stdout: Data
        var stderr: String
        var seconds: Double
        var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// Runs `binary` with `arguments` in `folder`, `input` on standard input, the environment of the
    /// test minus every LOCKBOX_ variable plus `environment`.
    private func lockbox(
        _ arguments: [String], in folder: FilePath, input: Data = Data(), environment: [String: String],
        binary: URL = lockboxBinary
    ) throws -> Run {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: folder.string)
        var variables = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LOCKBOX_") }
        variables["XDG_CONFIG_HOME"] = folder.appending("config").string
        variables["XDG_DATA_HOME"] = folder.appending("data").string
        variables["XDG_STATE_HOME"] = folder.appending("state").string
        variables["XDG_RUNTIME_DIR"] = folder.string
        variables.merge(environment) { _, new in new }
        process.environment = variables
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        let started = ContinuousClock.now
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        let errors = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let elapsed = ContinuousClock.now - started
        return Run(
            status: process.terminationStatus, stdout: output, stderr: errors,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// Copies the program at `source` to `destination`, to be run from there: by `cp`, a process of
    /// its own, so that no write descriptor of the copy is ever open in this process. A copy written
    /// here would be: a `Process` another test starts meanwhile forks with that descriptor, and
    /// running the copy while the child holds it fails with ETXTBSY ("Text file busy").
    private func copyExecutable(_ source: String, to destination: String) throws {
        let copy = Process()
        copy.executableURL = URL(fileURLWithPath: "/bin/cp")
        copy.arguments = ["--", source, destination]
        try copy.run()
        copy.waitUntilExit()
        guard copy.terminationStatus == 0 else {
            throw LockboxError.invalidArgument("cp \(source) \(destination) exited \(copy.terminationStatus)")
        }
    }

    /// A temporary folder with a key file `k` (mode 0600) in it.
    private func workFolder() throws -> FilePath {
        var template = Array((NSTemporaryDirectory() + "lockbox-pgcli-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw Errno(rawValue: errno) }
        let folder = FilePath(String(cString: made))
        try KeyFile.generate(at: folder.appending("k"))
        return folder
    }

    extension PostgresStoreTests {
        @Test func lockboxWorksOnAVaultInPostgresWithTheURLFromAFileOrTheEnvironment() throws {
            guard let cluster = try Cluster.current("CLI on PostgreSQL") else { return }
            let folder = try workFolder()
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            let viaFile = ["LOCKBOX_POSTGRES_URL_FILE": cluster.urlFile.string, "LOCKBOX_KEY_FILE": folder.appending("k").string]

            let created = try lockbox(["--store", "postgres", "init", "--verbose"], in: folder, environment: viaFile)
            #expect(created.status == 0, "\(created.stderr)")
            #expect(created.stderr.contains("handing the command over to"), "lockbox hands PostgreSQL over to lockbox-postgres")
            #expect(created.stderr.contains("Created a vault in PostgreSQL"))
            let again = try lockbox(["--store", "postgres", "init"], in: folder, environment: viaFile)
            #expect(again.status == 4, "an existing vault is refused with exit 4: \(again.stderr)")

            let secretBytes = Data((0...255).map(UInt8.init))
            #expect(
                try lockbox(
                    ["--store", "postgres", "set", "api.example", "alice", "--raw"], in: folder, input: secretBytes,
                    environment: viaFile
                ).status == 0)
            let read = try lockbox(["--store", "postgres", "get", "api.example", "alice"], in: folder, environment: viaFile)
            #expect(read.status == 0 && read.stdout == secretBytes, "every byte back")

            // The URL itself in LOCKBOX_POSTGRES_URL; the store also from LOCKBOX_STORE.
            let url = try String(contentsOfFile: cluster.urlFile.string, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            let viaVariable = ["LOCKBOX_POSTGRES_URL": url, "LOCKBOX_STORE": "postgres", "LOCKBOX_KEY_FILE": folder.appending("k").string]
            let listed = try lockbox(["list", "--json"], in: folder, environment: viaVariable)
            #expect(listed.status == 0 && listed.text.contains("\"account\" : \"alice\""), "\(listed.stderr)")
            #expect(try lockbox(["delete", "api.example", "alice"], in: folder, environment: viaVariable).status == 0)
            #expect(try lockbox(["get", "api.example", "alice"], in: folder, environment: viaVariable).status == 2, "gone: exit 2")

            // What the database holds names nothing.
            #expect(
                try lockbox(["set", "api.example", "bob"], in: folder, input: Data("t0ken-in-clear".utf8), environment: viaVariable).status
                    == 0)
            let dump = try cluster.psql("SELECT t::text FROM lockbox.items t")
            #expect(!dump.isEmpty && !dump.contains("api.example") && !dump.contains("bob") && !dump.contains("t0ken"))

            // Device IDs: 4 processes at once create one.
            let ids = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                let run = try? lockbox(["device-id", "fleet.example"], in: folder, environment: viaVariable)
                ids.withLock { $0.append(run.map { $0.status == 0 ? $0.text : "exit \($0.status): \($0.stderr)" } ?? "did not run") }
            }
            let seen = ids.withLock { $0 }
            #expect(Set(seen).count == 1 && seen.first?.count == 37, "one ID for all: \(seen)")

            // A command of the file vault only says so; a wrong key file is exit 5; neither shows the password.
            let doctor = try lockbox(["doctor"], in: folder, environment: viaVariable)
            #expect(doctor.status == 64 && doctor.stderr.contains("not on the PostgreSQL store"))
            try KeyFile.generate(at: folder.appending("other"))
            let wrongKey = try lockbox(
                ["get", "api.example", "bob", "--key-file", folder.appending("other").string], in: folder,
                environment: viaVariable)
            #expect(wrongKey.status == 5, "\(wrongKey.stderr)")
            if let password = cluster.url.password { #expect(!wrongKey.stderr.contains(password) && !doctor.stderr.contains(password)) }
        }

        @Test func migrateCopiesAFileVaultToPostgresAndBackByteForByte() throws {
            guard let cluster = try Cluster.current("migrate file <-> PostgreSQL") else { return }
            let folder = try workFolder()
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            let key = folder.appending("k").string
            let environment = ["LOCKBOX_POSTGRES_URL_FILE": cluster.urlFile.string]
            let items: [(String, String, Data)] = [
                ("api.example", "alice", Data("refresh-1".utf8)), ("api.example", "bob", Data((0...255).map(UInt8.init))),
                ("device", "id", Data("d-42".utf8)), ("other.example", "carol", Data(repeating: 0, count: 4096)),
            ]
            #expect(
                try lockbox(["init", "--vault", "source.lockbox", "--key-file", key], in: folder, environment: environment).status == 0)
            for (service, account, bytes) in items {
                #expect(
                    try lockbox(
                        ["set", service, account, "--raw", "--vault", "source.lockbox", "--key-file", key], in: folder,
                        input: bytes, environment: environment
                    ).status == 0)
            }
            #expect(try lockbox(["--store", "postgres", "init", "--key-file", key], in: folder, environment: environment).status == 0)

            let there = try lockbox(
                [
                    "migrate", "--from", "file", "--to", "postgres", "--all", "--json", "--vault", "source.lockbox",
                    "--key-file", key,
                ], in: folder, environment: environment)
            #expect(there.status == 0, "\(there.stderr)")
            #expect(there.stderr.contains("4 copied"), "\(there.stderr)")
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.items") == "4\n")
            let rerun = try lockbox(
                [
                    "migrate", "--from", "file", "--to", "postgres", "--all", "--vault", "source.lockbox",
                    "--key-file", key,
                ], in: folder, environment: environment)
            #expect(rerun.status == 0 && rerun.stderr.contains("0 copied, 4 already there"), "re-runnable: \(rerun.stderr)")

            // Back into a new vault, moving: PostgreSQL is left empty.
            #expect(try lockbox(["init", "--vault", "back.lockbox", "--key-file", key], in: folder, environment: environment).status == 0)
            let back = try lockbox(
                [
                    "migrate", "--from", "postgres", "--to", "file", "--all", "--move", "--vault", "back.lockbox",
                    "--key-file", key,
                ], in: folder, environment: environment)
            #expect(back.status == 0 && back.stderr.contains("4 copied"), "\(back.stderr)")
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.items") == "0\n", "--move removed each verified source item")
            for (service, account, bytes) in items {
                let read = try lockbox(
                    ["get", service, account, "--vault", "back.lockbox", "--key-file", key], in: folder,
                    environment: environment)
                #expect(read.status == 0 && read.stdout == bytes, "\(service)/\(account) byte for byte")
            }
            // A passphrase on a descriptor opens both vaults: it is read once.
            let passphraseVault = ["init", "--vault", "pass.lockbox", "--passphrase-fd", "0", "--kdf", "interactive"]
            #expect(try lockbox(passphraseVault, in: folder, input: Data("correct horse\n".utf8), environment: environment).status == 0)
            let fromPass = try lockbox(
                [
                    "migrate", "--from", "file", "--to", "postgres", "--all", "--vault", "pass.lockbox",
                    "--passphrase-fd", "0",
                ], in: folder, input: Data("correct horse\n".utf8), environment: environment)
            #expect(fromPass.status == 5, "the PostgreSQL vault has no slot for that passphrase: exit 5 (\(fromPass.stderr))")
        }

        @Test func pinGuessesFromTheCommandLineAreCountedInTheDatabase() throws {
            guard let cluster = try Cluster.current("CLI PIN on PostgreSQL") else { return }
            let folder = try workFolder()
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            let environment = [
                "LOCKBOX_POSTGRES_URL_FILE": cluster.urlFile.string, "LOCKBOX_STORE": "postgres",
                "LOCKBOX_KEY_FILE": folder.appending("k").string,
            ]
            #expect(try lockbox(["init"], in: folder, environment: environment).status == 0)
            let pin = ["--hash-cost", "interactive"]
            #expect(
                try lockbox(["pin", "set", "kids", "max"] + pin, in: folder, input: Data("5073\n5073\n".utf8), environment: environment)
                    .status == 0)
            let wrong = try lockbox(
                ["pin", "verify", "kids", "max"] + pin, in: folder, input: Data("1111\n".utf8), environment: environment)
            #expect(wrong.status == 30, "\(wrong.stderr)")
            #expect(try cluster.psql("SELECT failures FROM lockbox.pin_attempts") == "1\n", "the guess counted where every host sees it")
            #expect(
                try lockbox(["pin", "verify", "kids", "max"] + pin, in: folder, input: Data("5073\n".utf8), environment: environment).status
                    == 0)
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.pin_attempts") == "0\n", "the count removed by the right PIN")
        }

        @Test func anUnreachableDatabaseOrAMissingLockboxPostgresIsExit27() throws {
            let folder = try workFolder()
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            // A port nobody listens on (bound, never listening), one-second connect timeout.
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(socket) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
            }
            let port = Int(UInt16(bigEndian: address.sin_port))
            let url = "postgresql://lockbox:s3cret-pw@127.0.0.1:\(port)/lockbox?connect_timeout=1&sslmode=disable"
            let environment = ["LOCKBOX_POSTGRES_URL": url, "LOCKBOX_KEY_FILE": folder.appending("k").string]
            let unreachable = try lockbox(["--store", "postgres", "get", "a", "b"], in: folder, environment: environment)
            #expect(unreachable.status == 27, "\(unreachable.stderr)")
            #expect(unreachable.stderr.contains("error[postgres-unavailable]") && !unreachable.stderr.contains("s3cret-pw"))
            #expect(unreachable.seconds < 30, "bounded: \(unreachable.seconds) s")

            // `lockbox` alone in a folder: it cannot hand over, and says so.
            let alone = folder.appending("bin")
            try FileManager.default.createDirectory(atPath: alone.string, withIntermediateDirectories: true)
            try copyExecutable(lockboxBinary.path, to: alone.appending("lockbox").string)
            let missing = try lockbox(
                ["--store", "postgres", "list"], in: folder, environment: environment,
                binary: URL(fileURLWithPath: alone.appending("lockbox").string))
            #expect(missing.status == 27 && missing.stderr.contains("error[postgres-program-missing]"), "\(missing.stderr)")
        }

        @Test func badConnectionInputIsAClearErrorWithItsOwnExitCode() throws {
            let folder = try workFolder()
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            let key = ["LOCKBOX_KEY_FILE": folder.appending("k").string]
            func run(_ arguments: [String], _ environment: [String: String]) throws -> Run {
                try lockbox(["--store", "postgres"] + arguments, in: folder, environment: key.merging(environment) { _, new in new })
            }
            let noURL = try run(["list"], [:])
            #expect(noURL.status == 64 && noURL.stderr.contains("needs the database URL"), "\(noURL.stderr)")
            let missing = try run(["list", "--postgres-url-file", folder.appending("nope").string], [:])
            #expect(missing.status == 64 && missing.stderr.contains("no PostgreSQL URL file"), "\(missing.stderr)")
            let readable = folder.appending("readable.url")
            try "postgresql://u:pw-zz@127.0.0.1:5432/db\n".write(toFile: readable.string, atomically: true, encoding: .utf8)
            chmod(readable.string, 0o644)
            let open = try run(["list", "--postgres-url-file", readable.string], [:])
            #expect(open.status == 8 && !open.stderr.contains("pw-zz"), "a URL file others can read is refused: \(open.stderr)")
            let directory = try run(["list"], ["LOCKBOX_POSTGRES_URL_FILE": folder.string])
            #expect(directory.status == 64 && directory.stderr.contains("not a regular file"), "\(directory.stderr)")
            let badPort = try run(["list"], ["LOCKBOX_POSTGRES_URL": "postgresql://u:pw-zz@127.0.0.1:99999/db"])
            #expect(badPort.status == 64 && !badPort.stderr.contains("pw-zz"), "\(badPort.stderr)")
            let tpm = try run(["init", "--tpm"], ["LOCKBOX_POSTGRES_URL_FILE": readable.string])
            #expect(tpm.status == 64 && tpm.stderr.contains("TPM slot"), "\(tpm.stderr)")
            let unknown = try lockbox(["list"], in: folder, environment: ["LOCKBOX_STORE": "postgresql"])
            #expect(unknown.status == 64 && unknown.stderr.contains("file or postgres"), "\(unknown.stderr)")
        }

        @Test func theCommandLineKnowsTheStoresErrorCodes() {
            let errors: [PostgresStoreError] = [
                .unavailable(server: "s", operation: "o", waitedSeconds: 1), .connectionLost(server: "s", operation: "o"),
                .serverRefused(server: "s", operation: "o", sqlState: "42501"), .schemaTooNew(server: "s", found: 9, supported: 3),
                .schemaNotCurrent(server: "s", found: 0, required: 5), .readOnlyServer(server: "s", operation: "o"),
                .notRunning(server: "s", operation: "o"),
            ]
            // The texts `lockbox` maps to exit 27, 28 for the schema to migrate and 29 for a write on a standby
            // (Sources/LockboxCLI/ExitStatus.swift, LockboxError.Code.postgres).
            #expect(
                errors.map(\.code.rawValue) == [
                    "postgres-unavailable", "postgres-connection-lost", "postgres-refused", "postgres-schema-too-new",
                    "postgres-schema-not-current", "postgres-read-only", "postgres-not-running",
                ])
            #expect(
                errors.map(\.category) == [
                    .noStorageAccess, .noStorageAccess, .platformFailure, .badData, .noStorageAccess, .noStorageAccess,
                    .noStorageAccess,
                ])
        }

        /// The two roles of docs/POSTGRES.md: the owner migrates the schema (`migrate-schema`), the
        /// application role, with only the documented GRANTs (DML and EXECUTE), runs every command
        /// that applies to the PostgreSQL store; open checks the version and runs no DDL
        /// (`log_statement = 'all'` for that role, read back from the server's log).
        @Test func everyCommandRunsAsARoleWithOnlyDMLAndExecuteOnceTheOwnerMigrated() throws {
            guard let cluster = try Cluster.current("least-privilege role") else { return }
            let folder = try workFolder()
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            let key = folder.appending("k").string
            let owner = ["LOCKBOX_POSTGRES_URL_FILE": cluster.urlFile.string, "LOCKBOX_STORE": "postgres", "LOCKBOX_KEY_FILE": key]

            // No schema: open says what to run, with its own exit code, and creates nothing.
            let early = try lockbox(["get", "a", "b"], in: folder, environment: owner)
            #expect(early.status == 28 && early.stderr.contains("migrate-schema"), "\(early.stderr)")
            #expect(try cluster.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'lockbox'") == "0\n", "open made no schema")

            // The application role: a password of its own, the documented GRANTs and nothing else.
            let role = "lockbox_app_\(UInt32.random(in: 0...UInt32.max))"
            let password = UUID().uuidString.replacingOccurrences(of: "-", with: "")
            _ = try cluster.psql("CREATE ROLE \(role) LOGIN PASSWORD '\(password)'")
            defer {
                _ = try? cluster.psql("DROP OWNED BY \(role)")
                _ = try? cluster.psql("DROP ROLE IF EXISTS \(role)")
            }
            var components = URLComponents(
                string: try String(contentsOfFile: cluster.urlFile.string, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
            components?.user = role
            components?.password = password
            guard let appURL = components?.string else {
                Issue.record("cannot rewrite the URL for the application role")
                return
            }
            let appURLFile = folder.appending("app.url")
            #expect(
                FileManager.default.createFile(
                    atPath: appURLFile.string, contents: Data((appURL + "\n").utf8), attributes: [.posixPermissions: 0o600]))
            let app = ["LOCKBOX_POSTGRES_URL_FILE": appURLFile.string, "LOCKBOX_STORE": "postgres", "LOCKBOX_KEY_FILE": key]

            // The application role cannot make the schema: creating a vault is refused, nothing made.
            let refused = try lockbox(["init"], in: folder, environment: app)
            #expect(refused.status == 27 && refused.stderr.contains("42501"), "\(refused.stderr)")

            // The owner migrates, once; again changes nothing.
            let migrated = try lockbox(["migrate-schema"], in: folder, environment: owner)
            #expect(
                migrated.status == 0 && migrated.stderr.contains("from version 0 to \(PostgresSchema.currentVersion)"), "\(migrated.stderr)"
            )
            let again = try lockbox(["migrate-schema"], in: folder, environment: owner)
            #expect(again.status == 0 && again.stderr.contains("nothing was changed"), "\(again.stderr)")
            for grant in PostgresSchema.applicationRoleGrants(role) { _ = try cluster.psql(grant) }

            // Every command of the PostgreSQL store, as the application role.
            func run(
                _ arguments: [String], input: String = "", expect status: Int32 = 0, saying: String? = nil,
                sourceLocation: SourceLocation = #_sourceLocation
            ) throws {
                let result = try lockbox(arguments, in: folder, input: Data(input.utf8), environment: app)
                #expect(
                    result.status == status, "\(arguments.joined(separator: " ")): exit \(result.status): \(result.stderr)",
                    sourceLocation: sourceLocation)
                if let saying {
                    #expect(
                        result.stderr.contains(saying), "\(arguments.joined(separator: " ")): \(result.stderr)",
                        sourceLocation: sourceLocation)
                }
            }
            let pin = ["--hash-cost", "interactive"]
            let tokens = #"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-1"}"#
            try run(["init"])
            try run(["set", "db", "app"], input: "v1")
            try run(["set", "db", "app", "--keep-previous"], input: "v2")
            try run(["get", "db", "app"])
            try run(["list", "--json"])
            try run(["restore", "db", "app"])
            try run(["set", "ci", "gone"], input: "x")
            try run(["delete", "ci", "gone"])
            try run(["get", "ci", "gone"], expect: 2)
            try run(["set", "tmp", "one"], input: "x")
            try run(["wipe", "--service", "tmp", "--yes"])
            try run(["pin", "set", "kids", "max"] + pin, input: "5073\n5073\n")
            try run(["pin", "verify", "kids", "max"] + pin, input: "1111\n", expect: 30)
            try run(["pin", "status", "kids", "max"])
            try run(["pin", "verify", "kids", "max"] + pin, input: "5073\n")
            try run(["pin", "change", "kids", "max"] + pin, input: "5073\n7391\n7391\n")
            try run(["pin", "remove", "kids", "max"])
            try run(["token", "set", "api.example", "alice"], input: tokens)
            try run(["token", "get", "api.example", "alice"])
            try run(["token", "status", "api.example", "alice"])
            try run(["token", "clear", "api.example", "alice"])
            try run(["device-id", "fleet.example"])
            try run(["signout", "fleet.example", "--keep-device-id", "--yes"])
            try run(
                ["export", "--to", folder.appending("backup.lockbox").string, "--backup-passphrase-fd", "0", "--kdf", "interactive"],
                input: "correct horse battery staple\n")
            // import: a backup (export's), and JSON lines in one batch.
            try run(["wipe", "--all", "--yes"])
            try run(
                ["import", folder.appending("backup.lockbox").string, "--backup-passphrase-fd", "0", "--json"],
                input: "correct horse battery staple\n")
            try run(["get", "db", "app"])
            try run(
                ["import", "--json-lines", "-"],
                input: #"{"service":"bulk","account":"one","secret_b64":"MQ=="}"# + "\n"
                    + #"{"service":"bulk","account":"two","secret_b64":"Mg=="}"#
                    + "\n")
            try run(["get", "bulk", "two"])
            // Key slots and the data key: the file vault's commands, refused for PostgreSQL (exit 64)
            // before anything is opened, rather than run on a file vault at the default path.
            let keySlotCommands: [[String]] = [
                ["slot", "list"], ["slot", "add-passphrase", "--new-passphrase-fd", "0"], ["slot", "add-key-file", key],
                ["slot", "remove", "1", "--yes"], ["passwd", "--new-passphrase-fd", "0"], ["rotate-key"],
            ]
            for command in keySlotCommands {
                try run(
                    command, input: "a new passphrase of some length\n", expect: 64, saying: "a vault in PostgreSQL keeps the key slots")
            }
            #expect(
                !FileManager.default.fileExists(atPath: folder.appending("data").appending("lockbox").string),
                "no file vault was made or opened at the default path")
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.key_slots") == "1\n", "the vault's one slot, unchanged")
            try run(["--store", "file", "init", "--vault", folder.appending("copy.lockbox").string, "--key-file", key])
            try run(["migrate", "--from", "postgres", "--to", "file", "--all", "--vault", folder.appending("copy.lockbox").string])
            try run(["migrate", "--from", "file", "--to", "postgres", "--all", "--vault", folder.appending("copy.lockbox").string])
            try run(["wipe", "--all", "--yes"])

            // Open runs no DDL: with log_statement = 'all' for the application role, a `get` logs
            // its statements, and none of them changes the schema or takes the migration lock.
            _ = try cluster.psql("ALTER ROLE \(role) SET log_statement = 'all'")
            try run(["set", "db", "app"], input: "v3")
            let log = cluster.serverLog()
            let before = (try? Data(contentsOf: URL(fileURLWithPath: log)))?.count ?? 0
            try run(["get", "db", "app"])
            Thread.sleep(forTimeInterval: 0.5)
            let logged = String(decoding: (try Data(contentsOf: URL(fileURLWithPath: log))).dropFirst(before), as: UTF8.self)
            let statements = logged.split(separator: "\n").filter { $0.contains("LOG:  statement:") || $0.contains("LOG:  execute") }
            #expect(statements.contains { $0.contains("lockbox.items") }, "the get's statements are in the log: \(statements)")
            let ddl = statements.filter { line in
                ["CREATE ", "ALTER ", "DROP ", "GRANT ", "pg_advisory"].contains { line.uppercased().contains($0.uppercased()) }
            }
            #expect(ddl.isEmpty, "no DDL on open: \(ddl)")
            #expect(statements.count <= 12, "a get is a handful of statements: \(statements.count): \(statements)")
        }

        /// Reads work against a hot standby alone (no DDL on open); a write there is refused as
        /// read-only with its own exit code (29) and says to send writes to the primary, never half-done.
        @Test func getAndListWorkOnAStandbyAndAWriteThereIsAClearError() throws {
            guard let cluster = try Cluster.current("reads on a standby"),
                let standby = try Cluster.given("reads on a standby", urlVariable: "LOCKBOX_TEST_POSTGRES_STANDBY_URL_FILE")
            else { return }
            let folder = try workFolder()
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            let key = folder.appending("k").string
            let primary = ["LOCKBOX_POSTGRES_URL_FILE": cluster.urlFile.string, "LOCKBOX_STORE": "postgres", "LOCKBOX_KEY_FILE": key]
            #expect(try lockbox(["migrate-schema"], in: folder, environment: primary).status == 0)
            #expect(try lockbox(["init"], in: folder, environment: primary).status == 0)
            #expect(
                try lockbox(
                    ["pin", "set", "kids", "max", "--hash-cost", "interactive"], in: folder, input: Data("5073\n5073\n".utf8),
                    environment: primary
                ).status == 0)
            #expect(try lockbox(["set", "db", "app"], in: folder, input: Data("on-primary".utf8), environment: primary).status == 0)

            // Synchronous standby: the commit above is there once acknowledged (remote_apply is not
            // set, so wait until replay has caught up).
            let onlyStandby = ["LOCKBOX_POSTGRES_URL_FILE": standby.urlFile.string, "LOCKBOX_STORE": "postgres", "LOCKBOX_KEY_FILE": key]
            var read = try lockbox(["get", "db", "app"], in: folder, environment: onlyStandby)
            for _ in 0..<50 where read.status != 0 {
                Thread.sleep(forTimeInterval: 0.1)
                read = try lockbox(["get", "db", "app"], in: folder, environment: onlyStandby)
            }
            #expect(read.status == 0 && read.text == "on-primary", "get on the standby: \(read.status) \(read.stderr)")
            let listed = try lockbox(["list", "--json"], in: folder, environment: onlyStandby)
            #expect(listed.status == 0 && listed.text.contains("\"account\" : \"app\""), "\(listed.stderr)")

            let write = try lockbox(["set", "db", "app"], in: folder, input: Data("on-standby".utf8), environment: onlyStandby)
            #expect(write.status == 29, "a write on a standby has its own exit code: \(write.status) \(write.stderr)")
            #expect(
                write.stderr.contains("error[postgres-read-only]") && write.stderr.contains("25006")
                    && write.stderr.contains("writes need the primary") && write.stderr.contains("target_session_attrs=read-write"),
                "the message says what happened and what to do: \(write.stderr)")
            // A PIN guess is a write too (its count): refused there as read-only before it is evaluated.
            let guess = try lockbox(
                ["pin", "verify", "kids", "max", "--hash-cost", "interactive"], in: folder, input: Data("1111\n".utf8),
                environment: onlyStandby)
            #expect(guess.status == 29 && guess.stderr.contains("error[postgres-read-only]"), "\(guess.status) \(guess.stderr)")
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.pin_attempts") == "0\n", "nothing counted, nothing evaluated")

            // Both hosts with target_session_attrs=prefer-standby: reads from the standby, and the
            // write and the PIN guess go to the primary, in one command each.
            let primaryURL = try String(contentsOfFile: cluster.urlFile.string, encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
            let standbyHost = standby.url.hosts[0].description
            guard let at = primaryURL.lastIndex(of: "@"), let slash = primaryURL[at...].firstIndex(of: "/") else {
                Issue.record("unexpected URL shape")
                return
            }
            var routedURL = String(primaryURL[..<slash]) + "," + standbyHost + String(primaryURL[slash...])
            routedURL += (routedURL.contains("?") ? "&" : "?") + "target_session_attrs=prefer-standby"
            let routedFile = folder.appending("routed.url")
            #expect(
                FileManager.default.createFile(
                    atPath: routedFile.string, contents: Data((routedURL + "\n").utf8), attributes: [.posixPermissions: 0o600]))
            let routed = ["LOCKBOX_POSTGRES_URL_FILE": routedFile.string, "LOCKBOX_STORE": "postgres", "LOCKBOX_KEY_FILE": key]
            let routedRead = try lockbox(["get", "db", "app"], in: folder, environment: routed)
            #expect(routedRead.status == 0 && routedRead.text == "on-primary", "\(routedRead.status) \(routedRead.stderr)")
            let routedWrite = try lockbox(["set", "db", "app"], in: folder, input: Data("routed".utf8), environment: routed)
            #expect(routedWrite.status == 0, "the write went to the primary: \(routedWrite.stderr)")
            let routedGuess = try lockbox(
                ["pin", "verify", "kids", "max", "--hash-cost", "interactive"], in: folder, input: Data("1111\n".utf8),
                environment: routed)
            #expect(routedGuess.status == 30, "the guess counted on the primary: \(routedGuess.stderr)")
            #expect(try cluster.psql("SELECT failures FROM lockbox.pin_attempts") == "1\n")
            #expect(try lockbox(["get", "db", "app"], in: folder, environment: primary).text == "routed")
        }
    }
#endif
