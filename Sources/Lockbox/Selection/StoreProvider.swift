import FoundationEssentials
import SystemPackage

/// What a store offers beyond the reads and writes every ``SecretStore`` has, so a program (or
/// `lockbox doctor`) can check before it relies on it.
public struct StoreCapabilities: OptionSet, Sendable, Hashable {
    /// The bits.
    public let rawValue: UInt32
    /// A set of capabilities from its bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Its items outlive the process (everything but ``MemoryStore``).
    public static let persistent = StoreCapabilities(rawValue: 1 << 0)
    /// Many hosts share it (the PostgreSQL store).
    public static let sharedAcrossHosts = StoreCapabilities(rawValue: 1 << 1)
    /// It opens with Lockbox's credentials, one key slot each: passphrases, key files, TPM seals.
    public static let keySlots = StoreCapabilities(rawValue: 1 << 2)
    /// A re-authentication window can carry its data key, so commands inside the window need no
    /// credential (the file vault).
    public static let windowCarriesKey = StoreCapabilities(rawValue: 1 << 3)
    /// ``StoreProvider/create(_:kdf:)`` makes a new, empty one.
    public static let creatable = StoreCapabilities(rawValue: 1 << 4)
}

/// What a ``StoreProvider`` is asked to open: the configuration, and how to get credentials and
/// windows when the store needs them.
public struct StoreOpenRequest {
    /// Paths, profile and key file (``LockboxConfiguration``).
    public var configuration: LockboxConfiguration
    /// The credentials, asked only when the store needs one and no window opened it.
    public var credentials: () throws -> [VaultCredential]
    /// Where re-authentication windows are kept (`SessionWindow.fileVaultWindows()`), or `nil`.
    public var window: (any FileVaultWindow)?
    /// Open without changing anything (a store that cannot, opens as it does).
    public var readOnly: Bool

    /// A request.
    /// - Parameters:
    ///   - configuration: paths, profile and key file.
    ///   - credentials: asked only when needed; `nil`: the configuration's key file
    ///     (``LockboxConfiguration/keyFileCredential()``).
    ///   - window: where re-authentication windows are kept, or `nil`.
    ///   - readOnly: open without changing anything.
    public init(
        configuration: LockboxConfiguration, credentials: (() throws -> [VaultCredential])? = nil,
        window: (any FileVaultWindow)? = nil, readOnly: Bool = false
    ) {
        self.configuration = configuration
        self.credentials =
            credentials ?? {
                guard let credential = try configuration.keyFileCredential() else {
                    throw LockboxError.invalidArgument("no key file is configured to open the vault at \(configuration.vaultPath)")
                }
                return [credential]
            }
        self.window = window
        self.readOnly = readOnly
    }
}

/// A store a ``StoreProvider`` opened.
public struct OpenedStore: Sendable {
    /// The store, for blocking code.
    public var store: any SecretStore
    /// The store for async code: its own async implementation where it has one (PostgreSQL),
    /// else ``store`` run on the shared ``BlockingExecutor``.
    public var asyncStore: any AsyncSecretStore
    /// Whether this opening counts as a fresh authentication: a window opened it, or a
    /// passphrase given now opened a passphrase slot.
    public var freshlyAuthenticated: Bool
    /// Whether a re-authentication window opened it (no credential was asked for).
    public var throughWindow: Bool
    /// Where it is, for messages: a vault path, a database server (never a password).
    public var location: String

    /// A store opened by a provider.
    /// - Parameters:
    ///   - store: the store, for blocking code.
    ///   - asyncStore: its async form; `nil`: `store` offloaded to the shared executor.
    ///   - freshlyAuthenticated: whether this opening counts as a fresh authentication.
    ///   - throughWindow: whether a re-authentication window opened it.
    ///   - location: where it is, for messages.
    public init(
        store: any SecretStore, asyncStore: (any AsyncSecretStore)? = nil, freshlyAuthenticated: Bool = false,
        throughWindow: Bool = false, location: String
    ) {
        self.store = store
        self.asyncStore = asyncStore ?? store.offloaded()
        self.freshlyAuthenticated = freshlyAuthenticated
        self.throughWindow = throughWindow
        self.location = location
    }

    /// A store whose own implementation is async (PostgreSQL).
    /// - Parameters:
    ///   - asyncStore: the store.
    ///   - freshlyAuthenticated: whether this opening counts as a fresh authentication.
    ///   - location: where it is, for messages.
    public init(asyncStore: any AsyncSecretStore, freshlyAuthenticated: Bool = false, location: String) {
        self.store = asyncStore.blocking()
        self.asyncStore = asyncStore
        self.freshlyAuthenticated = freshlyAuthenticated
        self.throughWindow = false
        self.location = location
    }
}

/// The one seam through which every store is opened: the file vault (``FileVaultProvider``),
/// the Secret Service (`SecretServiceStoreProvider` of `LockboxSecretService`), PostgreSQL
/// (`PostgresStoreProvider` of `LockboxPostgres`) and ``MemoryStore`` (``MemoryStoreProvider``).
/// ``StoreResolution/open(_:)`` picks the provider of the store a ``StoreSelection`` chose; a
/// program that knows its store calls its provider directly.
///
/// ```swift
/// let configuration = LockboxConfiguration(vaultPath: "/var/lib/app/vault.lockbox", keyFile: "/etc/app/vault.key")
/// let opened = try FileVaultProvider().open(StoreOpenRequest(configuration: configuration))
/// let vault = Vault(store: opened.store)
/// ```
public protocol StoreProvider: Sendable {
    /// The store this provider opens.
    var kind: StoreKind { get }
    /// What that store can do.
    var capabilities: StoreCapabilities { get }
    /// Opens the store `request` describes.
    func open(_ request: StoreOpenRequest) throws -> OpenedStore
    /// Creates a new, empty store with one key slot per credential of `request` (a store with
    /// ``StoreCapabilities/creatable``); the others throw ``LockboxError/invalidArgument(_:)``.
    func create(_ request: StoreOpenRequest, kdf: KDFParameters) throws -> OpenedStore
}

extension StoreProvider {
    /// Refuses: this store is not created by Lockbox.
    public func create(_ request: StoreOpenRequest, kdf: KDFParameters) throws -> OpenedStore {
        throw LockboxError.invalidArgument("the \(kind) store is not created by Lockbox")
    }
}

/// Opens the encrypted file vault, in whichever format it is (``FileVault``), through its
/// re-authentication window when the request has one, else with the request's credentials.
public struct FileVaultProvider: StoreProvider {
    /// How long a write waits for another process's write to finish.
    public var timeout: Duration

    /// A provider.
    /// - Parameter timeout: how long a write waits for another process's write to finish.
    public init(timeout: Duration = .seconds(10)) { self.timeout = timeout }

    /// ``StoreKind/file``.
    public var kind: StoreKind { .file }
    /// Persistent, opened by key slots, windows carry its data key, creatable.
    public var capabilities: StoreCapabilities { [.persistent, .keySlots, .windowCarriesKey, .creatable] }

    /// Opens the vault at the configuration's ``LockboxConfiguration/vaultPath``; "no vault"
    /// (``LockboxError/vaultNotFound(path:)``) before any credential is asked for.
    public func open(_ request: StoreOpenRequest) throws -> OpenedStore {
        let path = request.configuration.vaultPath
        if !FileManager.default.fileExists(atPath: path.string) { throw LockboxError.vaultNotFound(path: path.string) }
        var credentials: [VaultCredential] = []
        let opened = try FileVault.open(
            at: path, window: request.window,
            credentials: {
                credentials = try request.credentials()
                return credentials
            }, readOnly: request.readOnly, timeout: timeout)
        if opened.throughWindow {
            return OpenedStore(store: opened.store, freshlyAuthenticated: true, throughWindow: true, location: path.string)
        }
        let passphraseGiven = credentials.contains { if case .passphrase = $0 { true } else { false } }
        // A passphrase given now counts only if it, not a key file given with it, opened a slot.
        let fresh = try passphraseGiven && opened.store.keySlots().contains { $0.openedThisHandle && $0.kind == .passphrase }
        return OpenedStore(store: opened.store, freshlyAuthenticated: fresh, location: path.string)
    }

    /// Creates a format-2 vault at the configuration's ``LockboxConfiguration/vaultPath``
    /// (``FileVault/create(at:credentials:kdf:timeout:now:)``).
    public func create(_ request: StoreOpenRequest, kdf: KDFParameters) throws -> OpenedStore {
        let path = request.configuration.vaultPath
        let store = try FileVault.create(at: path, credentials: request.credentials(), kdf: kdf, timeout: timeout)
        return OpenedStore(store: store, location: path.string)
    }
}

/// Opens a new, empty ``MemoryStore`` each time: for tests.
public struct MemoryStoreProvider: StoreProvider {
    /// A provider.
    public init() {}
    /// ``StoreKind/memory``.
    public var kind: StoreKind { .memory }
    /// None: its items live in this process only.
    public var capabilities: StoreCapabilities { [] }
    /// A new, empty ``MemoryStore``.
    public func open(_ request: StoreOpenRequest) throws -> OpenedStore {
        OpenedStore(store: MemoryStore(), location: "memory")
    }
}
