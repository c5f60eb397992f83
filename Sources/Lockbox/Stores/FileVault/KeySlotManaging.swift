/// A vault whose key slots can be listed and changed: ``EncryptedFileStore`` (format 1) and
/// ``SQLiteVaultStore`` (format 2), which share the slot code (``KeySlotInfo`` describes a slot
/// in either).
public protocol KeySlotManaging: SecretStore {
    /// The vault's key slots, in order.
    func keySlots() throws -> [KeySlotInfo]

    /// Adds a key slot that `credential` opens; returns its index. The data key is unchanged.
    @discardableResult
    func addKeySlot(_ credential: VaultCredential, kdf: KDFParameters) throws -> Int

    /// Removes the key slot at `index`. The last slot cannot be removed.
    func removeKeySlot(at index: Int) throws

    /// Replaces a passphrase slot with one for `newPassphrase`, wrapping the same data key.
    func changePassphrase(to newPassphrase: SecretBytes, kdf: KDFParameters, slot: Int?) throws

    /// Throws ``LockboxError/wrongCredential(path:)`` unless `passphrase` opens a passphrase slot.
    func verifyPassphrase(_ passphrase: SecretBytes) throws

    /// Replaces the data key with a fresh one, rewrapping every slot (each needs its credential
    /// in `credentials`, or `dropUnmatchedSlots`) and re-encrypting every item.
    func rotateDataKey(credentials: [VaultCredential], dropUnmatchedSlots: Bool) throws

    /// ``rotateDataKey(credentials:dropUnmatchedSlots:)``, calling `progress` with (items done,
    /// items in all) as the items are re-encrypted, where the store can tell: a format-2 vault after
    /// each item; a format-1 vault, whose items are encrypted together, not at all.
    func rotateDataKey(
        credentials: [VaultCredential], dropUnmatchedSlots: Bool, progress: ((_ done: Int, _ total: Int) -> Void)?
    ) throws
}

extension KeySlotManaging {
    /// Rotates without reporting progress (a store whose items are encrypted together, such as a
    /// format-1 vault, cannot report it item by item).
    ///
    /// - Parameters:
    ///   - credentials: The credentials of the slots to keep besides the one that opened this handle.
    ///   - dropUnmatchedSlots: Whether to remove the slots none of them opens instead of failing.
    ///   - progress: Not called.
    public func rotateDataKey(
        credentials: [VaultCredential], dropUnmatchedSlots: Bool, progress: ((_ done: Int, _ total: Int) -> Void)?
    ) throws {
        try rotateDataKey(credentials: credentials, dropUnmatchedSlots: dropUnmatchedSlots)
    }

    /// Adds a key slot that `credential` opens, a passphrase slot at the default Argon2id cost.
    @discardableResult
    public func addKeySlot(_ credential: VaultCredential) throws -> Int {
        try addKeySlot(credential, kdf: .default)
    }
}

extension EncryptedFileStore: KeySlotManaging {}
extension SQLiteVaultStore: KeySlotManaging {}

/// A file vault that can hand its vault ID, key-slot fingerprint and data key to a session window
/// (`SessionWindow.open(for:duration:openedBy:pin:clock:)`), whichever format it is.
package protocol FileVaultWindowMaterial: KeySlotManaging {
    /// The vault's ID, its key slots' fingerprint and the data key.
    func windowMaterial() throws -> (vaultID: [UInt8], fingerprint: String, dataKey: SecretBytes)
}

extension EncryptedFileStore: FileVaultWindowMaterial {}
extension SQLiteVaultStore: FileVaultWindowMaterial {}
