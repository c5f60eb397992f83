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
    /// As ``SecretStore/isReachableFromOtherProcesses`` (`true` unless the store says otherwise).
    var isReachableFromOtherProcesses: Bool { get }
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
    /// As ``SecretStore/set(_:for:changes:when:)``.
    @discardableResult
    func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) async throws -> Bool
    /// As ``SecretStore/delete(_:ifCurrent:)``.
    @discardableResult
    func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) async throws -> Bool
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

    /// The wrapped store's answer.
    public var isReachableFromOtherProcesses: Bool { store.isReachableFromOtherProcesses }

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

    /// ``SecretStore/set(_:for:changes:when:)`` on the executor.
    @discardableResult
    public func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) async throws -> Bool {
        try await executor.run { [store] in try store.set(secret, for: key, changes: changes, when: condition) }
    }

    /// ``SecretStore/delete(_:ifCurrent:)`` on the executor.
    @discardableResult
    public func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) async throws -> Bool {
        try await executor.run { [store] in try store.delete(key, ifCurrent: expected) }
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

extension AsyncSecretStore {
    /// Taken to be `true` for a store that does not say: see ``SecretStore/isReachableFromOtherProcesses``.
    public var isReachableFromOtherProcesses: Bool { true }
}

extension SecretStore {
    /// This store as an ``AsyncSecretStore`` whose calls run on `executor`.
    public func offloaded(to executor: BlockingExecutor = .shared) -> OffloadedSecretStore {
        OffloadedSecretStore(self, executor: executor)
    }
}

/// Any ``AsyncSecretStore`` as a blocking ``SecretStore``: each call blocks the calling thread
/// until the async store answers (the call runs on that thread, see ``AsyncSecretStore/blocking()``).
/// For code written against ``SecretStore`` — a command-line tool, a migration script — never
/// for a thread of Swift's cooperative pool or of the event loop the async store itself runs on.
public struct BlockingSecretStore: SecretStore {
    /// The async store whose calls are awaited.
    public let store: any AsyncSecretStore

    /// Blocks on `store`'s calls.
    public init(_ store: any AsyncSecretStore) { self.store = store }

    /// The wrapped store's answer.
    public var isOpenToOtherProcessesOfUser: Bool { store.isOpenToOtherProcessesOfUser }
    /// The wrapped store's answer.
    public var isReachableFromOtherProcesses: Bool { store.isReachableFromOtherProcesses }

    /// ``AsyncSecretStore/get(_:)``, awaited on this thread.
    public func get(_ key: ItemKey) throws -> SecretBytes? { try CallingThread.run { [store] in try await store.get(key) } }
    /// ``AsyncSecretStore/metadata(_:)``, awaited on this thread.
    public func metadata(_ key: ItemKey) throws -> ItemMetadata? { try CallingThread.run { [store] in try await store.metadata(key) } }
    /// ``AsyncSecretStore/item(_:)``, awaited on this thread.
    public func item(_ key: ItemKey) throws -> StoredItem? { try CallingThread.run { [store] in try await store.item(key) } }
    /// ``AsyncSecretStore/set(_:for:options:)``, awaited on this thread.
    public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws {
        try CallingThread.run { [store] in try await store.set(secret, for: key, options: options) }
    }
    /// ``AsyncSecretStore/set(_:)``, awaited on this thread.
    public func set(_ writes: [ItemWrite]) throws { try CallingThread.run { [store] in try await store.set(writes) } }

    /// The async store's ``AsyncSecretStore/set(_:for:changes:when:)``, on the calling thread.
    @discardableResult
    public func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) throws -> Bool {
        try CallingThread.run { [store] in try await store.set(secret, for: key, changes: changes, when: condition) }
    }

    /// The async store's ``AsyncSecretStore/delete(_:ifCurrent:)``, on the calling thread.
    @discardableResult
    public func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) throws -> Bool {
        try CallingThread.run { [store] in try await store.delete(key, ifCurrent: expected) }
    }
    /// ``AsyncSecretStore/delete(_:)-(ItemKey)``, awaited on this thread.
    @discardableResult
    public func delete(_ key: ItemKey) throws -> Bool { try CallingThread.run { [store] in try await store.delete(key) } }
    /// ``AsyncSecretStore/delete(_:)-([ItemKey])``, awaited on this thread.
    @discardableResult
    public func delete(_ keys: [ItemKey]) throws -> [ItemKey] { try CallingThread.run { [store] in try await store.delete(keys) } }
    /// ``AsyncSecretStore/list(service:)``, awaited on this thread.
    public func list(service: String?) throws -> [ItemMetadata] {
        try CallingThread.run { [store] in try await store.list(service: service) }
    }
    /// ``AsyncSecretStore/wipe(service:)``, awaited on this thread.
    @discardableResult
    public func wipe(service: String) throws -> Int { try CallingThread.run { [store] in try await store.wipe(service: service) } }
    /// ``AsyncSecretStore/wipeAll()``, awaited on this thread.
    @discardableResult
    public func wipeAll() throws -> Int { try CallingThread.run { [store] in try await store.wipeAll() } }
}

extension AsyncSecretStore {
    /// This store as a blocking ``SecretStore`` (see ``BlockingSecretStore``).
    public func blocking() -> BlockingSecretStore { BlockingSecretStore(self) }
}

/// A blocking ``SecretStore`` called inline from async code: its calls never suspend. Only the
/// blocking API uses it, inside ``CallingThread/run(_:)``, where blocking the thread is the point.
struct InlineSecretStore: AsyncSecretStore {
    let store: any SecretStore

    var isOpenToOtherProcessesOfUser: Bool { store.isOpenToOtherProcessesOfUser }
    var isReachableFromOtherProcesses: Bool { store.isReachableFromOtherProcesses }
    func get(_ key: ItemKey) throws -> SecretBytes? { try store.get(key) }
    func metadata(_ key: ItemKey) throws -> ItemMetadata? { try store.metadata(key) }
    func item(_ key: ItemKey) throws -> StoredItem? { try store.item(key) }
    func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws { try store.set(secret, for: key, options: options) }
    func set(_ writes: [ItemWrite]) throws { try store.set(writes) }
    func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) throws -> Bool {
        try store.set(secret, for: key, changes: changes, when: condition)
    }
    func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) throws -> Bool { try store.delete(key, ifCurrent: expected) }
    func delete(_ key: ItemKey) throws -> Bool { try store.delete(key) }
    func delete(_ keys: [ItemKey]) throws -> [ItemKey] { try store.delete(keys) }
    func list(service: String?) throws -> [ItemMetadata] { try store.list(service: service) }
    func wipe(service: String) throws -> Int { try store.wipe(service: service) }
    func wipeAll() throws -> Int { try store.wipeAll() }
}
