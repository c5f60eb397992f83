import Foundation
@_exported import Lockbox

/// A store for your tests that fails, slows down or acts locked when told to, around a real one
/// (a ``MemoryStore`` unless you pass another), and counts the calls it gets.
///
/// ```swift
/// let store = FaultInjectingStore()
/// store.failCall(2, of: .set, with: LockboxError.io(operation: "writing", path: "test", errno: .noSpace))
/// try vault(store).set(…)   // the first set succeeds
/// try vault(store).set(…)   // the second throws the error above
/// #expect(store.calls(.set) == 2)
/// ```
///
/// Like swift-log's in-memory handler, it ships for users' tests: code that keeps tokens or PINs
/// in Lockbox can check what it does when the store is full, slow, or a keyring is locked.
public final class FaultInjectingStore: SecretStore {
    /// A kind of store call, for counting and for choosing which call fails.
    public enum Operation: String, Sendable, CaseIterable {
        /// ``SecretStore/get(_:)``.
        case get
        /// ``SecretStore/metadata(_:)``.
        case metadata
        /// ``SecretStore/item(_:)``.
        case item
        /// ``SecretStore/set(_:for:options:)``.
        case set
        /// ``SecretStore/set(_:)`` (a batch).
        case setBatch
        /// ``SecretStore/delete(_:)-(ItemKey)``.
        case delete
        /// ``SecretStore/delete(_:)-([ItemKey])`` (a batch).
        case deleteBatch
        /// ``SecretStore/list(service:)``.
        case list
        /// ``SecretStore/wipe(service:)``.
        case wipe
        /// ``SecretStore/wipeAll()``.
        case wipeAll

        /// Whether the call changes the store.
        public var isWrite: Bool {
            switch self {
            case .get, .metadata, .item, .list: return false
            case .set, .setBatch, .delete, .deleteBatch, .wipe, .wipeAll: return true
            }
        }
    }

    /// The store every call that is not failed goes to.
    public let wrapped: any SecretStore

    private struct Fault {
        var remaining: Int
        var operation: Operation?
        var error: any Error
    }

    private struct State {
        var faults: [Fault] = []
        var counts: [Operation: Int] = [:]
        var latency: Duration = .zero
        var locked = false
    }

    private let state = Locked(State())

    /// Wraps `store` (a fresh ``MemoryStore`` by default).
    public init(wrapping store: any SecretStore = MemoryStore()) {
        self.wrapped = store
    }

    // MARK: Faults

    /// Makes the `number`th call from now (1: the next one) of `operation` — of any operation if
    /// `nil` — throw `error` instead of reaching the wrapped store. Several faults may be pending.
    public func failCall(_ number: Int, of operation: Operation? = nil, with error: any Error) {
        precondition(number >= 1, "failCall counts calls from 1 (the next call)")
        state.withLock { $0.faults.append(Fault(remaining: number, operation: operation, error: error)) }
    }

    /// Adds `latency` to every call from now on (the calling thread sleeps); `.zero` removes it.
    public func setLatency(_ latency: Duration) {
        state.withLock { $0.latency = latency }
    }

    /// While `locked`, every call throws ``LockboxError/keyringLocked(collection:)``, as the
    /// Secret Service does while its collection is locked.
    public func actLocked(_ locked: Bool = true) {
        state.withLock { $0.locked = locked }
    }

    // MARK: Counts

    /// How many calls of `operation` the store has received (failed ones included).
    public func calls(_ operation: Operation) -> Int {
        state.withLock { $0.counts[operation, default: 0] }
    }

    /// How many calls that change the store it has received (failed ones included).
    public var writeCalls: Int {
        state.withLock { $0.counts.filter { $0.key.isWrite }.values.reduce(0, +) }
    }

    /// Sets every count back to zero.
    public func resetCounts() {
        state.withLock { $0.counts = [:] }
    }

    /// Counts the call, sleeps the latency, throws an injected fault or the locked error, or runs `body`.
    private func call<T>(_ operation: Operation, _ body: () throws -> T) throws -> T {
        let (latency, failure) = state.withLock { state -> (Duration, (any Error)?) in
            state.counts[operation, default: 0] += 1
            var failure: (any Error)?
            for index in state.faults.indices where state.faults[index].operation == nil || state.faults[index].operation == operation {
                state.faults[index].remaining -= 1
                if state.faults[index].remaining == 0 && failure == nil { failure = state.faults[index].error }
            }
            state.faults.removeAll { $0.remaining <= 0 }
            if failure == nil && state.locked { failure = LockboxError.keyringLocked(collection: "FaultInjectingStore") }
            return (state.latency, failure)
        }
        if latency > .zero {
            let (seconds, attoseconds) = latency.components
            Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
        }
        if let failure { throw failure }
        return try body()
    }

    // MARK: SecretStore

    /// The wrapped store's answer.
    public var isOpenToOtherProcessesOfUser: Bool { wrapped.isOpenToOtherProcessesOfUser }
    /// The wrapped store's answer.
    public var isReachableFromOtherProcesses: Bool { wrapped.isReachableFromOtherProcesses }

    /// The wrapped store's `get`, unless a fault says otherwise.
    public func get(_ key: ItemKey) throws -> SecretBytes? { try call(.get) { try wrapped.get(key) } }
    /// The wrapped store's `metadata`, unless a fault says otherwise.
    public func metadata(_ key: ItemKey) throws -> ItemMetadata? { try call(.metadata) { try wrapped.metadata(key) } }
    /// The wrapped store's `item`, unless a fault says otherwise.
    public func item(_ key: ItemKey) throws -> StoredItem? { try call(.item) { try wrapped.item(key) } }

    /// The wrapped store's `set`, unless a fault says otherwise.
    public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) throws {
        try call(.set) { try wrapped.set(secret, for: key, options: options) }
    }

    /// The wrapped store's batch `set`, unless a fault says otherwise.
    public func set(_ writes: [ItemWrite]) throws { try call(.setBatch) { try wrapped.set(writes) } }

    /// The wrapped store's `delete`, unless a fault says otherwise.
    @discardableResult
    public func delete(_ key: ItemKey) throws -> Bool { try call(.delete) { try wrapped.delete(key) } }

    /// The wrapped store's batch `delete`, unless a fault says otherwise.
    @discardableResult
    public func delete(_ keys: [ItemKey]) throws -> [ItemKey] { try call(.deleteBatch) { try wrapped.delete(keys) } }

    /// The wrapped store's `list`, unless a fault says otherwise.
    public func list(service: String?) throws -> [ItemMetadata] { try call(.list) { try wrapped.list(service: service) } }

    /// The wrapped store's `wipe`, unless a fault says otherwise.
    @discardableResult
    public func wipe(service: String) throws -> Int { try call(.wipe) { try wrapped.wipe(service: service) } }

    /// The wrapped store's `wipeAll`, unless a fault says otherwise.
    @discardableResult
    public func wipeAll() throws -> Int { try call(.wipeAll) { try wrapped.wipeAll() } }
}

extension FaultInjectingStore: LockableSecretStore {
    /// Whether the store acts locked (``actLocked(_:)``), as a Secret Service connection answers
    /// whether its collection is locked. Asking is not a call: it is not counted and no fault or
    /// latency applies to it.
    public func isLocked() throws -> Bool { state.withLock { $0.locked } }
}
