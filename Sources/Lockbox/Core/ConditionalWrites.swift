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

    /// Changes to the parts given; `ItemChanges()` changes only the secret.
    public init(kind: ItemKind? = nil, label: String? = nil, attributes: [String: String]? = nil, access: ItemAccess? = nil) {
        self.kind = kind
        self.label = label
        self.attributes = attributes
        self.access = access
    }

    /// Changes to every part: what `options` says, its default label included.
    public init(replacingWith options: ItemOptions) {
        self.init(kind: options.kind, label: options.label, attributes: options.attributes, access: options.access)
    }

    /// The options of the item after the write, over `existing` (`nil`: a new item).
    package func options(over existing: ItemMetadata?) -> ItemOptions {
        let defaults = ItemOptions()
        return ItemOptions(
            kind: kind ?? existing?.kind ?? defaults.kind,
            label: label ?? existing?.label,
            attributes: attributes ?? existing.map { $0.attributes.filter { !$0.key.hasPrefix(ItemLimits.reservedAttributePrefix) } } ?? [:],
            access: access ?? existing?.access ?? defaults.access)
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
}

extension SecretStore {
    /// Reads the item, checks `condition`, then writes: two calls another writer can come between.
    /// Stores with transactions override this with one (the format-2 file vault does).
    @discardableResult
    public func set(_ secret: SecretBytes, for key: ItemKey, changes: ItemChanges, when condition: WriteCondition) throws -> Bool {
        let existing = try item(key)
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
        let existing = try await item(key)
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
