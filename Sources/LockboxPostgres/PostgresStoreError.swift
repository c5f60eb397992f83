#if PostgreSQL
    import Foundation
    import Lockbox

    /// What went wrong between a ``PostgresStore`` and its database. Problems with the vault itself
    /// (a wrong credential, a row that fails authentication, no vault there) are
    /// ``Lockbox/LockboxError``s, as with the other stores.
    ///
    /// No case carries a password, a query's parameters or a server message (which can quote row
    /// values): only the server's address without password, the operation, and SQLSTATE codes.
    public enum PostgresStoreError: LockboxCodedError, Equatable {
        /// The operation did not finish within the store's time limit: the database could not be
        /// reached, refused every connection, or did not answer. Nothing is known to be written.
        case unavailable(server: String, operation: String, waitedSeconds: Double)
        /// The connection closed during the operation (the server stopped, the network dropped
        /// it). A transaction that was open is rolled back by the server; the next call connects anew.
        case connectionLost(server: String, operation: String)
        /// The server refused the operation with this SQLSTATE (e.g. `42501`: no privilege;
        /// `28P01`: wrong password).
        case serverRefused(server: String, operation: String, sqlState: String)
        /// The server is read-only and refused a write (SQLSTATE `25006`): a hot standby, or a
        /// server with `default_transaction_read_only` on. Nothing of the operation was written.
        /// Writes (items, PIN attempt counts, refresh leases, device IDs, key slots) need the
        /// primary: name it in the URL, or list every host with `target_session_attrs=read-write`
        /// (``PostgresConnectionURL/TargetSessionAttributes/readWrite``), or with `prefer-standby`
        /// to keep reads on the standby and send the rest to the primary
        /// (``PostgresConnectionURL/TargetSessionAttributes/preferStandby``).
        case readOnlyServer(server: String, operation: String)
        /// The store's connection pool is not running, so the operation was not sent: the
        /// ``PostgresStoreService``'s `run()` has not started within the operation timeout, or has
        /// returned (a graceful shutdown), or the store was shut down (``PostgresStore/shutdown()``).
        case notRunning(server: String, operation: String)
        /// The database's Lockbox schema is newer than this version of Lockbox knows.
        case schemaTooNew(server: String, found: Int, supported: Int)
        /// The database has no Lockbox schema (`found` 0) or an older one than this Lockbox needs,
        /// and the store was opened without migrating (``PostgresSchemaPolicy/requireCurrent``): the
        /// schema's owner role runs `lockbox --store postgres migrate-schema`
        /// (``PostgresStore/migrateSchema(_:operationTimeout:logger:)``) first.
        case schemaNotCurrent(server: String, found: Int, required: Int)

        /// One line saying what happened.
        public var description: String {
            switch self {
            case .unavailable(let server, let operation, let waited):
                return
                    "PostgreSQL at \(server) did not complete \(operation) within \(String(format: "%.1f", waited)) s (unreachable or not answering)"
            case .connectionLost(let server, let operation):
                return
                    "the connection to PostgreSQL at \(server) was lost during \(operation); nothing of it was committed unless it had finished"
            case .serverRefused(let server, let operation, let sqlState):
                return "PostgreSQL at \(server) refused \(operation) (SQLSTATE \(sqlState))"
            case .readOnlyServer(let server, let operation):
                return
                    "PostgreSQL at \(server) is read-only (a hot standby; SQLSTATE 25006) and refused \(operation); nothing was written: writes need the primary"
            case .notRunning(let server, let operation):
                return
                    "the PostgreSQL store for \(server) is not running, so \(operation) was not sent: PostgresStoreService.run() has not started or has returned, or the store was shut down"
            case .schemaTooNew(let server, let found, let supported):
                return "the Lockbox schema at \(server) is version \(found); this Lockbox knows up to \(supported): upgrade Lockbox"
            case .schemaNotCurrent(let server, let found, let required):
                let state = found == 0 ? "has no Lockbox schema" : "has Lockbox schema version \(found)"
                return
                    "the database at \(server) \(state); this Lockbox needs version \(required): run `lockbox --store postgres migrate-schema` as the schema's owner role"
            }
        }

        /// A stable code per case (`lockbox` exits 27 for each): `postgres-unavailable`,
        /// `postgres-connection-lost`, `postgres-refused`, `postgres-schema-too-new`,
        /// `postgres-not-running`; and
        /// `postgres-schema-not-current` (`lockbox` exits 28), `postgres-read-only` (`lockbox` exits 29).
        public var code: LockboxError.Code {
            switch self {
            case .unavailable: LockboxError.Code(rawValue: "postgres-unavailable")
            case .connectionLost: LockboxError.Code(rawValue: "postgres-connection-lost")
            case .serverRefused: LockboxError.Code(rawValue: "postgres-refused")
            case .readOnlyServer: LockboxError.Code(rawValue: "postgres-read-only")
            case .notRunning: LockboxError.Code(rawValue: "postgres-not-running")
            case .schemaTooNew: LockboxError.Code(rawValue: "postgres-schema-too-new")
            case .schemaNotCurrent: LockboxError.Code(rawValue: "postgres-schema-not-current")
            }
        }

        /// Unreachable and lost connections, and a pool not running, are ``Lockbox/LockboxError/Category/noStorageAccess``
        /// (try again later); a refusal is a ``Lockbox/LockboxError/Category/platformFailure``; a schema
        /// too new is ``Lockbox/LockboxError/Category/badData``, like a vault format too new; a
        /// schema missing or older is ``Lockbox/LockboxError/Category/noStorageAccess`` (usable once
        /// migrated), and so is a read-only server (usable for writes once they go to the primary).
        public var category: LockboxError.Category {
            switch self {
            case .unavailable, .connectionLost, .notRunning: .noStorageAccess
            case .serverRefused: .platformFailure
            case .schemaTooNew: .badData
            case .schemaNotCurrent, .readOnlyServer: .noStorageAccess
            }
        }
    }
#endif
