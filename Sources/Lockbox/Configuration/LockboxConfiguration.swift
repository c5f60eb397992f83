import CoreMetrics
import FoundationEssentials
import Logging
import SystemPackage

/// Everything a program configures Lockbox with, in one value: which store, where the vault and
/// its key file are, how PINs are hashed, how much memory, how many cores and how many threads the
/// blocking work may take.
///
/// The library reads no environment variable and no configuration file around it: a program
/// builds this value — by hand, with ``forUser(environment:)`` (the XDG paths the `lockbox` CLI
/// uses), or from swift-configuration's `ConfigReader` through the `LockboxSwiftConfiguration`
/// product (`LOCKBOX_*` environment variables, a JSON file; YAML with swift-configuration's `YAML`
/// trait) — and creates Lockbox's types
/// from it:
///
/// ```swift
/// let configuration = LockboxConfiguration(
///     vaultPath: "/var/lib/myservice/vault.lockbox",
///     keyFile: "/run/credentials/myservice.service/vault-key",
///     pinPreset: .server)
/// let store = try configuration.openFileVault()
/// let executor = configuration.makeExecutor()
/// let pins = configuration.pinGuard(store: store, executor: executor)
/// let tokens = configuration.tokenStore(store: store, executor: executor)
/// ```
public struct LockboxConfiguration: Sendable {
    /// The store asked for: `auto`, or a store by name (``storeSelection(secretService:providers:)``).
    public var store: StoreRequest
    /// The profile a store choice is recorded under (``StoreSettings``).
    public var profile: String
    /// The file vault.
    public var vaultPath: FilePath
    /// The settings file that records each profile's store choice; `nil` when the program only
    /// ever asks for a store explicitly (`file` or `secret-service`) and records nothing.
    public var settingsPath: FilePath?
    /// The key file that opens the vault, if it is opened with one.
    public var keyFile: FilePath?
    /// Which key files ``keyFile`` may be (``KeyFileAccess``): owner-only by default.
    public var keyFileAccess: KeyFileAccess
    /// The folder the item locks of ``PinGuard``, ``TokenRefresher`` and ``DeviceIdentity`` go in
    /// (each in a subfolder of its own); `nil`: their defaults (beside the file vault). Every
    /// process that shares the store must use the same one.
    public var lockDirectory: FilePath?
    /// How PINs are hashed and their failures written (``PinPreset/desktop`` or ``PinPreset/server``).
    public var pinPreset: PinPreset
    /// The memory concurrent Argon2id hashes may take together, in bytes; `nil`:
    /// ``HashMemoryBudget/defaultBytes`` (a quarter of the machine's or container's memory).
    public var hashMemoryBudgetBytes: UInt64?
    /// How many Argon2id hashes may run at once (``HashMemoryBudget/concurrentHashes``), apart
    /// from ``blockingThreads``; `nil`: ``HashMemoryBudget/defaultConcurrentHashes``, one less
    /// than the cores the process may use, so a core stays free for the requests that do not hash.
    public var concurrentHashes: Int?
    /// How many blocking jobs run at once on the executor (``makeExecutor()``); `nil`:
    /// ``BlockingExecutor/defaultThreadCount``.
    public var blockingThreads: Int?
    /// How much lower the executor's threads run than the program's others, as a nice increment
    /// 0...19 (``BlockingExecutor/niceness``); `nil`: 0, the same priority.
    public var blockingThreadNiceness: Int?
    /// The TCTI that reaches the TPM (the `LockboxTPM` product), e.g. `device:/dev/tpmrm0`; `nil`:
    /// its default.
    public var tpmTCTI: String?
    /// The most seconds one TPM operation (connecting, then every command it sends) may take,
    /// above 0 and at most 3600; `nil`: the `LockboxTPM` product's default, 5 (the Secret Service
    /// store's per-call timeout). Give it to `TPMSealer`'s `timeout`.
    public var tpmTimeoutSeconds: Double?

    /// A configuration with every value given; those left out take the defaults documented on
    /// each property.
    public init(
        store: StoreRequest = .file, profile: String = "default", vaultPath: FilePath, settingsPath: FilePath? = nil,
        keyFile: FilePath? = nil, keyFileAccess: KeyFileAccess = .ownerOnly, lockDirectory: FilePath? = nil,
        pinPreset: PinPreset = .desktop, hashMemoryBudgetBytes: UInt64? = nil, concurrentHashes: Int? = nil,
        blockingThreads: Int? = nil, blockingThreadNiceness: Int? = nil, tpmTCTI: String? = nil,
        tpmTimeoutSeconds: Double? = nil
    ) {
        self.store = store
        self.profile = profile
        self.vaultPath = vaultPath
        self.settingsPath = settingsPath
        self.keyFile = keyFile
        self.keyFileAccess = keyFileAccess
        self.lockDirectory = lockDirectory
        self.pinPreset = pinPreset
        self.hashMemoryBudgetBytes = hashMemoryBudgetBytes
        self.concurrentHashes = concurrentHashes
        self.blockingThreads = blockingThreads
        self.blockingThreadNiceness = blockingThreadNiceness
        self.tpmTCTI = tpmTCTI
        self.tpmTimeoutSeconds = tpmTimeoutSeconds
    }

    /// What the `lockbox` CLI uses for a user at a shell: `auto` store selection, the vault at
    /// ``EncryptedFileStore/defaultPath(environment:)`` and the settings at
    /// ``StoreSettings/defaultPath(environment:)`` (the XDG base directories, from the
    /// `environment` the program passes — Lockbox reads none itself), the desktop PIN preset.
    public static func forUser(environment: [String: String]) -> LockboxConfiguration {
        LockboxConfiguration(
            store: .auto, vaultPath: FileVault.defaultPath(environment: environment),
            settingsPath: StoreSettings.defaultPath(environment: environment))
    }

    /// Checks the values a person could have mistyped: throws ``LockboxError/invalidArgument(_:)``
    /// naming the setting.
    public func validate() throws {
        guard !profile.isEmpty else { throw LockboxError.invalidArgument("the profile name is empty") }
        guard !vaultPath.isEmpty else { throw LockboxError.invalidArgument("the vault path is empty") }
        if let keyFile, keyFile.isEmpty { throw LockboxError.invalidArgument("the key file path is empty") }
        if let hashMemoryBudgetBytes, hashMemoryBudgetBytes == 0 {
            throw LockboxError.invalidArgument("the hash memory budget is 0 bytes; give at least one PIN hash's memory")
        }
        if let concurrentHashes, !(1...1024).contains(concurrentHashes) {
            throw LockboxError.invalidArgument("concurrent hashes must be 1 to 1024, not \(concurrentHashes)")
        }
        if let blockingThreads, !(1...1024).contains(blockingThreads) {
            throw LockboxError.invalidArgument("blocking threads must be 1 to 1024, not \(blockingThreads)")
        }
        if let blockingThreadNiceness, !(0...19).contains(blockingThreadNiceness) {
            throw LockboxError.invalidArgument("the blocking threads' niceness must be 0 to 19, not \(blockingThreadNiceness)")
        }
        if let tpmTimeoutSeconds, !(tpmTimeoutSeconds > 0 && tpmTimeoutSeconds <= 3600) {
            throw LockboxError.invalidArgument("the TPM timeout must be above 0 and at most 3600 seconds, not \(tpmTimeoutSeconds)")
        }
    }

    // MARK: Building what it describes

    /// The credential ``keyFile`` gives, read now with ``KeyFile/read(at:access:)``; `nil` when
    /// no key file is configured.
    public func keyFileCredential() throws -> VaultCredential? {
        guard let keyFile else { return nil }
        return .key(try KeyFile.read(at: keyFile, access: keyFileAccess))
    }

    /// Opens the file vault at ``vaultPath`` with ``keyFile``, in whichever format it is
    /// (``FileVault/open(at:credentials:readOnly:timeout:now:)``). Throws
    /// ``LockboxError/invalidArgument(_:)`` when no key file is configured (open a vault with a
    /// passphrase with ``FileVault/open(at:credentials:readOnly:timeout:now:)``).
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func openFileVault() throws -> any KeySlotManaging {
        try validate()
        guard let credential = try keyFileCredential() else {
            throw LockboxError.invalidArgument("no key file is configured to open the vault at \(vaultPath)")
        }
        return try FileVault.open(at: vaultPath, credential: credential)
    }

    /// ``openFileVault()``, awaited: reading the key file and opening the vault run on
    /// ``BlockingExecutor/shared``, so a caller on Swift's cooperative pool suspends instead of
    /// blocking a thread.
    public func openFileVault() async throws -> any KeySlotManaging {
        try await BlockingExecutor.shared.run { try self.openFileVault() }
    }

    /// The store selection this configuration describes (``StoreSelection``), which records its
    /// choice in ``settingsPath``. Without a settings file, a store asked for by name is used
    /// and nothing is recorded (a service that always uses the file vault needs none); `auto`
    /// throws ``LockboxError/invalidArgument(_:)``, having nowhere to record its choice.
    /// - Parameters:
    ///   - secretService: how to reach the Secret Service, or `nil`.
    ///   - providers: providers beyond the built-in ones (a PostgreSQL provider).
    public func storeSelection(
        secretService: (any SecretServiceProvider)? = nil, providers: [any StoreProvider] = []
    ) throws -> StoreSelection {
        try validate()
        let settings: FilePath
        if let settingsPath {
            settings = settingsPath
        } else if store != .auto {
            settings = FilePath()  // none: nothing is read or recorded
        } else {
            throw LockboxError.invalidArgument("choosing a store records the choice in a settings file, and none is configured")
        }
        return StoreSelection(
            request: store, profile: profile, settingsPath: settings, vaultPath: vaultPath,
            secretService: secretService, providers: providers)
    }

    /// Opens the store this configuration names through its provider: ``storeSelection(secretService:providers:)``
    /// resolved, then ``StoreResolution/open(_:)``, with ``keyFile`` as the credential.
    /// - Parameters:
    ///   - secretService: how to reach the Secret Service, or `nil`.
    ///   - providers: providers beyond the built-in ones (a PostgreSQL provider).
    ///   - window: where re-authentication windows are kept (`SessionWindow.fileVaultWindows()`), or `nil`.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func openStore(
        secretService: (any SecretServiceProvider)? = nil, providers: [any StoreProvider] = [],
        window: (any FileVaultWindow)? = nil
    ) throws -> OpenedStore {
        try storeSelection(secretService: secretService, providers: providers).resolve()
            .open(StoreOpenRequest(configuration: self, window: window))
    }

    /// ``openStore(secretService:providers:window:)``, awaited: resolving the store (which may
    /// connect to the Secret Service), reading the key file and opening the store run on
    /// ``BlockingExecutor/shared``, so a caller on Swift's cooperative pool suspends instead of
    /// blocking a thread.
    /// - Parameters:
    ///   - secretService: how to reach the Secret Service, or `nil`.
    ///   - providers: providers beyond the built-in ones (a PostgreSQL provider).
    ///   - window: where re-authentication windows are kept (`SessionWindow.fileVaultWindows()`), or `nil`.
    public func openStore(
        secretService: (any SecretServiceProvider)? = nil, providers: [any StoreProvider] = [],
        window: (any FileVaultWindow)? = nil
    ) async throws -> OpenedStore {
        try await BlockingExecutor.shared.run {
            try self.openStore(secretService: secretService, providers: providers, window: window)
        }
    }

    /// A new executor with ``blockingThreads`` threads at ``blockingThreadNiceness`` and a
    /// ``HashMemoryBudget`` of ``hashMemoryBudgetBytes`` and ``concurrentHashes``. Make one per
    /// program and hand it to every type.
    public func makeExecutor() -> BlockingExecutor {
        BlockingExecutor(
            threadCount: blockingThreads ?? BlockingExecutor.defaultThreadCount,
            hashMemoryBudget: HashMemoryBudget(bytes: hashMemoryBudgetBytes, concurrentHashes: concurrentHashes),
            niceness: Int32(blockingThreadNiceness ?? 0))
    }

    /// A ``PinGuard`` over `store` with ``pinPreset`` and the configured lock folder, logging to
    /// `logger` and recording metrics into `metricsFactory`.
    public func pinGuard(
        store: any SecretStore, executor: BlockingExecutor = .shared, logger: Logger = .lockboxDefault,
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) -> PinGuard {
        PinGuard(
            store: store, preset: pinPreset, lockDirectory: lockDirectory?.appending("pin-locks"), executor: executor,
            logger: logger, metricsFactory: metricsFactory)
    }

    /// A ``TokenRefresher`` over `store` with the configured lock folder, logging to `logger` and
    /// recording metrics into `metricsFactory`.
    public func tokenRefresher(
        store: any SecretStore, executor: BlockingExecutor = .shared, logger: Logger = .lockboxDefault,
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) -> TokenRefresher {
        TokenRefresher(
            store: store, lockDirectory: lockDirectory?.appending("token-locks"), executor: executor,
            logger: logger, metricsFactory: metricsFactory)
    }

    /// The former name of ``tokenRefresher(store:executor:logger:metricsFactory:)``.
    @available(*, deprecated, renamed: "tokenRefresher(store:executor:logger:metricsFactory:)")
    public func tokenStore(
        store: any SecretStore, executor: BlockingExecutor = .shared, logger: Logger = .lockboxDefault,
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) -> TokenRefresher {
        tokenRefresher(store: store, executor: executor, logger: logger, metricsFactory: metricsFactory)
    }

    /// A ``DeviceIdentity`` over `store` with the configured lock folder.
    public func deviceIdentity(store: any SecretStore, executor: BlockingExecutor = .shared) -> DeviceIdentity {
        DeviceIdentity(store: store, lockDirectory: lockDirectory?.appending("id-locks"), executor: executor)
    }
}
