#if PostgreSQL
    import Foundation
    import Lockbox
    import PostgresNIO

    /// Token refreshes that happen once across hosts: a lease row per item in
    /// `lockbox.refresh_leases` (docs/ARCHITECTURE.md, "Refresh leases across hosts").
    ///
    /// A row, not an advisory lock: a transaction-scoped advisory lock would have to stay open, with
    /// its connection, for the whole call to the token endpoint, and a session-scoped one dies with
    /// the connection rather than the host (a pooled connection outlives the task that took it). A row
    /// with an expiry on the database's clock survives reconnections, and a dead host's lease simply
    /// runs out. Each lease gets a fence from a sequence; storing the new tokens deletes the lease row
    /// *with that fence* and writes the tokens in the same transaction, so a host that stalled past
    /// its lease (the row taken over by another host) stores nothing.
    ///
    /// The row is addressed by the keyed address of another item key than the tokens' own (no service
    /// or account name in clear, and unlinkable to the tokens' row without the vault key); the fence
    /// and the expiry are in clear, because the database decides from them.
    extension PostgresStore: RefreshLeasing {
        /// One statement, one round trip (`CALL lockbox.take_refresh_lease`): inserts the lease, or
        /// takes over an expired one, COMMITs (waiting for a synchronous standby) and only then
        /// returns it; `nil` while another holder's lease is live. Two hosts at once: the second waits
        /// for the first's row and then finds it live. A lease is never returned before it is durable:
        /// a failover at that moment makes this throw, and the promoted standby has no lease a host
        /// does not know about.
        public func acquireRefreshLease(_ key: ItemKey, for duration: Duration) async throws -> RefreshLease? {
            let seconds = duration.seconds
            guard seconds.isFinite, seconds >= 0.001, seconds <= 86_400 else {
                throw LockboxError.invalidArgument("a refresh lease must last from 1 ms to 1 day, not \(duration)")
            }
            return try await run("taking a refresh lease") { store in
                let address = ByteBuffer(bytes: store.records.address(Self.leaseKey(key)))
                let rows = try await store.client.query(
                    "CALL lockbox.take_refresh_lease(\(address), \(seconds), NULL, NULL)", logger: store.logger)
                var lease: RefreshLease?
                for try await (fence, expires) in rows.decode((Int64?, Date?).self) {
                    if let fence, let expires { lease = RefreshLease(key: key, fence: fence, expires: expires) }
                }
                return lease
            }
        }

        /// One transaction: the lease row with this fence deleted, and only then the tokens written.
        public func completeRefresh(_ lease: RefreshLease, storing secret: SecretBytes, for key: ItemKey, options: ItemOptions) async throws
            -> Bool
        {
            try ItemLimits.validate(key, options: options, secretCount: secret.count)
            let time = VaultPayload.date(milliseconds: VaultPayload.milliseconds(now()))
            return try await run("storing refreshed tokens") { store in
                try await store.writing { connection, records in
                    let address = ByteBuffer(bytes: records.address(Self.leaseKey(lease.key)))
                    var held = false
                    for try await _ in try await connection.query(
                        "DELETE FROM lockbox.refresh_leases WHERE address = \(address) AND fence = \(lease.fence) RETURNING true",
                        logger: store.logger
                    ).decode(Bool.self) { held = true }
                    guard held else { return false }
                    try await store.upsert([ItemWrite(secret, for: key, options: options)], at: time, on: connection, records)
                    return true
                }
            }
        }

        /// Deletes the lease row if it still has this fence; returns once that is committed
        /// (`CALL lockbox.end_refresh_lease`, one round trip).
        public func releaseRefreshLease(_ lease: RefreshLease) async throws {
            try await run("ending a refresh lease") { store in
                let address = ByteBuffer(bytes: store.records.address(Self.leaseKey(lease.key)))
                let rows = try await store.client.query(
                    "CALL lockbox.end_refresh_lease(\(address), \(lease.fence), NULL)", logger: store.logger)
                for try await _ in rows.decode(Bool?.self) {}
            }
        }

        /// The item key whose keyed address names `key`'s lease row.
        static func leaseKey(_ key: ItemKey) -> ItemKey {
            ItemKey(service: key.service, account: "refresh-lease:" + key.account)
        }
    }
#endif
