import FoundationEssentials
import SystemPackage

/// A stable random identifier per service (a device ID, a guest or anonymous profile ID):
/// created on first use, the same forever after, and exactly one even when several processes
/// ask for the first time at once.
public struct DeviceIdentity: Sendable {
    /// Where IDs are kept, as a blocking store (a helper made over an ``AsyncSecretStore`` gives
    /// it as a ``BlockingSecretStore``).
    public var store: any SecretStore { access.secretStore }
    /// Where the async variants run the blocking store calls.
    public var executor: BlockingExecutor { access.executor }
    let access: StoreAccess
    let lock: ItemLock

    /// The account device IDs are stored under unless told otherwise.
    public static let defaultAccount = "device-id"

    /// Creates the helper over `store`. `lockDirectory` must be shared by every process using the
    /// store (default: beside the file vault, none for ``MemoryStore``, else a per-user folder);
    /// the async variants run on `executor`.
    public init(store: any SecretStore, lockDirectory: FilePath? = nil, executor: BlockingExecutor = .shared) {
        self.init(access: StoreAccess(store, executor: executor), lockDirectory: lockDirectory)
    }

    /// Creates the helper over an async store (a network-backed one): the async methods await it
    /// and never block a thread. The first-use lock serialises the processes of one host; across
    /// hosts, a store that adopts ``FirstWriteWinsStore`` (the PostgreSQL store) creates the one
    /// ID in its own transaction instead (see docs/ARCHITECTURE.md).
    public init(store: any AsyncSecretStore, lockDirectory: FilePath? = nil, executor: BlockingExecutor = .shared) {
        self.init(access: StoreAccess(store, executor: executor), lockDirectory: lockDirectory)
    }

    private init(access: StoreAccess, lockDirectory: FilePath?) {
        self.access = access
        self.lock = ItemLock(
            directory: lockDirectory ?? ItemLock.defaultDirectory("id-locks", for: access), timeout: .seconds(30),
            access: access)
    }

    /// The ID for (service, account), created on first use.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func deviceID(service: String, account: String = DeviceIdentity.defaultAccount) throws -> UUID {
        try access.blocking { try await self.identifier(ItemKey(service: service, account: account), kind: .deviceID, via: $0) }
    }

    /// A guest or anonymous profile's ID: the same mechanism under `guest:NAME`, kind `guest-id`.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func guestID(service: String, name: String) throws -> UUID {
        try access.blocking { try await self.identifier(ItemKey(service: service, account: "guest:" + name), kind: .guestID, via: $0) }
    }

    /// Replaces the ID with a new one and returns it.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public func reset(service: String, account: String = DeviceIdentity.defaultAccount) throws -> UUID {
        try access.blocking { try await self.reset(ItemKey(service: service, account: account), via: $0) }
    }

    // MARK: The one implementation of each operation (see ``StoreAccess``)

    func identifier(_ key: ItemKey, kind: ItemKind, via route: StoreRoute) async throws -> UUID {
        try ItemLimits.validate(key)
        if let existing = try await read(key, via: route) { return existing }
        if let store = route.store as? any FirstWriteWinsStore {
            // A store shared by many hosts: its own transaction picks the one ID, no host lock.
            let id = UUID()
            guard
                let existing = try await store.setIfAbsent(
                    SecretBytes(utf8: id.uuidString.lowercased()), for: key,
                    options: options(kind, key))
            else { return id }
            return try parse(existing, key)
        }
        let held = try await lock.acquire(key)
        defer { held.release() }
        // Re-read under the lock: another process may have created it meanwhile.
        if let existing = try await read(key, via: route) { return existing }
        // Written only if still absent, in one step of the store (one transaction of the file
        // vault): the lock above makes the processes of this host wait politely, the store's
        // transaction makes one ID win wherever the lock does not reach (another mount namespace,
        // a lock folder removed).
        for _ in 0..<8 {
            let id = UUID()
            if try await route.store.set(
                SecretBytes(utf8: id.uuidString.lowercased()), for: key,
                changes: ItemChanges(replacingWith: options(kind, key)), when: .ifAbsent)
            {
                return id
            }
            // Another writer's ID won; read it (again, if it was reset away meanwhile).
            if let existing = try await read(key, via: route) { return existing }
        }
        throw LockboxError.io(
            operation: "creating an ID (other writers kept removing it)", path: key.description,
            errno: .resourceTemporarilyUnavailable)
    }

    func reset(_ key: ItemKey, via route: StoreRoute) async throws -> UUID {
        try ItemLimits.validate(key)
        let held = try await lock.acquire(key)
        defer { held.release() }
        let id = UUID()
        try await write(id, key, kind: key.account.hasPrefix("guest:") ? .guestID : .deviceID, via: route)
        return id
    }

    private func read(_ key: ItemKey, via route: StoreRoute) async throws -> UUID? {
        guard let bytes = try await route.store.get(key) else { return nil }
        return try parse(bytes, key)
    }

    private func parse(_ bytes: SecretBytes, _ key: ItemKey) throws -> UUID {
        guard let text = bytes.stringValue(), let id = UUID(uuidString: text) else {
            throw LockboxError.undecodableItem(service: key.service, account: key.account, reason: "it is not a UUID")
        }
        return id
    }

    private func options(_ kind: ItemKind, _ key: ItemKey) -> ItemOptions {
        ItemOptions(kind: kind, label: (kind == .guestID ? "Guest ID" : "Device ID") + " for '\(key.service)'")
    }

    private func write(_ id: UUID, _ key: ItemKey, kind: ItemKind, via route: StoreRoute) async throws {
        try await route.store.set(SecretBytes(utf8: id.uuidString.lowercased()), for: key, options: options(kind, key))
    }
}

/// The async variants: the one implementation over the store as awaited (an
/// ``AsyncSecretStore`` directly, a blocking ``SecretStore`` offloaded to ``DeviceIdentity/executor``).
extension DeviceIdentity {
    /// ``deviceID(service:account:)``, awaited.
    public func deviceID(service: String, account: String = DeviceIdentity.defaultAccount) async throws -> UUID {
        try await identifier(ItemKey(service: service, account: account), kind: .deviceID, via: access.awaiting)
    }

    /// ``guestID(service:name:)``, awaited.
    public func guestID(service: String, name: String) async throws -> UUID {
        try await identifier(ItemKey(service: service, account: "guest:" + name), kind: .guestID, via: access.awaiting)
    }

    /// ``reset(service:account:)``, awaited.
    public func reset(service: String, account: String = DeviceIdentity.defaultAccount) async throws -> UUID {
        try await reset(ItemKey(service: service, account: account), via: access.awaiting)
    }
}

/// What ``SignOut/run(service:store:keepDeviceID:)`` removed.
public struct SignOutReport: Sendable, Equatable {
    /// The items removed, by kind.
    public var removed: [ItemMetadata]
    /// Device IDs kept because the caller asked.
    public var kept: [ItemMetadata]
}

/// Clearing everything a service stored, for logout.
public enum SignOut {
    /// Removes every item of `service` — tokens, PIN records, protected items, guest IDs,
    /// everything — except device IDs when `keepDeviceID` is set, and reports what it removed.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public static func run(service: String, store: any SecretStore, keepDeviceID: Bool = false) throws -> SignOutReport {
        try CallingThread.run { try await run(service: service, in: InlineSecretStore(store: store), keepDeviceID: keepDeviceID) }
    }

    /// ``run(service:store:keepDeviceID:)`` over an async store, awaited (never blocking a thread on it).
    public static func run(service: String, store: any AsyncSecretStore, keepDeviceID: Bool = false) async throws -> SignOutReport {
        try await run(service: service, in: store, keepDeviceID: keepDeviceID)
    }

    /// ``run(service:store:keepDeviceID:)``, its store calls run on `executor`.
    public static func run(
        service: String, store: any SecretStore, keepDeviceID: Bool = false, executor: BlockingExecutor = .shared
    ) async throws -> SignOutReport {
        try await run(service: service, in: store.offloaded(to: executor), keepDeviceID: keepDeviceID)
    }

    /// The one implementation.
    private static func run(service: String, in store: any AsyncSecretStore, keepDeviceID: Bool) async throws -> SignOutReport {
        var report = SignOutReport(removed: [], kept: [])
        for item in try await store.list(service: service) {
            if keepDeviceID && item.kind == .deviceID {
                report.kept.append(item)
                continue
            }
            if try await store.delete(item.key) { report.removed.append(item) }
        }
        return report
    }
}
