import FoundationEssentials

/// A store that keeps items in process memory only: for your own unit tests, like swift-log's
/// in-memory log handler. Nothing is written anywhere; everything is gone when it is released.
///
/// It follows the same contract and limits as the persistent stores, so code tested against it
/// behaves the same against ``EncryptedFileStore``.
public final class MemoryStore: SecretStore {
    /// `false`: the items live in this process's memory only.
    public var isOpenToOtherProcessesOfUser: Bool { false }
    /// `false`: no other process can reach it, so PIN, token and ID helpers over it write no lock files.
    public var isReachableFromOtherProcesses: Bool { false }

    private struct Entry {
        var metadata: ItemMetadata
        var secret: SecretBytes
    }

    private let entries = Locked<[ItemKey: Entry]>([:])
    private let now: @Sendable () -> Date

    /// Creates an empty store. `now` supplies timestamps (inject a fixed clock in tests).
    public init(now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    public func get(_ key: ItemKey) throws -> SecretBytes? {
        entries.withLock { $0[key]?.secret }
    }

    public func metadata(_ key: ItemKey) throws -> ItemMetadata? {
        entries.withLock { $0[key]?.metadata }
    }

    public func item(_ key: ItemKey) throws -> StoredItem? {
        entries.withLock { entries in entries[key].map { StoredItem(metadata: $0.metadata, secret: $0.secret) } }
    }

    public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws {
        try ItemLimits.validate(key, options: options, secretCount: secret.count)
        let time = now()
        entries.withLock { entries in
            let created = entries[key]?.metadata.created ?? time
            let metadata = ItemMetadata(key: key, options: options, created: created, modified: time)
            entries[key] = Entry(metadata: metadata, secret: secret)
        }
    }

    @discardableResult
    public func delete(_ key: ItemKey) throws -> Bool {
        entries.withLock { $0.removeValue(forKey: key) != nil }
    }

    public func list(service: String?) throws -> [ItemMetadata] {
        entries.withLock { entries in
            entries.values.lazy.map(\.metadata)
                .filter { service == nil || $0.key.service == service }
        }.sortedForListing()
    }

    @discardableResult
    public func wipe(service: String) throws -> Int {
        entries.withLock { entries in
            let doomed = entries.keys.filter { $0.service == service }
            for key in doomed { entries.removeValue(forKey: key) }
            return doomed.count
        }
    }

    @discardableResult
    public func wipeAll() throws -> Int {
        entries.withLock { entries in
            defer { entries.removeAll() }
            return entries.count
        }
    }
}
