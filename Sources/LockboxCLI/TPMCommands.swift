import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxTPM
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Options that describe a new TPM2 key slot (`init --tpm`, `slot add-tpm`). The TPM is the one
/// behind $LOCKBOX_TPM_TCTI, else the kernel's resource manager /dev/tpmrm0.
struct TPMSlotOptions: ParsableArguments {
    @Option(
        name: .customLong("tpm-pcrs"),
        help: ArgumentHelp(
            "Bind the TPM slot to these SHA-256 PCRs (comma-separated, e.g. 7 for the Secure Boot state). After a change to them (firmware, boot loader, kernel, Secure Boot keys) the slot refuses; open with a recovery slot and add it again. Default: none.",
            valueName: "list"))
    var pcrs: String?

    @Flag(
        name: .customLong("tpm-pin"),
        help:
            "Protect the TPM slot with a PIN (4 to 12 digits, checked by the PIN policy as for `pin set`), asked twice on the terminal; the TPM counts wrong PINs and locks out."
    )
    var pin = false

    @Option(
        name: .customLong("tpm-new-pin-fd"),
        help: ArgumentHelp(
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
        try TPMConnection.withConnection(tcti: TPMSupport.tcti, timeout: try TPMSupport.timeout()) { _ in }
        var pinValue: SecretBytes?
        if let newPinFd {
            pinValue = try SecretInput.passphrase(fromDescriptor: newPinFd, what: "TPM PIN")
        } else if pin {
            pinValue = try SecretInput.promptTwice("New TPM PIN: ", what: "TPM PIN")
        }
        // The same policy as `lockbox pin set`: the TPM limits guesses, not how likely each is.
        if let pinValue { try PinPolicy.default.check(pinValue) }
        return try TPMSupport.sealer(pcrs: try selection(), pin: pinValue)
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

    /// The most one TPM operation may take: `$LOCKBOX_TPM_TIMEOUT` seconds, else 5 (exit 64 for
    /// a value that is not a number of seconds).
    static func timeout() throws -> Double { try TPMConnection.timeout(environment: ProcessInfo.processInfo.environment) }

    /// A sealer for the CLI's TPM and timeout; PINs are checked against the PIN policy's length
    /// and digits before the TPM sees them.
    static func sealer(pcrs: PCRSelection = .none, pin: SecretBytes? = nil) throws -> TPMSealer {
        TPMSealer(tcti: tcti, pcrs: pcrs, pin: pin, timeout: try timeout(), pinPolicy: .default)
    }
}

extension VaultOptions {
    /// The TPM as a credential, when nothing else was given and the vault has a TPM2 key slot:
    /// with the PIN from --tpm-pin-fd or the terminal if every TPM slot needs one.
    func tpmCredential() throws -> VaultCredential? {
        guard FileManager.default.fileExists(atPath: vaultPath.string) else { return nil }
        let sealed = try FileVault.sealedKeySlots(at: vaultPath)
        guard !sealed.isEmpty else { return nil }
        TPMSupport.quietenLibraryLog()
        let needsPIN = sealed.values.allSatisfy { TPMSealer.requiresPIN($0) == true }
        Trace.log(
            "credential: the TPM (TPM2 key slot(s) \(sealed.keys.sorted().map(String.init).joined(separator: ", "))\(needsPIN ? ", with PIN" : ""))"
        )
        guard needsPIN else { return .sealed(try TPMSupport.sealer()) }
        if let tpmPinFd {
            return .sealed(try TPMSupport.sealer(pin: try SecretInput.passphrase(fromDescriptor: tpmPinFd, what: "TPM PIN")))
        }
        guard let typed = try Terminal.readHidden(prompt: "TPM PIN for \(vaultPath.string): ") else {
            throw LockboxError.reauthenticationRequired(
                "the vault's TPM slot needs its PIN: give it with --tpm-pin-fd, or open with --key-file or --passphrase-fd")
        }
        return .sealed(try TPMSupport.sealer(pin: typed))
    }
}

extension Slot {
    struct AddTPM: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-tpm",
            abstract:
                "Add a TPM2 slot: the vault then opens on this machine without a passphrase (unlock with an existing credential first).",
            discussion: """
                The data key is wrapped under a secret sealed in this machine's TPM 2.0 ($LOCKBOX_TPM_TCTI, \
                else /dev/tpmrm0); a copy of the vault elsewhere cannot use the slot. Keep a passphrase or \
                key-file slot as recovery: a cleared or replaced TPM, or changed PCRs, cannot open it.
                Example: lockbox slot add-tpm --tpm-pcrs 7
                """)
        @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
        @OptionGroup var tpmSlot: TPMSlotOptions

        func run() throws {
            let store = try vaultOptions.storeOpener().openFileStoreForKeySlots("slot add-tpm")
            let index = try store.addKeySlot(.sealed(try tpmSlot.sealer()))
            Console.status("Added TPM2 slot \(index).")
        }
    }
}

extension Doctor {
    /// Whether a TPM answers and its dictionary-attack state; for each TPM2 key slot of the
    /// vault, whether it would unseal here now (checked without authorizing anything, so no try
    /// is used); what an unclean restart costs; and which key slots the vault has (read from its
    /// header, no credential needed). The problem is the first reason a TPM2 slot cannot open.
    static func tpmChecks(vaultPath: FilePath) -> (checks: [Check], problem: (any LockboxCodedError)?) {
        TPMSupport.quietenLibraryLog()
        var checks: [Check] = []
        var problem: (any LockboxCodedError)?
        let tcti = TPMSupport.tcti
        let kinds = try? FileVault.keySlotKinds(at: vaultPath)
        let sealed = (try? FileVault.sealedKeySlots(at: vaultPath)) ?? [:]
        let hasTPMSlot = kinds?.contains(.tpm2) ?? false
        let sealer: TPMSealer
        do {
            sealer = try TPMSupport.sealer()
        } catch {
            checks.append(Check(name: "TPM", ok: false, detail: "\(error)", fix: "set LOCKBOX_TPM_TIMEOUT to a number of seconds, e.g. 5"))
            return (checks, error as? any LockboxCodedError)
        }
        let state: TPMDictionaryAttack
        do {
            state = try TPMDictionaryAttack.read(tcti: tcti, timeout: sealer.timeout)
            checks.append(
                Check(
                    name: "TPM", ok: !state.inLockout, detail: "\(tcti): answers; dictionary-attack protection: \(state)",
                    fix: state.inLockout ? "wait, or as its administrator: tpm2_dictionarylockout --clear-lockout" : nil))
        } catch {
            // Without a TPM2 slot in the vault, no TPM is no problem.
            let timedOut = (error as? TPMError)?.timeout != nil
            checks.append(
                Check(
                    name: "TPM", ok: !hasTPMSlot,
                    detail: hasTPMSlot || timedOut ? "\(tcti): \(error)" : "\(tcti): none reachable (only needed for TPM2 key slots)",
                    fix: !hasTPMSlot
                        ? nil
                        : timedOut
                            ? "restart the TPM's service (swtpm, tpm2-abrmd) or the machine, or raise LOCKBOX_TPM_TIMEOUT; else open with a recovery slot"
                            : "use the machine whose TPM sealed the slot, add yourself to group tss, or set LOCKBOX_TPM_TCTI; else open with a recovery slot"
                ))
            if hasTPMSlot { problem = error as? any LockboxCodedError }
            if let kinds { checks.append(slotList(kinds, usableTPMSlot: false)) }
            return (checks, problem)
        }
        var usableTPMSlot = false
        for (index, blob) in sealed.sorted(by: { $0.key < $1.key }) {
            let pcrs = TPMSealer.boundPCRs(blob).map { "PCRs \($0)" } ?? "PCRs unknown"
            let pin = TPMSealer.requiresPIN(blob) == true ? "PIN" : "no PIN"
            do {
                _ = try sealer.checkUnsealable(blob)
                usableTPMSlot = true
                checks.append(Check(name: "TPM slot \(index)", ok: true, detail: "would unseal here (\(pcrs), \(pin))"))
            } catch {
                problem = problem ?? error as? any LockboxCodedError
                checks.append(
                    Check(
                        name: "TPM slot \(index)", ok: false, detail: "cannot unseal here (\(pcrs), \(pin)): \(error)",
                        fix: slotFix(index, error)))
            }
        }
        if sealed.values.contains(where: { TPMSealer.requiresPIN($0) == true }) {
            let left = state.triesLeft
            checks.append(
                Check(
                    name: "TPM restarts", ok: left > 1,
                    detail:
                        "a restart without TPM2_Shutdown (power loss, a crash) right after a PIN use counts as one failed try; \(left) of \(state.maxTries) tries left",
                    fix: left > 1
                        ? nil
                        : "one more failure locks every PIN on this TPM out: wait \(state.recoveryTime) s per failure, or as its administrator: tpm2_dictionarylockout --clear-lockout"
                ))
        }
        if let kinds { checks.append(slotList(kinds, usableTPMSlot: usableTPMSlot)) }
        return (checks, problem)
    }

    /// The `key slots` line: the slots, a problem when no TPM2 slot opens or none is left for
    /// recovery.
    private static func slotList(_ kinds: [KeySlotInfo.Kind], usableTPMSlot: Bool) -> Check {
        let list = kinds.enumerated().map { "\($0.offset): \($0.element.rawValue)" }.joined(separator: ", ")
        let hasTPMSlot = kinds.contains(.tpm2)
        let hasRecovery = kinds.contains { $0 != .tpm2 }
        return Check(
            name: "key slots", ok: !hasTPMSlot || (usableTPMSlot && hasRecovery), detail: list,
            fix: !hasTPMSlot
                ? nil
                : !usableTPMSlot
                    ? "no TPM2 slot can open now (see above); use a passphrase or key-file slot"
                    : hasRecovery ? nil : "add a recovery slot: lockbox slot add-passphrase")
    }

    /// What to do about TPM2 slot `index`, which cannot unseal because of `error`.
    private static func slotFix(_ index: Int, _ error: any Error) -> String {
        let again = "open with a recovery slot (--key-file or --passphrase-fd): `lockbox slot remove \(index)`, then `lockbox slot add-tpm`"
        switch (error as? TPMError)?.failure {
        case .policyMismatch?: return "the PCRs changed since sealing: " + again + " to seal to today's values"
        case .foreignObject?: return "the slot belongs to another TPM, or this one was cleared: " + again + " on this machine"
        case .lockedOut?:
            return "wait until the TPM accepts PINs again (see TPM above), or as its administrator: tpm2_dictionarylockout --clear-lockout"
        default: return "open with a recovery slot"
        }
    }
}
