import FoundationEssentials
import Lockbox
import LockboxSecretService
import LockboxSessionWindows
import SystemPackage

/// The one place the commands open a store: ``VaultOptions`` parsed once into the library's
/// ``LockboxConfiguration``, then opened through the library's providers, as a service opens
/// them — ``StoreResolution/open(_:)`` for the store the selection chose, ``FileVault`` for the
/// commands that work on the file vault itself, and the PostgreSQL provider `lockbox-postgres`
/// registers (``PostgresCommands``). Re-authentication windows come in through
/// `SessionWindow.fileVaultWindows()`; the window's scope comes from the same resolution.
struct StoreOpener {
    /// What the command line and the environment said.
    let options: VaultOptions
    /// The same, as the library's configuration (vault path, key file, profile, settings file,
    /// store asked for), worked out once.
    let configuration: LockboxConfiguration

    init(_ options: VaultOptions) throws {
        self.options = options
        self.configuration = try options.configuration()
    }

    /// The credentials given (key file, passphrase descriptor, TPM, or a prompt).
    func credentials(prompt: String? = nil) throws -> [VaultCredential] {
        try options.unlockCredentials(prompt: prompt, keyFile: configuration.keyFile, vaultPath: configuration.vaultPath)
    }

    /// The request every provider is given: this configuration, its credentials when needed,
    /// the session's windows.
    private func request(prompt: String? = nil, window: Bool = true) -> StoreOpenRequest {
        StoreOpenRequest(
            configuration: configuration, credentials: { try credentials(prompt: prompt) },
            window: window ? SessionWindow.fileVaultWindows() : nil)
    }

    /// The PostgreSQL provider `lockbox-postgres` registers for the URL these options name. In
    /// `lockbox`, this hands the command over to `lockbox-postgres` and does not return.
    func postgresProvider() throws -> any StoreProvider {
        try PostgresCommands.provider().provider(options.postgresConnection())
    }

    /// The store selection these options describe: the library's one resolver. PostgreSQL only
    /// with `allowPostgres` (the commands that work on it).
    func selection(allowPostgres: Bool = false) throws -> StoreSelection {
        if configuration.store == .postgres && !allowPostgres {
            throw LockboxError.invalidArgument(
                "this command works on the file vault or the Secret Service, not on the PostgreSQL store; "
                    + "with PostgreSQL use get, set, delete, list, wipe, init, migrate, pin, token, device-id or sign-out")
        }
        let providers = configuration.store == .postgres ? [try postgresProvider()] : []
        // Built field by field rather than with `configuration.storeSelection`, whose validation
        // would refuse an empty --profile or --vault that the commands have always taken.
        return StoreSelection(
            request: configuration.store, profile: configuration.profile,
            settingsPath: configuration.settingsPath ?? options.settingsPath, vaultPath: configuration.vaultPath,
            secretService: SecretServiceStoreProvider(), providers: providers)
    }

    /// The store this invocation uses, decided by ``StoreSelection``, without opening it.
    func resolveStore(allowPostgres: Bool = false) throws -> StoreResolution {
        let resolution = try selection(allowPostgres: allowPostgres).resolve()
        Trace.log(
            "store requested: \(resolution.selection.request); settings \(configuration.settingsPath?.string ?? "-"), profile '\(configuration.profile)' "
                + (resolution.recorded.map { "recorded \($0.storeKind.rawValue) (\($0.reason))" } ?? "has no recorded store"))
        Trace.log("store: \(resolution.storeKind.rawValue) (\(resolution.reason))")
        return resolution
    }

    /// Opens the store this invocation should use, and records the choice for the profile the
    /// first time one is made. With `auto` and a recorded store that is unavailable, it fails
    /// loudly rather than switch to another, empty store. `movesSecrets`: the command will read or
    /// write a secret (`set`), so a Secret Service session is prepared while the bus connects.
    func openStore(movesSecrets: Bool = false) throws -> any SecretStore {
        // No freshness needed: no session-window look-up for the Secret Service.
        try open(needsFreshness: false, allowPostgres: true, movesSecrets: movesSecrets).store
    }

    /// A vault over the store this invocation uses, able to read protected items when this
    /// invocation is freshly authenticated: inside a re-authentication window (`lockbox unlock`), or with
    /// the vault passphrase given just now.
    func openVault() throws -> Vault {
        let opened = try open(allowPostgres: true, movesSecrets: true)
        return Vault(store: opened.store, freshness: opened.fresh ? InvocationFreshness.fresh : InvocationFreshness.stale)
    }

    /// Opens the store ``StoreSelection`` chose through its provider (recording a new choice),
    /// with the resolution. `needsFreshness: false` (a command that reads no protected item: set,
    /// delete, list) skips the Secret Service's window look-up and reports `fresh` as false; a
    /// file vault still opens through its window when one is open. `movesSecrets: true` (a command
    /// that reads or writes a secret) starts preparing the Secret Service's encrypted session
    /// before connecting, when that is the store.
    func open(needsFreshness: Bool = true, allowPostgres: Bool = false, movesSecrets: Bool = false) throws -> (
        store: any SecretStore, fresh: Bool, resolution: StoreResolution
    ) {
        let resolution = try resolveStore(allowPostgres: allowPostgres)
        // A command that reads or writes a secret in the Secret Service: the encrypted session's
        // library starts loading now, beside connecting to the bus, not after it.
        if movesSecrets && resolution.storeKind == .secretService { SecretServiceStore.prepareSession() }
        let prompt = resolution.storeKind == .postgres ? "Passphrase for the vault in PostgreSQL: " : nil
        let opened = try resolution.open(request(prompt: prompt))
        switch resolution.storeKind {
        case .file:
            Trace.log("store: file vault \(opened.location)")
            try Self.traceOpened(opened.store, throughWindow: opened.throughWindow)
            return (opened.store, opened.freshlyAuthenticated, resolution)
        case .secretService:
            if resolution.recorded != nil, resolution.selection.request == .auto {
                RecordedSecretService.resolution.withLock { $0 = resolution }
            }
            return (opened.store, needsFreshness ? try secretServiceWindowOpen(opened.store, resolution) : false, resolution)
        case .postgres:
            Trace.log("store: PostgreSQL at \(opened.location)")
            return (opened.store, opened.freshlyAuthenticated, resolution)
        case .memory:
            return (opened.store, opened.freshlyAuthenticated, resolution)
        }
    }

    private func secretServiceWindowOpen(_ store: any SecretStore, _ resolution: StoreResolution) throws -> Bool {
        guard let scope = try SessionWindow.scope(for: resolution) else { return false }
        let open = try SessionWindow.isOpen(scope: scope, store: store)
        Trace.log("store: Secret Service; re-authentication window \(open ? "open" : "not open")")
        return open
    }

    /// Opens the file vault, format 1 or 2, through its window if one is open, else with the
    /// credentials given (commands that only make sense for it: key slots, passphrase, migration).
    func openFileStore() throws -> any KeySlotManaging {
        let path = configuration.vaultPath
        // Say "no vault" before asking for a passphrase that could not help.
        if !FileManager.default.fileExists(atPath: path.string) { throw LockboxError.vaultNotFound(path: path.string) }
        Trace.log("store: file vault \(path.string)")
        let opened = try FileVault.open(at: path, window: SessionWindow.fileVaultWindows(), credentials: { try credentials() })
        try Self.traceOpened(opened.store, throughWindow: opened.throughWindow)
        return opened.store
    }

    /// ``openFileStore()`` for a command that lists or changes the vault's key slots or data key
    /// (`passwd`, `rotate-key`, `slot`): refused, before anything is opened, when the store asked
    /// for is PostgreSQL (``refuseKeySlotsInPostgres(_:)``).
    func openFileStoreForKeySlots(_ command: String) throws -> any KeySlotManaging {
        try refuseKeySlotsInPostgres(command)
        return try openFileStore()
    }

    /// Throws ``LockboxError/invalidArgument(_:)`` (exit 64) when the store asked for is PostgreSQL:
    /// `command` works on the file vault's key slots, and lockbox does not change a vault in
    /// PostgreSQL's key slots or data key (`init` sets them). Without this the command would
    /// quietly work on a file vault at the default path instead.
    func refuseKeySlotsInPostgres(_ command: String) throws {
        guard configuration.store == .postgres else { return }
        throw LockboxError.invalidArgument(
            "`lockbox \(command)` works on the file vault's key slots; a vault in PostgreSQL keeps the key slots and data key "
                + "`lockbox --store postgres init` gave it, and lockbox does not change them (docs/POSTGRES.md, \"Key slots\")")
    }

    /// Opens `kind` by name (`migrate --from/--to`): the file vault, the Secret Service, or
    /// PostgreSQL, each through its provider.
    func open(_ kind: StoreKind) throws -> any SecretStore {
        switch kind {
        case .file: return try openFileStore()
        case .secretService: return try SecretServiceStoreProvider().open(request(window: false)).store
        case .postgres: return try openPostgresStore()
        case .memory: return try MemoryStoreProvider().open(request(window: false)).store
        }
    }

    /// Opens the vault in PostgreSQL with the credentials given, through the provider
    /// `lockbox-postgres` registers.
    func openPostgresStore() throws -> any SecretStore {
        let provider = try postgresProvider()
        let opened = try provider.open(request(prompt: "Passphrase for the vault in PostgreSQL: ", window: false))
        Trace.log("store: PostgreSQL at \(opened.location)")
        return opened.store
    }

    /// Creates a vault in PostgreSQL with `credentials`, through the registered provider; the
    /// server it is on (never a password).
    func createPostgresVault(credentials: [VaultCredential], kdf: KDFParameters) throws -> String {
        let provider = try postgresProvider()
        return try provider.create(StoreOpenRequest(configuration: configuration, credentials: { credentials }), kdf: kdf).location
    }

    /// Traces which key slots opened the vault (never what opened them), or that a window did.
    private static func traceOpened(_ store: any SecretStore, throughWindow: Bool) throws {
        guard Trace.enabled else { return }
        if throughWindow {
            Trace.log("opened through the re-authentication window (no credential needed)")
            return
        }
        guard let slots = try (store as? any KeySlotManaging)?.keySlots() else { return }
        Trace.log(
            "opened: key slot(s) \(slots.indices.filter { slots[$0].openedThisHandle }.map(String.init).joined(separator: ", ")) of \(slots.count)"
        )
    }
}

extension VaultOptions {
    /// The one opener of this command's store (``StoreOpener``): these options parsed once into
    /// the library's configuration.
    func storeOpener() throws -> StoreOpener { try StoreOpener(self) }
}
