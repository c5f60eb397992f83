import FoundationEssentials

/// The metadata a write gives an item, each part `nil` to keep what the item has: rotating a
/// secret keeps its kind, label, attributes and access unless the caller names new ones. A new
/// item takes ``ItemOptions``' defaults for the parts left `nil`.
public struct ItemChanges: Sendable, Hashable {
    /// A new kind, or `nil` to keep the item's.
    public var kind: ItemKind?
    /// A new label, or `nil` to keep the item's.
    public var label: String?
    /// New attributes (replacing all of the item's), or `nil` to keep the item's.
    public var attributes: [String: String]?
    /// A new access policy, or `nil` to keep the item's: an item stored with
    /// ``ItemAccess/freshAuthentication`` stays protected through a rotation.
    public var access: ItemAccess?
    /// When the new secret expires, `nil` for never. Unlike the other parts it is not kept from
    /// the item: an expiry belongs to the value it was given with, so a rotation that names none
    /// stores a value that does not expire.
    public var expires: Date?
    /// Lockbox's bookkeeping for the new value; like the expiry, never kept from the item (a
    /// plain rotation drops the previous version the item held).
    package var reserved = ItemReserved()

    /// Changes to the parts given; `ItemChanges()` changes only the secret (and stores it
    /// without an expiry).
    public init(
        kind: ItemKind? = nil, label: String? = nil, attributes: [String: String]? = nil, access: ItemAccess? = nil,
        expires: Date? = nil
    ) {
        self.kind = kind
        self.label = label
        self.attributes = attributes
        self.access = access
        self.expires = expires
    }

    /// Changes to every part: what `options` says, its default label included. Nothing of the
    /// item there is kept, so a plain write needs no read of it first.
    public init(replacingWith options: ItemOptions) {
        self.init(
            kind: options.kind, label: options.label, attributes: options.attributes, access: options.access,
            expires: options.expires)
        reserved = options.reserved
        replacement = options
    }

    /// The options every write takes, whatever is stored (``init(replacingWith:)``); `nil` when a
    /// part is to be kept.
    package private(set) var replacement: ItemOptions?

    /// The options of the item after the write, over `existing` (`nil`: a new item).
    package func options(over existing: ItemMetadata?) -> ItemOptions {
        if let replacement { return replacement }
        let defaults = ItemOptions()
        var options = ItemOptions(
            kind: kind ?? existing?.kind ?? defaults.kind,
            label: label ?? existing?.label,
            attributes: attributes ?? existing.map { $0.attributes.filter { !$0.key.hasPrefix(ItemLimits.reservedAttributePrefix) } }
                ?? [:],
            access: access ?? existing?.access ?? defaults.access,
            expires: expires)
        options.reserved = reserved
        return options
    }
}

/// What a write requires of the item it would replace.
public enum WriteCondition: Sendable, Equatable {
    /// Nothing: the write replaces whatever is there.
    case always
    /// That no item is there (`lockbox set --no-clobber`, the first write of a device ID).
    case ifAbsent
    /// That the item's secret is byte for byte `expected` (compare-and-set: write only over the
    /// value the caller read).
    case ifCurrent(SecretBytes)

    /// Whether the condition holds for `current`, the secret stored now (`nil`: no item).
    package func holds(for current: SecretBytes?) -> Bool {
        switch self {
        case .always: return true
        case .ifAbsent: return current == nil
        case .ifCurrent(let expected): return current.map { $0 == expected } ?? false  // constant time
        }
    }

    /// What a read-then-write must read first for this condition and `changes`: nothing (a plain
    /// write), the item's metadata, or the whole item.
    package func read(for changes: ItemChanges) -> ExistingItemRead {
        switch self {
        case .always: return changes.replacement == nil ? .metadata : .nothing
        case .ifAbsent: return .metadata
        case .ifCurrent: return .item
        }
    }
}

/// What ``WriteCondition/read(for:)`` says to read before a write.
package enum ExistingItemRead {
    case nothing, metadata, item
}

extension SecretStore {
    /// Reads the item, checks `condition`, then writes: two calls another writer can come between.
    /// Stores with transactions override this with one (the format-2 file vault does).
    @discardableResult
    public func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) throws -> Bool {
        let existing: (metadata: ItemMetadata, secret: SecretBytes?)?
        switch condition.read(for: changes) {
        case .nothing: existing = nil
        case .metadata: existing = try metadata(key).map { ($0, SecretBytes(count: 0) { _ in }) }
        case .item: existing = try item(key).map { ($0.metadata, $0.secret) }
        }
        guard condition.holds(for: existing?.secret) else { return false }
        try set(secret, for: key, options: changes.options(over: existing?.metadata))
        return true
    }

    /// Reads the item, compares, then deletes: two calls another writer can come between. Stores
    /// with transactions override this with one (the format-2 file vault does).
    @discardableResult
    public func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) throws -> Bool {
        guard let current = try get(key), current == expected else { return false }
        return try delete(key)
    }
}

extension AsyncSecretStore {
    /// Reads the item, checks `condition`, then writes: two calls another writer can come between.
    /// Stores with transactions override this with one.
    @discardableResult
    public func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) async throws -> Bool {
        let existing: (metadata: ItemMetadata, secret: SecretBytes?)?
        switch condition.read(for: changes) {
        case .nothing: existing = nil
        case .metadata: existing = try await metadata(key).map { ($0, SecretBytes(count: 0) { _ in }) }
        case .item: existing = try await item(key).map { ($0.metadata, $0.secret) }
        }
        guard condition.holds(for: existing?.secret) else { return false }
        try await set(secret, for: key, options: changes.options(over: existing?.metadata))
        return true
    }

    /// Reads the item, compares, then deletes: two calls another writer can come between. Stores
    /// with transactions override this with one.
    @discardableResult
    public func delete(_ key: ItemKey, ifCurrent expected: SecretBytes) async throws -> Bool {
        guard let current = try await get(key), current == expected else { return false }
        return try await delete(key)
    }
}
