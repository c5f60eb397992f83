#if PostgreSQL
    import FoundationEssentials
    import Lockbox

    /// The PostgreSQL store's ``StoreProvider``: opens (or creates) the vault in the database
    /// ``url`` names, with the request's credentials. `lockbox-postgres` registers one for the
    /// `lockbox` commands; a service that names PostgreSQL in its ``LockboxConfiguration`` passes
    /// one to ``LockboxConfiguration/openStore(secretService:providers:window:)``.
    ///
    /// Opening from a provider waits on the calling thread; from async code, call
    /// ``PostgresStore/open(_:credentials:operationTimeout:maximumConnections:executor:now:)``.
    public struct PostgresStoreProvider: StoreProvider {
        /// The database: hosts, name, user and password.
        public var url: PostgresConnectionURL
        /// The most each database operation may take.
        public var operationTimeout: Duration
        /// The most connections the store's pool keeps.
        public var maximumConnections: Int

        /// A provider for the database `url` names.
        /// - Parameters:
        ///   - url: the database.
        ///   - operationTimeout: the most each database operation may take.
        ///   - maximumConnections: the most connections the store's pool keeps.
        public init(url: PostgresConnectionURL, operationTimeout: Duration = .seconds(10), maximumConnections: Int = 16) {
            self.url = url
            self.operationTimeout = operationTimeout
            self.maximumConnections = maximumConnections
        }

        /// ``StoreKind/postgres``.
        public var kind: StoreKind { .postgres }
        /// Persistent, shared across hosts, opened by key slots, creatable.
        public var capabilities: StoreCapabilities { [.persistent, .sharedAcrossHosts, .keySlots, .creatable] }

        /// Opens the vault with the request's credentials; fresh when a passphrase was among them.
        public func open(_ request: StoreOpenRequest) throws -> OpenedStore {
            let credentials = try request.credentials()
            let (url, timeout, connections) = (url, operationTimeout, maximumConnections)
            let store = try CallingThread.run {
                try await PostgresStore.open(url, credentials: credentials, operationTimeout: timeout, maximumConnections: connections)
            }
            return OpenedStore(asyncStore: store, freshlyAuthenticated: Self.includesPassphrase(credentials), location: store.server)
        }

        /// Creates the schema if needed and a new, empty vault in it, one key slot per credential.
        public func create(_ request: StoreOpenRequest, kdf: KDFParameters) throws -> OpenedStore {
            let credentials = try request.credentials()
            let (url, timeout, connections) = (url, operationTimeout, maximumConnections)
            let store = try CallingThread.run {
                try await PostgresStore.create(
                    url, credentials: credentials, kdf: kdf, operationTimeout: timeout, maximumConnections: connections)
            }
            return OpenedStore(asyncStore: store, location: store.server)
        }

        private static func includesPassphrase(_ credentials: [VaultCredential]) -> Bool {
            credentials.contains { if case .passphrase = $0 { true } else { false } }
        }
    }
#endif
