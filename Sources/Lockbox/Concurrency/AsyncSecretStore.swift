/// A store whose calls suspend instead of blocking a thread: what a network-backed store (a
/// database over a non-blocking client) implements, and what ``OffloadedSecretStore`` makes of any
/// blocking ``SecretStore``.
///
/// The requirements and their contract are ``SecretStore``'s — safe to call concurrently, no
/// secret from ``list(service:)``, each call atomic — with `async` added. A store that only has a
/// blocking client must not implement this by calling it inline (that blocks a thread of Swift's
/// cooperative pool); it implements ``SecretStore`` and is used through ``OffloadedSecretStore``.
public protocol AsyncSecretStore: Sendable {
    /// As ``SecretStore/isOpenToOtherProcessesOfUser``.
    var isOpenToOtherProcessesOfUser: Bool { get }
    /// The secret stored under `key`, or `nil` if there is none.
    func get(_ key: ItemKey) async throws -> SecretBytes?
    /// The metadata of the item under `key`, or `nil` if there is none.
    func metadata(_ key: ItemKey) async throws -> ItemMetadata?
    /// The item under `key` with its secret, read together.
    func item(_ key: ItemKey) async throws -> StoredItem?
    /// Stores `secret` under `key`, replacing any item there (its creation time is kept).
    func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) async throws
    /// Stores several items, each as ``set(_:for:options:)`` would (in one step where the store can).
    func set(_ writes: [ItemWrite]) async throws
    /// Removes the item under `key`; returns whether there was one.
    @discardableResult
    func delete(_ key: ItemKey) async throws -> Bool
    /// Removes the items under `keys`; returns the keys that held an item.
    @discardableResult
    func delete(_ keys: [ItemKey]) async throws -> [ItemKey]
    /// Metadata of every item, or of one service's items, sorted by service then account.
    func list(service: String?) async throws -> [ItemMetadata]
    /// Removes every item of `service`; returns how many were removed.
    @discardableResult
    func wipe(service: String) async throws -> Int
    /// Removes every item in the store; returns how many were removed.
    @discardableResult
    func wipeAll() async throws -> Int
}

/// Any blocking ``SecretStore`` as an ``AsyncSecretStore``: every call runs on a
/// ``BlockingExecutor``'s threads, so the caller's task suspends and the cooperative pool stays
/// free. Obtain one with ``SecretStore/offloaded(to:)``.
public struct OffloadedSecretStore: AsyncSecretStore {
    /// The blocking store whose calls are offloaded.
    public let store: any SecretStore
    /// Where they run.
    public let executor: BlockingExecutor

    /// Offloads `store`'s calls to `executor`.
    public init(_ store: any SecretStore, executor: BlockingExecutor = .shared) {
        self.store = store
        self.executor = executor
    }

    /// The wrapped store's answer.
    public var isOpenToOtherProcessesOfUser: Bool { store.isOpenToOtherProcessesOfUser }

    /// ``SecretStore/get(_:)`` on the executor.
    public func get(_ key: ItemKey) async throws -> SecretBytes? {
        try await executor.run { [store] in try store.get(key) }
    }

    /// ``SecretStore/metadata(_:)`` on the executor.
    public func metadata(_ key: ItemKey) async throws -> ItemMetadata? {
        try await executor.run { [store] in try store.metadata(key) }
    }

    /// ``SecretStore/item(_:)`` on the executor.
    public func item(_ key: ItemKey) async throws -> StoredItem? {
        try await executor.run { [store] in try store.item(key) }
    }

    /// ``SecretStore/set(_:for:options:)`` on the executor.
    public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) async throws {
        try await executor.run { [store] in try store.set(secret, for: key, options: options) }
    }

    /// ``SecretStore/set(_:)`` on the executor.
    public func set(_ writes: [ItemWrite]) async throws {
        try await executor.run { [store] in try store.set(writes) }
    }

    /// ``SecretStore/delete(_:)-(ItemKey)`` on the executor.
    @discardableResult
    public func delete(_ key: ItemKey) async throws -> Bool {
        try await executor.run { [store] in try store.delete(key) }
    }

    /// ``SecretStore/delete(_:)-([ItemKey])`` on the executor.
    @discardableResult
    public func delete(_ keys: [ItemKey]) async throws -> [ItemKey] {
        try await executor.run { [store] in try store.delete(keys) }
    }

    /// ``SecretStore/list(service:)`` on the executor.
    public func list(service: String?) async throws -> [ItemMetadata] {
        try await executor.run { [store] in try store.list(service: service) }
    }

    /// ``SecretStore/wipe(service:)`` on the executor.
    @discardableResult
    public func wipe(service: String) async throws -> Int {
        try await executor.run { [store] in try store.wipe(service: service) }
    }

    /// ``SecretStore/wipeAll()`` on the executor.
    @discardableResult
    public func wipeAll() async throws -> Int {
        try await executor.run { [store] in try store.wipeAll() }
    }
}

extension SecretStore {
    /// This store as an ``AsyncSecretStore`` whose calls run on `executor`.
    public func offloaded(to executor: BlockingExecutor = .shared) -> OffloadedSecretStore {
        OffloadedSecretStore(self, executor: executor)
    }
}
