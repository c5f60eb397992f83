import Foundation
import SystemPackage

/// A stable random identifier per service (a device ID, a guest or anonymous profile ID):
/// created on first use, the same forever after, and exactly one even when several processes
/// ask for the first time at once.
public struct DeviceIdentity: Sendable {
    /// Where IDs are kept.
    public let store: any SecretStore
    /// Where the async variants run.
    public let executor: BlockingExecutor
    let lock: ItemLock

    /// The account device IDs are stored under unless told otherwise.
    public static let defaultAccount = "device-id"

    /// Creates the helper over `store`. `lockDirectory` must be shared by every process using the
    /// store (default: beside the file vault, none for ``MemoryStore``, else a per-user folder);
    /// the async variants run on `executor`.
    public init(store: any SecretStore, lockDirectory: FilePath? = nil, executor: BlockingExecutor = .shared) {
        self.store = store
        self.executor = executor
        self.lock = ItemLock(directory: lockDirectory ?? ItemLock.defaultDirectory("id-locks", for: store), timeout: .seconds(30), store: store)
    }

    /// The ID for (service, account), created on first use.
    public func deviceID(service: String, account: String = DeviceIdentity.defaultAccount) throws -> UUID {
        try identifier(ItemKey(service: service, account: account), kind: .deviceID)
    }

    /// A guest or anonymous profile's ID: the same mechanism under `guest:NAME`, kind `guest-id`.
    public func guestID(service: String, name: String) throws -> UUID {
        try identifier(ItemKey(service: service, account: "guest:" + name), kind: .guestID)
    }

    private func identifier(_ key: ItemKey, kind: ItemKind) throws -> UUID {
        try ItemLimits.validate(key)
        if let existing = try read(key) { return existing }
        return try lock.withLock(key) {
            // Re-read under the lock: another process may have created it meanwhile.
            if let existing = try read(key) { return existing }
            let id = UUID()
            try write(id, key, kind: kind)
            return id
        }
    }

    /// Replaces the ID with a new one and returns it.
    public func reset(service: String, account: String = DeviceIdentity.defaultAccount) throws -> UUID {
        let key = ItemKey(service: service, account: account)
        return try lock.withLock(key) {
            let id = UUID()
            try write(id, key, kind: account.hasPrefix("guest:") ? .guestID : .deviceID)
            return id
        }
    }

    private func read(_ key: ItemKey) throws -> UUID? {
        guard let bytes = try store.get(key) else { return nil }
        guard let text = bytes.stringValue(), let id = UUID(uuidString: text) else {
            throw LockboxError.undecodableItem(service: key.service, account: key.account, reason: "it is not a UUID")
        }
        return id
    }

    private func write(_ id: UUID, _ key: ItemKey, kind: ItemKind) throws {
        try store.set(SecretBytes(utf8: id.uuidString.lowercased()), for: key,
                      options: ItemOptions(kind: kind, label: (kind == .guestID ? "Guest ID" : "Device ID") + " for '\(key.service)'"))
    }
}

/// The async variants, each run on ``DeviceIdentity/executor``.
extension DeviceIdentity {
    /// ``deviceID(service:account:)``, run on ``executor``.
    public func deviceID(service: String, account: String = DeviceIdentity.defaultAccount) async throws -> UUID {
        try await executor.run { try self.deviceID(service: service, account: account) }
    }

    /// ``guestID(service:name:)``, run on ``executor``.
    public func guestID(service: String, name: String) async throws -> UUID {
        try await executor.run { try self.guestID(service: service, name: name) }
    }

    /// ``reset(service:account:)``, run on ``executor``.
    public func reset(service: String, account: String = DeviceIdentity.defaultAccount) async throws -> UUID {
        try await executor.run { try self.reset(service: service, account: account) }
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
    public static func run(service: String, store: any SecretStore, keepDeviceID: Bool = false) throws -> SignOutReport {
        var report = SignOutReport(removed: [], kept: [])
        for item in try store.list(service: service) {
            if keepDeviceID && item.kind == .deviceID {
                report.kept.append(item)
                continue
            }
            if try store.delete(item.key) { report.removed.append(item) }
        }
        return report
    }
}

extension SignOut {
    /// ``run(service:store:keepDeviceID:)``, run on `executor`.
    public static func run(
        service: String, store: any SecretStore, keepDeviceID: Bool = false, executor: BlockingExecutor = .shared
    ) async throws -> SignOutReport {
        try await executor.run { try run(service: service, store: store, keepDeviceID: keepDeviceID) }
    }
}
