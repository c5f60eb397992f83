import FoundationEssentials
import SystemPackage

/// Everything that can go wrong in Lockbox, each case naming what happened, with its details.
///
/// An error answers three questions, from coarse to fine:
///
/// - ``category``: what kind of failure, the same whichever store is behind it — there is no
///   entry (``Category/noEntry``), the storage cannot be reached (``Category/noStorageAccess``),
///   the credential was wrong (``Category/authenticationFailed``)… A handful of values; most
///   programs switch on these alone.
/// - ``code``: exactly what happened (`wrong-credential`, `keyring-locked`, `pin-locked-out`),
///   stable across releases: log it, or switch on it where the category is too coarse.
/// - the case and its associated values: the details (paths, counts, the time a lockout ends).
///
/// ```swift
/// do {
///     let token = try vault.string(service: "com.example.api", account: "alice")
/// } catch let error as LockboxError {
///     switch error.category {
///     case .noEntry: askUserToSignIn()
///     case .noStorageAccess: retryLaterOrUseTheFileVault(error.code)
///     case .lockedOut: showLockout(error)
///     default: log(error.code, error.description)
///     }
/// }
/// ```
///
/// ``description`` is a sentence for a person saying what happened, in the library's terms;
/// what to do about it depends on the program (the `lockbox` CLI keeps its advice, and its exit
/// codes, in one table keyed by ``code``). Errors of Lockbox's other products that users switch
/// on the same way (`TPMError` of LockboxTPM) conform to ``LockboxCodedError`` too.
///
/// No case ever carries secret bytes: only paths, item addresses (service and account) and
/// counts, which Lockbox treats as non-secret metadata.
public enum LockboxError: Error, Sendable, Equatable {
    /// No item is stored under this service and account.
    case itemNotFound(service: String, account: String)
    /// There is no vault file at the path.
    case vaultNotFound(path: String)
    /// A vault already exists where a new one was to be created.
    case vaultAlreadyExists(path: String)
    /// No key slot opened with the passphrase or key file given.
    case wrongCredential(path: String)
    /// The vault file is damaged or was tampered with; `reason` says which part failed.
    case corruptVault(path: String, reason: String)
    /// The vault was written by a newer (or unknown) format version.
    case unsupportedFormatVersion(path: String, found: Int, supported: Int)
    /// The file is readable or writable by group or others, or owned by another user.
    case insecurePermissions(path: String, detail: String)
    /// Another process held the vault's lock for longer than the timeout.
    case vaultBusy(path: String, waitedSeconds: Double)
    /// Another process re-keyed the vault (passphrase change, slot removal or key rotation)
    /// since this handle opened it.
    case credentialsChanged(path: String)
    /// A key file could not be used; `reason` says why.
    case invalidKeyFile(path: String, reason: String)
    /// An argument broke a rule; `reason` says which.
    case invalidArgument(String)
    /// A key-slot operation could not be done; `reason` says why and what to do.
    case keySlot(String)
    /// An operating-system call failed.
    case io(operation: String, path: String, errno: Errno)
    /// There is no D-Bus session bus, so no Secret Service can be reached.
    case noSessionBus(detail: String)
    /// The session bus has no Secret Service provider (gnome-keyring, KeePassXC, …).
    case secretServiceUnavailable(detail: String)
    /// The keyring collection is locked, and Lockbox never shows an unlock prompt.
    case keyringLocked(collection: String)
    /// A Secret Service call did not finish within the time limit.
    case secretServiceTimeout(operation: String, seconds: Double)
    /// A Secret Service call failed, e.g. because the provider went away during the session.
    case secretServiceFailed(operation: String, detail: String)
    /// An item exists but Lockbox cannot decode it; `reason` says why.
    case undecodableItem(service: String, account: String, reason: String)
    /// The store recorded for this profile is not available; Lockbox will not switch to another.
    case recordedStoreUnavailable(store: String, settingsPath: String, reason: String)
    /// A new PIN breaks a rule of the PIN policy; `rule` says which.
    case pinRejected(rule: String)
    /// The PIN was wrong. `failures` counts consecutive failures; `retryAt` is when the next
    /// try is allowed, if this failure started a lockout.
    case wrongPin(profile: String, failures: Int, retryAt: Date?)
    /// Too many wrong PINs: no try is accepted (or even hashed) before `retryAt`.
    case pinLockedOut(profile: String, retryAt: Date, seconds: Double)
    /// The PIN is disabled after the hard limit of consecutive failures, until a higher authority resets it.
    case pinDisabled(profile: String, failures: Int)
    /// No PIN is set for this profile.
    case pinNotSet(profile: String)
    /// The PIN and the items listed with it were wiped after too many failures.
    case pinWiped(profile: String, failures: Int)
    /// PIN records would go into a store every process of the user can read and rewrite (the
    /// Secret Service); ``PinGuard`` keeps them there only when told to accept that.
    case pinStoreUnprotected(store: String)
    /// The item (or action) needs a fresh authentication: a PIN or passphrase within the window.
    case reauthenticationRequired(String)
    /// The kernel keyring cannot hold a re-authentication window here (some containers block it).
    case kernelKeyringUnavailable(detail: String)
    /// The refresh token was rejected (invalid, expired or revoked): the tokens were cleared.
    case sessionExpired(service: String, account: String)
    /// No token set is stored for (service, account).
    case noTokens(service: String, account: String)
    /// The item's secret expired at `expired` (``ItemOptions/expires``): it is not returned
    /// unless asked for anyway.
    case itemExpired(service: String, account: String, expired: Date)
    /// The item holds no previous version: none was kept, its grace period ended, or a later
    /// rotation replaced it.
    case noPreviousVersion(service: String, account: String)
}

/// An error of a Lockbox product with a stable ``code`` and a store-neutral ``category``:
/// ``LockboxError``, and the errors of the other products (`TPMError`). A program handles every
/// Lockbox failure through these two properties, whichever product threw it.
public protocol LockboxCodedError: Error, Sendable, CustomStringConvertible {
    /// Exactly what went wrong, as a stable code.
    var code: LockboxError.Code { get }
    /// What kind of failure this is, independent of the store behind it.
    var category: LockboxError.Category { get }
}

extension LockboxError: LockboxCodedError {}

extension LockboxError {
    /// What kind of failure an error is, the same whichever store (the encrypted file vault,
    /// the Secret Service, a TPM) is behind it: the handful of cases a program decides on.
    ///
    /// In the spirit of keyring-rs's store-neutral `Error`. Like ``Code``, a category is a
    /// stable text (``rawValue``), and more may be added in later releases: a `switch` over
    /// categories keeps a `default:`. Every ``Code`` belongs to exactly one category.
    ///
    /// There is no "ambiguous" category: an item is addressed by service and account, and
    /// where a store holds several matching entries (Secret Service items written by other
    /// programs) Lockbox picks one by a documented rule (its own first, then the most recently
    /// modified) rather than failing.
    public struct Category: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The category's text, e.g. `no-entry`.
        public let rawValue: String

        /// A category from its text.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The category's text.
        public var description: String { rawValue }

        /// What was asked for does not exist: no item, no vault, no PIN, no tokens.
        /// Codes: `item-not-found`, `vault-not-found`, `pin-not-set`, `no-tokens`.
        public static let noEntry = Category(rawValue: "no-entry")
        /// What was to be created exists already. Code: `vault-exists`.
        public static let alreadyExists = Category(rawValue: "already-exists")
        /// Stored data cannot be read: damaged, tampered with, or in a format this release does
        /// not know. Retrying does not help; restoring does.
        /// Codes: `corrupt-vault`, `unsupported-format-version`, `undecodable-item`.
        public static let badData = Category(rawValue: "bad-data")
        /// The storage is there but cannot be used now or here: locked, unreachable (no session
        /// bus, no provider, no TPM, no kernel keyring), busy, timed out, open to other users,
        /// or unfit for what was asked. The data is not known to be lost; the same call may
        /// work once the condition is fixed, or with another store.
        public static let noStorageAccess = Category(rawValue: "no-storage-access")
        /// The operating system or the store's provider failed at something it should have
        /// done (an I/O error, a Secret Service call that failed, a TPM error without a
        /// meaning of its own). The detail (``LockboxError/description``) says which call.
        public static let platformFailure = Category(rawValue: "platform-failure")
        /// The request itself is wrong: an argument, a key file, a key-slot change or a new
        /// PIN that breaks a rule. Fix the request; retrying it unchanged fails again.
        public static let invalidArgument = Category(rawValue: "invalid-argument")
        /// A credential was checked and refused: a wrong passphrase, key file or PIN, a vault
        /// re-keyed meanwhile, a rejected refresh token, changed TPM PCR values.
        public static let authenticationFailed = Category(rawValue: "authentication-failed")
        /// The action needs a fresh authentication (a PIN or passphrase within the
        /// re-authentication window) before it is allowed. Code: `reauthentication-required`.
        public static let authenticationRequired = Category(rawValue: "authentication-required")
        /// Too many wrong tries: no credential is accepted for a while, or at all until a reset.
        /// Codes: `pin-locked-out`, `pin-disabled`, `pin-wiped`, and the TPM's `tpm-locked-out`.
        public static let lockedOut = Category(rawValue: "locked-out")

        /// Every category.
        public static let all: [Category] = [
            .noEntry, .alreadyExists, .badData, .noStorageAccess, .platformFailure,
            .invalidArgument, .authenticationFailed, .authenticationRequired, .lockedOut,
        ]
    }

    /// What kind of failure this is, the same whichever store is behind it (see ``Category``);
    /// ``code`` says exactly which.
    public var category: Category {
        switch self {
        case .itemNotFound, .vaultNotFound, .pinNotSet, .noTokens, .itemExpired, .noPreviousVersion:
            return .noEntry
        case .vaultAlreadyExists:
            return .alreadyExists
        case .corruptVault, .unsupportedFormatVersion, .undecodableItem:
            return .badData
        case .insecurePermissions, .vaultBusy, .noSessionBus, .secretServiceUnavailable, .keyringLocked,
            .secretServiceTimeout, .recordedStoreUnavailable, .kernelKeyringUnavailable, .pinStoreUnprotected:
            return .noStorageAccess
        case .io, .secretServiceFailed:
            return .platformFailure
        case .invalidArgument, .invalidKeyFile, .keySlot, .pinRejected:
            return .invalidArgument
        case .wrongCredential, .wrongPin, .credentialsChanged, .sessionExpired:
            return .authenticationFailed
        case .reauthenticationRequired:
            return .authenticationRequired
        case .pinLockedOut, .pinDisabled, .pinWiped:
            return .lockedOut
        }
    }

    /// A stable, machine-readable name for what went wrong (`wrong-credential`, `keyring-locked`…):
    /// what programs switch on and log, the detail within a ``Category``. Its ``rawValue`` never
    /// changes meaning. The codes of LockboxTPM's `TPMError` (`tpm-locked-out`, …) are here too.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's text, e.g. `vault-not-found`.
        public let rawValue: String

        /// A code from its text.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The code's text.
        public var description: String { rawValue }

        /// No item at this address.
        public static let itemNotFound = Code(rawValue: "item-not-found")
        /// No vault file at the path.
        public static let vaultNotFound = Code(rawValue: "vault-not-found")
        /// A vault already exists where one was to be created.
        public static let vaultAlreadyExists = Code(rawValue: "vault-exists")
        /// No key slot opened with the credential given.
        public static let wrongCredential = Code(rawValue: "wrong-credential")
        /// The vault file is damaged or was tampered with.
        public static let corruptVault = Code(rawValue: "corrupt-vault")
        /// The vault uses a format version this Lockbox cannot read.
        public static let unsupportedFormatVersion = Code(rawValue: "unsupported-format-version")
        /// A file is open to other users.
        public static let insecurePermissions = Code(rawValue: "insecure-permissions")
        /// Another process held the vault's lock too long.
        public static let vaultBusy = Code(rawValue: "vault-busy")
        /// The vault was re-keyed since it was opened.
        public static let credentialsChanged = Code(rawValue: "credentials-changed")
        /// A key file cannot be used.
        public static let invalidKeyFile = Code(rawValue: "invalid-key-file")
        /// An argument broke a rule.
        public static let invalidArgument = Code(rawValue: "invalid-argument")
        /// A key-slot change was refused.
        public static let keySlotRefused = Code(rawValue: "key-slot-refused")
        /// An operating-system call failed.
        public static let ioFailure = Code(rawValue: "io-failure")
        /// No D-Bus session bus.
        public static let noSessionBus = Code(rawValue: "no-session-bus")
        /// No Secret Service provider (or no libsecret).
        public static let secretServiceUnavailable = Code(rawValue: "secret-service-unavailable")
        /// The keyring collection is locked.
        public static let keyringLocked = Code(rawValue: "keyring-locked")
        /// A Secret Service call timed out.
        public static let secretServiceTimeout = Code(rawValue: "secret-service-timeout")
        /// A Secret Service call failed.
        public static let secretServiceFailed = Code(rawValue: "secret-service-failed")
        /// An item exists but cannot be decoded.
        public static let undecodableItem = Code(rawValue: "undecodable-item")
        /// The store recorded for the profile is not available.
        public static let recordedStoreUnavailable = Code(rawValue: "recorded-store-unavailable")
        /// A new PIN broke the PIN policy.
        public static let pinRejected = Code(rawValue: "pin-rejected")
        /// The PIN was wrong.
        public static let wrongPin = Code(rawValue: "wrong-pin")
        /// The PIN is locked out for a while.
        public static let pinLockedOut = Code(rawValue: "pin-locked-out")
        /// The PIN is disabled until reset.
        public static let pinDisabled = Code(rawValue: "pin-disabled")
        /// No PIN is set for the profile.
        public static let pinNotSet = Code(rawValue: "pin-not-set")
        /// The PIN and its items were wiped.
        public static let pinWiped = Code(rawValue: "pin-wiped")
        /// The store cannot keep PIN records from other processes of the user.
        public static let pinStoreUnprotected = Code(rawValue: "pin-store-unprotected")
        /// A fresh authentication is needed.
        public static let reauthenticationRequired = Code(rawValue: "reauthentication-required")
        /// The kernel keyring cannot hold a window here.
        public static let kernelKeyringUnavailable = Code(rawValue: "kernel-keyring-unavailable")
        /// The refresh token was rejected; the tokens were cleared.
        public static let sessionExpired = Code(rawValue: "session-expired")
        /// No token set is stored.
        public static let noTokens = Code(rawValue: "no-tokens")
        /// The item's secret expired.
        public static let itemExpired = Code(rawValue: "item-expired")
        /// The item holds no previous version.
        public static let noPreviousVersion = Code(rawValue: "no-previous-version")

        /// Every code, in the order of ``LockboxError``'s cases.
        public static let all: [Code] = [
            .itemNotFound,
            .vaultNotFound,
            .vaultAlreadyExists,
            .wrongCredential,
            .corruptVault,
            .unsupportedFormatVersion,
            .insecurePermissions,
            .vaultBusy,
            .credentialsChanged,
            .invalidKeyFile,
            .invalidArgument,
            .keySlotRefused,
            .ioFailure,
            .noSessionBus,
            .secretServiceUnavailable,
            .keyringLocked,
            .secretServiceTimeout,
            .secretServiceFailed,
            .undecodableItem,
            .recordedStoreUnavailable,
            .pinRejected,
            .wrongPin,
            .pinLockedOut,
            .pinDisabled,
            .pinNotSet,
            .pinWiped,
            .pinStoreUnprotected,
            .reauthenticationRequired,
            .kernelKeyringUnavailable,
            .sessionExpired,
            .noTokens,
            .itemExpired,
            .noPreviousVersion,
        ]
    }

    /// Exactly what went wrong, as a stable code (``category`` is the kind of failure).
    public var code: Code {
        switch self {
        case .itemNotFound: return .itemNotFound
        case .vaultNotFound: return .vaultNotFound
        case .vaultAlreadyExists: return .vaultAlreadyExists
        case .wrongCredential: return .wrongCredential
        case .corruptVault: return .corruptVault
        case .unsupportedFormatVersion: return .unsupportedFormatVersion
        case .insecurePermissions: return .insecurePermissions
        case .vaultBusy: return .vaultBusy
        case .credentialsChanged: return .credentialsChanged
        case .invalidKeyFile: return .invalidKeyFile
        case .invalidArgument: return .invalidArgument
        case .keySlot: return .keySlotRefused
        case .io: return .ioFailure
        case .noSessionBus: return .noSessionBus
        case .secretServiceUnavailable: return .secretServiceUnavailable
        case .keyringLocked: return .keyringLocked
        case .secretServiceTimeout: return .secretServiceTimeout
        case .secretServiceFailed: return .secretServiceFailed
        case .undecodableItem: return .undecodableItem
        case .recordedStoreUnavailable: return .recordedStoreUnavailable
        case .pinRejected: return .pinRejected
        case .wrongPin: return .wrongPin
        case .pinLockedOut: return .pinLockedOut
        case .pinDisabled: return .pinDisabled
        case .pinNotSet: return .pinNotSet
        case .pinWiped: return .pinWiped
        case .pinStoreUnprotected: return .pinStoreUnprotected
        case .reauthenticationRequired: return .reauthenticationRequired
        case .kernelKeyringUnavailable: return .kernelKeyringUnavailable
        case .sessionExpired: return .sessionExpired
        case .noTokens: return .noTokens
        case .itemExpired: return .itemExpired
        case .noPreviousVersion: return .noPreviousVersion
        }
    }
}

extension LockboxError.Code {
    // The codes of LockboxTPM's `TPMError` (its `failure`), named here so that a program can
    // map every Lockbox code without linking the TPM product.

    /// No TPM could be reached (`TPMError.Failure.unavailable`).
    public static let tpmUnavailable = LockboxError.Code(rawValue: "tpm-unavailable")
    /// The TPM refused the PIN (`TPMError.Failure.authorizationFailed`).
    public static let tpmAuthorizationFailed = LockboxError.Code(rawValue: "tpm-authorization-failed")
    /// The TPM is in dictionary-attack lockout (`TPMError.Failure.lockedOut`).
    public static let tpmLockedOut = LockboxError.Code(rawValue: "tpm-locked-out")
    /// The PCR values differ from those the slot was sealed to (`TPMError.Failure.policyMismatch`).
    public static let tpmPCRMismatch = LockboxError.Code(rawValue: "tpm-pcr-mismatch")
    /// The slot was sealed by another TPM, or this one was cleared (`TPMError.Failure.foreignObject`).
    public static let tpmForeignSlot = LockboxError.Code(rawValue: "tpm-foreign-slot")
    /// Another tpm2-tss failure (`TPMError.Failure.other`).
    public static let tpmFailure = LockboxError.Code(rawValue: "tpm-failure")
}

extension LockboxError: CustomStringConvertible {
    /// A sentence for a person: what happened, in the library's terms (no program's commands or
    /// options: a program adds its own advice, as the `lockbox` CLI does by ``code``).
    public var description: String {
        switch self {
        case .itemNotFound(let service, let account):
            return "no item for service '\(service)' and account '\(account)'."
        case .vaultNotFound(let path):
            return "no vault at \(path)."
        case .vaultAlreadyExists(let path):
            return "a vault already exists at \(path); refusing to overwrite it."
        case .wrongCredential(let path):
            return "wrong passphrase or key file for the vault at \(path): no key slot opened."
        case .corruptVault(let path, let reason):
            return
                "the vault at \(path) is corrupt or was tampered with (\(reason)). Restore it from a backup; Lockbox will not guess at damaged data."
        case .unsupportedFormatVersion(let path, let found, let supported):
            if found == Int(VaultRecords.formatVersion) && supported < found {
                // Either a format-2 (SQLite) vault given to a format-1 reader, or a future format-1 header.
                return
                    "the vault at \(path) uses format version \(found), which this reader does not open (it reads version \(supported)). A format-2 vault (a SQLite database, what `lockbox init` makes) opens with FileVault.open(at:credentials:), which opens every format, or any lockbox command that takes a vault; if it is not one, a newer Lockbox may read it."
            }
            return
                "the vault at \(path) uses format version \(found), but this Lockbox reads only version \(supported) and below. Upgrade Lockbox to open it."
        case .insecurePermissions(let path, let detail):
            return "refusing to use \(path): \(detail)"
        case .vaultBusy(let path, let waited):
            let seconds = (waited * 10).rounded() / 10
            return "the vault at \(path) stayed locked by another process for \(seconds) s. Retry once that process finishes."
        case .credentialsChanged(let path):
            return
                "the vault at \(path) was re-keyed by another process since it was opened. Open it again with the current passphrase or key file."
        case .invalidKeyFile(let path, let reason):
            return "cannot use key file \(path): \(reason)"
        case .invalidArgument(let reason):
            return reason
        case .keySlot(let reason):
            return reason
        case .io(let operation, let path, let errno):
            return "\(operation) failed for \(path): \(errno.description)"
        case .noSessionBus(let detail):
            return "no D-Bus session bus, so no Secret Service (\(detail))."
        case .secretServiceUnavailable(let detail):
            return "no Secret Service provider is running on the session bus (\(detail))."
        case .keyringLocked(let collection):
            return "locked: the keyring collection '\(collection)' is locked."
        case .secretServiceTimeout(let operation, let seconds):
            return
                "the Secret Service did not answer within \(seconds) s (\(operation)); it may be waiting on an unlock prompt nobody can see."
        case .secretServiceFailed(let operation, let detail):
            return "the Secret Service failed while \(operation): \(detail). If the keyring daemon stopped, start it again and retry."
        case .undecodableItem(let service, let account, let reason):
            return "the item for account '\(account)' on service '\(service)' exists but cannot be read: \(reason)."
        case .pinRejected(let rule):
            return "PIN not accepted: \(rule)."
        case .wrongPin(let profile, let failures, let retryAt):
            let lockout =
                retryAt.map { " Locked until \($0.formatted(.iso8601)) (\(max(0, Int($0.timeIntervalSinceNow.rounded(.up)))) s)." } ?? ""
            return "wrong PIN for '\(profile)' (\(failures) consecutive failure\(failures == 1 ? "" : "s")).\(lockout)"
        case .pinLockedOut(let profile, let retryAt, let seconds):
            return
                "the PIN for '\(profile)' is locked after too many wrong tries; try again in \(Int(seconds.rounded(.up))) s (at \(retryAt.formatted(.iso8601)))."
        case .pinDisabled(let profile, let failures):
            return
                "the PIN for '\(profile)' is disabled after \(failures) consecutive failures, until another profile's PIN or the vault passphrase resets it."
        case .pinNotSet(let profile):
            return "no PIN is set for '\(profile)'."
        case .pinWiped(let profile, let failures):
            return "after \(failures) consecutive wrong PINs, the PIN for '\(profile)' and the items listed with it were wiped."
        case .pinStoreUnprotected(let store):
            return
                "PINs are not kept in this store (\(store)): every process of the user can read a PIN's hash there (and try every PIN offline) and rewrite its failure count. Keep PIN records in an encrypted file vault."
        case .reauthenticationRequired(let what):
            return "re-authentication required: \(what)."
        case .kernelKeyringUnavailable(let detail):
            return
                "the kernel keyring cannot hold a re-authentication window here (\(detail)); Lockbox will ask each time instead and never writes the window to disk."
        case .sessionExpired(let service, let account):
            return
                "session expired: the refresh token for '\(account)' on '\(service)' was rejected, so the tokens were cleared. Sign in again."
        case .noTokens(let service, let account):
            return "no tokens are stored for '\(account)' on '\(service)'."
        case .itemExpired(let service, let account, let expired):
            return "the item for account '\(account)' on service '\(service)' expired at \(expired.formatted(.iso8601))."
        case .noPreviousVersion(let service, let account):
            return
                "the item for account '\(account)' on service '\(service)' holds no previous version (none was kept, its grace period ended, or a later rotation replaced it)."
        case .recordedStoreUnavailable(let store, let settingsPath, let reason):
            let reason = reason.hasSuffix(".") ? String(reason.dropLast()) : reason
            return
                "this profile keeps its credentials in the \(store) store (recorded in \(settingsPath)), which is not available: \(reason). Lockbox will not switch to another, empty store."
        }
    }
}
