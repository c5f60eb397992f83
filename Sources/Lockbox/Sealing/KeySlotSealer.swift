/// Keeps a key slot's secret outside the vault file, in something that will not give it back
/// elsewhere: a TPM 2.0 (`TPMSealer` in the LockboxTPM module). The vault stores what ``seal(_:)``
/// returns as it is, in a TPM2 key slot (docs/FORMAT.md, section 5.5), and the core library never
/// interprets it, so it links nothing of the TPM software stack.
///
/// Give one as ``VaultCredential/sealed(_:)`` to create, add or open such a slot.
public protocol KeySlotSealer: Sendable {
    /// Seals `secret` (32 random bytes); returns the bytes the key slot stores.
    func seal(_ secret: SecretBytes) throws -> [UInt8]

    /// The secret that `sealed` holds, or an error that says why it cannot be had here (no TPM,
    /// another TPM, a lockout, changed PCRs, a wrong PIN).
    func unseal(_ sealed: [UInt8]) throws -> SecretBytes
}
