import FoundationEssentials
import Lockbox
import SystemPackage

/// A file vault that nothing given opens, and no terminal to ask on: the message lists the ways
/// *this* vault opens (its key slots, read from its header without a credential) and only those,
/// so a vault with a key-file slot alone is never told to run `lockbox unlock`. Exit 40, as every
/// locked-vault error.
struct VaultLocked: AdvisingError {
    /// The vault file.
    var path: String
    /// Its key slots' kinds, in slot order; `nil` when the header could not be read (the
    /// message then names every kind of credential).
    var slots: [KeySlotInfo.Kind]?

    /// The error for the vault at `path`, its slots read from its header.
    init(path: FilePath) {
        self.path = path.string
        slots = try? FileVault.keySlotKinds(at: path)
    }

    /// An error for `path` with the given slots (tests).
    init(path: String, slots: [KeySlotInfo.Kind]?) {
        self.path = path
        self.slots = slots
    }

    var description: String {
        let start =
            "re-authentication required: the vault \(path) is locked: no re-authentication window is open, "
            + "no key file or passphrase was given, and there is no terminal to ask on."
        guard let slots, !slots.isEmpty else {
            return start + " Give its key file (--key-file PATH or LOCKBOX_KEY_FILE) or its passphrase (--passphrase-fd N)."
        }
        let ways = Self.ways(slots)
        return start + " This vault opens with " + ways.joined(separator: "; or ") + "."
    }

    /// What opens each kind of slot the vault has, in the order of its first slot of that kind.
    static func ways(_ slots: [KeySlotInfo.Kind]) -> [String] {
        var ways: [String] = []
        var seen: Set<KeySlotInfo.Kind> = []
        for kind in slots where seen.insert(kind).inserted {
            let indices = slots.indices.filter { slots[$0] == kind }.map(String.init).joined(separator: ", ")
            let which = "slot\(indices.contains(",") ? "s" : "") \(indices)"
            switch kind {
            case .keyFile:
                ways.append("its key file (\(which)): --key-file PATH or LOCKBOX_KEY_FILE")
            case .passphrase:
                ways.append("its passphrase (\(which)): --passphrase-fd N, a terminal, or `lockbox unlock` first for a window")
            case .tpm2:
                ways.append("this machine's TPM (\(which)): with its PIN from --tpm-pin-fd N, if the slot has one")
            }
        }
        return ways
    }

    var code: LockboxError.Code { .reauthenticationRequired }
    var category: LockboxError.Category { .authenticationRequired }
}
