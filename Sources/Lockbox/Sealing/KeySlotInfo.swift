/// What a key slot of a file vault (either format) is, without any of its key material:
/// ``KeySlotManaging/keySlots()`` lists them.
public struct KeySlotInfo: Sendable, Hashable, CustomStringConvertible {
    /// The kinds of key slot.
    public enum Kind: String, Sendable, Hashable {
        /// Opened by a passphrase (Argon2id).
        case passphrase
        /// Opened by a key file.
        case keyFile = "key-file"
        /// Opened by a secret a TPM keeps (``VaultCredential/sealed(_:)``).
        case tpm2

        init(_ kind: KeySlot.Kind) {
            switch kind {
            case .passphrase: self = .passphrase
            case .keyFile: self = .keyFile
            case .tpm2: self = .tpm2
            }
        }
    }
    /// The slot's position, as `removeKeySlot(at:)` and `lockbox slot remove` take it.
    public var index: Int
    /// What opens the slot.
    public var kind: Kind
    /// Argon2id cost, for passphrase slots.
    public var kdf: KDFParameters?
    /// Whether this handle was opened through this slot.
    public var openedThisHandle: Bool

    /// `0: passphrase, Argon2id(t=3, m=256 MiB)`.
    public var description: String {
        "\(index): \(kind.rawValue)" + (kdf.map { ", \($0)" } ?? "") + (openedThisHandle ? " (opened this handle)" : "")
    }
}
