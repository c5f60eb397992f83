#if PostgreSQL
    import Foundation
    import Lockbox
    import PostgresNIO

    /// First writes that agree across hosts (device IDs): the row is inserted with
    /// `ON CONFLICT DO NOTHING`, which waits for a concurrent inserter of the same address to commit
    /// or roll back; if another won, its row is read in the same transaction.
    extension PostgresStore: FirstWriteWinsStore {
        /// Stores `secret` under `key` unless an item is there (then returns that item's secret),
        /// in one transaction.
        public func setIfAbsent(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) async throws -> SecretBytes? {
            try ItemLimits.validate(key, options: options, secretCount: secret.count)
            let time = VaultPayload.date(milliseconds: VaultPayload.milliseconds(now()))
            return try await run("creating an item") { store in
                try await store.writing { connection, records in
                    let address = records.address(key)
                    let addressBytes = ByteBuffer(bytes: address)
                    let columns = store.sealed(secret, for: key, options: options, created: time, modified: time, address: address, records)
                    var inserted = false
                    for try await _ in try await connection.query(
                        """
                        INSERT INTO lockbox.items (address, metadata, secret)
                        VALUES (\(addressBytes), \(ByteBuffer(bytes: columns.metadata)), \(ByteBuffer(bytes: columns.secret)))
                        ON CONFLICT (address) DO NOTHING RETURNING true
                        """, logger: store.logger
                    ).decode(Bool.self) { inserted = true }
                    if inserted { return nil }
                    var found: (ByteBuffer, ByteBuffer)?
                    for try await row in try await connection.query(
                        "SELECT metadata, secret FROM lockbox.items WHERE address = \(addressBytes)", logger: store.logger
                    ).decode((ByteBuffer, ByteBuffer).self) { found = row }
                    guard let found else {
                        throw LockboxError.corruptVault(path: store.server, reason: "an item that blocked a first write is gone")
                    }
                    return try store.opened(records, address: address, metadata: found.0, secret: found.1).secret
                }
            }
        }
    }
#endif
