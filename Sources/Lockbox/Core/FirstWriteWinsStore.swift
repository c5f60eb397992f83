/// A store that can create an item only if none exists, in one step no other writer can come
/// between — on every host that shares it. ``DeviceIdentity`` uses it, when its store adopts
/// this protocol, instead of its per-host first-use lock, so that first uses on many hosts at
/// once agree on one ID. `LockboxPostgres`'s `PostgresStore` adopts it
/// (`INSERT … ON CONFLICT DO NOTHING`, then a read in the same transaction).
public protocol FirstWriteWinsStore: AsyncSecretStore {
    /// Stores `secret` under `key` if no item is there, and returns `nil`; otherwise leaves the
    /// existing item alone and returns its secret.
    func setIfAbsent(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions) async throws -> SecretBytes?
}
