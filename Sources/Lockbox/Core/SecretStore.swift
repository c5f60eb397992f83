/// A place that keeps secrets addressed by (service, account).
///
/// ``Vault`` is written once against this protocol; ``EncryptedFileStore`` and ``MemoryStore``
/// implement it. Implementations must be safe to call from many threads at once, must never
/// return secret bytes from ``list(service:)``, and must make each call atomic: after a crash
/// an item holds its old or its new value, never a mix.
public protocol SecretStore: Sendable {
    /// Whether another process of the same user can read and rewrite this store's items without
    /// any credential of Lockbox's: `true` for the Secret Service (any process on the session bus
    /// can, while the collection is unlocked), `false` for the file vault (it needs the vault's
    /// passphrase or key file) and for ``MemoryStore`` (one process's memory). ``PinGuard``
    /// refuses to keep PIN records where it is `true` unless told to accept that. A store that
    /// does not say is taken to be open (the default).
    var isOpenToOtherProcessesOfUser: Bool { get }
    /// Whether any other process can reach this store at all: `false` for ``MemoryStore`` (one
    /// process's memory), `true` (the default) for every store with a file, a daemon or a server
    /// behind it. Where it is `false`, ``PinGuard``, ``TokenRefresher`` and ``DeviceIdentity`` lock
    /// items within this process only and write no lock files.
    var isReachableFromOtherProcesses: Bool { get }
    /// The secret stored under `key`, or `nil` if there is none.
    func get(_ key: ItemKey) throws -> SecretBytes?
    /// The metadata of the item under `key`, or `nil` if there is none.
    func metadata(_ key: ItemKey) throws -> ItemMetadata?
    /// The item under `key` with its secret, read together (one lookup where the store can).
    func item(_ key: ItemKey) throws -> StoredItem?
    /// Stores `secret` under `key`, replacing any item there (its creation time is kept).
    func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws
    /// Stores several items, each as ``set(_:for:options:)`` would. Stores that can write them in
    /// one step do: ``EncryptedFileStore`` rewrites its file once for the whole batch (all of it
    /// or none of it after a crash) instead of once per item, which is what makes importing or
    /// migrating thousands of items linear rather than quadratic. The default stores them one
    /// at a time, in order. Every write is validated before any is made.
    func set(_ writes: [ItemWrite]) throws
    /// Removes the item under `key`; returns whether there was one.
    @discardableResult
    func delete(_ key: ItemKey) throws -> Bool
    /// Removes the items under `keys`; returns the keys that held an item. Stores that can do it
    /// in one step do (``EncryptedFileStore``: one rewrite, all or nothing); the default removes
    /// them one at a time, in order.
    @discardableResult
    func delete(_ keys: [ItemKey]) throws -> [ItemKey]
    /// Metadata of every item, or of one service's items, sorted by service then account.
    func list(service: String?) throws -> [ItemMetadata]
    /// Removes every item of `service`; returns how many were removed.
    @discardableResult
    func wipe(service: String) throws -> Int
    /// Removes every item in the store; returns how many were removed.
    @discardableResult
    func wipeAll() throws -> Int
    /// Stores `secret` under `key` if `condition` holds for the item there now, with the metadata
    /// `changes` names and the rest kept; returns whether it wrote. The format-2 file vault checks
    /// and writes in one transaction; the default reads, then writes (see ``WriteCondition``).
    @discardableResult
    func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) throws -> Bool
    /// Removes the item under `key` if its secret is byte for byte `expected`; returns whether it
    /// did. One transaction in the format-2 file vault; the default reads, then deletes.
    @discardableResult
    func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) throws -> Bool
}

/// An item read with its secret.
public struct StoredItem: Sendable {
    /// Everything but the secret.
    public var metadata: ItemMetadata
    /// The secret.
    public var secret: SecretBytes

    /// Creates a stored item.
    public init(metadata: ItemMetadata, secret: SecretBytes) {
        self.metadata = metadata
        self.secret = secret
    }
}

/// One item for ``SecretStore/set(_:)``: what ``SecretStore/set(_:for:options:)`` takes, as a value.
public struct ItemWrite: Sendable {
    /// Where the item goes.
    public var key: ItemKey
    /// Its secret.
    public var secret: SecretBytes
    /// Its kind, label, attributes and access policy.
    public var options: ItemOptions

    /// Creates a write of `secret` under `key`.
    public init(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions = ItemOptions()) {
        self.key = key
        self.secret = secret
        self.options = options
    }
}

extension SecretStore {
    /// Taken to be `true` for a store that does not say: see the requirement.
    public var isOpenToOtherProcessesOfUser: Bool { true }

    /// Taken to be `true` for a store that does not say: see the requirement.
    public var isReachableFromOtherProcesses: Bool { true }

    /// One single-key `delete(_:)` per key, in order.
    @discardableResult
    public func delete(_ keys: [ItemKey]) throws -> [ItemKey] {
        try keys.filter { try delete($0) }
    }

    /// One ``set(_:for:options:)`` per write, in order, after validating them all.
    public func set(_ writes: [ItemWrite]) throws {
        for write in writes { try ItemLimits.validate(write.key, options: write.options, secretCount: write.secret.count) }
        for write in writes { try set(write.secret, for: write.key, options: write.options) }
    }

    /// Reads metadata and secret with two calls; stores that can do it in one override this.
    public func item(_ key: ItemKey) throws -> StoredItem? {
        guard let metadata = try metadata(key), let secret = try get(key) else { return nil }
        return StoredItem(metadata: metadata, secret: secret)
    }
}

extension Array where Element == ItemMetadata {
    /// The order every store's `list` uses.
    package func sortedForListing() -> [ItemMetadata] {
        sorted { ($0.key.service, $0.key.account) < ($1.key.service, $1.key.account) }
    }
}
