#if PostgreSQL
    import Foundation
    import Lockbox
    import LockboxPostgres
    import SystemPackage
    import LockboxCLI

    /// `lockbox-postgres`: the `lockbox` commands with the PostgreSQL store (`--store postgres`,
    /// `migrate --from/--to postgres`). `lockbox` hands such command lines over to this program, so
    /// users type `lockbox` either way; only this program links SwiftNIO and postgres-nio. It
    /// registers the library's ``PostgresStoreProvider``, through which the commands open the store
    /// as they open every other.
    struct PostgresSupport: PostgresCommandSupport {
        /// The stores opened by this command, closed by ``closeAll()``.
        private let opened = Locked<[PostgresStore]>([])

        /// A command makes a handful of queries one after another: a small pool.
        private static let maximumConnections = 2

        func provider(_ connection: PostgresConnectionSource) throws -> any StoreProvider {
            let url: PostgresConnectionURL =
                switch connection {
                case .file(let path): try PostgresConnectionURL.read(fromFile: path)
                case .environment(let name): try PostgresConnectionURL.read(fromEnvironment: name)
                }
            return Remembering(base: PostgresStoreProvider(url: url, maximumConnections: Self.maximumConnections), opened: opened)
        }

        func closeAll() {
            let stores = opened.withLock { stores in
                defer { stores = [] }
                return stores
            }
            for store in stores { try? CallingThread.run { await store.shutdown() } }
        }

        /// The library's provider, keeping each store it opens or creates for ``closeAll()``.
        private struct Remembering: StoreProvider {
            let base: PostgresStoreProvider
            let opened: Locked<[PostgresStore]>

            var kind: StoreKind { base.kind }
            var capabilities: StoreCapabilities { base.capabilities }

            func open(_ request: StoreOpenRequest) throws -> OpenedStore { remember(try base.open(request)) }

            func create(_ request: StoreOpenRequest, kdf: KDFParameters) throws -> OpenedStore {
                remember(try base.create(request, kdf: kdf))
            }

            private func remember(_ store: OpenedStore) -> OpenedStore {
                if let postgres = store.asyncStore as? PostgresStore { opened.withLock { $0.append(postgres) } }
                return store
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
    let message =
        "lockbox: this lockbox-postgres was built without the PostgreSQL store; build it with "
        + "`swift build --traits PostgreSQL --product lockbox-postgres`, or install it with `make install-postgres`\n"
    _ = message.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    exit(27)
#endif
