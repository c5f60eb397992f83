import FoundationEssentials

/// A store that hands out a refresh lease per item, so that of all the hosts sharing it that find
/// the same expired tokens, one calls the token endpoint: ``TokenRefresher`` uses it, when its store
/// adopts this protocol, besides its per-host lock (which holds on one host only).
///
/// The contract, for each item (addressed by the ``ItemKey`` the token store passes):
/// - ``acquireRefreshLease(_:for:)`` takes the lease if nobody holds a live one, for a duration
///   of the store's own clock (no host's clock decides when a lease ends), and returns it with a
///   fence — a number no earlier lease of the item had. Two hosts asking at once: one gets it.
/// - ``completeRefresh(_:storing:for:options:)`` stores the new tokens and ends the lease in one
///   transaction, only if the lease is still the item's latest (no host took it over after it
///   expired): a host that stalled past its lease cannot overwrite a newer refresh. Readers see
///   the old tokens or the new ones, never a mix.
/// - ``releaseRefreshLease(_:)`` ends it without writing (the refresh failed).
///
/// A holder that dies leaves its lease to expire; then the next host takes it and refreshes.
/// `LockboxPostgres`'s `PostgresStore` adopts it (a lease row, `clock_timestamp()`).
public protocol RefreshLeasing: AsyncSecretStore {
    /// Takes the refresh lease of `key` for `duration` of the store's clock, or returns `nil` if
    /// another holder's lease is still live.
    func acquireRefreshLease(_ key: ItemKey, for duration: Duration) async throws -> RefreshLease?

    /// Stores `secret` under `key` and ends `lease`, in one transaction, if `lease` is still the
    /// item's latest lease; returns whether it stored (`false`: another host took the lease over).
    func completeRefresh(_ lease: RefreshLease, storing secret: SecretBytes, for key: ItemKey, options: ItemOptions) async throws -> Bool

    /// Ends `lease` without storing anything; does nothing if another host took it over.
    func releaseRefreshLease(_ lease: RefreshLease) async throws
}

/// A refresh lease a ``RefreshLeasing`` store handed out.
public struct RefreshLease: Sendable, Hashable {
    /// The item the lease is for.
    public var key: ItemKey
    /// Larger than the fence of every earlier lease of the item: what a completion is checked by.
    public var fence: Int64
    /// When the lease ends, by the store's clock.
    public var expires: Date

    /// Creates a lease (for stores adopting ``RefreshLeasing``).
    public init(key: ItemKey, fence: Int64, expires: Date) {
        self.key = key
        self.fence = fence
        self.expires = expires
    }
}
