import CTSS2
import Lockbox

/// A tpm2-tss call that failed: which C function, and the `TSS2_RC` it returned, decoded.
///
/// ``failure`` sorts the codes callers act on (no TPM, a wrong PIN, a lockout, changed PCRs,
/// an object from another TPM); ``code`` and ``category`` say the same in the terms every
/// Lockbox error uses (``LockboxCodedError``), so a program handles a TPM failure as it handles
/// a `LockboxError`; ``description`` names the function and tpm2-tss's own text for the code
/// (`Tss2_RC_Decode`). Nothing secret is ever part of it.
public struct TPMError: LockboxCodedError, Equatable {
    /// What went wrong, in the terms a caller acts on.
    public enum Failure: Sendable, Equatable {
        /// No TPM could be reached through the TCTI (no device, no permission, nothing listening).
        case unavailable
        /// The TPM refused the authorization value (a wrong PIN); the dictionary-attack counter
        /// went up (`TPM_RC_AUTH_FAIL`), or the object is exempt from it (`TPM_RC_BAD_AUTH`).
        case authorizationFailed
        /// The TPM is in dictionary-attack lockout (`TPM_RC_LOCKOUT`) and refuses every
        /// authorization of a protected object until the recovery time passes or an
        /// administrator resets it.
        case lockedOut
        /// The object's policy is not met: the PCR values differ from those it was sealed to
        /// (`TPM_RC_POLICY_FAIL`, or `TPM_RC_PCR_CHANGED` when they changed mid-session).
        case policyMismatch
        /// The TPM cannot load the object: it was made by another TPM, or this TPM's storage
        /// hierarchy was cleared since (`TPM_RC_INTEGRITY` and similar on `TPM2_Load`).
        case foreignObject
        /// Anything else; ``TPMError/responseCode`` tells which.
        case other
    }

    /// The tpm2-tss function that returned the error, e.g. `Esys_Unseal`.
    public let function: String
    /// The raw `TSS2_RC` (layer in bits 16–23; 0 for codes from the TPM itself).
    public let responseCode: UInt32
    /// The code sorted into what a caller acts on.
    public let failure: Failure
    /// When the TPM did not answer in time: the seconds it was given
    /// (``TPMConnection/withConnection(tcti:timeout:_:)``); ``function`` is the call that waited.
    public let timeout: Double?

    /// An error `function` returned with `responseCode`.
    public init(function: String, responseCode: UInt32) {
        self.function = function
        self.responseCode = responseCode
        self.failure = Self.classify(responseCode, function: function)
        self.timeout = nil
    }

    private init(function: String, timeout: Double) {
        self.function = function
        self.responseCode = Self.tctiTryAgain
        self.failure = .unavailable
        self.timeout = timeout
    }

    /// The TPM did not answer within `seconds` while `function` waited for it: an
    /// ``Failure/unavailable`` TPM.
    public static func notAnswering(within seconds: Double, function: String) -> TPMError {
        TPMError(function: function, timeout: seconds)
    }

    /// The stable code of ``failure``: `tpm-unavailable`, `tpm-authorization-failed`,
    /// `tpm-locked-out`, `tpm-pcr-mismatch`, `tpm-foreign-slot` or `tpm-failure`.
    public var code: LockboxError.Code {
        switch failure {
        case .unavailable: return .tpmUnavailable
        case .authorizationFailed: return .tpmAuthorizationFailed
        case .lockedOut: return .tpmLockedOut
        case .policyMismatch: return .tpmPCRMismatch
        case .foreignObject: return .tpmForeignSlot
        case .other: return .tpmFailure
        }
    }

    /// The kind of failure, as for every Lockbox error: no TPM and a slot this TPM cannot load
    /// are ``LockboxError/Category/noStorageAccess``; a refused PIN and changed PCR values
    /// ``LockboxError/Category/authenticationFailed``; the dictionary-attack lockout
    /// ``LockboxError/Category/lockedOut``; anything else
    /// ``LockboxError/Category/platformFailure``.
    public var category: LockboxError.Category {
        switch failure {
        case .unavailable, .foreignObject: return .noStorageAccess
        case .authorizationFailed, .policyMismatch: return .authenticationFailed
        case .lockedOut: return .lockedOut
        case .other: return .platformFailure
        }
    }

    /// Every code a ``TPMError`` can have, in the order of ``Failure``'s cases.
    public static let codes: [LockboxError.Code] = [
        .tpmUnavailable, .tpmAuthorizationFailed, .tpmLockedOut, .tpmPCRMismatch, .tpmForeignSlot, .tpmFailure,
    ]

    /// What happened and what to do, then the call and tpm2-tss's text for the code, e.g.
    /// `the TPM is in dictionary-attack lockout ... (Esys_Unseal: tpm:warn(2.0): ... 0x921)`.
    public var description: String {
        let detail = "(\(function): \(Self.decode(responseCode)), 0x\(String(responseCode, radix: 16)))"
        if let timeout {
            return
                "the TPM did not answer within \(Self.seconds(timeout)) s (\(function) was waiting for it): it accepts connections but is hung or overloaded. A recovery passphrase or key file still opens the vault."
        }
        switch failure {
        case .unavailable:
            return
                "no TPM could be reached \(detail): the machine has no TPM 2.0 behind this TCTI, or this user may not use it. A recovery passphrase or key file still opens the vault."
        case .authorizationFailed:
            return "the TPM refused the PIN; the TPM counted the failure \(detail)"
        case .lockedOut:
            return
                "the TPM is in dictionary-attack lockout after too many wrong PINs and refuses every PIN until its recovery time passes or its lockout authority resets it \(detail). A recovery passphrase or key file still opens the vault."
        case .policyMismatch:
            return
                "the TPM refused: the PCR values differ from those the key slot was sealed to (a firmware, boot loader or kernel update, or another boot configuration) \(detail). A recovery passphrase or key file still opens the vault; a TPM slot sealed again to today's values works."
        case .foreignObject:
            return
                "this TPM cannot load the key slot: it was sealed by another TPM, or this TPM was cleared since \(detail). A recovery passphrase or key file still opens the vault."
        case .other:
            return "\(function) failed: \(Self.decode(responseCode)) (0x\(String(responseCode, radix: 16)))"
        }
    }

    /// `5`, `0.5`: seconds without a needless fraction.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && value < 1e9 ? String(Int(value)) : String(value)
    }

    /// tpm2-tss's text for `rc`.
    ///
    /// The corresponding C function is `Tss2_RC_Decode` (it returns a thread-local buffer, copied
    /// at once).
    public static func decode(_ rc: UInt32) -> String {
        guard let text = Tss2_RC_Decode(rc) else { return "unknown response code" }
        return String(cString: text)
    }

    // TPM 2.0 Part 2, 6.6 (TPM_RC). Format-1 codes carry a handle, session or parameter number
    // in bits 8–11, masked off here.
    static let layerMask: UInt32 = 0xFF_0000
    static let tctiLayer: UInt32 = 0x0A_0000
    static let format1: UInt32 = 0x080
    static let authFail: UInt32 = 0x08E
    static let badAuth: UInt32 = 0x0A2
    static let policyFail: UInt32 = 0x09D
    static let lockout: UInt32 = 0x921
    static let pcrChanged: UInt32 = 0x128
    // tss2_common.h: TSS2_ESYS_RC_LAYER (7 << 16) | TSS2_BASE_RC_GENERAL_FAILURE / _BAD_VALUE.
    static let esysGeneralFailure: UInt32 = 0x07_0001
    static let esysBadValue: UInt32 = 0x07_000B
    // TSS2_TCTI_RC_LAYER | TSS2_BASE_RC_TRY_AGAIN: what a TCTI returns when its wait ran out.
    static let tctiTryAgain: UInt32 = 0x0A_0009

    /// The TPM's own code without the handle/session/parameter number, or `nil` if `rc` did not
    /// come from the TPM.
    static func tpmCode(_ rc: UInt32) -> UInt32? {
        guard rc & layerMask == 0 else { return nil }
        return rc & format1 != 0 ? rc & 0x0BF : rc & 0xFFF
    }

    private static func classify(_ rc: UInt32, function: String) -> Failure {
        if rc & layerMask == tctiLayer { return .unavailable }
        guard let code = tpmCode(rc) else { return .other }
        switch code {
        case authFail, badAuth: return .authorizationFailed
        case lockout: return .lockedOut
        case policyFail, pcrChanged: return .policyMismatch
        // A blob this TPM's storage seed did not make fails its integrity check on load
        // (TPM_RC_INTEGRITY), or an earlier check of the same parameter (other format-1 codes).
        default: return function == "Esys_Load" && code & format1 != 0 ? .foreignObject : .other
        }
    }
}
