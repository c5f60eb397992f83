import FoundationEssentials
import Lockbox

/// A store in the freedesktop Secret Service (gnome-keyring, KeePassXC), over a D-Bus connection
/// and in an encrypted session that Lockbox makes itself with libcrypto (libsecret's, the
/// fallback, where the provider refuses Lockbox's).
///
/// Items go into the default collection with the attributes other tools use — `service` and
/// `username` (the account) — so `secret-tool lookup service S username A` finds what Lockbox
/// stores, and Lockbox finds items that other keyring libraries stored under those two
/// attributes. Lockbox's own attributes carry the `lockbox:` prefix.
///
/// Lockbox never shows an unlock prompt: a locked collection is reported as
/// ``LockboxError/keyringLocked(collection:)``, and every call is bounded by ``timeout`` so a
/// provider that stops answering cannot hang the caller. The connection is reused across calls.
///
/// What `list` and `wipe` cover: `list(service:)` and `wipe(service:)` see every item in the
/// keyring with that `service` and a `username` (including items other tools stored);
/// `list(service: nil)` and `wipeAll()` see only the items Lockbox stored.
public final class SecretServiceStore: SecretStore {
    /// Attribute names shared with `secret-tool`, Python `keyring` and other libraries.
    static let serviceAttribute = "service"
    static let accountAttribute = "username"
    /// Lockbox's own attributes; the prefix cannot clash with other tools' plain names.
    static let markerAttribute = "lockbox:store"
    static let markerValue = "lockbox"
    static let formatAttribute = "lockbox:format"
    static let formatVersion = "1"
    static let kindAttribute = "lockbox:kind"
    static let accessAttribute = "lockbox:access"
    /// The prefix of the expiry and the bookkeeping of the previous version and companions
    /// (`lockbox:expires`, `lockbox:previous`, `lockbox:companion`, `lockbox:companion-id`).
    static let reservedAttributePrefix = "lockbox:"
    static let userAttributePrefix = "lockbox:attr:"
    static let schemaAttribute = "xdg:schema"
    static let schemaName = "org.freedesktop.Secret.Generic"

    /// `true`: every process of the user on the session bus can read and rewrite items in an
    /// unlocked collection (`secret-tool lookup`, `secret-tool store`); the Secret Service does
    /// not tell one process of a user from another.
    public var isOpenToOtherProcessesOfUser: Bool { true }

    /// The collection items are stored in (the `default` alias, usually the login keyring).
    public let collectionAlias = "default"
    /// The most a single call may take before it fails with ``LockboxError/secretServiceTimeout(operation:seconds:)``.
    public var timeout: Double { client.timeout }

    /// The D-Bus/libsecret calls; this class maps Lockbox's items onto them.
    private let client: SecretServiceClient

    /// How many times this store has connected to the provider (1 while the connection holds).
    package var connectionCount: Int { client.connectionCount }

    /// Connects to the session bus, where the Secret Service is asked on each call.
    ///
    /// Throws ``LockboxError/noSessionBus(detail:)`` without a session bus, and
    /// ``LockboxError/secretServiceUnavailable(detail:)`` without libsecret; a provider that is
    /// not there is reported by the first call (``isLocked()`` in a ``StoreSelection``), as
    /// ``LockboxError/secretServiceUnavailable(detail:)`` or
    /// ``LockboxError/secretServiceTimeout(operation:seconds:)``.
    public init(timeout: Double = 5) throws {
        client = try SecretServiceClient(timeout: timeout)
    }

    /// A store whose encrypted sessions are made by `sessions` (tests: both must read what the
    /// other wrote), on the session bus `environment` names (tests: a fake provider's).
    package init(
        timeout: Double = 5, sessions: SecretServiceSessions = .libcrypto,
        environment: @escaping @Sendable (String) -> String? = DBusConnection.processEnvironment
    ) throws {
        client = try SecretServiceClient(timeout: timeout, sessions: sessions, environment: environment)
    }

    /// Starts loading what Lockbox's encrypted session needs (libcrypto, its HKDF and
    /// AES-128-CBC) on a thread of its own and returns at once, for a caller that knows, before
    /// it connects, that it will read or write a secret: the loading then overlaps connecting to
    /// the bus as well as the calls before `OpenSession`. Later calls do nothing; a store opened
    /// without it starts the same loading on its first secret.
    package static func prepareSession() {
        SessionCrypto.preload()
    }

    /// For a program that owns its process, as the `lockbox` tool does: when the first encrypted
    /// session loads libcrypto, its legacy name tables are left empty, which spares the session's
    /// library context a copy of every name in them, and it is loaded with `RTLD_DEEPBIND`, so its
    /// references to its own functions are bound without a search of the whole program. Nothing
    /// else in the process may look up a libcrypto cipher or digest by legacy name
    /// (`EVP_get_cipherbyname`, `EVP_get_digestbyname`; tpm2-tss does not) or rely on libcrypto
    /// calling an interposed allocator. No effect once libcrypto is loaded.
    package static func libcryptoProcessIsOurs() {
        SessionCrypto.processIsOurs()
    }

    // MARK: SecretStore

    public func get(_ key: ItemKey) throws -> SecretBytes? {
        guard let item = try findItem(key, loadSecret: true) else { return nil }
        return item.secret
    }

    public func metadata(_ key: ItemKey) throws -> ItemMetadata? {
        try findItem(key, loadSecret: false)?.metadata
    }

    public func item(_ key: ItemKey) throws -> StoredItem? {
        guard let found = try findItem(key, loadSecret: true), let secret = found.secret else { return nil }
        return StoredItem(metadata: found.metadata, secret: secret)
    }

    public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws {
        try ItemLimits.validate(key, options: options, secretCount: secret.count)
        var attributes = Self.addressAttributes(key)
        attributes[Self.markerAttribute] = Self.markerValue
        attributes[Self.formatAttribute] = Self.formatVersion
        attributes[Self.kindAttribute] = options.kind.rawValue
        if options.access != .always { attributes[Self.accessAttribute] = options.access.rawValue }
        for (name, value) in ReservedAttributes.encode(expires: options.expires, reserved: options.reserved) {
            attributes[Self.reservedAttributePrefix + name] = value
        }
        attributes[Self.schemaAttribute] = Self.schemaName
        for (name, value) in options.attributes { attributes[Self.userAttributePrefix + name] = value }
        let label = options.resolvedLabel(for: key)
        let contentType = secret.isValidUTF8 ? "text/plain" : "application/octet-stream"

        client.prepareSession()
        try client.run("storing an item") { calls in
            // The items already at this address, then the lock check (Lockbox never prompts, and
            // creating an item in a locked collection could).
            let (unlocked, locked) = try calls.searchItems(Self.addressAttributes(key))
            if !locked.isEmpty { throw LockboxError.keyringLocked(collection: collectionAlias) }
            if try calls.isLocked(alias: collectionAlias) { throw LockboxError.keyringLocked(collection: collectionAlias) }
            // Store first (replacing an item with identical attributes in one step), then remove
            // the other items at the same address: a crash in between leaves two copies, never none.
            let stored = try calls.createItem(
                alias: collectionAlias, label: label, attributes: attributes, secret: secret,
                contentType: contentType)
            for path in unlocked where path != stored { try calls.deleteItem(path) }
        }
    }

    @discardableResult
    public func delete(_ key: ItemKey) throws -> Bool {
        try client.run("deleting an item") { calls in
            let (unlocked, locked) = try calls.searchItems(Self.addressAttributes(key))
            try refuseLocked(calls, unlocked: unlocked, locked: locked)
            for path in unlocked { try calls.deleteItem(path) }
            return !unlocked.isEmpty
        }
    }

    public func list(service: String?) throws -> [ItemMetadata] {
        try client.run("listing items") { calls in
            let query = service.map { [Self.serviceAttribute: $0] } ?? [Self.markerAttribute: Self.markerValue]
            // Paths, then one GetAll per item: no item proxies (each costs six more bus calls).
            let (unlocked, locked) = try calls.searchItems(query)
            try refuseLocked(calls, unlocked: unlocked, locked: locked)
            var byKey: [ItemKey: ItemMetadata] = [:]
            for path in unlocked {
                let item = try calls.itemProperties(path)
                if item.locked { throw LockboxError.keyringLocked(collection: collectionAlias) }
                guard let attributes = item.attributes,
                    let metadata = Self.metadata(attributes: attributes, label: item.label, created: item.created, modified: item.modified)
                else { continue }
                if let existing = byKey[metadata.key], existing.modified >= metadata.modified { continue }
                byKey[metadata.key] = metadata
            }
            return Array(byKey.values).sortedForListing()
        }
    }

    @discardableResult
    public func wipe(service: String) throws -> Int {
        try remove(matching: [Self.serviceAttribute: service], operation: "wiping a service")
    }

    @discardableResult
    public func wipeAll() throws -> Int {
        try remove(matching: [Self.markerAttribute: Self.markerValue], operation: "wiping Lockbox's items")
    }

    /// Whether the default collection is locked right now (asked of the provider, not cached).
    public func isLocked() throws -> Bool {
        try client.run("checking the collection") { calls in try calls.isLocked(alias: collectionAlias) }
    }

    // MARK: Mapping items onto the Secret Service

    private struct FoundItem {
        var metadata: ItemMetadata
        var secret: SecretBytes?
    }

    private func remove(matching query: [String: String], operation: String) throws -> Int {
        try client.run(operation) { calls in
            let (unlocked, locked) = try calls.searchItems(query)
            try refuseLocked(calls, unlocked: unlocked, locked: locked)
            var removed = Set<ItemKey>()
            for path in unlocked {
                let item = try calls.itemProperties(path)
                guard let attributes = item.attributes,
                    let metadata = Self.metadata(attributes: attributes, label: item.label, created: item.created, modified: item.modified)
                else { continue }
                try calls.deleteItem(path)
                removed.insert(metadata.key)
            }
            return removed.count
        }
    }

    /// The item at `key`: Lockbox's own first, then the most recently modified.
    ///
    /// Three calls for the usual single match: `SearchItems` (item paths, locked and unlocked
    /// apart), the item's properties in one `GetAll` (the format check, the access policy and the
    /// metadata need its attributes), and, for a read, `GetSecrets` for that one path (with
    /// libsecret's proxy set-up and `OpenSession` before it, once per connection). No item proxy
    /// is built, and no other match's secret is fetched.
    private func findItem(_ key: ItemKey, loadSecret: Bool) throws -> FoundItem? {
        if loadSecret { client.prepareSession() }
        return try client.run(loadSecret ? "reading an item" : "reading item metadata") { calls in
            let (unlocked, locked) = try calls.searchItems(Self.addressAttributes(key))
            guard !(unlocked.isEmpty && locked.isEmpty) else {
                // A locked keyring can look exactly like a missing item: ask which it is.
                if try calls.isLocked(alias: collectionAlias) { throw LockboxError.keyringLocked(collection: collectionAlias) }
                return nil
            }
            var candidates = try (unlocked + locked).map { try calls.itemProperties($0) }
            for index in candidates.indices where locked.contains(candidates[index].path) { candidates[index].locked = true }
            let ranked = candidates.sorted { a, b in
                let aOurs = a.attributes?[Self.markerAttribute] == Self.markerValue
                let bOurs = b.attributes?[Self.markerAttribute] == Self.markerValue
                if aOurs != bOurs { return aOurs }
                return a.modified > b.modified
            }
            let item = ranked[0]
            if item.locked { throw LockboxError.keyringLocked(collection: collectionAlias) }
            if let format = item.attributes?[Self.formatAttribute], format != Self.formatVersion {
                throw LockboxError.undecodableItem(
                    service: key.service, account: key.account,
                    reason: "it was written in Lockbox item format \(format); this Lockbox reads format \(Self.formatVersion)")
            }
            guard let attributes = item.attributes,
                let metadata = Self.metadata(attributes: attributes, label: item.label, created: item.created, modified: item.modified)
            else {
                throw LockboxError.undecodableItem(service: key.service, account: key.account, reason: "its attributes are incomplete")
            }
            guard loadSecret else { return FoundItem(metadata: metadata, secret: nil) }
            guard let secret = try calls.secret(at: item.path) else {
                throw LockboxError.undecodableItem(
                    service: key.service, account: key.account,
                    reason: "the provider returned no secret for it")
            }
            return FoundItem(metadata: metadata, secret: secret)
        }
    }

    /// Refuses a search that matched locked items, or that matched nothing in a locked
    /// collection (a locked keyring can look exactly like a missing item); changing a locked
    /// collection could prompt, and Lockbox never prompts. The lock is asked only on a miss.
    private func refuseLocked(_ calls: SecretServiceClient.Calls, unlocked: [String], locked: [String]) throws {
        if !locked.isEmpty { throw LockboxError.keyringLocked(collection: collectionAlias) }
        if unlocked.isEmpty, try calls.isLocked(alias: collectionAlias) { throw LockboxError.keyringLocked(collection: collectionAlias) }
    }

    private static func addressAttributes(_ key: ItemKey) -> [String: String] {
        [serviceAttribute: key.service, accountAttribute: key.account]
    }

    /// Metadata from an item's attributes, label and times (seconds since 1970); `nil` unless
    /// both address attributes are there.
    private static func metadata(attributes: [String: String], label: String, created: UInt64, modified: UInt64) -> ItemMetadata? {
        guard let service = attributes[serviceAttribute], let account = attributes[accountAttribute] else { return nil }
        let key = ItemKey(service: service, account: account)
        var extra: [String: String] = [:]
        for (name, value) in attributes where name.hasPrefix(userAttributePrefix) {
            extra[String(name.dropFirst(userAttributePrefix.count))] = value
        }
        // An unknown access value is read as the strictest known one, never as "always".
        let access = attributes[accessAttribute].map { ItemAccess(rawValue: $0) ?? .freshAuthentication } ?? .always
        var metadata = ItemMetadata(
            key: key, kind: ItemKind(rawValue: attributes[kindAttribute] ?? ItemKind.generic.rawValue), label: label,
            created: Date(timeIntervalSince1970: Double(created)),
            modified: Date(timeIntervalSince1970: Double(modified)),
            attributes: extra, access: access)
        // Any process of the user can write these attributes: an expiry that cannot be read is
        // taken as passed (the strictest reading, as for access), other bookkeeping as absent.
        switch ReservedAttributes.decode({ attributes[reservedAttributePrefix + $0] }) {
        case .success((let expires, let reserved)):
            metadata.expires = expires
            metadata.reserved = reserved
        case .failure(let malformed):
            if malformed.name == ReservedAttributes.expires { metadata.expires = Date(timeIntervalSince1970: 0) }
            var lenient = attributes
            lenient.removeValue(forKey: reservedAttributePrefix + malformed.name)
            if case .success((let expires, let reserved)) = ReservedAttributes.decode({ lenient[reservedAttributePrefix + $0] }) {
                metadata.expires = metadata.expires ?? expires
                metadata.reserved = reserved
            }
        }
        return metadata
    }
}
