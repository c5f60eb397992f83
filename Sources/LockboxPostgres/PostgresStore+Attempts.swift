#if PostgreSQL
    import Foundation
    import Lockbox
    import PostgresNIO

    /// PIN lockouts that hold across hosts: the counts live in `lockbox.pin_attempts` and the database
    /// decides, from `clock_timestamp()`, whether a guess may be evaluated (docs/ARCHITECTURE.md,
    /// "PIN attempts across hosts").
    ///
    /// A row is addressed by the keyed address of the profile's attempt key (no service or profile
    /// name in clear, and unlinkable to the PIN record's row without the vault key); its count and
    /// last attempt are in clear, because the database must read them to decide. Sealing them would
    /// add nothing against the database's writer: whoever can write the table can already reset a
    /// count by deleting the row or writing back an older sealed value.
    extension PostgresStore: PinAttemptLedger {
        /// One statement, one round trip: `CALL lockbox.count_pin_attempt`, which locks the row, takes
        /// the decision from the database's clock, counts the guess and COMMITs (waiting for a
        /// synchronous standby) before it sends the decision back. A decision is never read before the
        /// count is durable: if the primary dies first, this throws
        /// ``PostgresStoreError/connectionLost(server:operation:)`` and the guess is not evaluated.
        public func beginPinAttempt(_ key: ItemKey, lockout: LockoutPolicy) async throws -> PinAttemptDecision {
            try await run("counting a PIN attempt") { store in
                let address = ByteBuffer(bytes: store.records.address(key))
                let rows = try await store.client.query(
                    "CALL lockbox.count_pin_attempt(\(address), \(lockout.delays), \(Int32(lockout.evaluationLimit)), NULL, NULL, NULL, NULL)",
                    logger: store.logger)
                var decision: PinAttemptDecision?
                for try await (evaluate, counted, decidedAt, lockedUntil) in rows.decode((Bool?, Int32?, Date?, Date?).self) {
                    guard let evaluate, let counted, let decidedAt else { continue }
                    decision = PinAttemptDecision(
                        evaluate: evaluate, failures: Int(counted), decidedAt: decidedAt, lockedUntil: lockedUntil)
                }
                guard let decision else {
                    throw LockboxError.corruptVault(path: store.server, reason: "the PIN attempt counter returned no row")
                }
                return decision
            }
        }

        /// Deletes the profile's count (a right PIN, a reset, a new or removed PIN); returns once the
        /// deletion is committed (`CALL lockbox.clear_pin_attempts`, one round trip).
        public func recordPinSuccess(_ key: ItemKey) async throws {
            try await run("clearing PIN attempts") { store in
                let rows = try await store.client.query(
                    "CALL lockbox.clear_pin_attempts(\(ByteBuffer(bytes: store.records.address(key))), NULL)", logger: store.logger)
                for try await _ in rows.decode(Bool?.self) {}
            }
        }

        /// The profile's count, last attempt and the database's clock, read in one statement.
        public func pinAttempts(_ key: ItemKey) async throws -> PinAttemptState {
            try await run("reading PIN attempts") { store in
                let address = ByteBuffer(bytes: store.records.address(key))
                let rows = try await store.client.query(
                    """
                    SELECT (SELECT failures::int8 FROM lockbox.pin_attempts WHERE address = \(address)),
                           (SELECT last_attempt FROM lockbox.pin_attempts WHERE address = \(address)),
                           clock_timestamp()
                    """, logger: store.logger)
                var state = PinAttemptState(failures: 0, lastAttempt: nil, readAt: Date())
                for try await (failures, last, now) in rows.decode((Int?, Date?, Date).self) {
                    state = PinAttemptState(failures: failures ?? 0, lastAttempt: last, readAt: now)
                }
                return state
            }
        }
    }
#endif
