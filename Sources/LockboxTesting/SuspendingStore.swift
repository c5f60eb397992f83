import Dispatch
import Lockbox

/// An ``Lockbox/AsyncSecretStore`` for your tests that behaves like a network-backed store: every
/// call suspends the calling task and is answered from another thread, after a latency you choose;
/// answers can be held back altogether; and calls fail on demand.
///
/// Behind it is a ``FaultInjectingStore`` (``faults``): choose failures, act locked and count calls
/// there, as with a blocking store. Its thread-sleeping latency is not used here; set the
/// suspending one with ``setLatency(_:)``.
///
/// ```swift
/// let store = SuspendingStore()
/// let vault = Vault(store: store)
/// store.faults.failCall(1, of: .set, with: LockboxError.io(operation: "writing", path: "db", errno: .noSpace))
/// await #expect(throws: LockboxError.self) { try await vault.set("x", service: "svc", account: "a") }
/// store.holdAnswers()        // calls now wait, suspended, until releaseAnswers()
/// ```
public final class SuspendingStore: AsyncSecretStore {
    /// The store that answers, and where faults are injected and calls counted.
    public let faults: FaultInjectingStore

    private struct State {
        var latency: Duration = .zero
        var holding = false
        var held: [CheckedContinuation<Void, Never>] = []
        var inFlight = 0
    }

    private let state = Locked(State())
    /// The "network": where answers come from, never the caller's thread.
    private let answers = DispatchQueue(label: "lockbox-testing.suspending-store", attributes: .concurrent)

    /// A suspending store over `store` (a fresh ``Lockbox/MemoryStore`` by default), through a
    /// ``FaultInjectingStore``.
    public init(wrapping store: any SecretStore = MemoryStore()) {
        faults = FaultInjectingStore(wrapping: store)
    }

    /// Answers every call after `latency` from now on (the caller suspended meanwhile); `.zero`
    /// still suspends and answers from another thread.
    public func setLatency(_ latency: Duration) {
        state.withLock { $0.latency = latency }
    }

    /// Holds every answer, from now until ``releaseAnswers()``: the calls wait, suspended.
    public func holdAnswers() {
        state.withLock { $0.holding = true }
    }

    /// Answers the held calls and stops holding.
    public func releaseAnswers() {
        let held = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.holding = false
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { answers.async { continuation.resume() } }
    }

    /// Calls waiting for their answer now (held or in their latency).
    public var callsWaiting: Int { state.withLock { $0.inFlight } }

    /// Suspends until the answer is due, then answers through ``faults``.
    private func call<T>(_ body: () throws -> T) async throws -> T {
        state.withLock { $0.inFlight += 1 }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let latency = state.withLock { state -> Duration? in
                if state.holding {
                    state.held.append(continuation)
                    return nil
                }
                return state.latency
            }
            guard let latency else { return }
            let (seconds, attoseconds) = latency.components
            let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
            answers.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { continuation.resume() }
        }
        state.withLock { $0.inFlight -= 1 }
        return try body()
    }

    // MARK: AsyncSecretStore

    /// The wrapped store's answer.
    public var isOpenToOtherProcessesOfUser: Bool { faults.isOpenToOtherProcessesOfUser }
    /// The wrapped store's answer.
    public var isReachableFromOtherProcesses: Bool { faults.isReachableFromOtherProcesses }

    /// ``FaultInjectingStore/get(_:)``, answered later.
    public func get(_ key: ItemKey) async throws -> SecretBytes? { try await call { try faults.get(key) } }
    /// ``FaultInjectingStore/metadata(_:)``, answered later.
    public func metadata(_ key: ItemKey) async throws -> ItemMetadata? { try await call { try faults.metadata(key) } }
    /// ``FaultInjectingStore/item(_:)``, answered later.
    public func item(_ key: ItemKey) async throws -> StoredItem? { try await call { try faults.item(key) } }
    /// ``FaultInjectingStore/set(_:for:options:)``, answered later.
    public func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) async throws {
        try await call { try faults.set(secret, for: key, options: options) }
    }
    /// ``FaultInjectingStore/set(_:)``, answered later.
    public func set(_ writes: [ItemWrite]) async throws { try await call { try faults.set(writes) } }
    /// ``FaultInjectingStore/delete(_:)-(ItemKey)``, answered later.
    @discardableResult
    public func delete(_ key: ItemKey) async throws -> Bool { try await call { try faults.delete(key) } }
    /// ``FaultInjectingStore/delete(_:)-([ItemKey])``, answered later.
    @discardableResult
    public func delete(_ keys: [ItemKey]) async throws -> [ItemKey] { try await call { try faults.delete(keys) } }
    /// ``FaultInjectingStore/list(service:)``, answered later.
    public func list(service: String?) async throws -> [ItemMetadata] { try await call { try faults.list(service: service) } }
    /// ``FaultInjectingStore/wipe(service:)``, answered later.
    @discardableResult
    public func wipe(service: String) async throws -> Int { try await call { try faults.wipe(service: service) } }
    /// ``FaultInjectingStore/wipeAll()``, answered later.
    @discardableResult
    public func wipeAll() async throws -> Int { try await call { try faults.wipeAll() } }
}
