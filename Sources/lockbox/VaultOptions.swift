import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxWindows
import LockboxSecretService
import SystemPackage

/// `--store`: a store of the library's ``StoreRequest`` (or `auto`), or `postgres`, the
/// PostgreSQL store, which `lockbox-postgres` opens (``PostgresCommands``).
enum StoreArgument: String, ExpressibleByArgument, CaseIterable, CustomStringConvertible {
    case auto
    case secretService = "secret-service"
    case file
    case postgres

    /// The library's request for this store; `nil` for `postgres`, which the resolver does not choose.
    var request: StoreRequest? { StoreRequest(rawValue: rawValue) }

    var description: String { rawValue }
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

    @Option(name: .long, help: ArgumentHelp(
        "Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.",
        valueName: "store"))
    var store: StoreArgument?

    /// `--backend`: the old name of `--store`, still accepted (scripts use it) but not shown.
    @Option(name: .customLong("backend"), help: .private)
    var backendAlias: StoreArgument?

    @Option(name: .customLong("postgres-url-file"), help: ArgumentHelp(
        "With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.",
        valueName: "path"), completion: .file())
    var postgresURLFile: String?

    @Option(name: .long, help: ArgumentHelp(
        "The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.",
        valueName: "name"))
    var profile: String?

    @Option(name: .long, help: ArgumentHelp(
        "The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).",
        valueName: "path"), completion: .file())
    var vault: String?

    @Option(name: .long, help: ArgumentHelp(
        "Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE, else the one `lockbox init` made or was given for this vault.",
        valueName: "path"), completion: .file())
    var keyFile: String?

    @Option(name: .long, help: ArgumentHelp(
        "Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.",
        valueName: "fd"))
    var passphraseFd: Int32?

    @Option(name: .customLong("tpm-pin-fd"), help: ArgumentHelp(
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
        return EncryptedFileStore.defaultPath(environment: environment)
    }

    /// The key file: --key-file, then $LOCKBOX_KEY_FILE (a path, not a secret), then the one
    /// `lockbox init` recorded for this profile's vault, when the vault is that one.
    var keyFilePath: FilePath? {
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
    func requestedStore() throws -> StoreArgument {
        if let chosen = store ?? backendAlias { return chosen }
        for (name, value) in [("LOCKBOX_STORE", environment["LOCKBOX_STORE"]), ("LOCKBOX_BACKEND", environment["LOCKBOX_BACKEND"])] {
            guard let fromEnvironment = value, !fromEnvironment.isEmpty else { continue }
            guard let parsed = StoreArgument(rawValue: fromEnvironment) else {
                throw LockboxError.invalidArgument("\(name) is '\(fromEnvironment)'; use auto, secret-service, file or postgres")
            }
            return parsed
        }
        return namesFileVault ? .file : .auto
    }

    /// The store request for ``StoreSelection``: every store but PostgreSQL, which commands that
    /// work on it open with ``openStore()`` before asking the resolver.
    func requestedSelection() throws -> StoreRequest {
        let requested = try requestedStore()
        guard let request = requested.request else {
            throw LockboxError.invalidArgument(
                "this command works on the file vault or the Secret Service, not on the PostgreSQL store; "
                    + "with PostgreSQL use get, set, delete, list, wipe, init, migrate, pin, token, device-id or sign-out")
        }
        return request
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

    /// Opens the vault in PostgreSQL with the credentials given (a key file, a passphrase on a
    /// descriptor or asked on the terminal). In `lockbox`, hands the command over to `lockbox-postgres`.
    func openPostgresStore() throws -> (store: any AsyncSecretStore, fresh: Bool) {
        let support = try PostgresCommands.provider()
        let connection = try postgresConnection()
        let credentials = try unlockCredentials(prompt: "Passphrase for the vault in PostgreSQL: ")
        let opened = try support.open(connection, credentials: credentials)
        Trace.log("store: PostgreSQL at \(opened.server)")
        return (opened.store, Self.includesPassphrase(credentials))
    }

    /// Whether a passphrase is among `credentials` (a vault opened with one counts as freshly
    /// authenticated when its passphrase slot opened it).
    static func includesPassphrase(_ credentials: [VaultCredential]) -> Bool {
        credentials.contains { if case .passphrase = $0 { true } else { false } }
    }

    /// Opens the store this invocation should use, and records the choice for the profile the
    /// first time one is made. With `auto` and a recorded store that is unavailable, it fails
    /// loudly rather than switch to another, empty store.
    func openStore() throws -> any SecretStore {
        if try requestedStore() == .postgres { return try openPostgresStore().store.blocking() }
        // No freshness needed: no session-window look-up for the Secret Service.
        return try openResolvedStore(needsFreshness: false).store
    }

    /// A vault over the store this invocation uses, able to read protected items when this
    /// invocation is freshly authenticated: inside a re-authentication window (`lockbox unlock`), or with
    /// the vault passphrase given just now.
    func openVault() throws -> Vault {
        let (store, fresh) = try openStoreDetailed()
        return Vault(store: store, freshness: fresh ? InvocationFreshness.fresh : InvocationFreshness.stale)
    }

    /// The store selection these options describe: the library's one resolver.
    func selection() throws -> StoreSelection {
        StoreSelection(request: try requestedSelection(), profile: profileName, settingsPath: settingsPath,
                       vaultPath: vaultPath, secretService: SecretServiceStoreProvider())
    }

    /// The store this invocation uses, decided by ``StoreSelection``, without opening it.
    func resolveStore() throws -> StoreResolution {
        let resolution = try selection().resolve()
        Trace.log("store requested: \(resolution.selection.request); settings \(settingsPath.string), profile '\(profileName)' "
            + (resolution.recorded.map { "recorded \($0.storeKind.rawValue) (\($0.reason))" } ?? "has no recorded store"))
        Trace.log("store: \(resolution.storeKind.rawValue) (\(resolution.reason))")
        return resolution
    }

    /// The store, and whether this invocation counts as freshly authenticated.
    func openStoreDetailed() throws -> (store: any SecretStore, fresh: Bool) {
        if try requestedStore() == .postgres {
            let opened = try openPostgresStore()
            return (opened.store.blocking(), opened.fresh)
        }
        let opened = try openResolvedStore()
        return (opened.store, opened.fresh)
    }

    /// Opens the store ``StoreSelection`` chose (recording a new choice), with the resolution.
    /// `needsFreshness: false` (a command that reads no protected item: set, delete, list) skips
    /// the Secret Service's window look-up and reports `fresh` as false; a file vault still opens
    /// through its window when one is open.
    func openResolvedStore(needsFreshness: Bool = true) throws -> (store: any SecretStore, fresh: Bool, resolution: StoreResolution) {
        let resolution = try resolveStore()
        switch resolution.storeKind {
        case .file:
            // One open decides the format (docs/PERFORMANCE.md): a format-1 vault is read whole
            // by it; the read stops at the first bytes of a format-2 vault, and SQLite takes the
            // descriptor over.
            let opened = try resolution.opening { () throws -> (store: any SecretStore, fresh: Bool) in
                switch try probeVaultFile() {
                case .format1(let snapshot):
                    let opened = try openFileStore(snapshot)
                    return (opened.store, opened.fresh)
                case .format2(let file):
                    let opened = try openFormat2Store(probed: file)
                    return (opened.store, opened.fresh)
                }
            }
            return (opened.store, opened.fresh, resolution)
        case .secretService:
            let store = try resolution.opening { try resolution.openSecretService() }
            if resolution.recorded != nil, resolution.selection.request == .auto { RecordedSecretService.resolution.withLock { $0 = resolution } }
            return (store, needsFreshness ? try secretServiceWindowOpen(store, resolution) : false, resolution)
        }
    }

    private func secretServiceWindowOpen(_ store: any SecretStore, _ resolution: StoreResolution) throws -> Bool {
        guard let scope = try SessionWindow.scope(for: resolution) else { return false }
        let open = try SessionWindow.isOpen(scope: scope, store: store)
        Trace.log("store: Secret Service; re-authentication window \(open ? "open" : "not open")")
        return open
    }

    /// Opens a format-2 vault: through its re-authentication window if one is open (no
    /// credential needed), else with the credentials given. Fresh when a window or a passphrase
    /// opened it.
    func openFormat2Store(useWindow: Bool = true, probed: OpenedDatabaseFile? = nil) throws -> (store: SQLiteVaultStore, fresh: Bool) {
        Trace.log("store: file vault, format 2 (SQLite) \(vaultPath.string)")
        var credentials: [VaultCredential] = []
        let opened = try SessionWindow.openStore(format2At: vaultPath, credentials: {
            credentials = try unlockCredentials()
            return credentials
        }, window: useWindow, probed: probed)
        if opened.throughWindow {
            Trace.log("opened through the re-authentication window (no credential needed)")
            return (opened.store, true)
        }
        let slots = try opened.store.keySlots()
        Self.traceOpened(slots)
        let passphraseOpened = slots.contains { $0.openedThisHandle && $0.kind == .passphrase }
        let byPassphrase = passphraseOpened && Self.includesPassphrase(credentials)
        return (opened.store, byPassphrase)
    }

    /// Opens the file vault, format 1 or 2, with the credentials given (commands that only make
    /// sense for it: key slots, passphrase, migration).
    func openFileStore() throws -> any KeySlotManaging {
        if SQLiteVaultStore.sqliteHeader(vaultPath).isSQLite { return try openFormat2Store().store }
        return try openFileStoreDetailed().store
    }

    /// Opens the file vault: through its re-authentication window if one is open (no credential needed),
    /// else with the credentials given. Fresh when a window or a passphrase opened it.
    func openFileStoreDetailed(useWindow: Bool = true) throws -> (store: EncryptedFileStore, fresh: Bool) {
        let path = vaultPath
        // Say "no vault" before asking for a passphrase that could not help.
        if !FileManager.default.fileExists(atPath: path.string) { throw LockboxError.vaultNotFound(path: path.string) }
        return try openFileStore(EncryptedFileStore.readSnapshot(at: path), useWindow: useWindow)
    }

    /// What the vault file is, format 1 (read whole) or 2, from one open of it; "no vault" before
    /// any passphrase is asked.
    private func probeVaultFile() throws -> VaultFile.Probe {
        if !FileManager.default.fileExists(atPath: vaultPath.string) { throw LockboxError.vaultNotFound(path: vaultPath.string) }
        return try VaultFile.probe(at: vaultPath)
    }

    /// Traces which key slots opened the vault (never what opened them).
    private static func traceOpened(_ slots: [EncryptedFileStore.KeySlotInfo]) {
        Trace.log("opened: key slot(s) \(slots.indices.filter { slots[$0].openedThisHandle }.map(String.init).joined(separator: ", ")) of \(slots.count)")
    }

    /// Opens the format-1 vault file read as `snapshot`: through its re-authentication window if
    /// one is open and `useWindow`, else with the credentials given.
    private func openFileStore(_ snapshot: VaultFileSnapshot, useWindow: Bool = true) throws -> (store: EncryptedFileStore, fresh: Bool) {
        let path = vaultPath
        Trace.log("store: file vault \(path.string)")
        // The file is read once: the window (keyed by the vault ID in its header) and the
        // credentials open the same snapshot.
        if useWindow, let store = try SessionWindow.openStore(snapshot) {
            Trace.log("opened through the re-authentication window (no credential needed)")
            return (store, true)
        }
        let credentials = try unlockCredentials()
        let store = try EncryptedFileStore.open(snapshot, credentials: credentials)
        let slots = try store.keySlots()
        Self.traceOpened(slots)
        let passphraseOpened = slots.contains { $0.openedThisHandle && $0.kind == .passphrase }
        let byPassphrase = passphraseOpened && Self.includesPassphrase(credentials)
        return (store, byPassphrase)
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
