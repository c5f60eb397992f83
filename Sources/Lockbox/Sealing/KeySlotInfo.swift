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
    /// For a key-file slot, the fingerprint of its key file as the vault records it: 32 lowercase
    /// hexadecimal digits, what ``KeyFile/fingerprint(at:access:)`` gives for the file
    /// (docs/FORMAT.md section 18.1.1). `nil` for other kinds, and where none is recorded: every
    /// slot of a format-1 vault, and a format-2 slot made before fingerprints were recorded that
    /// no key file has opened since. Read from the vault file, not authenticated: see
    /// ``keyFileFingerprintMatches``.
    public var keyFileFingerprint: String?
    /// Whether ``keyFileFingerprint`` is that of the key file that opened this handle through
    /// this slot: `false` means the recorded value was changed outside Lockbox. `nil` when this
    /// handle was not opened through this slot with a key file, or nothing is recorded.
    public var keyFileFingerprintMatches: Bool?

    /// Memberwise, for the stores.
    init(
        index: Int, kind: Kind, kdf: KDFParameters?, openedThisHandle: Bool, keyFileFingerprint: [UInt8]? = nil,
        openedWith openingFingerprint: [UInt8]? = nil
    ) {
        self.index = index
        self.kind = kind
        self.kdf = kdf
        self.openedThisHandle = openedThisHandle
        if kind == .keyFile, let keyFileFingerprint {
            self.keyFileFingerprint = keyFileFingerprint.hexString
            if openedThisHandle, let openingFingerprint {
                keyFileFingerprintMatches = keyFileFingerprint == openingFingerprint
            }
        }
    }

    /// `0: passphrase, Argon2id(t=3, m=256 MiB)`, `1: key-file, fingerprint 5b0c… (opened this
    /// handle)`.
    public var description: String {
        var text = "\(index): \(kind.rawValue)" + (kdf.map { ", \($0)" } ?? "")
        if kind == .keyFile {
            text += ", fingerprint " + (keyFileFingerprint ?? "(not recorded)")
            if keyFileFingerprintMatches == false { text += " (recorded wrongly: not the fingerprint of the key file that opened it)" }
        }
        return text + (openedThisHandle ? " (opened this handle)" : "")
    }
}
