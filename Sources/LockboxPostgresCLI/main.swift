#if PostgreSQL
import Foundation
import Lockbox
import LockboxPostgres
import SystemPackage
import lockbox

/// `lockbox-postgres`: the `lockbox` commands with the PostgreSQL store (`--store postgres`,
/// `migrate --from/--to postgres`). `lockbox` hands such command lines over to this program, so
/// users type `lockbox` either way; only this program links SwiftNIO and postgres-nio.
struct PostgresSupport: PostgresCommandSupport {
    /// The stores opened by this command, closed by ``closeAll()``.
    private let opened = Locked<[PostgresStore]>([])

    /// A command makes a handful of queries one after another: a small pool.
    private static let maximumConnections = 2

    func open(_ connection: PostgresConnectionSource, credentials: [VaultCredential]) throws -> (store: any AsyncSecretStore, server: String) {
        let url = try Self.url(connection)
        return remember(try CallingThread.run {
            try await PostgresStore.open(url, credentials: credentials, maximumConnections: Self.maximumConnections)
        })
    }

    func create(
        _ connection: PostgresConnectionSource, credentials: [VaultCredential], kdf: KDFParameters
    ) throws -> (store: any AsyncSecretStore, server: String) {
        let url = try Self.url(connection)
        return remember(try CallingThread.run {
            try await PostgresStore.create(url, credentials: credentials, kdf: kdf, maximumConnections: Self.maximumConnections)
        })
    }

    func closeAll() {
        let stores = opened.withLock { stores in defer { stores = [] }; return stores }
        for store in stores { try? CallingThread.run { await store.shutdown() } }
    }

    private func remember(_ store: PostgresStore) -> (store: any AsyncSecretStore, server: String) {
        opened.withLock { $0.append(store) }
        return (store, store.server)
    }

    private static func url(_ connection: PostgresConnectionSource) throws -> PostgresConnectionURL {
        switch connection {
        case .file(let path): try PostgresConnectionURL.read(fromFile: path)
        case .environment(let name): try PostgresConnectionURL.read(fromEnvironment: name)
        }
    }
}

PostgresCommands.support.withLock { $0 = PostgresSupport() }
LockboxTool.main()
#else
#if canImport(Glibc)
import Glibc
#endif

// Built without the package's `PostgreSQL` trait, this program has no PostgreSQL store to offer:
// it says so and exits with the PostgreSQL store's code (27), as `lockbox` does when it is missing.
fputs(
    "lockbox: this lockbox-postgres was built without the PostgreSQL store; build it with "
        + "`swift build --traits PostgreSQL --product lockbox-postgres`, or install it with `make install-postgres`\n",
    stderr
)
exit(27)
#endif
