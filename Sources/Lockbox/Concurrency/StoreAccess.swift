/// The store a Lockbox type was given — a blocking ``SecretStore`` or an ``AsyncSecretStore`` —
/// and the route each of the type's two APIs takes to it.
///
/// Every operation of ``Vault``, ``PinGuard``, ``TokenRefresher``, ``DeviceIdentity``, ``Transfer``
/// and ``SignOut`` has one implementation, async, over a ``StoreRoute``:
/// - the async API takes ``awaiting``: an async store is awaited as it is, a blocking one is
///   offloaded to the executor (each call on its threads), and the operation's own blocking work
///   (hashing) runs on the executor too. No thread of the cooperative pool ever blocks.
/// - the blocking API runs the same implementation on the calling thread
///   (``CallingThread/run(_:)``) over ``blocking``: a blocking store is called inline, an async
///   store is awaited (the caller's thread blocked meanwhile), and hashing runs inline.
package struct StoreAccess: Sendable {
    private enum Given: Sendable {
        case blocking(any SecretStore)
        case async(any AsyncSecretStore)
    }

    private let given: Given
    /// Where the async API offloads blocking work.
    package let executor: BlockingExecutor

    /// Access to a blocking store. A ``BlockingSecretStore`` is unwrapped: its async store is
    /// used as such, so what that store adopts (``PinAttemptLedger``, ``RefreshLeasing``,
    /// ``FirstWriteWinsStore``) serves the Lockbox type too, and the async API awaits it rather
    /// than blocking an executor thread on it.
    package init(_ store: any SecretStore, executor: BlockingExecutor) {
        // The type comparison first: a failed `as?` from a class (every other store) to this
        // struct makes the runtime look for a boxed Swift value and an Objective-C bridge, a
        // noticeable cost on every command; comparing metadata is one pointer compare.
        if type(of: store) == BlockingSecretStore.self, let bridged = store as? BlockingSecretStore {
            given = .async(bridged.store)
        } else {
            given = .blocking(store)
        }
        self.executor = executor
    }

    /// Access to an async store.
    package init(_ store: any AsyncSecretStore, executor: BlockingExecutor) {
        given = .async(store)
        self.executor = executor
    }

    /// The route of the async API.
    package var awaiting: StoreRoute {
        switch given {
        case .blocking(let store): StoreRoute(store: store.offloaded(to: executor), offloads: true, executor: executor)
        case .async(let store): StoreRoute(store: store, offloads: true, executor: executor)
        }
    }

    /// The route of the blocking API (only inside ``CallingThread/run(_:)``: see ``blocking(_:)``).
    private var blockingRoute: StoreRoute {
        switch given {
        case .blocking(let store): StoreRoute(store: InlineSecretStore(store: store), offloads: false, executor: executor)
        case .async(let store): StoreRoute(store: store, offloads: false, executor: executor)
        }
    }

    /// Runs an operation's implementation for the blocking API: on this thread, over ``blockingRoute``.
    package func blocking<Result: Sendable>(_ operation: sending @escaping (StoreRoute) async throws -> Result) throws -> Result {
        let route = blockingRoute
        return try CallingThread.run { try await operation(route) }
    }

    /// The store as a blocking ``SecretStore`` (an async one through ``BlockingSecretStore``).
    package var secretStore: any SecretStore {
        switch given {
        case .blocking(let store): store
        case .async(let store): store.blocking()
        }
    }

    /// The given store's type, for logs and metrics.
    package var typeName: String {
        switch given {
        case .blocking(let store): "\(type(of: store))"
        case .async(let store): "\(type(of: store))"
        }
    }

    /// As ``SecretStore/isOpenToOtherProcessesOfUser``.
    package var isOpenToOtherProcessesOfUser: Bool {
        switch given {
        case .blocking(let store): store.isOpenToOtherProcessesOfUser
        case .async(let store): store.isOpenToOtherProcessesOfUser
        }
    }

    /// As ``SecretStore/isReachableFromOtherProcesses``.
    package var isReachableFromOtherProcesses: Bool {
        switch given {
        case .blocking(let store): store.isReachableFromOtherProcesses
        case .async(let store): store.isReachableFromOtherProcesses
        }
    }

    /// The given store itself if it is an object (two stores in one process are told apart by it).
    package var object: AnyObject? {
        switch given {
        case .blocking(let store): type(of: store) is AnyClass ? store as AnyObject : nil
        case .async(let store): type(of: store) is AnyClass ? store as AnyObject : nil
        }
    }

    /// The given blocking store, if it is one (the default lock folder sits beside a file vault).
    package var blockingStore: (any SecretStore)? {
        if case .blocking(let store) = given { return store }
        return nil
    }
}

/// How one API's calls of an operation reach the store and where its own blocking work runs:
/// ``StoreAccess/awaiting`` or the blocking route.
package struct StoreRoute: Sendable {
    /// The store, as the route awaits it.
    package let store: any AsyncSecretStore
    /// Whether the operation's own blocking work (an Argon2id hash) goes to ``executor``
    /// (the async API) or runs on the current thread (the blocking API).
    package let offloads: Bool
    /// The executor, and its hash memory budget.
    package let executor: BlockingExecutor

    /// Runs blocking work the operation does itself (not a store call): on the executor for the
    /// async API, inline for the blocking one.
    package func compute<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
        offloads ? try await executor.run(work) : try work()
    }

    /// ``compute(_:)`` holding `bytes` of the executor's hash memory budget for exactly as long as
    /// `work` runs: on the executor (``BlockingExecutor/runHoldingHashMemory(_:_:)``) for the async
    /// API, on this thread for the blocking one (which waits for the memory here, blocked).
    package func computeHoldingHashMemory<Result: Sendable>(
        _ bytes: UInt64, _ work: @escaping @Sendable () throws -> Result
    ) async throws -> Result {
        if offloads { return try await executor.runHoldingHashMemory(bytes, work) }
        return try executor.hashMemoryBudget.withReservation(of: bytes, work)
    }
}
