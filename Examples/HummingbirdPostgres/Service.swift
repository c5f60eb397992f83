import ArgumentParser
import Foundation
import Hummingbird
import Lockbox
import LockboxPostgres
import Logging
import ServiceLifecycle
import SystemPackage

/// A Hummingbird 2 service keeping tokens in a Lockbox vault in PostgreSQL, run under
/// swift-service-lifecycle's `ServiceGroup` beside the store's own service
/// (`PostgresStoreService`): the store's connection pool runs inside the group, logs to the
/// service's logger, and closes after the HTTP server has stopped (the group stops services in
/// reverse order) on SIGTERM or SIGINT.
///
/// Routes:
/// - `GET /health`: `ok`.
/// - `PUT /tokens/{name}` (the token as the body): stored, 204.
/// - `GET /tokens/{name}`: the token, or 404.
///
/// The database URL comes from a file (`--postgres-url-file`, mode 0600: it holds a password),
/// the vault's key from a key file (`--key-file`). The application role needs only DML and
/// EXECUTE once the schema's owner has run `lockbox --store postgres migrate-schema`
/// (docs/POSTGRES.md, "Two roles"); `--create-vault`, for the owner role, migrates the schema and
/// creates the vault if there is none yet.
@main
struct HummingbirdPostgres: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An example Hummingbird service over a Lockbox vault in PostgreSQL, under ServiceGroup.")

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port; the port is printed as `listening on PORT`).")
    var port = 0

    @Option(help: "A file holding the PostgreSQL URL (mode 0600).")
    var postgresURLFile: String

    @Option(help: "The vault's key file.")
    var keyFile: String

    @Flag(help: "Migrate the schema and create the vault with the key file's slot if the database holds none yet (as the schema's owner).")
    var createVault = false

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .info
            return handler
        }
        let logger = Logger(label: "hummingbird-postgres")
        let url = try PostgresConnectionURL.read(fromFile: FilePath(postgresURLFile))
        let postgres = try PostgresStoreService(
            configuration: PostgresStoreConfiguration(url: url, operationTimeout: .seconds(5), maximumConnections: 4),
            logger: Logger(label: "lockbox.postgres"))
        let vault = Vault(service: postgres, credentials: [.keyFile(FilePath(keyFile))], createIfMissing: createVault)

        let router = Router()
        router.get("health") { _, _ in "ok" }
        router.put("tokens/:name") { request, context -> HTTPResponse.Status in
            let name = try context.parameters.require("name")
            let body = try await request.body.collect(upTo: 64 * 1024)
            let token = SecretBytes(copying: Array(body.readableBytesView))
            try await vault.store().set(token, for: ItemKey(service: "tokens", account: name), options: ItemOptions())
            return .noContent
        }
        router.get("tokens/:name") { _, context -> Response in
            let name = try context.parameters.require("name")
            guard let token = try await vault.store().get(ItemKey(service: "tokens", account: name)) else {
                return Response(status: .notFound)
            }
            let bytes = token.withUnsafeBytes { ByteBuffer(bytes: $0) }
            return Response(status: .ok, body: ResponseBody(byteBuffer: bytes))
        }
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "lockbox-postgres-example"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port.map(String.init) ?? "unknown"
                // Unbuffered: the script that started the service waits for this line.
                FileHandle.standardOutput.write(Data("listening on \(bound)\n".utf8))
            },
            logger: logger
        )
        // The store first: the group shuts services down in reverse order, so the HTTP server
        // stops taking requests before the pool closes.
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: postgres), .init(service: app)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        logger.info("stopped")
    }
}

/// The vault, opened on first use through the store's service (whose pool runs in the group).
actor Vault {
    private let service: PostgresStoreService
    private let credentials: [VaultCredential]
    private let createIfMissing: Bool
    private var opened: PostgresStore?

    init(service: PostgresStoreService, credentials: [VaultCredential], createIfMissing: Bool) {
        self.service = service
        self.credentials = credentials
        self.createIfMissing = createIfMissing
    }

    /// The open store; opens (or creates, when allowed and missing) it on the first call.
    func store() async throws -> PostgresStore {
        if let opened { return opened }
        // As the schema's owner role: bring the schema to this Lockbox's version first (a role with
        // only DML and EXECUTE leaves this to `lockbox --store postgres migrate-schema`).
        if createIfMissing { try await service.migrateSchema() }
        let store: PostgresStore
        do {
            store = try await service.openStore(credentials: credentials)
        } catch LockboxError.vaultNotFound where createIfMissing {
            store = try await service.createStore(credentials: credentials)
        }
        opened = store
        return store
    }
}
