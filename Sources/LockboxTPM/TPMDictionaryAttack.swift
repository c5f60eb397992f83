import CTSS2
import Lockbox

/// The TPM's dictionary-attack (DA) protection, which counts wrong PINs of ``TPMSealer``
/// objects in the TPM itself (TPM 2.0 Part 1, 19.8.6).
///
/// - Every wrong authValue of an object that is not `noDA` adds one to `failedTries`.
/// - At `maxTries` failures the TPM is in lockout: it refuses every DA-protected authorization
///   (`TPM_RC_LOCKOUT`) — all PIN objects of every program, not just Lockbox's.
/// - Every `recoveryTime` seconds of powered-on time, `failedTries` goes down by one, so a
///   lockout ends `recoveryTime` seconds after it began (if nothing else failed). A
///   `recoveryTime` of 0 disables the protection.
/// - After a failed authorization with the lockout hierarchy's own auth, that hierarchy is
///   locked for `lockoutRecovery` seconds.
/// - The counter is kept in the TPM's non-volatile memory: restoring a vault file, killing
///   processes, changing the clock, changing namespaces or rebooting does not reset it. Only
///   `TPM2_DictionaryAttackLockReset` with the lockout auth does (`tpm2_dictionarylockout
///   --clear-lockout`, i.e. an administrator who holds the lockout auth; on many machines it is
///   empty, so root can).
///
/// - A TPM that restarts without `TPM2_Shutdown` (power loss, a crash, a killed swtpm) after an
///   object that is not `noDA` was used since its last start counts one failure at the next
///   `TPM2_Startup`, whether that use succeeded or not: an unclean restart right after a right
///   PIN costs one try. A normal shutdown sends `TPM2_Shutdown` first and costs none.
///
/// Lockbox reads these parameters (`lockbox doctor`) and changes them only on request
/// (``TPMConnection/setDictionaryAttackParameters(maxTries:recoveryTime:lockoutRecovery:lockoutAuth:)``,
/// used by the tests); the TPM's settings are the machine owner's choice.
public struct TPMDictionaryAttack: Sendable, Equatable, CustomStringConvertible {
    /// Failed authorizations the TPM currently counts (`TPM2_PT_LOCKOUT_COUNTER`).
    public var failedTries: UInt32
    /// Failures that put the TPM in lockout (`TPM2_PT_MAX_AUTH_FAIL`).
    public var maxTries: UInt32
    /// Seconds after which one failure is forgotten (`TPM2_PT_LOCKOUT_INTERVAL`).
    public var recoveryTime: UInt32
    /// Seconds the lockout hierarchy stays locked after a wrong lockout auth (`TPM2_PT_LOCKOUT_RECOVERY`).
    public var lockoutRecovery: UInt32
    /// Whether the TPM is in lockout now (`TPMA_PERMANENT.inLockout`).
    public var inLockout: Bool

    // TPM 2.0 Part 2, 6.13 (TPM_PT): variable properties start at PT_VAR = 0x200. (tpm2-tss
    // defines them as sums, which Swift does not import.)
    static let permanent: UInt32 = 0x200
    static let lockoutCounter: UInt32 = 0x200 + 14
    static let maxAuthFail: UInt32 = 0x200 + 15
    static let lockoutInterval: UInt32 = 0x200 + 16
    static let lockoutRecovery: UInt32 = 0x200 + 17

    /// Reads the TPM's DA state through `connection`.
    public init(reading connection: TPMConnection) throws {
        let first = Self.permanent
        let values = try connection.properties(from: first, count: Self.lockoutRecovery - first + 1)
        func value(_ property: UInt32) throws -> UInt32 {
            guard let value = values[property] else {
                throw TPMError(function: "Esys_GetCapability", responseCode: TPMError.esysGeneralFailure)
            }
            return value
        }
        failedTries = try value(Self.lockoutCounter)
        maxTries = try value(Self.maxAuthFail)
        recoveryTime = try value(Self.lockoutInterval)
        lockoutRecovery = try value(Self.lockoutRecovery)
        inLockout = try value(first) & UInt32(TPMA_PERMANENT_INLOCKOUT) != 0
    }

    /// Reads the DA state of the TPM behind `tcti`, within `timeout` seconds
    /// (``TPMConnection/withConnection(tcti:timeout:_:)``).
    public static func read(tcti: String, timeout: Double = TPMConnection.defaultTimeout) throws -> TPMDictionaryAttack {
        try TPMConnection.withConnection(tcti: tcti, timeout: timeout) { try TPMDictionaryAttack(reading: $0) }
    }

    /// Wrong PINs the TPM still accepts before it locks out (0 in lockout).
    public var triesLeft: UInt32 { maxTries > failedTries ? maxTries - failedTries : 0 }

    /// In lockout: the most seconds until the TPM accepts PINs again, if nothing else fails
    /// (one failure is forgotten every ``recoveryTime`` seconds of powered-on time, and the TPM
    /// does not say how far into the current interval it is); 0 when it accepts them now; `nil`
    /// when only the lockout authority can end the lockout (a ``recoveryTime`` of 0).
    public var secondsUntilPINsAccepted: UInt64? {
        guard inLockout else { return 0 }
        guard recoveryTime > 0 else { return nil }
        let excess = UInt64(failedTries >= maxTries ? failedTries - maxTries + 1 : 1)
        return excess * UInt64(recoveryTime)
    }

    /// `failed tries 0 of 32, recovery 1 per 600 s, lockout-auth recovery 86400 s`, plus
    /// `, IN LOCKOUT: PINs accepted again in at most 600 s`.
    public var description: String {
        let lockout: String
        if !inLockout {
            lockout = ""
        } else if let seconds = secondsUntilPINsAccepted {
            lockout = ", IN LOCKOUT: PINs accepted again in at most \(seconds) s"
        } else {
            lockout = ", IN LOCKOUT until its lockout authority resets it"
        }
        return "failed tries \(failedTries) of \(maxTries), recovery 1 per \(recoveryTime) s, lockout-auth recovery \(lockoutRecovery) s"
            + lockout
    }
}
