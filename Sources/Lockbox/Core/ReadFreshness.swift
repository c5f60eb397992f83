/// How up to date a read must be, for a store whose reads can be served by a replica: the
/// PostgreSQL store with `target_session_attrs=prefer-standby` sends a read to a hot standby only
/// when the running task allows it (``current`` is ``replicaAllowed``), and to the primary
/// otherwise.
///
/// A replica lags the primary by its replication delay, so a read there may miss a write that was
/// acknowledged a moment ago (on any host, this one included). ``Vault``'s plain reads — its `get`,
/// `string`, `metadata` and `list` — allow it; everything that reads in order to decide or to
/// write back does not: ``PinGuard`` (the PIN record, the attempt count), ``TokenRefresher`` (the
/// tokens it refreshes), ``DeviceIdentity``, conditional writes, keeping a previous version. Stores
/// without replicas ignore it.
public enum ReadFreshness: Sendable, Equatable {
    /// Every acknowledged write must be visible: the primary serves the read. The default.
    case latest
    /// A replica may serve the read, and may not yet have the latest writes.
    case replicaAllowed

    /// The freshness the running task's reads need (``latest`` unless inside
    /// ``allowingReplica(isolation:_:)``).
    @TaskLocal public static var current: ReadFreshness = .latest

    /// Runs `body` with ``current`` set to ``replicaAllowed``: its reads may be served by a replica.
    /// - Parameters:
    ///   - isolation: the caller's actor, which `body` runs on.
    ///   - body: the reads that may be stale.
    public static func allowingReplica<T>(
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        try await $current.withValue(.replicaAllowed, operation: body, isolation: isolation)
    }
}
