#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxTPM
import SystemPackage

/// Options that describe a new TPM2 key slot (`init --tpm`, `slot add-tpm`). The TPM is the one
/// behind $LOCKBOX_TPM_TCTI, else the kernel's resource manager /dev/tpmrm0.
struct TPMSlotOptions: ParsableArguments {
    @Option(name: .customLong("tpm-pcrs"), help: ArgumentHelp(
        "Bind the TPM slot to these SHA-256 PCRs (comma-separated, e.g. 7 for the Secure Boot state). After a change to them (firmware, boot loader, kernel, Secure Boot keys) the slot refuses; open with a recovery slot and add it again. Default: none.",
        valueName: "list"))
    var pcrs: String?

    @Flag(name: .customLong("tpm-pin"), help: "Protect the TPM slot with a PIN (4 to 12 digits, checked by the PIN policy as for `pin set`), asked twice on the terminal; the TPM counts wrong PINs and locks out.")
    var pin = false

    @Option(name: .customLong("tpm-new-pin-fd"), help: ArgumentHelp(
        "Read the new TPM slot's PIN from this file descriptor (implies --tpm-pin).", valueName: "fd"))
    var newPinFd: Int32?

    /// The PCRs from --tpm-pcrs.
    func selection() throws -> PCRSelection {
        guard let pcrs, !pcrs.isEmpty else { return .none }
        var indices: [Int] = []
        for part in pcrs.split(separator: ",", omittingEmptySubsequences: false) {
            guard let index = Int(part.trimmingWhiteSpace()) else {
                throw LockboxError.invalidArgument("--tpm-pcrs takes PCR numbers separated by commas, e.g. 7 or 0,7")
            }
            indices.append(index)
        }
        return try PCRSelection(indices)
    }

    /// A sealer for a new slot, with the PIN read now if one is asked for; fails at once (exit
    /// 60) when no TPM answers, before anything else is asked.
    func sealer() throws -> TPMSealer {
        TPMSupport.quietenLibraryLog()
        _ = try TPMConnection(tcti: TPMSupport.tcti)
        var pinValue: SecretBytes?
        if let newPinFd {
            pinValue = try SecretInput.passphrase(fromDescriptor: newPinFd, what: "TPM PIN")
        } else if pin {
            pinValue = try SecretInput.promptTwice("New TPM PIN: ", what: "TPM PIN")
        }
        // The same policy as `lockbox pin set`: the TPM limits guesses, not how likely each is.
        if let pinValue { try PinPolicy.default.check(pinValue) }
        return TPMSealer(tcti: TPMSupport.tcti, pcrs: try selection(), pin: pinValue)
    }
}

enum TPMSupport {
    /// tpm2-tss logs every failed connection to standard error itself; lockbox reports errors
    /// its own way. A TSS2_LOG the user set is kept.
    static func quietenLibraryLog() {
        setenv("TSS2_LOG", "all+NONE", 0)
    }

    /// The TPM the CLI talks to: `$LOCKBOX_TPM_TCTI`, else the kernel's resource manager.
    static var tcti: String { TPMConnection.defaultTCTI(environment: ProcessInfo.processInfo.environment) }
}

extension VaultOptions {
    /// The TPM as a credential, when nothing else was given and the vault has a TPM2 key slot:
    /// with the PIN from --tpm-pin-fd or the terminal if every TPM slot needs one.
    func tpmCredential() throws -> VaultCredential? {
        guard FileManager.default.fileExists(atPath: vaultPath.string) else { return nil }
        let sealed = try EncryptedFileStore.sealedKeySlots(at: vaultPath)
        guard !sealed.isEmpty else { return nil }
        TPMSupport.quietenLibraryLog()
        let needsPIN = sealed.values.allSatisfy { TPMSealer.requiresPIN($0) == true }
        Trace.log("credential: the TPM (TPM2 key slot(s) \(sealed.keys.sorted().map(String.init).joined(separator: ", "))\(needsPIN ? ", with PIN" : ""))")
        guard needsPIN else { return .sealed(TPMSealer(tcti: TPMSupport.tcti)) }
        if let tpmPinFd {
            return .sealed(TPMSealer(tcti: TPMSupport.tcti, pin: try SecretInput.passphrase(fromDescriptor: tpmPinFd, what: "TPM PIN")))
        }
        guard let typed = try Terminal.readHidden(prompt: "TPM PIN for \(vaultPath.string): ") else {
            throw LockboxError.reauthenticationRequired(
                "the vault's TPM slot needs its PIN: give it with --tpm-pin-fd, or open with --key-file or --passphrase-fd")
        }
        return .sealed(TPMSealer(tcti: TPMSupport.tcti, pin: typed))
    }
}

extension Slot {
    struct AddTPM: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-tpm",
            abstract: "Add a TPM2 slot: the vault then opens on this machine without a passphrase (unlock with an existing credential first).",
            discussion: """
                The data key is wrapped under a secret sealed in this machine's TPM 2.0 ($LOCKBOX_TPM_TCTI, \
                else /dev/tpmrm0); a copy of the vault elsewhere cannot use the slot. Keep a passphrase or \
                key-file slot as recovery: a cleared or replaced TPM, or changed PCRs, cannot open it.
                """)
        @OptionGroup var vaultOptions: VaultOptions
        @OptionGroup var tpmSlot: TPMSlotOptions

        func run() throws {
            let store = try vaultOptions.openFileStore()
            let index = try store.addKeySlot(.sealed(try tpmSlot.sealer()))
            Console.status("Added TPM2 slot \(index).")
        }
    }
}

extension Doctor {
    /// Whether a TPM answers, its dictionary-attack state, and which key slots the vault has
    /// (read from its header, no credential needed).
    static func tpmChecks(vaultPath: FilePath) -> [Check] {
        TPMSupport.quietenLibraryLog()
        var checks: [Check] = []
        let tcti = TPMSupport.tcti
        let kinds = try? EncryptedFileStore.keySlotKinds(at: vaultPath)
        let hasTPMSlot = kinds?.contains(.tpm2) ?? false
        var tpmUsable = false
        do {
            let state = try TPMDictionaryAttack(reading: TPMConnection(tcti: tcti))
            tpmUsable = !state.inLockout
            checks.append(Check(
                name: "TPM", ok: tpmUsable, detail: "\(tcti): answers; dictionary-attack protection: \(state)",
                fix: state.inLockout ? "wait \(state.recoveryTime) s per failure, or as its administrator: tpm2_dictionarylockout --clear-lockout" : nil))
        } catch {
            // Without a TPM2 slot in the vault, no TPM is no problem.
            checks.append(Check(name: "TPM", ok: !hasTPMSlot,
                                detail: hasTPMSlot ? "\(tcti): \(error)" : "\(tcti): none reachable (only needed for TPM2 key slots)",
                                fix: hasTPMSlot ? "use the machine whose TPM sealed the slot, add yourself to group tss, or set LOCKBOX_TPM_TCTI; else open with a recovery slot" : nil))
        }
        if let kinds {
            let list = kinds.enumerated().map { "\($0.offset): \($0.element.rawValue)" }.joined(separator: ", ")
            let hasRecovery = kinds.contains { $0 != .tpm2 }
            checks.append(Check(
                name: "key slots", ok: !hasTPMSlot || (tpmUsable && hasRecovery), detail: list,
                fix: !hasTPMSlot ? nil
                    : !tpmUsable ? "the TPM2 slot cannot open now (see TPM above); use a passphrase or key-file slot"
                    : hasRecovery ? nil : "add a recovery slot: lockbox slot add-passphrase"))
        }
        return checks
    }
}
