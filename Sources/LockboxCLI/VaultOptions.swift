import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxSecretService
import LockboxSessionWindows
import SystemPackage

/// `--store`: the library's ``StoreRequest`` (a store by name, or `auto`); `memory` is not
/// offered (a command's items would be gone when it ends). `postgres` is opened by
/// `lockbox-postgres` (``PostgresCommands``).
extension StoreRequest: ExpressibleByArgument {
    /// The request named `argument`, but never `memory`.
    public init?(argument: String) {
        guard let request = StoreRequest(rawValue: argument), request != .memory else { return nil }
        self = request
    }

    /// `auto`, `secret-service`, `file`, `postgres`.
    public static var allValueStrings: [String] { [auto, secretService, file, postgres].map(\.rawValue) }
}

/// `migrate --from/--to`: the library's ``StoreKind``, but never `memory`.
extension StoreKind: ExpressibleByArgument {
    /// The store named `argument`, but never `memory`.
    public init?(argument: String) {
        guard let kind = StoreKind(rawValue: argument), kind != .memory else { return nil }
        self = kind
    }

    /// `file`, `secret-service`, `postgres`.
    public static var allValueStrings: [String] { [file, secretService, postgres].map(\.rawValue) }
}

/// The options every command that opens a store shares: which store, where the file vault is
/// and how to unlock it.
struct VaultOptions: ParsableArguments {
    /// The title of the group in help: hidden from `--help` (which ends with a line naming the
    /// group), shown in full by `--help-all`, docs/CLI.md and the man page.
    static let title = "Vault options"

    /// The group's visibility: hidden from help (``title``), but offered by the shell
    /// completions, which `--generate-completion-script` writes from the same declarations.
    static var visibility: ArgumentVisibility {
        CommandLine.arguments.dropFirst().contains("--generate-completion-script") ? .default : .hidden
    }

    /// Every option of the group, as the root's help names them.
    static let summary = "--store, --profile, --vault, --key-file, --passphrase-fd, --tpm-pin-fd, --postgres-url-file"

    /// The options people use most, as the line that closes a command's `--help` names them.
    static let shortSummary = "--store, --profile, --vault, --key-file, --passphrase-fd"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.",
            valueName: "store"))
    var store: StoreRequest?

    /// `--backend`: the old name of `--store`, still accepted (scripts use it) but not shown.
    @Option(name: .customLong("backend"), help: .private)
    var backendAlias: StoreRequest?

    @Option(
        name: .customLong("postgres-url-file"),
        help: ArgumentHelp(
            "With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.",
            valueName: "path"), completion: .file())
    var postgresURLFile: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.",
            valueName: "name"))
    var profile: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).",
            valueName: "path"), completion: .file())
    var vault: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE, else the one `lockbox init` made or was given for this vault.",
            valueName: "path"), completion: .file())
    var keyFile: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.",
            valueName: "fd"))
    var passphraseFd: Int32?

    @Option(
        name: .customLong("tpm-pin-fd"),
        help: ArgumentHelp(
            "Read the PIN of the vault's TPM2 slot from this open file descriptor (else it is asked on the terminal).",
            valueName: "fd"))
    var tpmPinFd: Int32?

    /// The vault path: --vault, then $LOCKBOX_VAULT, then the XDG default.
    var vaultPath: FilePath {
        if let vault { return FilePath(vault) }
        let environment = CommandEnvironment.values
        if let fromEnvironment = environment["LOCKBOX_VAULT"], !fromEnvironment.isEmpty {
            return FilePath(fromEnvironment)
        }
        return FileVault.defaultPath(environment: environment)
    }

    /// The key file: --key-file, then $LOCKBOX_KEY_FILE (a path, not a secret), then the one
    /// `lockbox init` recorded for this profile's vault, when the vault is that one.
    var keyFilePath: FilePath? { keyFilePath(forVault: vaultPath) }

    /// ``keyFilePath`` for the vault at `vaultPath` (already worked out).
    func keyFilePath(forVault vaultPath: FilePath) -> FilePath? {
        if let given = givenKeyFilePath { return given }
        // A credential given explicitly is the one to use: the recorded key file is not added.
        guard passphraseFd == nil, let profile = try? StoreSettings.load(from: settingsPath).profiles[profileName],
            let recordedVault = profile.vault, let recordedKey = profile.keyFile,
            VaultFile.resolvedPath(FilePath(recordedVault)) == VaultFile.resolvedPath(vaultPath)
        else { return nil }
        Trace.log("credential: the key file lockbox init recorded for this vault")
        return FilePath(recordedKey)
    }

    /// The key file the command line or the environment names: --key-file, then $LOCKBOX_KEY_FILE.
    var givenKeyFilePath: FilePath? {
        if let keyFile { return FilePath(keyFile) }
        if let fromEnvironment = CommandEnvironment.values["LOCKBOX_KEY_FILE"], !fromEnvironment.isEmpty {
            return FilePath(fromEnvironment)
        }
        return nil
    }

    /// The credentials given: key file and/or passphrase from a descriptor; with neither, a
    /// no-echo prompt on the terminal.
    func unlockCredentials(prompt: String? = nil) throws -> [VaultCredential] {
        let vaultPath = vaultPath
        return try unlockCredentials(prompt: prompt, keyFile: keyFilePath(forVault: vaultPath), vaultPath: vaultPath)
    }

    /// ``unlockCredentials(prompt:)`` with the key file and the vault path already worked out
    /// (``StoreOpener``'s configuration).
    func unlockCredentials(prompt: String?, keyFile keyFilePath: FilePath?, vaultPath: FilePath) throws -> [VaultCredential] {
        var credentials: [VaultCredential] = []
        if let keyFilePath {
            Trace.log("credential: key file \(keyFilePath.string)")
            credentials.append(.keyFile(keyFilePath))
        }
        if let passphraseFd {
            Trace.log("credential: passphrase from file descriptor \(passphraseFd)")
            credentials.append(.passphrase(try Self.passphrase(fromDescriptor: passphraseFd)))
        }
        if credentials.isEmpty, let tpm = try tpmCredential() {
            return [tpm]
        }
        if credentials.isEmpty {
            Trace.log("credential: none given; asking on the terminal")
            guard let typed = try Terminal.readHidden(prompt: prompt ?? "Passphrase for \(vaultPath.string): ") else {
                // Name the ways this vault opens (its slots), never one it does not have.
                throw (try? requestedStore()) == .postgres ? VaultLocked(path: "in PostgreSQL", slots: nil) : VaultLocked(path: vaultPath)
            }
            credentials.append(.passphrase(typed))
        }
        return credentials
    }

    private var environment: [String: String] { CommandEnvironment.values }

    /// Passphrases read from descriptors, by descriptor: a command that opens two vaults
    /// (`migrate --from file --to postgres`) reads the descriptor once and offers it to both.
    private static let passphrasesRead = Locked<[Int32: SecretBytes]>([:])

    /// The passphrase on descriptor `fd`, read once however many times it is asked for.
    static func passphrase(fromDescriptor fd: Int32) throws -> SecretBytes {
        if let read = passphrasesRead.withLock({ $0[fd] }) { return read }
        let passphrase = try SecretInput.passphrase(fromDescriptor: fd, what: "passphrase")
        passphrasesRead.withLock { $0[fd] = passphrase }
        return passphrase
    }

    var profileName: String { profile ?? environment["LOCKBOX_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default" }

    var settingsPath: FilePath { StoreSettings.defaultPath(environment: environment) }

    /// Whether anything names the file vault or its credentials: that means the file store.
    private var namesFileVault: Bool {
        vault != nil || keyFile != nil || passphraseFd != nil
            || !(environment["LOCKBOX_VAULT"] ?? "").isEmpty || !(environment["LOCKBOX_KEY_FILE"] ?? "").isEmpty
    }

    func validate() throws {
        if let store, let backendAlias, store != backendAlias {
            throw ValidationError("--store and --backend (its old name) name different stores; give --store once")
        }
    }

    /// The store asked for: --store (or its old name --backend), then $LOCKBOX_STORE (or its old
    /// name $LOCKBOX_BACKEND), then `file` if a vault or key is named, else `auto`.
    func requestedStore() throws -> StoreRequest {
        if let chosen = store ?? backendAlias { return chosen }
        for (name, value) in [("LOCKBOX_STORE", environment["LOCKBOX_STORE"]), ("LOCKBOX_BACKEND", environment["LOCKBOX_BACKEND"])] {
            guard let fromEnvironment = value, !fromEnvironment.isEmpty else { continue }
            guard let parsed = StoreRequest(argument: fromEnvironment) else {
                throw LockboxError.invalidArgument("\(name) is '\(fromEnvironment)'; use auto, secret-service, file or postgres")
            }
            return parsed
        }
        return namesFileVault ? .file : .auto
    }

    /// Where the PostgreSQL URL comes from: --postgres-url-file, then $LOCKBOX_POSTGRES_URL_FILE,
    /// then $LOCKBOX_POSTGRES_URL (the URL itself).
    func postgresConnection() throws -> PostgresConnectionSource {
        if let postgresURLFile { return .file(FilePath(postgresURLFile)) }
        if let file = environment["LOCKBOX_POSTGRES_URL_FILE"], !file.isEmpty { return .file(FilePath(file)) }
        guard let url = environment["LOCKBOX_POSTGRES_URL"], !url.isEmpty else {
            throw LockboxError.invalidArgument(
                "the PostgreSQL store needs the database URL: --postgres-url-file PATH, LOCKBOX_POSTGRES_URL_FILE or LOCKBOX_POSTGRES_URL")
        }
        return .environment(name: "LOCKBOX_POSTGRES_URL")
    }

    /// The library's configuration these options describe, worked out once (the vault path,
    /// the key file, the profile and the settings file): what ``StoreOpener`` opens.
    func configuration() throws -> LockboxConfiguration {
        let vaultPath = vaultPath
        return LockboxConfiguration(
            store: try requestedStore(), profile: profileName, vaultPath: vaultPath, settingsPath: settingsPath,
            keyFile: keyFilePath(forVault: vaultPath))
    }
}

/// Argon2id cost presets, as `--kdf` takes them.
enum KDFPreset: String, ExpressibleByArgument, CaseIterable {
    case interactive, moderate, sensitive

    var parameters: KDFParameters {
        switch self {
        case .interactive: return .interactive
        case .moderate: return .moderate
        case .sensitive: return .sensitive
        }
    }
}

/// Whether this invocation is freshly authenticated, decided once when the store was opened.
enum InvocationFreshness: FreshAuthentication {
    case fresh, stale

    func requireFreshAuthentication() throws {
        if self == .stale {
            throw LockboxError.reauthenticationRequired("this item is protected, and no re-authentication window is open")
        }
    }
}

/// The recorded Secret Service this invocation uses, if it came from a recorded choice. Connecting
/// does not ask whether a provider is there (the first call finds out, one round trip fewer), so
/// "no provider" can come from that first call rather than from opening the store:
/// ``LockboxCommand/main()`` turns it into the recorded-store error (exit 26) here, as
/// ``StoreResolution/opening(_:)`` does for a failure while opening.
enum RecordedSecretService {
    static let resolution = Locked<StoreResolution?>(nil)

    /// `error` as the recorded-store error when it means the recorded Secret Service has no provider.
    static func translating(_ error: any LockboxCodedError) -> any LockboxCodedError {
        guard let lockboxError = error as? LockboxError, case .secretServiceUnavailable = lockboxError,
            let resolution = resolution.withLock({ $0 })
        else { return error }
        return LockboxError.recordedStoreUnavailable(
            store: resolution.storeKind.rawValue, settingsPath: resolution.selection.settingsPath.string,
            reason: lockboxError.description)
    }
}
