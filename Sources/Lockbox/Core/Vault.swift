import CoreMetrics
import FoundationEssentials
import Logging

/// A keychain-like vault: secrets addressed by (service, account) over any ``SecretStore`` or
/// ``AsyncSecretStore``.
///
/// ```swift
/// let store = try EncryptedFileStore.open(at: "/var/lib/myapp/vault.lockbox",
///                                         credential: .keyFile("/run/credentials/myapp.service/vault-key"))
/// let vault = Vault(store: store)
/// try vault.set("eyJhbGciOi…", service: "com.example.api", account: "alice", kind: .token)
/// let token = try vault.string(service: "com.example.api", account: "alice")
/// ```
///
/// `Vault` is a small value over a shared store: copy it freely and call it from any thread.
/// Every method has a blocking and an async variant of the same name (in async code the compiler
/// picks the async one: `try await vault.get(…)`); both run the one implementation, see
/// docs/ARCHITECTURE.md.
public struct Vault: Sendable {
    /// The store this vault reads and writes, as a blocking store (a vault made over an
    /// ``AsyncSecretStore`` gives it as a ``BlockingSecretStore``).
    public var store: any SecretStore { access.secretStore }
    /// What vouches for a fresh authentication when a protected item is read; `nil` means no
    /// protected item can be read.
    public let freshness: (any FreshAuthentication)?
    /// Where the async variants of the methods run the blocking store calls.
    public var executor: BlockingExecutor { access.executor }
    /// Where the vault logs its store calls (debug), wipes (notice) and failures (warning), with
    /// the store, the operation and the item's address as metadata — never a secret.
    public let logger: Logger
    let access: StoreAccess
    private let metrics: LockboxMetrics

    /// Creates a vault over `store`. Items stored with ``ItemAccess/freshAuthentication`` are
    /// returned only while `freshness` (e.g. a ``ReauthGate``) says a fresh authentication is in force.
    /// The async variants of the methods (`try await vault.get(…)`) run on `executor`. Store
    /// calls are logged to `logger` and timed in `metricsFactory`'s
    /// `lockbox_store_call_duration{store, operation}` (the bootstrapped `MetricsSystem` by default).
    public init(
        store: any SecretStore, freshness: (any FreshAuthentication)? = nil, executor: BlockingExecutor = .shared,
        logger: Logger = .lockboxDefault, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(access: StoreAccess(store, executor: executor), freshness: freshness, logger: logger, metricsFactory: metricsFactory)
    }

    /// Creates a vault over an async store (a network-backed one): the async methods await it
    /// and never block a thread; the blocking methods block the calling thread until it answers.
    /// The other parameters are those of the initializer over a blocking ``SecretStore``.
    public init(
        store: any AsyncSecretStore, freshness: (any FreshAuthentication)? = nil, executor: BlockingExecutor = .shared,
        logger: Logger = .lockboxDefault, metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(access: StoreAccess(store, executor: executor), freshness: freshness, logger: logger, metricsFactory: metricsFactory)
    }

    private init(access: StoreAccess, freshness: (any FreshAuthentication)?, logger: Logger, metricsFactory: any MetricsFactory) {
        self.access = access
        self.freshness = freshness
        self.logger = logger
        self.metrics = LockboxMetrics(factory: metricsFactory)
    }

    /// Runs one store call: timed, logged at `level` (a failure at warning, with its error code).
    func observed<T: Sendable>(
        _ operation: String, service: String? = nil, account: String? = nil, level: Logger.Level = .debug,
        _ body: () async throws -> T
    ) async throws -> T {
        var metadata: Logger.Metadata = [LogKey.store: .string(access.typeName), LogKey.operation: .string(operation)]
        if let service { metadata[LogKey.service] = .string(service) }
        if let account { metadata[LogKey.account] = .string(account) }
        do {
            let result = try await metrics.storeCall(access.typeName, operation, body)
            logger.log(level: level, "store call", metadata: metadata)
            return result
        } catch {
            metadata[LogKey.errorCode] = loggableError(error)
            logger.warning("store call failed", metadata: metadata)
            throw error
        }
    }

    // MARK: Binary secrets

    /// The secret under (service, account), or `nil` if none is stored. A protected item throws
    /// ``LockboxError/reauthenticationRequired(_:)`` outside a re-authentication window.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func get(service: String, account: String) throws -> SecretBytes? {
        try access.blocking { try await self.get(service: service, account: account, via: $0) }
    }

    /// The secret under (service, account); throws ``LockboxError/itemNotFound(service:account:)``
    /// if none is stored.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func require(service: String, account: String) throws -> SecretBytes {
        try access.blocking { try await self.require(service: service, account: account, via: $0) }
    }

    /// Stores `secret` under (service, account), replacing the secret that was there. The kind,
    /// label, attributes and access given replace the item's; those left `nil` are kept, so a
    /// rotation never drops them (a new item takes `.generic`, the conventional label, no
    /// attributes and `.always`). With `access: .freshAuthentication` the secret can later be
    /// read only inside a re-authentication window.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func set(
        _ secret: SecretBytes, service: String, account: String, kind: ItemKind? = nil,
        label: String? = nil, attributes: [String: String]? = nil, access: ItemAccess? = nil
    ) throws {
        let changes = ItemChanges(kind: kind, label: label, attributes: attributes, access: access)
        _ = try self.access.blocking {
            try await self.set(secret, service: service, account: account, changes: changes, when: .always, via: $0)
        }
    }

    /// ``set(_:service:account:kind:label:attributes:access:)-(SecretBytes,_,_,_,_,_,_)`` only if
    /// `condition` holds for the item stored now: ``WriteCondition/ifAbsent`` never overwrites,
    /// ``WriteCondition/ifCurrent(_:)`` writes only over the secret the caller read. Returns
    /// whether it wrote. The format-2 file vault checks and writes in one transaction.
    @discardableResult
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func set(
        _ secret: SecretBytes, service: String, account: String, kind: ItemKind? = nil,
        label: String? = nil, attributes: [String: String]? = nil, access: ItemAccess? = nil, when condition: WriteCondition
    ) throws -> Bool {
        let changes = ItemChanges(kind: kind, label: label, attributes: attributes, access: access)
        return try self.access.blocking {
            try await self.set(secret, service: service, account: account, changes: changes, when: condition, via: $0)
        }
    }

    // MARK: String conveniences

    /// The secret under (service, account) decoded as UTF-8, or `nil` if none is stored.
    ///
    /// Throws ``LockboxError/invalidArgument(_:)`` if the stored bytes are not UTF-8.
    /// The returned `String` cannot be wiped; prefer ``get(service:account:)`` for long-lived code.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func string(service: String, account: String) throws -> String? {
        try access.blocking { try await self.string(service: service, account: account, via: $0) }
    }

    /// Stores the UTF-8 bytes of `string` under (service, account).
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func set(
        _ string: String, service: String, account: String, kind: ItemKind? = nil,
        label: String? = nil, attributes: [String: String]? = nil, access: ItemAccess? = nil
    ) throws {
        try set(
            SecretBytes(utf8: string), service: service, account: account, kind: kind,
            label: label, attributes: attributes, access: access)
    }

    // MARK: Metadata and removal

    /// The metadata of the item under (service, account), or `nil` if none is stored.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func metadata(service: String, account: String) throws -> ItemMetadata? {
        try access.blocking { try await self.metadata(service: service, account: account, via: $0) }
    }

    /// Removes the item under (service, account); returns whether there was one.
    @discardableResult
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func delete(service: String, account: String) throws -> Bool {
        try access.blocking { try await self.delete(service: service, account: account, via: $0) }
    }

    /// Removes the item under (service, account) only if its secret is byte for byte `expected`
    /// (compare-and-delete: a value rotated meanwhile is kept); returns whether it removed it.
    @discardableResult
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func delete(service: String, account: String, ifCurrent expected: SecretBytes) throws -> Bool {
        try access.blocking { try await self.delete(service: service, account: account, ifCurrent: expected, via: $0) }
    }

    /// Metadata (never secrets) of every item, or of one service's items.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func list(service: String? = nil) throws -> [ItemMetadata] {
        try access.blocking { try await self.list(service: service, via: $0) }
    }

    /// Removes every item of `service`; returns how many were removed.
    @discardableResult
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func wipe(service: String) throws -> Int {
        try access.blocking { try await self.wipe(service: service, via: $0) }
    }

    /// Removes every item; returns how many were removed.
    @discardableResult
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func wipeAll() throws -> Int {
        try access.blocking { try await self.wipeAll(via: $0) }
    }

    // MARK: The one implementation of each operation

    func get(service: String, account: String, allowExpired: Bool = false, via route: StoreRoute) async throws -> SecretBytes? {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        // A plain read: a replica may serve it (ReadFreshness).
        guard
            let item = try await observed(
                "get", service: service, account: account, { try await ReadFreshness.allowingReplica { try await route.store.item(key) } })
        else {
            return nil
        }
        if !allowExpired, let expires = item.metadata.expires, expires <= Date() {
            throw LockboxError.itemExpired(service: service, account: account, expired: expires)
        }
        if item.metadata.access == .freshAuthentication {
            guard let freshness else {
                throw LockboxError.reauthenticationRequired("'\(account)' on '\(service)' is protected")
            }
            try await route.compute { try freshness.requireFreshAuthentication() }
        }
        return item.secret
    }

    func require(service: String, account: String, allowExpired: Bool = false, via route: StoreRoute) async throws -> SecretBytes {
        guard let secret = try await get(service: service, account: account, allowExpired: allowExpired, via: route) else {
            throw LockboxError.itemNotFound(service: service, account: account)
        }
        return secret
    }

    func set(
        _ secret: SecretBytes, service: String, account: String, changes: ItemChanges, when condition: WriteCondition, via route: StoreRoute
    ) async throws -> Bool {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key, options: changes.options(over: nil), secretCount: secret.count)
        if case .ifCurrent = condition { try await requireFreshnessToCompare(key, via: route) }
        let written = try await observed("set", service: service, account: account) {
            try await route.store.set(secret, for: key, changes: changes, when: condition)
        }
        // A rotation that keeps no previous version drops the one the item held.
        if written, changes.reserved.previousID == nil, let companionKey = try? ItemCompanion.previous.checkedKey(for: key),
            try await route.store.metadata(companionKey)?.reserved.companion == ItemCompanion.previous.rawValue
        {
            try await route.store.delete(companionKey)
        }
        return written
    }

    /// A comparison with a protected item's secret tells whether a guess is right, so it needs
    /// what reading it needs: a fresh re-authentication.
    func requireFreshnessToCompare(_ key: ItemKey, via route: StoreRoute) async throws {
        guard try await route.store.metadata(key)?.access == .freshAuthentication else { return }
        guard let freshness else {
            throw LockboxError.reauthenticationRequired("'\(key.account)' on '\(key.service)' is protected")
        }
        try await route.compute { try freshness.requireFreshAuthentication() }
    }

    func string(service: String, account: String, via route: StoreRoute) async throws -> String? {
        guard let secret = try await get(service: service, account: account, via: route) else { return nil }
        guard let string = secret.stringValue() else {
            throw LockboxError.invalidArgument(
                "the item for account '\(account)' on service '\(service)' holds binary data, not UTF-8 text; read it with get(service:account:)"
            )
        }
        return string
    }

    func metadata(service: String, account: String, via route: StoreRoute) async throws -> ItemMetadata? {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        guard
            var metadata = try await observed(
                "metadata", service: service, account: account,
                { try await ReadFreshness.allowingReplica { try await route.store.metadata(key) } })
        else {
            return nil
        }
        if metadata.reserved.previousID != nil {
            let companion = try await ReadFreshness.allowingReplica {
                try await route.store.metadata(ItemCompanion.previous.key(for: key))
            }
            metadata.previousUntil = companion.flatMap { Self.previousUntil(of: metadata, companion: $0) }
        }
        return metadata
    }

    func delete(service: String, account: String, via route: StoreRoute) async throws -> Bool {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        let deleted = try await observed("delete", service: service, account: account) { try await route.store.delete(key) }
        if deleted { try await deleteCompanions(of: key, via: route) }
        return deleted
    }

    func delete(service: String, account: String, ifCurrent expected: SecretBytes, via route: StoreRoute) async throws -> Bool {
        let key = ItemKey(service: service, account: account)
        try ItemLimits.validate(key)
        try await requireFreshnessToCompare(key, via: route)
        let deleted = try await observed("delete", service: service, account: account) {
            try await route.store.delete(key, ifCurrent: expected)
        }
        if deleted { try await deleteCompanions(of: key, via: route) }
        return deleted
    }

    func list(service: String?, via route: StoreRoute) async throws -> [ItemMetadata] {
        if let service { try ItemLimits.validateService(service) }
        let all = try await observed("list", service: service) {
            try await ReadFreshness.allowingReplica { try await route.store.list(service: service) }
        }
        return Self.visible(all)
    }

    func wipe(service: String, via route: StoreRoute) async throws -> Int {
        try ItemLimits.validateService(service)
        return try await observed("wipe", service: service, level: .notice) { try await route.store.wipe(service: service) }
    }

    func wipeAll(via route: StoreRoute) async throws -> Int {
        try await observed("wipe-all", level: .notice) { try await route.store.wipeAll() }
    }
}
