import ArgumentParser
import Configuration
import Foundation
import Hummingbird
import Lockbox
import LockboxSwiftConfiguration
import NIOCore

/// A Hummingbird 2 service keeping its users' refresh tokens and PINs in a Lockbox key-file vault.
///
/// Routes:
/// - `GET /health`: `ok`, answered at once however busy the PIN routes are.
/// - `PUT /users/{user}/token` (an OAuth token response as the body) and `GET /users/{user}/token`
///   (`{"refresh_token": …}`): `TokenRefresher`.
/// - `PUT /users/{user}/pin` (the PIN as the body) and `POST /users/{user}/pin/verify`: `PinGuard`
///   with the server preset. 204 when right; 401 wrong, 429 locked out (with `Retry-After`), 423
///   disabled, 404 no PIN, 422 refused by the PIN policy; the body is `{"code": …}` (the error's
///   stable code) plus the failure count where there is one.
/// - `GET /device-id`: `DeviceIdentity`, the same ID in every process on the vault.
///
/// Configuration: `LOCKBOX_VAULT`, `LOCKBOX_KEY_FILE`, `LOCKBOX_PIN_PRESET`, … (environment) over a
/// `--config` JSON file, read into a `LockboxConfiguration` by the `LockboxSwiftConfiguration`
/// adapter; the store, executor and Lockbox types are made from it.
///
/// With `--blocking`, the handlers call Lockbox's blocking API directly, as a service did before
/// the async API: the benchmark (scripts/bench/bench-service.sh) measures what that costs.
@main
struct HummingbirdService: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An example Hummingbird service over a Lockbox key-file vault.")

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port; the port is printed as `listening on PORT`).")
    var port = 0

    @Option(help: "A JSON file with a `lockbox` object (LockboxConfiguration's keys); LOCKBOX_* environment variables override it.")
    var config: String?

    @Flag(help: "Create the vault with the key file's slot if it does not exist yet.")
    var createVault = false

    @Flag(help: "Call Lockbox's blocking API from the handlers, on Swift's cooperative pool (for comparison only).")
    var blocking = false

    /// What the service uses unless its configuration says otherwise: the file vault in the
    /// working folder, PINs with the server preset.
    static let defaults = LockboxConfiguration(store: .file, vaultPath: "vault.lockbox", pinPreset: .server)

    /// Lockbox's configuration as a service reads it: `LOCKBOX_*` environment variables over the
    /// `--config` JSON file over ``defaults`` (the `LockboxSwiftConfiguration` adapter).
    func configuration() async throws -> LockboxConfiguration {
        var providers: [any ConfigProvider] = [EnvironmentVariablesProvider()]
        if let config { providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(config))) }
        return try LockboxConfiguration(config: ConfigReader(providers: providers).scoped(to: "lockbox"), defaults: Self.defaults)
    }

    func run() async throws {
        let configuration = try await configuration()
        let store = try openVault(configuration)
        let api = LockboxAPI(store: store, configuration: configuration, blocking: blocking)
        let router = Router()
        api.addRoutes(to: router)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "lockbox-example"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port.map(String.init) ?? "unknown"
                // Unbuffered: the script that started the service waits for this line.
                FileHandle.standardOutput.write(Data("listening on \(bound)\n".utf8))
            }
        )
        try await app.runService()
    }

    /// Opens the vault, creating it first if asked and it is missing. Two processes started with
    /// `--create-vault` at once agree: the loser of the creation opens the winner's vault.
    func openVault(_ configuration: LockboxConfiguration) throws -> any SecretStore {
        if createVault, let credential = try configuration.keyFileCredential() {
            do {
                return try FileVault.create(at: configuration.vaultPath, credentials: [credential])
            } catch LockboxError.vaultAlreadyExists {
                // Someone else created it: open theirs.
            }
        }
        return try configuration.openFileVault()
    }
}
