#if PostgreSQL
    import Foundation
    import Lockbox
    import SystemPackage
    import Testing
    @testable import LockboxPostgres
    #if canImport(Glibc)
        import Glibc
    #endif

    // Against a real PostgreSQL primary with a synchronous standby, started by
    // scripts/dev/postgres-session.sh (scripts/test.sh runs this suite inside it). Without that cluster
    // these tests say so and pass, unless LOCKBOX_REQUIRE_POSTGRES_TESTS=1 (as scripts/test.sh sets)
    // or CI=true: then they fail.

    /// The cluster scripts/dev/postgres-session.sh gives, or `nil` (recorded as a failure when required).
    struct Cluster {
        let url: PostgresConnectionURL
        let urlFile: FilePath
        let ctl: String

        static func current(_ test: String) throws -> Cluster? {
            guard let cluster = try given(test, urlVariable: "LOCKBOX_TEST_POSTGRES_URL_FILE") else { return nil }
            // Every test starts from an empty database: no schema, no vault.
            _ = try cluster.psql("DROP SCHEMA IF EXISTS lockbox CASCADE")
            return cluster
        }

        /// The cluster whose URL file the environment variable `urlVariable` names.
        static func given(_ test: String, urlVariable: String) throws -> Cluster? {
            let environment = ProcessInfo.processInfo.environment
            guard let file = environment[urlVariable], let ctl = environment["LOCKBOX_TEST_POSTGRES_CTL"] else {
                let note = "\(test): no PostgreSQL cluster (run inside scripts/dev/postgres-session.sh)"
                if environment["LOCKBOX_REQUIRE_POSTGRES_TESTS"] == "1" || environment["CI"] == "true" {
                    Issue.record("LOCKBOX_REQUIRE_POSTGRES_TESTS=1 or CI=true requires this to run: \(note)")
                } else {
                    FileHandle.standardError.write(Data("NOT TESTED: \(note)\n".utf8))
                }
                return nil
            }
            return Cluster(url: try PostgresConnectionURL.read(fromFile: FilePath(file)), urlFile: FilePath(file), ctl: ctl)
        }

        /// The server log of `node` (scripts/dev/postgres-session.sh: the server folder beside the
        /// client folder of the URL files, `NODE.log`).
        func serverLog(node: String = "primary") -> String {
            urlFile.removingLastComponent().removingLastComponent().appending("server").appending("\(node).log").string
        }

        /// Runs `sql` as the superuser in the vault's database on `node` (psql, unaligned, no headers).
        func psql(_ sql: String, on node: String = "primary") throws -> String {
            try control(["psql", node, sql])
        }

        /// Runs the session's control command (scripts/dev/postgres-session.sh: kill, stop, cont,
        /// promote, start, psql); returns its output.
        @discardableResult
        func control(_ arguments: [String]) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ctl)
            process.arguments = arguments
            let output = Pipe()
            let errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw LockboxError.invalidArgument("\(arguments.first ?? "ctl") failed (\(process.terminationStatus)): \(errorText)")
            }
            return String(decoding: data, as: UTF8.self)
        }
    }

    func secret(_ string: String) -> SecretBytes { SecretBytes(utf8: string) }
    func text(_ bytes: SecretBytes?) -> String? { bytes.map { $0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } } }
    let cheapKDF: KDFParameters = {
        do { return try KDFParameters(opsLimit: 1, memoryLimitBytes: 8 * 1024) } catch { fatalError("bad test KDF") }
    }()

    /// The error `body` throws, or `nil` (recorded) if it returns.
    func thrown<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T) async -> (any Error)? {
        do {
            _ = try await body()
            Issue.record("expected an error", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    func lockboxCode(_ error: (any Error)?) -> LockboxError.Code? { (error as? LockboxError)?.code }

    @Suite(.serialized)
    struct PostgresStoreTests {
        static let key = SecretBytes(count: 32) { buffer in
            for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: index &* 7 &+ 3) }
        }

        func makeStore(_ cluster: Cluster) async throws -> PostgresStore {
            try await PostgresStore.create(cluster.url, credentials: [.key(Self.key), .passphrase(secret("fleet words"))], kdf: cheapKDF)
        }

        @Test func roundTripSetGetListDeleteAndReopen() async throws {
            guard let cluster = try Cluster.current("round trip") else { return }
            let store = try await makeStore(cluster)
            let mail = ItemKey(service: "mail.example", account: "ada")
            let chat = ItemKey(service: "chat.example", account: "ada")
            try await store.set(
                secret("first"), for: mail, options: ItemOptions(kind: .password, label: "Mail", attributes: ["team": "ops"]))
            let created = try #require(try await store.metadata(mail)).created
            try await store.set(secret("second"), for: mail, options: ItemOptions(kind: .password, label: "Mail"))
            try await store.set([
                ItemWrite(secret("c1"), for: chat), ItemWrite(secret("c2"), for: ItemKey(service: "chat.example", account: "bob")),
            ])

            #expect(text(try await store.get(mail)) == "second")
            let item = try #require(try await store.item(mail))
            #expect(item.metadata.label == "Mail" && item.metadata.kind == .password && item.metadata.created == created)
            #expect(try await store.list(service: nil).map(\.key) == [chat, ItemKey(service: "chat.example", account: "bob"), mail])
            #expect(try await store.list(service: "mail.example").map(\.key) == [mail])
            #expect(try await store.get(ItemKey(service: "mail.example", account: "nobody")) == nil)

            // Another host: the same vault through another pool, with the passphrase slot.
            let other = try await PostgresStore.open(cluster.url, credentials: [.passphrase(secret("fleet words"))])
            #expect(text(try await other.get(chat)) == "c1")
            #expect(try await other.delete(chat))
            #expect(try await !store.delete(chat))
            #expect(try await store.get(chat) == nil)
            #expect(try await store.delete([mail, chat]) == [mail])
            #expect(try await store.wipe(service: "chat.example") == 1)
            try await store.set(secret("x"), for: mail, options: ItemOptions())
            #expect(try await other.wipeAll() == 1)
            #expect(try await store.list(service: nil).isEmpty)
            await other.shutdown()
            await store.shutdown()
        }

        @Test func expiryAndThePreviousVersionLiveInTheSealedRowsWithoutASchemaChange() async throws {
            guard let cluster = try Cluster.current("expiry and previous versions") else { return }
            let store = try await makeStore(cluster)
            let vault = Vault(store: store)
            let expires = Date(timeIntervalSince1970: 4_102_444_800)
            try await vault.set(secret("old"), service: "ci", account: "gone", changes: ItemChanges(expires: Date().addingTimeInterval(-5)))
            try await vault.set(secret("live"), service: "ci", account: "live", changes: ItemChanges(expires: expires))
            await #expect(throws: LockboxError.self) { _ = try await vault.get(service: "ci", account: "gone") }
            do {
                _ = try await vault.get(service: "ci", account: "gone")
            } catch let error as LockboxError {
                #expect(error.code == .itemExpired)
            }
            #expect(text(try await vault.get(service: "ci", account: "gone", allowExpired: true)) == "old")
            #expect(try await vault.metadata(service: "ci", account: "live")?.expires == expires)

            try await vault.set(secret("v1"), service: "db", account: "app", changes: ItemChanges())
            try await vault.set(secret("v2"), service: "db", account: "app", changes: ItemChanges(), keepingPreviousFor: .seconds(600))
            #expect(text(try await vault.get(service: "db", account: "app")) == "v2")
            #expect(text(try await vault.previous(service: "db", account: "app")) == "v1")
            #expect(try await vault.list(service: "db").map(\.account) == ["app"])
            #expect(try await store.list(service: "db").count == 2, "the previous value is a sealed row of its own")

            // Another host sees the same, through another pool.
            let otherStore = try await PostgresStore.open(cluster.url, credentials: [.passphrase(secret("fleet words"))])
            let other = Vault(store: otherStore)
            #expect(text(try await other.previous(service: "db", account: "app")) == "v1")
            #expect(try await other.metadata(service: "ci", account: "live")?.expires == expires)
            #expect(try await other.restorePrevious(service: "db", account: "app"))
            #expect(text(try await vault.get(service: "db", account: "app")) == "v1")
            #expect(text(try await vault.previous(service: "db", account: "app")) == "v2")
            #expect(try await vault.wipeExpired() == [ItemKey(service: "ci", account: "gone")])
            #expect(try await vault.list().map(\.account).sorted() == ["app", "live"])
            await otherStore.shutdown()
            await store.shutdown()
        }

        @Test func createRefusesAnExistingVaultAndOpenRefusesWrongCredentials() async throws {
            guard let cluster = try Cluster.current("create and open refusals") else { return }
            // No schema: open reads the version, changes nothing, and says to migrate.
            #expect(
                await thrown { try await PostgresStore.open(cluster.url, credentials: [.key(Self.key)]) } as? PostgresStoreError
                    == .schemaNotCurrent(server: cluster.url.description, found: 0, required: PostgresSchema.currentVersion))
            #expect(try await PostgresStore.schemaVersion(cluster.url) == 0)
            try await PostgresStore.migrateSchema(cluster.url)
            #expect(
                lockboxCode(await thrown { try await PostgresStore.open(cluster.url, credentials: [.key(Self.key)]) }) == .vaultNotFound)
            let store = try await makeStore(cluster)
            try await store.set(secret("kept"), for: ItemKey(service: "s", account: "a"), options: ItemOptions())
            #expect(lockboxCode(await thrown { try await makeStore(cluster) }) == .vaultAlreadyExists)
            #expect(
                lockboxCode(
                    await thrown {
                        try await PostgresStore.open(cluster.url, credentials: [.passphrase(secret("wrong words"))])
                    }) == .wrongCredential)
            #expect(text(try await store.get(ItemKey(service: "s", account: "a"))) == "kept")
            await store.shutdown()
        }

        @Test func migrationsAreVersionedAndRerunnable() async throws {
            guard let cluster = try Cluster.current("migrations") else { return }
            #expect(try await PostgresStore.migrateSchema(cluster.url) == PostgresSchema.currentVersion)
            #expect(try await PostgresStore.migrateSchema(cluster.url) == PostgresSchema.currentVersion)
            // Eight hosts starting at once: each migration applied exactly once.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 { group.addTask { try await PostgresStore.migrateSchema(cluster.url) } }
                for try await version in group { #expect(version == PostgresSchema.currentVersion) }
            }
            let versions = try cluster.psql("SELECT version FROM lockbox.schema_migrations ORDER BY version")
            #expect(versions.split(separator: "\n").map(String.init) == (1...PostgresSchema.currentVersion).map(String.init))
            let store = try await makeStore(cluster)
            await store.shutdown()

            // A schema from a newer Lockbox: refused, not used.
            _ = try cluster.psql("INSERT INTO lockbox.schema_migrations (version) VALUES (\(PostgresSchema.currentVersion + 1))")
            let error = await thrown { try await PostgresStore.open(cluster.url, credentials: [.key(Self.key)]) }
            #expect(
                error as? PostgresStoreError
                    == .schemaTooNew(
                        server: cluster.url.description, found: PostgresSchema.currentVersion + 1,
                        supported: PostgresSchema.currentVersion))
        }

        @Test func theDatabaseHoldsNoServiceAccountLabelOrSecretInClear() async throws {
            guard let cluster = try Cluster.current("psql look") else { return }
            let store = try await makeStore(cluster)
            let clear = ["payroll-service-zq", "account-ada-zq", "label-visible-zq", "hunter2-secret-zq", "attr-value-zq"]
            try await store.set(
                secret(clear[3]), for: ItemKey(service: clear[0], account: clear[1]),
                options: ItemOptions(label: clear[2], attributes: ["team": clear[4]]))
            await store.shutdown()
            // Every column of every Lockbox table, as text, in psql's default bytea output (hex) and
            // decoded as escape strings.
            var seen = ""
            for table in ["vault", "key_slots", "items", "schema_migrations"] {
                seen += try cluster.psql("SELECT t::text FROM lockbox.\(table) t")
            }
            seen += try cluster.psql(
                "SELECT encode(address, 'escape') || encode(metadata, 'escape') || encode(secret, 'escape') FROM lockbox.items")
            // What a backup holds (pg_dump), and what the synchronous standby holds.
            let dump = try cluster.control(["dump", "primary"])
            #expect(dump.contains("COPY lockbox.items"), "the dump holds the items table")
            seen += dump
            if ProcessInfo.processInfo.environment["LOCKBOX_TEST_POSTGRES_STANDBY_URL_FILE"] != nil {
                // Synchronous commit waits for the standby's flush, not its replay: wait for the row.
                var replicated = ""
                for _ in 0..<100 where !replicated.contains("\\x") {
                    replicated = try cluster.psql("SELECT t::text FROM lockbox.items t", on: "standby")
                    if !replicated.contains("\\x") { try await Task.sleep(for: .milliseconds(50)) }
                }
                #expect(replicated.contains("\\x"), "the standby has the row")
                seen += replicated
            }
            #expect(seen.contains("\\x"), "the look saw the rows")
            for word in clear {
                let hex = word.utf8.map { String(format: "%02x", $0) }.joined()
                #expect(!seen.contains(word) && !seen.lowercased().contains(hex), "\(word) is in the database in clear")
            }
        }

        @Test func aTamperedOrMovedRowFailsAuthenticationForThatItemOnly() async throws {
            guard let cluster = try Cluster.current("tampered rows") else { return }
            let store = try await makeStore(cluster)
            let victim = ItemKey(service: "bank", account: "ada")
            let bystander = ItemKey(service: "bank", account: "bob")
            try await store.set(secret("ada's secret"), for: victim, options: ItemOptions())
            let victimAddress = try cluster.psql("SELECT encode(address, 'hex') FROM lockbox.items").trimmingCharacters(
                in: .whitespacesAndNewlines)
            try await store.set(secret("bob's secret"), for: bystander, options: ItemOptions())
            let bystanderAddress = try cluster.psql(
                "SELECT encode(address, 'hex') FROM lockbox.items WHERE address <> '\\x\(victimAddress)'"
            )
            .trimmingCharacters(in: .whitespacesAndNewlines)
            let saved = try cluster.psql(
                "SELECT encode(metadata, 'hex') || ' ' || encode(secret, 'hex') FROM lockbox.items WHERE address = '\\x\(victimAddress)'"
            )
            .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").map(String.init)
            func restore() throws {
                _ = try cluster.psql(
                    "UPDATE lockbox.items SET metadata = '\\x\(saved[0])', secret = '\\x\(saved[1])' WHERE address = '\\x\(victimAddress)'")
            }

            // One bit flipped in the secret's ciphertext, its tag, its nonce; in the metadata.
            for (column, position) in [("secret", 30), ("secret", saved[1].count / 2 - 1), ("secret", 0), ("metadata", 40)] {
                _ = try cluster.psql(
                    """
                    UPDATE lockbox.items SET \(column) = set_byte(\(column), \(position), get_byte(\(column), \(position)) # 1)
                    WHERE address = '\\x\(victimAddress)'
                    """)
                #expect(lockboxCode(await thrown { try await store.get(victim) }) == .corruptVault, "\(column) byte \(position)")
                #expect(text(try await store.get(bystander)) == "bob's secret")
                try restore()
                #expect(text(try await store.get(victim)) == "ada's secret")
            }
            // Truncated to nothing.
            _ = try cluster.psql("UPDATE lockbox.items SET secret = '\\x' WHERE address = '\\x\(victimAddress)'")
            #expect(lockboxCode(await thrown { try await store.get(victim) }) == .corruptVault)
            try restore()

            // The victim's row copied over the bystander's address: both columns, or the secret alone.
            _ = try cluster.psql(
                "UPDATE lockbox.items SET metadata = '\\x\(saved[0])', secret = '\\x\(saved[1])' WHERE address = '\\x\(bystanderAddress)'")
            #expect(lockboxCode(await thrown { try await store.get(bystander) }) == .corruptVault)
            #expect(lockboxCode(await thrown { try await store.metadata(bystander) }) == .corruptVault)
            #expect(lockboxCode(await thrown { try await store.list(service: nil) }) == .corruptVault)
            // A row that fails authentication is not overwritten in place (its creation time cannot be
            // read): it is deleted, then written anew.
            #expect(
                lockboxCode(await thrown { try await store.set(secret("bob's new secret"), for: bystander, options: ItemOptions()) })
                    == .corruptVault)
            #expect(try await store.delete(bystander))
            try await store.set(secret("bob's new secret"), for: bystander, options: ItemOptions())
            _ = try cluster.psql("UPDATE lockbox.items SET secret = '\\x\(saved[1])' WHERE address = '\\x\(bystanderAddress)'")
            #expect(lockboxCode(await thrown { try await store.get(bystander) }) == .corruptVault)
            #expect(try await store.metadata(bystander)?.key == bystander)
            // A row of one item's metadata with another's secret (same address): its metadata nonce
            // is bound into the secret, so it fails too.
            #expect(text(try await store.get(victim)) == "ada's secret")
            await store.shutdown()
        }

        /// A read finds a row only at the addresses of the key that sealed it, so it reads no key
        /// check when it finds one; when it finds none, the key check tells an absent item from a
        /// data key that changed, and a write that expected a row that is gone checks the key
        /// before it inserts. Here the vault is replaced under an open handle by another vault
        /// (another data key and slot salts, the same credentials): the handle cannot reopen it.
        @Test func aHandleWhoseDataKeyIsGoneNeitherReadsNothingNorWritesUnderIt() async throws {
            guard let cluster = try Cluster.current("replaced data key") else { return }
            let before = try await makeStore(cluster)
            let known = ItemKey(service: "bank", account: "ada")
            try await before.set(secret("old"), for: known, options: ItemOptions())
            #expect(text(try await before.get(known)) == "old")
            _ = try cluster.psql("DELETE FROM lockbox.items; DELETE FROM lockbox.key_slots; DELETE FROM lockbox.vault")
            let after = try await makeStore(cluster)
            try await after.set(secret("new"), for: known, options: ItemOptions())

            func changed(_ error: (any Error)?) -> Bool {
                if case .credentialsChanged? = error as? LockboxError { return true }
                return false
            }
            #expect(changed(await thrown { try await before.get(known) }))
            #expect(changed(await thrown { try await before.metadata(known) }))
            #expect(changed(await thrown { try await before.get(ItemKey(service: "bank", account: "nobody")) }))
            #expect(changed(await thrown { try await before.set(secret("stale"), for: known, options: ItemOptions()) }))
            let unknown = ItemKey(service: "x", account: "y")
            #expect(changed(await thrown { try await before.set(secret("stale"), for: unknown, options: ItemOptions()) }))
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.items").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
            #expect(text(try await after.get(known)) == "new")
            await before.shutdown()
            await after.shutdown()
        }

        @Test func anUnreachableDatabaseGivesATypedErrorInBoundedTime() async throws {
            guard let cluster = try Cluster.current("unreachable database") else { return }
            // A closed port (connection refused on every try), and a port that accepts TCP but never
            // answers (the kernel completes the handshake for a listening socket nobody reads).
            let refusedPort = try freePort()
            let (silentSocket, silentPort) = try silentListener()
            defer { close(silentSocket) }
            for port in [refusedPort, silentPort] {
                var url = cluster.url
                url.port = port
                url.tlsMode = .disable
                let start = ContinuousClock.now
                let error = await thrown { try await PostgresStore.open(url, credentials: [.key(Self.key)], operationTimeout: .seconds(2)) }
                let waited = ContinuousClock.now - start
                guard case .unavailable(let server, _, let seconds)? = error as? PostgresStoreError else {
                    Issue.record("port \(port): expected unavailable, got \(String(describing: error))")
                    continue
                }
                #expect(server == url.description && seconds == 2)
                #expect(waited < .seconds(6), "port \(port): waited \(waited)")
                #expect(!"\(error!)".contains(cluster.url.password ?? "no password"))
            }
            // An open store whose server stops answering: the next call is bounded too.
            let store = try await PostgresStore.create(cluster.url, credentials: [.key(Self.key)], operationTimeout: .seconds(2))
            try await store.set(secret("v"), for: ItemKey(service: "s", account: "a"), options: ItemOptions())
            await store.shutdown()
            let error = await thrown { try await store.get(ItemKey(service: "s", account: "a")) }
            #expect(error is PostgresStoreError, "after shutdown: \(String(describing: error))")
        }

        @Test func aConnectionDroppedMidTransactionWritesNothingAndTheNextCallReconnects() async throws {
            guard let cluster = try Cluster.current("connection dropped mid-transaction") else { return }
            let store = try await makeStore(cluster)
            let written = ItemKey(service: "drop", account: "first")
            let held = ItemKey(service: "drop", account: "held")
            try await store.set(secret("old"), for: held, options: ItemOptions())

            // Another session holds `held`'s row lock, so the store's transaction stops there, after
            // its first write and before its commit.
            let blocker = Process()
            blocker.executableURL = URL(fileURLWithPath: cluster.ctl)
            blocker.arguments = ["psql", "primary", "BEGIN; SELECT 1 FROM lockbox.items FOR UPDATE; SELECT pg_sleep(120); COMMIT"]
            blocker.standardOutput = FileHandle.nullDevice
            blocker.standardError = FileHandle.nullDevice
            try blocker.run()
            defer {
                _ = try? cluster.psql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()")
                blocker.waitUntilExit()
            }
            // Wait until the blocker holds the lock: in its pg_sleep (the query text shows from the
            // start of the batch, before the FOR UPDATE has run; the wait event only in the sleep).
            let sleeping =
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(120)%' AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()"
            for _ in 0..<400 {
                if try cluster.psql(sleeping).trimmingCharacters(in: .whitespacesAndNewlines) == "1" { break }
                try await Task.sleep(for: .milliseconds(50))
            }

            let writing = Task { try await store.set([ItemWrite(secret("new"), for: written), ItemWrite(secret("new"), for: held)]) }
            // The store's backend waiting on the lock: its transaction has written `written`'s row.
            let waiting = """
                SELECT pid FROM pg_stat_activity WHERE usename = 'lockbox' AND wait_event_type = 'Lock' AND backend_xid IS NOT NULL
                """
            var backend = ""
            for _ in 0..<400 {
                backend = try cluster.psql(waiting).trimmingCharacters(in: .whitespacesAndNewlines)
                if !backend.isEmpty { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            try #require(!backend.isEmpty && !backend.contains("\n"), "the store's transaction never waited on the lock")
            #expect(try cluster.psql("SELECT pg_terminate_backend(\(backend))").contains("t"))

            let error = await thrown { try await writing.value }
            guard case .connectionLost? = error as? PostgresStoreError else {
                Issue.record("expected connectionLost, got \(String(describing: error))")
                return
            }
            #expect(!"\(error!)".contains(cluster.url.password ?? "no password"))
            // Nothing of the transaction was committed; the next calls connect anew, even while the
            // blocker still holds its lock (reads do not wait for it).
            #expect(try await store.get(written) == nil)
            #expect(text(try await store.get(held)) == "old")
            _ = try cluster.psql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()")
            try await store.set([ItemWrite(secret("new"), for: written), ItemWrite(secret("new"), for: held)])
            #expect(text(try await store.get(written)) == "new")
            #expect(text(try await store.get(held)) == "new")
            await store.shutdown()
        }

        @Test func connectionURLsComeFromPrivateFilesAndNeverShowThePassword() throws {
            let url = try PostgresConnectionURL(
                parsing: "postgresql://fleet:p%40ss%2Fword@db.example:6543/vaults?sslmode=require&connect_timeout=3")
            #expect(url.user == "fleet" && url.password == "p@ss/word" && url.host == "db.example" && url.port == 6543)
            #expect(url.database == "vaults" && url.tlsMode == .require && url.connectTimeout == .seconds(3))
            #expect(url.description == "postgresql://fleet@db.example:6543/vaults")
            #expect(try PostgresConnectionURL(parsing: "postgres://u@[::1]/d").host == "::1")
            for bad in [
                "http://u@h/d", "postgresql://u@h", "postgresql://h/d", "postgresql://u@h:0/d", "postgresql://u@h:99999/d",
                "postgresql://u@h/d?sslmode=maybe", "postgresql://u@h/d?host=evil",
                "postgresql://u@h/d?connect_timeout=0",
            ] {
                let error = #expect(throws: LockboxError.self, "\(bad)") { try PostgresConnectionURL(parsing: bad) }
                #expect(error?.code == .invalidArgument)
            }

            let folder = FilePath(NSTemporaryDirectory()).appending("lockbox-pg-url-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(atPath: folder.string, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder.string) }
            let file = folder.appending("url")
            _ = FileManager.default.createFile(
                atPath: file.string, contents: Data("postgresql://u:sekrit@h/d\n".utf8), attributes: [.posixPermissions: 0o600])
            #expect(try PostgresConnectionURL.read(fromFile: file).password == "sekrit")
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.string)
            let loose = #expect(throws: LockboxError.self) { try PostgresConnectionURL.read(fromFile: file) }
            #expect(loose?.code == .insecurePermissions && !"\(loose!)".contains("sekrit"))
            let notFile = #expect(throws: LockboxError.self) { try PostgresConnectionURL.read(fromFile: folder) }
            #expect(notFile?.code == .invalidArgument)
            #expect(
                try PostgresConnectionURL.read(fromEnvironment: "LOCKBOX_PG", environment: ["LOCKBOX_PG": "postgresql://u@h/d"]).host == "h"
            )
            #expect(throws: LockboxError.self) { try PostgresConnectionURL.read(fromEnvironment: "LOCKBOX_PG", environment: [:]) }
        }
    }

    /// A loopback port nothing listens on (bound, then closed).
    func freePort() throws -> Int {
        let (socket, port) = try silentListener()
        close(socket)
        return port
    }

    /// A listening loopback TCP socket that never accepts, and its port.
    private func silentListener() throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Errno(rawValue: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw Errno(rawValue: errno)
        }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    extension PostgresStoreTests {
        @Test func concurrentWritersOverFewItemsAllFinishAndEachItemHoldsOneOfItsWrites() async throws {
            guard let cluster = try Cluster.current("contended writes") else { return }
            let store = try await makeStore(cluster)
            defer { Task { await store.shutdown() } }
            let keys = (0..<4).map { ItemKey(service: "contended.example", account: "a\($0)") }
            // 16 writers × 25 sets over 4 items: every set returns, each item holds one of its writes.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<16 {
                    group.addTask {
                        for round in 0..<25 {
                            try await store.set(secret("w\(writer)-r\(round)"), for: keys[(writer + round) % 4], options: ItemOptions())
                        }
                    }
                }
                try await group.waitForAll()
            }
            for key in keys {
                let value = try #require(text(try await store.get(key)))
                #expect(value.hasPrefix("w") && value.contains("-r"))
            }
            #expect(try cluster.psql("SELECT count(*) FROM lockbox.items") == "4\n")
        }
    }
#endif
