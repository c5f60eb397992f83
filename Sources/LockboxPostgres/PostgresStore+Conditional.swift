#if PostgreSQL
    import Foundation
    import Lockbox
    import PostgresNIO

    /// Conditional writes across hosts (PINs set and changed): the row is locked with
    /// `SELECT … FOR UPDATE`, opened and compared with what the caller read, and written in the same
    /// transaction, so a concurrent writer on any host waits for the commit and then sees the new row.
    /// When no item is expected there is no row to lock: the write is `setIfAbsent`'s insert.
    extension PostgresStore: ConditionalWriteStore {
        /// Stores `secret` under `key` if the item's secret is `expected` (`nil`: no item), in one
        /// transaction; returns whether it wrote.
        public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions, ifCurrent expected: SecretBytes?) async throws
            -> Bool
        {
            // No row to lock when none is expected: the insert itself must be the condition.
            guard let expected else { return try await setIfAbsent(secret, for: key, options: options) == nil }
            try ItemLimits.validate(key, options: options, secretCount: secret.count)
            let time = VaultPayload.date(milliseconds: VaultPayload.milliseconds(now()))
            return try await run("replacing an item") { store in
                try await store.writing { connection, records in
                    let address = records.address(key)
                    var found: (ByteBuffer, ByteBuffer)?
                    for try await row in try await connection.query(
                        "SELECT metadata, secret FROM lockbox.items WHERE address = \(ByteBuffer(bytes: address)) FOR UPDATE",
                        logger: store.logger
                    ).decode((ByteBuffer, ByteBuffer).self) { found = row }
                    let current = try found.map { try store.opened(records, address: address, metadata: $0.0, secret: $0.1).secret }
                    // A row deleted while this waited for its lock is gone here too: not what was read.
                    guard let current, current == expected else { return false }
                    try await store.upsert([ItemWrite(secret, for: key, options: options)], at: time, on: connection, records)
                    return true
                }
            }
        }
    }
#endif
