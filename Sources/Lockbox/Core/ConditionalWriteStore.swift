/// A store that can replace an item only if it still holds what the caller read, in one step no
/// other writer can come between — on every host that shares it. A read-modify-write on a store
/// many hosts share needs it: their processes meet no common lock, so without it the later of two
/// writes silently undoes the earlier (two PIN changes, both reported done, one of them lost).
/// ``PinGuard`` uses it, when its store adopts this protocol and ``PinAttemptLedger``, to set and
/// change PINs. `LockboxPostgres`'s `PostgresStore` adopts it (the row read `FOR UPDATE`, compared
/// and written in one transaction; with nothing expected, an `INSERT … ON CONFLICT DO NOTHING`).
public protocol ConditionalWriteStore: AsyncSecretStore {
    /// Stores `secret` under `key` if the item's current secret is byte for byte `expected`
    /// (`nil`: if there is no item), and returns `true`; otherwise changes nothing and returns `false`.
    func set(_ secret: SecretBytes, for key: ItemKey, options: ItemOptions, ifCurrent expected: SecretBytes?) async throws -> Bool
}
