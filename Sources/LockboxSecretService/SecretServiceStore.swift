import CLibSecret
import Foundation
import Lockbox

/// A store in the freedesktop Secret Service (gnome-keyring, KeePassXC), through libsecret.
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
    public let timeout: Double

    private let connection = Locked<ServiceHandle?>(nil)
    private let connectionsMade = Locked(0)

    /// How many times this store has connected to the provider (1 while the connection holds).
    package var connectionCount: Int { connectionsMade.withLock { $0 } }

    /// A reference to libsecret's shared `SecretService` proxy.
    private final class ServiceHandle: @unchecked Sendable {
        let service: OpaquePointer
        init(_ service: OpaquePointer) { self.service = service }
        deinit { g_object_unref(UnsafeMutableRawPointer(service)) }
    }

    /// Connects to the Secret Service on the session bus and checks the default collection.
    ///
    /// Throws ``LockboxError/noSessionBus(detail:)``, ``LockboxError/secretServiceUnavailable(detail:)``
    /// or ``LockboxError/secretServiceTimeout(operation:seconds:)`` when it cannot be reached.
    /// A locked collection is not an error here (reads and writes report it); see ``isLocked()``.
    public init(timeout: Double = 5) throws {
        self.timeout = timeout
        try Self.loadLibsecret()
        _ = try withService("connecting") { _, _ in () }
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
        attributes[Self.schemaAttribute] = Self.schemaName
        for (name, value) in options.attributes { attributes[Self.userAttributePrefix + name] = value }
        let label = options.resolvedLabel(for: key)
        let contentType = secret.isValidUTF8 ? "text/plain" : "application/octet-stream"

        try withService("storing an item") { service, deadline in
            try requireUnlocked(service, deadline)
            // Store first (replacing an item with identical attributes in one step), then remove
            // any older item at the same address: a crash in between leaves two copies, never none.
            let table = GStringTable(attributes)
            // secret_value_new copies the bytes into libsecret's own locked, wiped memory.
            let value = secret.withUnsafeBytes { bytes in
                UnsafeRawPointer(bytes.bytes).withMemoryRebound(to: CChar.self, capacity: max(1, bytes.count)) {
                    secret_value_new($0, bytes.count, contentType)
                }
            }
            defer { if let value { secret_value_unref(UnsafeMutableRawPointer(value)) } }
            _ = try withGError { error in
                secret_service_store_sync(service, nil, table.table, collectionAlias, label, value, deadline.cancellable, error)
            }
            let (unlocked, locked) = try searchPaths(service, deadline, Self.addressAttributes(key))
            for path in unlocked + locked {
                // Only an item whose attributes were read and differ is an older copy; one whose
                // attributes could not be read is left alone rather than guessed at.
                if let old = try itemProperties(service, deadline, path).attributes, old != attributes {
                    try deleteItem(service, deadline, path)
                }
            }
        }
    }

    @discardableResult
    public func delete(_ key: ItemKey) throws -> Bool {
        try withService("deleting an item") { service, deadline in
            try requireUnlocked(service, deadline)
            let (unlocked, locked) = try searchPaths(service, deadline, Self.addressAttributes(key))
            for path in unlocked + locked { try deleteItem(service, deadline, path) }
            return !(unlocked.isEmpty && locked.isEmpty)
        }
    }

    public func list(service: String?) throws -> [ItemMetadata] {
        try withService("listing items") { proxy, deadline in
            let query = service.map { [Self.serviceAttribute: $0] } ?? [Self.markerAttribute: Self.markerValue]
            // Paths, then one GetAll per item: no item proxies (each costs six more bus calls).
            let (unlocked, locked) = try searchPaths(proxy, deadline, query)
            if !locked.isEmpty { throw LockboxError.keyringLocked(collection: collectionAlias) }
            if unlocked.isEmpty, try isLocked(proxy, deadline) {
                throw LockboxError.keyringLocked(collection: collectionAlias)
            }
            var byKey: [ItemKey: ItemMetadata] = [:]
            for path in unlocked {
                let item = try itemProperties(proxy, deadline, path)
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
        try withService("checking the collection") { service, deadline in try isLocked(service, deadline) }
    }

    // MARK: Internals

    /// Loads libsecret (once per process; see CLibSecret.h): a system without it has no Secret
    /// Service client, which is reported as the Secret Service being unavailable.
    private static func loadLibsecret() throws {
        var message = [CChar](repeating: 0, count: 512)
        if lockbox_libsecret_load(&message, message.count) == 0 {
            let detail = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw LockboxError.secretServiceUnavailable(detail: "libsecret could not be loaded: \(detail)")
        }
    }

    private struct FoundItem {
        var metadata: ItemMetadata
        var secret: SecretBytes?
    }

    private func remove(matching query: [String: String], operation: String) throws -> Int {
        try withService(operation) { service, deadline in
            try requireUnlocked(service, deadline)
            let (unlocked, locked) = try searchPaths(service, deadline, query)
            var removed = Set<ItemKey>()
            for path in unlocked + locked {
                let item = try itemProperties(service, deadline, path)
                guard let attributes = item.attributes,
                      let metadata = Self.metadata(attributes: attributes, label: item.label, created: item.created, modified: item.modified)
                else { continue }
                try deleteItem(service, deadline, path)
                removed.insert(metadata.key)
            }
            return removed.count
        }
    }

    /// The item at `key`: Lockbox's own first, then the most recently modified.
    ///
    /// Three D-Bus calls for the usual single match, on the kept connection: `SearchItems` (item
    /// paths, locked and unlocked apart), the item's properties in one `GetAll`, and, for a read,
    /// `GetSecrets` for that one path. No item proxy is built (libsecret's proxies cost several
    /// calls and bus match rules each), and no other match's secret is fetched.
    private func findItem(_ key: ItemKey, loadSecret: Bool) throws -> FoundItem? {
        try withService(loadSecret ? "reading an item" : "reading item metadata") { service, deadline in
            let (unlocked, locked) = try searchPaths(service, deadline, Self.addressAttributes(key))
            guard !(unlocked.isEmpty && locked.isEmpty) else {
                // A locked keyring can look exactly like a missing item: ask which it is.
                if try isLocked(service, deadline) { throw LockboxError.keyringLocked(collection: collectionAlias) }
                return nil
            }
            var candidates = try (unlocked + locked).map { try itemProperties(service, deadline, $0) }
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
            let fetched = try withGError { error in
                secret_service_get_secret_for_dbus_path_sync(service, item.path, deadline.cancellable, error)
            }
            guard let value = fetched else {
                throw LockboxError.undecodableItem(service: key.service, account: key.account,
                                                   reason: "the provider returned no secret for it")
            }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            var length = 0
            let bytes = secret_value_get(value, &length)
            let secret = SecretBytes(count: length) { out in
                if let bytes, length > 0, let target = out.baseAddress { target.copyMemory(from: bytes, byteCount: length) }
            }
            return FoundItem(metadata: metadata, secret: secret)
        }
    }

    /// An item's D-Bus properties, as one `Properties.GetAll` returns them.
    private struct ItemProperties {
        var path: String
        /// `nil` when the reply had no `Attributes` of type `a{ss}`.
        var attributes: [String: String]?
        var label = ""
        var created: UInt64 = 0
        var modified: UInt64 = 0
        var locked = false
    }

    /// Item paths matching `query` exactly (no schema name is matched): `SearchItems`, one call.
    /// Never unlocks (that would prompt).
    private func searchPaths(
        _ service: OpaquePointer, _ deadline: Deadline, _ query: [String: String]
    ) throws -> (unlocked: [String], locked: [String]) {
        let table = GStringTable(query)
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        _ = try withGError { error in
            secret_service_search_for_dbus_paths_sync(service, nil, table.table, deadline.cancellable, &unlocked, &locked, error)
        }
        defer {
            g_strfreev(unlocked)
            g_strfreev(locked)
        }
        return (stringArray(unlocked), stringArray(locked))
    }

    /// The properties of the item at `path`, in one call.
    private func itemProperties(
        _ service: OpaquePointer, _ deadline: Deadline, _ path: String
    ) throws -> ItemProperties {
        guard let reply = try dbusCall(service, deadline, path, "org.freedesktop.DBus.Properties", "GetAll",
                                       ["org.freedesktop.Secret.Item"], replyType: "(a{sv})")
        else { throw LockboxError.secretServiceFailed(operation: "reading an item's properties", detail: "no answer") }
        defer { g_variant_unref(reply) }
        var properties = ItemProperties(path: path)
        guard let dictionary = g_variant_get_child_value(reply, 0) else { return properties }
        defer { g_variant_unref(dictionary) }
        GVariantReader.forEachProperty(dictionary) { name, value in
            switch name {
            case "Attributes": properties.attributes = GVariantReader.stringDictionary(value)
            case "Label": properties.label = GVariantReader.string(value) ?? ""
            case "Created": properties.created = GVariantReader.uint64(value) ?? 0
            case "Modified": properties.modified = GVariantReader.uint64(value) ?? 0
            case "Locked": properties.locked = GVariantReader.bool(value) ?? false
            default: break
            }
        }
        return properties
    }

    /// Deletes the item at `path` (`Item.Delete`, one call). Lockbox never shows a prompt: if
    /// the provider wants the deletion confirmed (KeePassXC can be set to), the prompt is
    /// dismissed and the deletion reported as refused, with what to do.
    private func deleteItem(_ service: OpaquePointer, _ deadline: Deadline, _ path: String) throws {
        guard let reply = try dbusCall(service, deadline, path, "org.freedesktop.Secret.Item", "Delete", [], replyType: "(o)")
        else { return }
        defer { g_variant_unref(reply) }
        guard let prompt = g_variant_get_child_value(reply, 0) else { return }
        defer { g_variant_unref(prompt) }
        guard let promptPath = GVariantReader.string(prompt), promptPath != "/" else { return }
        if let dismissed = try? dbusCall(service, deadline, promptPath, "org.freedesktop.Secret.Prompt", "Dismiss", [], replyType: "()") {
            g_variant_unref(dismissed)
        }
        throw LockboxError.secretServiceFailed(
            operation: "deleting an item",
            detail: "the provider asked to confirm the deletion with a prompt, which Lockbox never shows; allow deleting "
                + "without confirmation in the provider's settings, or delete the item there")
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
        return ItemMetadata(
            key: key, kind: ItemKind(rawValue: attributes[kindAttribute] ?? ItemKind.generic.rawValue), label: label,
            created: Date(timeIntervalSince1970: Double(created)),
            modified: Date(timeIntervalSince1970: Double(modified)),
            attributes: extra, access: access)
    }

    /// Asks the provider (not libsecret's cache) whether the default collection is locked: two
    /// plain D-Bus calls on the service's connection — `ReadAlias("default")`, then the
    /// collection's `Locked` property — whatever the number of items (building a collection
    /// proxy would fetch its item list too).
    private func isLocked(_ service: OpaquePointer, _ deadline: Deadline) throws -> Bool {
        func call(_ path: String, _ interface: String, _ method: String, _ strings: [String], _ replyType: String) throws -> OpaquePointer? {
            try dbusCall(service, deadline, path, interface, method, strings, replyType: replyType)
        }
        guard let aliasReply = try call("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "ReadAlias", [collectionAlias], "(o)")
        else { throw LockboxError.secretServiceFailed(operation: "finding the default collection", detail: "no answer") }
        defer { g_variant_unref(aliasReply) }
        let pathValue = g_variant_get_child_value(aliasReply, 0)
        defer { if let pathValue { g_variant_unref(pathValue) } }
        let path = g_variant_get_string(pathValue, nil).map { String(cString: $0) } ?? "/"
        guard path != "/" else {
            throw LockboxError.secretServiceFailed(
                operation: "finding the default collection",
                detail: "the provider has no '\(collectionAlias)' collection; create one (e.g. in Passwords and Keys)")
        }
        guard let reply = try call(path, "org.freedesktop.DBus.Properties", "Get", ["org.freedesktop.Secret.Collection", "Locked"], "(v)")
        else { throw LockboxError.secretServiceFailed(operation: "reading the collection's state", detail: "no answer") }
        defer { g_variant_unref(reply) }
        let boxed = g_variant_get_child_value(reply, 0)
        defer { if let boxed { g_variant_unref(boxed) } }
        guard let inner = g_variant_get_variant(boxed) else {
            throw LockboxError.secretServiceFailed(operation: "reading the collection's state", detail: "an unexpected reply")
        }
        defer { g_variant_unref(inner) }
        return g_variant_get_boolean(inner) != 0
    }

    /// One plain D-Bus method call to the provider on the service's connection, with string
    /// arguments; the caller unrefs the reply.
    private func dbusCall(
        _ service: OpaquePointer, _ deadline: Deadline,
        _ path: String, _ interface: String, _ method: String, _ strings: [String], replyType: String
    ) throws -> OpaquePointer? {
        // A SecretService is a GDBusProxy (its parent class).
        let proxy = service
        let connection = g_dbus_proxy_get_connection(proxy)
        let busName = g_dbus_proxy_get_name(proxy).map { String(cString: $0) } ?? "org.freedesktop.secrets"
        var arguments: [OpaquePointer?] = strings.map { g_variant_new_string($0) }
        let parameters = g_variant_new_tuple(&arguments, gsize(arguments.count))
        // GDBus checks the reply against this signature and fails the call otherwise, so a reply
        // of another shape is an error here, never a crash in the reading code.
        let expected = g_variant_type_new(replyType)
        defer { g_variant_type_free(expected) }
        return try withGError { error in
            g_dbus_connection_call_sync(connection, busName, path, interface, method, parameters, expected,
                                        G_DBUS_CALL_FLAGS_NONE, Int32(timeout * 1000), deadline.cancellable, error)
        }
    }

    private func requireUnlocked(_ service: OpaquePointer, _ deadline: Deadline) throws {
        if try isLocked(service, deadline) { throw LockboxError.keyringLocked(collection: collectionAlias) }
    }

    /// Runs `body` with the shared service proxy and a fresh deadline, serialised, and turns
    /// every libsecret failure into a typed ``LockboxError``. A failure that means the provider
    /// went away drops the connection, so the next call reconnects.
    private func withService<T>(
        _ operation: String,
        _ body: (OpaquePointer, Deadline) throws -> T
    ) throws -> T {
        try connection.withLock { (handle: inout ServiceHandle?) throws -> T in
            let deadline = Deadline(seconds: timeout)
            do {
                if handle == nil {
                    let service = try withGError { error in
                        secret_service_get_sync(SECRET_SERVICE_OPEN_SESSION, deadline.cancellable, error)
                    }
                    guard let service else {
                        throw LockboxError.secretServiceUnavailable(detail: "libsecret returned no service")
                    }
                    handle = ServiceHandle(service)
                    connectionsMade.withLock { $0 += 1 }
                }
                guard let service = handle?.service else {
                    throw LockboxError.secretServiceUnavailable(detail: "no connection")
                }
                return try body(service, deadline)
            } catch let error as GLibError {
                let mapped = Self.map(error, operation: operation, deadline: deadline)
                if case .keyringLocked = mapped {} else {
                    handle = nil
                    secret_service_disconnect()
                }
                throw mapped
            }
        }
    }

    private static func map(_ error: GLibError, operation: String, deadline: Deadline) -> LockboxError {
        if error.isCancelled || deadline.expired {
            return .secretServiceTimeout(operation: operation, seconds: deadline.seconds)
        }
        if error.domain == "secret-error" && error.code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
            return .keyringLocked(collection: "default")
        }
        switch error.remoteName {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return .secretServiceUnavailable(detail: error.message)
        case "org.freedesktop.Secret.Error.IsLocked":
            return .keyringLocked(collection: "default")
        default:
            break
        }
        let message = error.message
        if message.contains("Cannot autolaunch D-Bus") || message.contains("DBUS_SESSION_BUS_ADDRESS")
            || (error.domain == "g-io-error-quark" && message.contains("Could not connect"))
        {
            return .noSessionBus(detail: message)
        }
        if message.contains("was not provided by any .service files") {
            return .secretServiceUnavailable(detail: message)
        }
        return .secretServiceFailed(operation: operation, detail: message)
    }
}
