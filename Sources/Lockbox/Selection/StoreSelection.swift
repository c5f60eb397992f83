import FoundationEssentials
import SystemPackage

/// The store asked for: a ``StoreKind``, or `auto`. It names a choice, not a store: the stores
/// themselves are named only by ``StoreKind``, and this type adds `auto` (let ``StoreSelection``
/// choose and record the choice). What a program asks for (`--store`, `LOCKBOX_STORE`,
/// ``LockboxConfiguration/store``) is a `StoreRequest`; what was chosen, recorded or opened
/// (``StoreResolution/storeKind``, ``StoreProvider/kind``) is a ``StoreKind``.
public enum StoreRequest: Sendable, Hashable, RawRepresentable, CaseIterable, CustomStringConvertible {
    /// The store recorded for the profile; the first time, the Secret Service when it is
    /// reachable and unlocked, else the file vault — and that choice is recorded.
    case auto
    /// The store named.
    case store(StoreKind)

    /// A request for `kind`.
    public init(_ kind: StoreKind) { self = .store(kind) }

    /// `auto`, or the ``StoreKind`` named `rawValue`; `nil` for any other text.
    public init?(rawValue: String) {
        if rawValue == "auto" {
            self = .auto
        } else if let kind = StoreKind(rawValue: rawValue) {
            self = .store(kind)
        } else {
            return nil
        }
    }

    /// `auto`, then every ``StoreKind``.
    public static var allCases: [StoreRequest] { [.auto] + StoreKind.allCases.map(StoreRequest.store) }

    /// The store named, or `nil` for `auto`.
    public var kind: StoreKind? {
        if case .store(let kind) = self { return kind }
        return nil
    }

    /// `auto`, `secret-service`, `file`, `postgres` or `memory`.
    public var rawValue: String { kind?.rawValue ?? "auto" }

    /// `auto`, `secret-service`, `file`, `postgres` or `memory`.
    public var description: String { rawValue }

    /// The Secret Service: `.store(.secretService)`.
    public static let secretService = StoreRequest.store(.secretService)
    /// The encrypted file vault: `.store(.file)`.
    public static let file = StoreRequest.store(.file)
    /// A vault in PostgreSQL: `.store(.postgres)`; needs a PostgreSQL provider (``StoreSelection/providers``).
    public static let postgres = StoreRequest.store(.postgres)
    /// A ``MemoryStore`` (tests): `.store(.memory)`.
    public static let memory = StoreRequest.store(.memory)
}

/// A store that can say whether it is locked right now (the Secret Service's default
/// collection): ``StoreSelection`` uses the Secret Service for `auto` only when it is unlocked.
public protocol LockableSecretStore: SecretStore {
    /// Whether the store is locked now (reads and writes would fail until it is unlocked).
    func isLocked() throws -> Bool
}

/// Connects to the Secret Service for ``StoreSelection``. The core links no libsecret:
/// `LockboxSecretService` provides one (`SecretServiceStoreProvider`); a program without it passes `nil`,
/// and then `auto` means the file vault.
///
/// It is the Secret Service's ``StoreProvider``: opening connects.
public protocol SecretServiceProvider: StoreProvider {
    /// Connects; throws ``LockboxError/noSessionBus(detail:)``,
    /// ``LockboxError/secretServiceUnavailable(detail:)`` or
    /// ``LockboxError/secretServiceTimeout(operation:seconds:)`` when it cannot.
    func connect() throws -> any LockableSecretStore
}

extension SecretServiceProvider {
    /// ``StoreKind/secretService``.
    public var kind: StoreKind { .secretService }
    /// Persistent; the login keyring unlocks it, not Lockbox's credentials.
    public var capabilities: StoreCapabilities { [.persistent] }
    /// Connects (``connect()``); the request's credentials are not used.
    public func open(_ request: StoreOpenRequest) throws -> OpenedStore {
        OpenedStore(store: try connect(), location: "the Secret Service")
    }
}

/// The one place that decides which store a profile uses: `auto | secret-service | file`, with
/// the choice recorded per profile in ``StoreSettings`` the first time one is made, and the
/// rule that a recorded store that is not available stops everything (``LockboxError/recordedStoreUnavailable(store:settingsPath:reason:)``)
/// rather than switching to another, empty one.
///
/// ```swift
/// let user = LockboxConfiguration.forUser(environment: ProcessInfo.processInfo.environment)
/// let selection = try user.storeSelection(secretService: SecretServiceStoreProvider())
/// let resolution = try selection.resolve()
/// let store = try resolution.open(credentials: [.keyFile("/run/credentials/app/vault-key")])
/// ```
///
/// The `lockbox` CLI, `lockbox doctor`, the examples and the re-authentication window's scope
/// (`SessionWindow.scope(for:)`) all go through it, so they agree on the store.
public struct StoreSelection: Sendable {
    /// The store asked for.
    public var request: StoreRequest
    /// The profile whose choice is recorded.
    public var profile: String
    /// The settings file that records each profile's choice; empty: none, so a store asked for
    /// by name is used without reading or recording anything.
    public var settingsPath: FilePath
    /// The file vault's path.
    public var vaultPath: FilePath
    /// How to reach the Secret Service; `nil` when the program does not use it.
    public var secretService: (any SecretServiceProvider)?
    /// The providers of the stores beyond the built-in ones (``FileVaultProvider``,
    /// ``MemoryStoreProvider``, and ``secretService``): a PostgreSQL provider, or a replacement
    /// for a built-in one.
    public var providers: [any StoreProvider]

    /// A selection.
    /// - Parameters:
    ///   - request: the store asked for.
    ///   - profile: whose choice is recorded (default `default`).
    ///   - settingsPath: the settings file (a user's: ``StoreSettings/defaultPath(environment:)``).
    ///   - vaultPath: the file vault (a user's: ``EncryptedFileStore/defaultPath(environment:)``).
    ///   - secretService: how to reach the Secret Service, or `nil`.
    ///   - providers: providers beyond the built-in ones (a PostgreSQL provider).
    ///
    /// ``LockboxConfiguration/storeSelection(secretService:providers:)`` makes one from a configuration.
    public init(
        request: StoreRequest = .auto, profile: String = "default",
        settingsPath: FilePath, vaultPath: FilePath,
        secretService: (any SecretServiceProvider)? = nil, providers: [any StoreProvider] = []
    ) {
        self.request = request
        self.profile = profile
        self.settingsPath = settingsPath
        self.vaultPath = vaultPath
        self.secretService = secretService
        self.providers = providers
    }

    /// The provider that opens `kind`: one of ``providers``, else the built-in one; `nil` when
    /// this program has none (PostgreSQL without its provider, the Secret Service without
    /// ``secretService``).
    public func provider(for kind: StoreKind) -> (any StoreProvider)? {
        if let given = providers.first(where: { $0.kind == kind }) { return given }
        switch kind {
        case .file: return FileVaultProvider()
        case .memory: return MemoryStoreProvider()
        case .secretService: return secretService
        case .postgres: return nil
        }
    }

    /// Decides the store, without opening the file vault (no credential is needed) and without
    /// recording anything: ``StoreResolution/open(credentials:)`` or
    /// ``StoreResolution/opening(_:)`` records a new choice once the store opened.
    ///
    /// For `auto` with nothing recorded, it connects to the Secret Service to see whether it is
    /// reachable and unlocked; the connection is kept in the resolution and reused.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func resolve() throws -> StoreResolution {
        if let kind = request.kind, !kind.isRecordable || settingsPath.isEmpty {
            // Never recorded (or nowhere to record it), so the settings are not read.
            return StoreResolution(
                selection: self, storeKind: kind, reason: "asked for explicitly", recorded: nil,
                recordReason: nil, connection: nil)
        }
        let recorded = try StoreSettings.load(from: settingsPath).profiles[profile]
        func resolution(_ storeKind: StoreKind, _ reason: String, record: String?, connection: (any LockableSecretStore)? = nil)
            -> StoreResolution
        {
            StoreResolution(
                selection: self, storeKind: storeKind, reason: reason, recorded: recorded,
                recordReason: recorded == nil ? record : nil, connection: connection)
        }
        switch request {
        case .store(let kind):
            return resolution(kind, "asked for explicitly", record: "requested explicitly")
        case .auto:
            if let recorded {
                let when = recorded.recorded.formatted(.iso8601)
                return resolution(recorded.storeKind, "recorded for profile '\(profile)' on \(when): \(recorded.reason)", record: nil)
            }
            var why = "no Secret Service"
            if let secretService {
                do {
                    let store = try secretService.connect()
                    if try !store.isLocked() {
                        return resolution(
                            .secretService, "nothing recorded yet; the Secret Service is reachable and unlocked",
                            record: "chosen automatically: the Secret Service was reachable and unlocked", connection: store)
                    }
                    why = "the Secret Service's default collection was locked"
                } catch let error as LockboxError {
                    why = error.description
                }
            } else {
                why = "this program has no Secret Service support"
            }
            return resolution(.file, "nothing recorded yet; not the Secret Service: \(why)", record: "chosen automatically: \(why)")
        }
    }

    /// ``resolve()``, awaited: reading the settings and, for `auto` with nothing recorded,
    /// connecting to the Secret Service run on ``BlockingExecutor/shared``, so a caller on Swift's
    /// cooperative pool suspends instead of blocking a thread.
    public func resolve() async throws -> StoreResolution {
        try await BlockingExecutor.shared.run { try self.resolve() }
    }
}

/// The store a ``StoreSelection`` resolved to: which one, why, and how to open it.
public struct StoreResolution: Sendable {
    /// The selection it came from.
    public let selection: StoreSelection
    /// The store to use.
    public let storeKind: StoreKind
    /// Why this store (for diagnostics and traces).
    public let reason: String
    /// The profile's recorded choice, if one was recorded before.
    public let recorded: StoreSettings.Profile?
    /// Set when this choice is new: what to record once the store opened.
    let recordReason: String?
    /// The Secret Service connection made while deciding, reused by ``openSecretService()``.
    let connection: (any LockableSecretStore)?

    /// Whether the choice is new (nothing was recorded for the profile yet).
    public var isNewChoice: Bool { recordReason != nil }

    /// Runs `open`, the caller's way of opening the resolved store (the file vault through a
    /// session window, or with credentials), and then records the choice if it is new. When the
    /// choice was recorded before and the store is not available (no vault file, no session bus,
    /// no Secret Service provider, a timeout), throws
    /// ``LockboxError/recordedStoreUnavailable(store:settingsPath:reason:)``: never another,
    /// empty store.
    public func opening<Opened>(_ open: () throws -> Opened) throws -> Opened {
        let opened: Opened
        do {
            opened = try open()
        } catch let error as LockboxError where recorded != nil && selection.request == .auto && Self.meansUnavailable(error) {
            throw LockboxError.recordedStoreUnavailable(
                store: storeKind.rawValue, settingsPath: selection.settingsPath.string, reason: error.description)
        }
        try recordChoice()
        return opened
    }

    /// The Secret Service store (the connection made while resolving, or a new one). Throws
    /// ``LockboxError/secretServiceUnavailable(detail:)`` when the selection has no provider.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func openSecretService() throws -> any LockableSecretStore {
        if let connection { return connection }
        guard let provider = selection.secretService else {
            throw LockboxError.secretServiceUnavailable(detail: "no Secret Service provider was given to StoreSelection")
        }
        return try provider.connect()
    }

    /// Opens the resolved store with `credentials` through its provider
    /// (``StoreSelection/provider(for:)``); records the choice if it is new.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func open(credentials: [VaultCredential]) throws -> any SecretStore {
        try open(
            StoreOpenRequest(
                configuration: LockboxConfiguration(
                    store: selection.request, profile: selection.profile, vaultPath: selection.vaultPath,
                    settingsPath: selection.settingsPath),
                credentials: { credentials })
        ).store
    }

    /// Opens the resolved store through its provider (``StoreSelection/provider(for:)``): the
    /// one way every program, the `lockbox` CLI included, opens a store it did not name itself.
    /// Records the choice if it is new; a recorded store that is not available throws
    /// ``LockboxError/recordedStoreUnavailable(store:settingsPath:reason:)`` (``opening(_:)``).
    /// The Secret Service connection made while resolving is reused.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func open(_ request: StoreOpenRequest) throws -> OpenedStore {
        try opening { () throws -> OpenedStore in
            if storeKind == .secretService, let connection {
                return OpenedStore(store: connection, location: "the Secret Service")
            }
            guard let provider = selection.provider(for: storeKind) else {
                if storeKind == .secretService { _ = try openSecretService() }  // its own error
                throw LockboxError.invalidArgument("this program has no provider for the \(storeKind) store")
            }
            return try provider.open(request)
        }
    }

    /// ``openSecretService()``, awaited: connecting runs on ``BlockingExecutor/shared``.
    public func openSecretService() async throws -> any LockableSecretStore {
        try await BlockingExecutor.shared.run { try self.openSecretService() }
    }

    /// ``open(credentials:)``, awaited: opening (a passphrase slot hashes with Argon2id, the
    /// Secret Service answers over D-Bus) and recording the choice run on
    /// ``BlockingExecutor/shared``, so a caller on Swift's cooperative pool suspends instead of
    /// blocking a thread.
    public func open(credentials: [VaultCredential]) async throws -> any SecretStore {
        try await BlockingExecutor.shared.run { try self.open(credentials: credentials) }
    }

    /// ``open(_:)``, awaited: the provider opens the store, and the choice is recorded, on
    /// ``BlockingExecutor/shared``, so a caller on Swift's cooperative pool suspends instead of
    /// blocking a thread. The request is handed over (`sending`): its credentials closure runs on
    /// the executor's thread, if the store needs a credential.
    public func open(_ request: sending StoreOpenRequest) async throws -> OpenedStore {
        let handedOver = HandedOverRequest(request: request)
        return try await BlockingExecutor.shared.run { try self.open(handedOver.request) }
    }

    /// Records the choice for the profile if it is new (``opening(_:)`` does this itself).
    public func recordChoice() throws {
        guard let recordReason else { return }
        try StoreSettings.record(storeKind, for: selection.profile, reason: recordReason, at: selection.settingsPath)
    }

    /// The failures that mean "this store is not here", as opposed to a wrong credential or damage.
    static func meansUnavailable(_ error: LockboxError) -> Bool {
        switch error {
        case .vaultNotFound, .noSessionBus, .secretServiceUnavailable, .secretServiceTimeout: return true
        default: return false
        }
    }
}

/// A request ``StoreResolution/open(_:)`` hands to the executor's thread. The caller gave the
/// request away (`sending`), so nothing else uses it, or its credentials closure, meanwhile.
private struct HandedOverRequest: @unchecked Sendable {
    let request: StoreOpenRequest
}
