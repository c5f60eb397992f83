#if PostgreSQL
    import Foundation
    import Lockbox
    import SystemPackage
    import Testing
    @testable import LockboxPostgres
    #if canImport(Glibc)
        import Glibc
    #endif

    // Issue 17, item 5: `lockbox --store postgres` and `migrate` both ways, run as users run them:
    // the `lockbox` binary, which hands these command lines over to `lockbox-postgres` beside it.

    /// `lockbox` as built beside the test product.
    private let lockboxBinary = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(
        ".build/debug/lockbox")

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
            try FileManager.default.copyItem(atPath: lockboxBinary.path, toPath: alone.appending("lockbox").string)
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
            ]
            // The texts `lockbox` maps to exit 27 (Sources/LockboxCLI/ExitStatus.swift, LockboxError.Code.postgres).
            #expect(
                errors.map(\.code.rawValue) == [
                    "postgres-unavailable", "postgres-connection-lost", "postgres-refused", "postgres-schema-too-new",
                ])
            #expect(errors.map(\.category) == [.noStorageAccess, .noStorageAccess, .platformFailure, .badData])
        }
    }
#endif
