#if PostgreSQL
    import Logging
    import PostgresNIO

    /// The statements of the per-item calls (`get`, `metadata`, `item`, `set` of one item), prepared
    /// once per connection (postgres-nio's `PostgresPreparedStatement`: a named statement, parsed
    /// and planned by the server on the connection's first use, then only bound and executed).
    /// The server's parse and plan is most of its work for a statement this small: preparing
    /// makes a `get` cost the server little more than a bare `SELECT` of one row
    /// (docs/PERFORMANCE.md, "PostgreSQL store").
    ///
    /// A connection's first use of each costs one more round trip (the preparation is answered
    /// before the execution is sent). The names are fixed; behind PgBouncer in transaction mode
    /// they need its protocol-level prepared statements (`max_prepared_statements`, PgBouncer
    /// 1.21 or newer).
    enum PostgresStatements {
        /// An item's sealed metadata and sealed secret: its row alone, by primary key (no row: no
        /// result). The row's address is keyed by the data key, so a row found there was written
        /// under this handle's key; no row needs ``ReadKeyCheck`` to tell an absent item from a
        /// rotated key (``PostgresStore/get(_:)``).
        struct ReadItem: PostgresPreparedStatement {
            static let name = "lockbox_read_item"
            static let sql = "SELECT metadata, secret FROM lockbox.items WHERE address = $1"
            static let bindingDataTypes: [PostgresDataType] = [.bytea]
            typealias Row = (ByteBuffer, ByteBuffer)

            var address: ByteBuffer

            func makeBindings() -> PostgresBindings {
                var bindings = PostgresBindings(capacity: 1)
                bindings.append(address)
                return bindings
            }

            func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
        }

        /// ``ReadItem`` without the secret column (no secret leaves the server).
        struct ReadItemMetadata: PostgresPreparedStatement {
            static let name = "lockbox_read_item_metadata"
            static let sql = "SELECT metadata FROM lockbox.items WHERE address = $1"
            static let bindingDataTypes: [PostgresDataType] = [.bytea]
            typealias Row = ByteBuffer

            var address: ByteBuffer

            func makeBindings() -> PostgresBindings {
                var bindings = PostgresBindings(capacity: 1)
                bindings.append(address)
                return bindings
            }

            func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
        }

        /// The vault row's key check (no vault row: no result): read after a ``ReadItem`` found no
        /// row, or one that failed authentication.
        struct ReadKeyCheck: PostgresPreparedStatement {
            static let name = "lockbox_read_key_check"
            static let sql = "SELECT key_check FROM lockbox.vault"
            static let bindingDataTypes: [PostgresDataType] = []
            typealias Row = ByteBuffer

            func makeBindings() -> PostgresBindings { PostgresBindings() }

            func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
        }

        /// `CALL lockbox.put_item`: the write of one item, committed before its outcome is sent
        /// (``PostgresStore/set(_:for:options:)``).
        struct PutItem: PostgresPreparedStatement {
            static let name = "lockbox_put_item"
            static let sql = "CALL lockbox.put_item($1, $2, $3, $4, $5, NULL, NULL)"
            static let bindingDataTypes: [PostgresDataType] = [.bytea, .bytea, .bytea, .bytea, .bytea]
            typealias Row = (Int32?, ByteBuffer?)

            var address: ByteBuffer
            var keyCheck: ByteBuffer
            var expectedMetadata: ByteBuffer?
            var metadata: ByteBuffer
            var secret: ByteBuffer

            func makeBindings() -> PostgresBindings {
                var bindings = PostgresBindings(capacity: 5)
                bindings.append(address)
                bindings.append(keyCheck)
                bindings.append(expectedMetadata)
                bindings.append(metadata)
                bindings.append(secret)
                return bindings
            }

            func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
        }

        /// The one row `statement` returns (or the last of several; `nil` for none), on a
        /// connection of `client`.
        ///
        /// postgres-nio remembers a failed preparation on its connection and fails every later
        /// use of that statement there with the same error, even once its cause is gone (a
        /// schema migrated meanwhile, a grant given). So after a server error the connection is
        /// closed, and the pool opens a fresh one.
        static func row<Statement: PostgresPreparedStatement>(
            _ statement: Statement, on client: PostgresClient, logger: Logger
        ) async throws -> Statement.Row? where Statement.Row: Sendable {
            try await client.withConnection { connection in
                do {
                    var found: Statement.Row?
                    for try await row in try await connection.execute(statement, logger: logger) { found = row }
                    return found
                } catch let error as PSQLError where error.code == .server {
                    try? await connection.close()
                    throw error
                }
            }
        }
    }
#endif
