#if PostgreSQL
    import Lockbox
    import Logging
    import PostgresNIO

    /// The tables a ``PostgresStore`` keeps, in the schema `lockbox`, and the versioned migrations
    /// that make them (docs/ARCHITECTURE.md, "PostgreSQL store").
    ///
    /// The missing migrations run in one transaction under a transaction-scoped advisory lock, each
    /// recording its version in `lockbox.schema_migrations`: running them again (every open does)
    /// changes nothing and, at the current version, only reads the version; hosts starting together
    /// apply each exactly once.
    enum PostgresSchema {
        /// The newest schema version this code knows.
        static var currentVersion: Int { migrations.count }

        /// `pg_advisory_xact_lock` key: "LKBX" followed by "MIGR".
        static let migrationLock: Int64 = 0x4C4B_4258_4D49_4752

        /// Migration N (1-based) is `migrations[N - 1]`: statements run in order, once. Never edit a
        /// released one; append.
        static let migrations: [[PostgresQuery]] = [
            // 1: the vault row (vault ID, key check), key slots (one row each, the format-2 slot
            // encoding) and items (keyed address, sealed metadata, sealed secret).
            [
                """
                CREATE TABLE lockbox.vault (
                    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                    format_version smallint NOT NULL,
                    vault_id bytea NOT NULL CHECK (length(vault_id) = 16),
                    key_check bytea NOT NULL CHECK (length(key_check) = 32)
                )
                """,
                "CREATE TABLE lockbox.key_slots (slot_id integer PRIMARY KEY CHECK (slot_id >= 0), slot bytea NOT NULL)",
                """
                CREATE TABLE lockbox.items (
                    address bytea PRIMARY KEY CHECK (length(address) = 32),
                    metadata bytea NOT NULL,
                    secret bytea NOT NULL
                )
                """,
            ],
            // 2: PIN attempt counters (PostgresStore+Attempts.swift): a keyed address (of another item
            // key than the PIN record's), the count and the last attempt in clear, because the database
            // decides from them; and the function that counts a guess in one statement.
            [
                """
                CREATE TABLE lockbox.pin_attempts (
                    address bytea PRIMARY KEY CHECK (length(address) = 32),
                    failures integer NOT NULL CHECK (failures BETWEEN 0 AND 100),
                    last_attempt timestamptz
                )
                """,
                """
                CREATE FUNCTION lockbox.begin_pin_attempt(
                    attempt_address bytea, delays float8[], disable_after integer,
                    OUT evaluate boolean, OUT counted integer, OUT decided_at timestamptz, OUT locked_until timestamptz
                ) LANGUAGE plpgsql AS $body$
                DECLARE
                    previous integer;
                    last timestamptz;
                    delay float8;
                BEGIN
                    INSERT INTO lockbox.pin_attempts AS a (address, failures, last_attempt) VALUES (attempt_address, 0, NULL)
                        ON CONFLICT (address) DO NOTHING;
                    SELECT a.failures, a.last_attempt INTO previous, last
                        FROM lockbox.pin_attempts a WHERE a.address = attempt_address FOR UPDATE;
                    -- Read after the row lock: time spent waiting behind another host's guess counts.
                    decided_at := clock_timestamp();
                    IF previous >= disable_after THEN
                        evaluate := false; counted := previous; locked_until := NULL;
                        RETURN;
                    END IF;
                    IF previous > 0 AND last IS NOT NULL THEN
                        IF last > decided_at THEN
                            -- The database's clock went back: the delay restarts from now.
                            UPDATE lockbox.pin_attempts a SET last_attempt = decided_at WHERE a.address = attempt_address;
                            last := decided_at;
                        END IF;
                        delay := delays[least(previous, cardinality(delays))];
                        IF last + delay * interval '1 second' > decided_at THEN
                            evaluate := false; counted := previous; locked_until := last + delay * interval '1 second';
                            RETURN;
                        END IF;
                    END IF;
                    UPDATE lockbox.pin_attempts a SET failures = previous + 1, last_attempt = decided_at WHERE a.address = attempt_address;
                    evaluate := true; counted := previous + 1; locked_until := NULL;
                END
                $body$
                """,
            ],
            // 3: refresh leases (PostgresStore+Leases.swift): a keyed address (of another item key
            // than the tokens' row), a fence from a sequence, and the expiry by the database's clock.
            [
                "CREATE SEQUENCE lockbox.refresh_lease_fences",
                """
                CREATE TABLE lockbox.refresh_leases (
                    address bytea PRIMARY KEY CHECK (length(address) = 32),
                    fence bigint NOT NULL,
                    expires_at timestamptz NOT NULL
                )
                """,
            ],
            // 4: begin_pin_attempt again, with one change: a count row deleted by another host (a
            // right PIN, a reset) between this guess's INSERT … DO NOTHING and its SELECT … FOR UPDATE
            // left the SELECT with no row, the guess uncounted and a NULL count returned (the caller
            // failed). Now it inserts and locks again until it holds a row. Migration 2 stays as
            // released (migrations are never edited), so the whole function is restated here.
            [
                """
                CREATE OR REPLACE FUNCTION lockbox.begin_pin_attempt(
                    attempt_address bytea, delays float8[], disable_after integer,
                    OUT evaluate boolean, OUT counted integer, OUT decided_at timestamptz, OUT locked_until timestamptz
                ) LANGUAGE plpgsql AS $body$
                DECLARE
                    previous integer;
                    last timestamptz;
                    delay float8;
                BEGIN
                    LOOP
                        INSERT INTO lockbox.pin_attempts AS a (address, failures, last_attempt) VALUES (attempt_address, 0, NULL)
                            ON CONFLICT (address) DO NOTHING;
                        SELECT a.failures, a.last_attempt INTO previous, last
                            FROM lockbox.pin_attempts a WHERE a.address = attempt_address FOR UPDATE;
                        EXIT WHEN FOUND;
                    END LOOP;
                    -- Read after the row lock: time spent waiting behind another host's guess counts.
                    decided_at := clock_timestamp();
                    IF previous >= disable_after THEN
                        evaluate := false; counted := previous; locked_until := NULL;
                        RETURN;
                    END IF;
                    IF previous > 0 AND last IS NOT NULL THEN
                        IF last > decided_at THEN
                            -- The database's clock went back: the delay restarts from now.
                            UPDATE lockbox.pin_attempts a SET last_attempt = decided_at WHERE a.address = attempt_address;
                            last := decided_at;
                        END IF;
                        delay := delays[least(previous, cardinality(delays))];
                        IF last + delay * interval '1 second' > decided_at THEN
                            evaluate := false; counted := previous; locked_until := last + delay * interval '1 second';
                            RETURN;
                        END IF;
                    END IF;
                    UPDATE lockbox.pin_attempts a SET failures = previous + 1, last_attempt = decided_at WHERE a.address = attempt_address;
                    evaluate := true; counted := previous + 1; locked_until := NULL;
                END
                $body$
                """
            ],
            // 5: the statements whose result a host acts on, as procedures that COMMIT before they
            // return it. An autocommit statement's rows (and its CommandComplete) reach the client
            // before the implicit commit at Sync, which waits for the synchronous standby: a host
            // could evaluate a guess, or hold a lease, that a failover at that moment loses. A
            // procedure's OUT row is sent after its COMMIT returned, and that COMMIT waits for the
            // standby, so the row is the acknowledgement: one round trip, durable before it is read.
            // Called with CALL outside any transaction block (a procedure may COMMIT only there).
            [
                """
                CREATE PROCEDURE lockbox.count_pin_attempt(
                    attempt_address bytea, delays float8[], evaluation_limit integer,
                    OUT evaluate boolean, OUT counted integer, OUT decided_at timestamptz, OUT locked_until timestamptz
                ) LANGUAGE plpgsql AS $body$
                BEGIN
                    SELECT d.evaluate, d.counted, d.decided_at, d.locked_until INTO evaluate, counted, decided_at, locked_until
                        FROM lockbox.begin_pin_attempt(attempt_address, delays, evaluation_limit) d;
                    COMMIT;
                END
                $body$
                """,
                """
                CREATE PROCEDURE lockbox.clear_pin_attempts(attempt_address bytea, OUT cleared boolean)
                LANGUAGE plpgsql AS $body$
                BEGIN
                    DELETE FROM lockbox.pin_attempts a WHERE a.address = attempt_address;
                    cleared := FOUND;
                    COMMIT;
                END
                $body$
                """,
                """
                CREATE PROCEDURE lockbox.take_refresh_lease(
                    lease_address bytea, lease_seconds float8, OUT taken_fence bigint, OUT taken_until timestamptz
                ) LANGUAGE plpgsql AS $body$
                BEGIN
                    INSERT INTO lockbox.refresh_leases AS l (address, fence, expires_at)
                        VALUES (lease_address, nextval('lockbox.refresh_lease_fences'), clock_timestamp() + lease_seconds * interval '1 second')
                        ON CONFLICT (address) DO UPDATE SET fence = EXCLUDED.fence, expires_at = EXCLUDED.expires_at
                            WHERE l.expires_at <= clock_timestamp()
                        RETURNING l.fence, l.expires_at INTO taken_fence, taken_until;
                    COMMIT;
                END
                $body$
                """,
                """
                CREATE PROCEDURE lockbox.end_refresh_lease(lease_address bytea, lease_fence bigint, OUT ended boolean)
                LANGUAGE plpgsql AS $body$
                BEGIN
                    DELETE FROM lockbox.refresh_leases l WHERE l.address = lease_address AND l.fence = lease_fence;
                    ended := FOUND;
                    COMMIT;
                END
                $body$
                """,
            ],
            // 6: a plain write in one round trip (PostgresStore.set): the key check (the vault row
            // FOR SHARE, so that a data-key rotation waits), the compare-and-set of the item's row
            // against the sealed metadata the host last saw there (which holds the creation time the
            // new row keeps), and the COMMIT, before the outcome is sent. Outcome 0: written and
            // committed; 1: the row is not what the host expected (nothing written; its current
            // metadata, or NULL when there is none, comes back so the host can seal again and
            // retry); 2: the vault's key check is another one (rotated); 3: no vault row.
            [
                """
                CREATE PROCEDURE lockbox.put_item(
                    item_address bytea, writer_key_check bytea, expected_metadata bytea, new_metadata bytea, new_secret bytea,
                    OUT outcome integer, OUT found_metadata bytea
                ) LANGUAGE plpgsql AS $body$
                DECLARE
                    vault_check bytea;
                BEGIN
                    SELECT v.key_check INTO vault_check FROM lockbox.vault v FOR SHARE;
                    IF NOT FOUND THEN
                        outcome := 3;
                        RETURN;
                    END IF;
                    IF vault_check <> writer_key_check THEN
                        outcome := 2;
                        RETURN;
                    END IF;
                    IF expected_metadata IS NULL THEN
                        INSERT INTO lockbox.items (address, metadata, secret) VALUES (item_address, new_metadata, new_secret)
                            ON CONFLICT (address) DO NOTHING;
                    ELSE
                        UPDATE lockbox.items i SET metadata = new_metadata, secret = new_secret
                            WHERE i.address = item_address AND i.metadata = expected_metadata;
                    END IF;
                    IF NOT FOUND THEN
                        SELECT i.metadata INTO found_metadata FROM lockbox.items i WHERE i.address = item_address;
                        outcome := 1;
                        RETURN;
                    END IF;
                    outcome := 0;
                    COMMIT;
                END
                $body$
                """
            ],
            // 7: put_item again, with one change: the key check no longer locks the vault row. A
            // share lock on a row is written into the row (and with several writers at once into a
            // multixact), so every write dirtied the one vault row that every other write locks too.
            // Now the procedure first takes lockbox.items' ROW EXCLUSIVE lock (the lock its write
            // takes anyway, held in memory), then reads the key check, in a snapshot taken after
            // that lock: a data-key rotation (docs/ARCHITECTURE.md, "PostgreSQL store") takes the
            // vault row FOR UPDATE and then lockbox.items IN SHARE MODE before it changes the key
            // check, so either it waits for this write's commit or this write sees its key check.
            // The outcomes are those of migration 6.
            [
                """
                CREATE OR REPLACE PROCEDURE lockbox.put_item(
                    item_address bytea, writer_key_check bytea, expected_metadata bytea, new_metadata bytea, new_secret bytea,
                    OUT outcome integer, OUT found_metadata bytea
                ) LANGUAGE plpgsql AS $body$
                DECLARE
                    vault_check bytea;
                BEGIN
                    LOCK TABLE lockbox.items IN ROW EXCLUSIVE MODE;
                    SELECT v.key_check INTO vault_check FROM lockbox.vault v;
                    IF NOT FOUND THEN
                        outcome := 3;
                        RETURN;
                    END IF;
                    IF vault_check <> writer_key_check THEN
                        outcome := 2;
                        RETURN;
                    END IF;
                    IF expected_metadata IS NULL THEN
                        INSERT INTO lockbox.items (address, metadata, secret) VALUES (item_address, new_metadata, new_secret)
                            ON CONFLICT (address) DO NOTHING;
                    ELSE
                        UPDATE lockbox.items i SET metadata = new_metadata, secret = new_secret
                            WHERE i.address = item_address AND i.metadata = expected_metadata;
                    END IF;
                    IF NOT FOUND THEN
                        SELECT i.metadata INTO found_metadata FROM lockbox.items i WHERE i.address = item_address;
                        outcome := 1;
                        RETURN;
                    END IF;
                    outcome := 0;
                    COMMIT;
                END
                $body$
                """
            ],
        ]

        /// The privileges the application role needs, and no more (docs/POSTGRES.md, "Two roles"):
        /// the schema's tables for reading and writing rows, the sequence of lease fences, the
        /// functions and procedures. Run again after each `migrate-schema` (a new migration's
        /// tables are not covered by an earlier `ON ALL TABLES`).
        static func applicationRoleGrants(_ role: String) -> [String] {
            [
                "GRANT USAGE ON SCHEMA lockbox TO \(role)",
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA lockbox TO \(role)",
                "GRANT USAGE ON ALL SEQUENCES IN SCHEMA lockbox TO \(role)",
                "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA lockbox TO \(role)",
                "GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA lockbox TO \(role)",
            ]
        }

        /// The schema version the database is at: 0 without a `lockbox.schema_migrations` table.
        /// Reads only (two statements, no lock, no DDL).
        static func version(on connection: PostgresConnection, logger: Logger) async throws -> Int {
            var exists = false
            for try await found in try await connection.query(
                "SELECT to_regclass('lockbox.schema_migrations') IS NOT NULL", logger: logger
            ).decode(Bool.self) { exists = found }
            guard exists else { return 0 }
            var newest = 0
            for try await found in try await connection.query(
                "SELECT coalesce(max(version), 0)::int8 FROM lockbox.schema_migrations", logger: logger
            ).decode(Int.self) { newest = found }
            return newest
        }

        /// Throws ``PostgresStoreError/schemaNotCurrent(server:found:required:)`` unless the
        /// database is at ``currentVersion`` (``PostgresStoreError/schemaTooNew(server:found:supported:)``
        /// if newer). Reads only: what open does for a role with only DML and EXECUTE.
        static func requireCurrent(_ client: PostgresClient, logger: Logger, server: String) async throws {
            try await client.withConnection { connection in
                let found = try await version(on: connection, logger: logger)
                guard found <= currentVersion else {
                    throw PostgresStoreError.schemaTooNew(server: server, found: found, supported: currentVersion)
                }
                guard found == currentVersion else {
                    throw PostgresStoreError.schemaNotCurrent(server: server, found: found, required: currentVersion)
                }
            }
        }

        /// Creates the schema and applies every migration the database lacks. Throws
        /// ``PostgresStoreError/schemaTooNew(server:found:supported:)`` if the database has one this
        /// code does not know.
        ///
        /// A database already at ``currentVersion`` is only read (``version(on:logger:)``: no lock,
        /// no DDL). Otherwise one transaction under the advisory lock creates the schema and the
        /// version table if missing, reads the version again (another host may have migrated
        /// meanwhile), and applies every missing migration in order, each recording its version: all
        /// of them or none, and hosts starting together apply each exactly once.
        static func migrate(_ client: PostgresClient, logger: Logger, server: String) async throws {
            try await client.withConnection { connection in
                let found = try await version(on: connection, logger: logger)
                guard found <= currentVersion else {
                    throw PostgresStoreError.schemaTooNew(server: server, found: found, supported: currentVersion)
                }
                guard found < currentVersion else { return }
                // IF NOT EXISTS under the lock: two hosts creating the schema at once would otherwise
                // collide on the catalog's unique index.
                try await PostgresStore.transaction(on: connection, logger: logger) { connection in
                    try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
                    try await connection.query("CREATE SCHEMA IF NOT EXISTS lockbox", logger: logger)
                    try await connection.query(
                        """
                        CREATE TABLE IF NOT EXISTS lockbox.schema_migrations (
                            version integer PRIMARY KEY,
                            applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
                        )
                        """, logger: logger)
                    let newest = try await version(on: connection, logger: logger)
                    guard newest <= currentVersion else {
                        throw PostgresStoreError.schemaTooNew(server: server, found: newest, supported: currentVersion)
                    }
                    for (index, statements) in migrations.enumerated() where index + 1 > newest {
                        for statement in statements { try await connection.query(statement, logger: logger) }
                        try await connection.query("INSERT INTO lockbox.schema_migrations (version) VALUES (\(index + 1))", logger: logger)
                    }
                }
            }
        }
    }
#endif
