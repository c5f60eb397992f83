import ArgumentParser
import Foundation
import Hummingbird
import Lockbox
import NIOCore

/// A Hummingbird 2 service keeping its users' refresh tokens and PINs in a Lockbox key-file vault.
///
/// Routes:
/// - `GET /health`: `ok`, answered at once however busy the PIN routes are.
/// - `PUT /users/{user}/token` (an OAuth token response as the body) and `GET /users/{user}/token`
///   (`{"refresh_token": …}`): `TokenStore`.
/// - `PUT /users/{user}/pin` (the PIN as the body) and `POST /users/{user}/pin/verify`: `PinGuard`
///   with the server preset. 204 when right; 401 wrong, 429 locked out (with `Retry-After`), 423
///   disabled, 404 no PIN, 422 refused by the PIN policy; the body is `{"code": …}` (the error's
///   stable code) plus the failure count where there is one.
/// - `GET /device-id`: `DeviceIdentity`, the same ID in every process on the vault.
///
/// With `--blocking`, the handlers call Lockbox's blocking API directly, as a service did before
/// the async API: the benchmark (scripts/bench-service.sh) measures what that costs.
@main
struct HummingbirdService: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An example Hummingbird service over a Lockbox key-file vault.")

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port; the port is printed as `listening on PORT`).")
    var port = 0

    @Option(help: "The vault file.")
    var vault: String

    @Option(help: "The key file that opens the vault (32 bytes, mode 0600).")
    var keyFile: String

    @Flag(help: "Create the vault with the key file's slot if it does not exist yet.")
    var createVault = false

    @Option(help: "The PIN preset: server (OWASP's 19 MiB, one write per verify) or desktop (256 MiB).")
    var pinPreset: PresetName = .server

    @Flag(help: "Call Lockbox's blocking API from the handlers, on Swift's cooperative pool (for comparison only).")
    var blocking = false

    enum PresetName: String, ExpressibleByArgument, CaseIterable {
        case server, desktop
        var preset: PinPreset { self == .server ? .server : .desktop }
    }

    func run() async throws {
        let store = try openVault()
        let api = LockboxAPI(store: store, preset: pinPreset.preset, blocking: blocking)
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
    func openVault() throws -> EncryptedFileStore {
        let credential = VaultCredential.keyFile(FilePath(keyFile))
        if createVault {
            do {
                return try EncryptedFileStore.create(at: FilePath(vault), credentials: [credential])
            } catch LockboxError.vaultAlreadyExists {
                // Someone else created it: open theirs.
            }
        }
        return try EncryptedFileStore.open(at: FilePath(vault), credential: credential)
    }
}
