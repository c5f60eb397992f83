import Foundation
import SystemPackage

/// Everything that can go wrong in Lockbox, each case naming what happened, with its details.
///
/// Switch on ``code`` (stable: the same code keeps its meaning across releases, and the store
/// behind the error does not change it) or match the case for its details. ``description`` is
/// a sentence for a person saying what happened, in the library's terms; what to do about it
/// depends on the program (the `lockbox` CLI keeps its advice, and its exit codes, in one table
/// keyed by ``code``).
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
    case recordedBackendUnavailable(backend: String, settingsPath: String, reason: String)
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
}

extension LockboxError {
    /// A stable, machine-readable name for what went wrong (`wrong-credential`, `keyring-locked`…):
    /// what programs switch on and log. Its ``rawValue`` never changes meaning.
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
        ]
    }

    /// What went wrong, as a stable code.
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
        case .recordedBackendUnavailable: return .recordedStoreUnavailable
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
        }
    }
}

extension LockboxError: CustomStringConvertible {
    /// A sentence for a person: what happened, in the library's terms (no program's commands or
    /// options: a program adds its own advice, as the `lockbox` CLI does by ``code``).
    public var description: String {
        switch self {
        case let .itemNotFound(service, account):
            return "no item for service '\(service)' and account '\(account)'."
        case let .vaultNotFound(path):
            return "no vault at \(path)."
        case let .vaultAlreadyExists(path):
            return "a vault already exists at \(path); refusing to overwrite it."
        case let .wrongCredential(path):
            return "wrong passphrase or key file for the vault at \(path): no key slot opened."
        case let .corruptVault(path, reason):
            return "the vault at \(path) is corrupt or was tampered with (\(reason)). Restore it from a backup; Lockbox will not guess at damaged data."
        case let .unsupportedFormatVersion(path, found, supported):
            return "the vault at \(path) uses format version \(found), but this Lockbox reads only version \(supported) and below. Upgrade Lockbox to open it."
        case let .insecurePermissions(path, detail):
            return "refusing to use \(path): \(detail)"
        case let .vaultBusy(path, waited):
            let seconds = (waited * 10).rounded() / 10
            return "the vault at \(path) stayed locked by another process for \(seconds) s. Retry once that process finishes."
        case let .credentialsChanged(path):
            return "the vault at \(path) was re-keyed by another process since it was opened. Open it again with the current passphrase or key file."
        case let .invalidKeyFile(path, reason):
            return "cannot use key file \(path): \(reason)"
        case let .invalidArgument(reason):
            return reason
        case let .keySlot(reason):
            return reason
        case let .io(operation, path, errno):
            return "\(operation) failed for \(path): \(errno.description)"
        case let .noSessionBus(detail):
            return "no D-Bus session bus, so no Secret Service (\(detail))."
        case let .secretServiceUnavailable(detail):
            return "no Secret Service provider is running on the session bus (\(detail))."
        case let .keyringLocked(collection):
            return "locked: the keyring collection '\(collection)' is locked."
        case let .secretServiceTimeout(operation, seconds):
            return "the Secret Service did not answer within \(seconds) s (\(operation)); it may be waiting on an unlock prompt nobody can see."
        case let .secretServiceFailed(operation, detail):
            return "the Secret Service failed while \(operation): \(detail). If the keyring daemon stopped, start it again and retry."
        case let .undecodableItem(service, account, reason):
            return "the item for account '\(account)' on service '\(service)' exists but cannot be read: \(reason)."
        case let .pinRejected(rule):
            return "PIN not accepted: \(rule)."
        case let .wrongPin(profile, failures, retryAt):
            let lockout = retryAt.map { " Locked until \($0.formatted(.iso8601)) (\(max(0, Int($0.timeIntervalSinceNow.rounded(.up)))) s)." } ?? ""
            return "wrong PIN for '\(profile)' (\(failures) consecutive failure\(failures == 1 ? "" : "s")).\(lockout)"
        case let .pinLockedOut(profile, retryAt, seconds):
            return "the PIN for '\(profile)' is locked after too many wrong tries; try again in \(Int(seconds.rounded(.up))) s (at \(retryAt.formatted(.iso8601)))."
        case let .pinDisabled(profile, failures):
            return "the PIN for '\(profile)' is disabled after \(failures) consecutive failures, until another profile's PIN or the vault passphrase resets it."
        case let .pinNotSet(profile):
            return "no PIN is set for '\(profile)'."
        case let .pinWiped(profile, failures):
            return "after \(failures) consecutive wrong PINs, the PIN for '\(profile)' and the items listed with it were wiped."
        case let .pinStoreUnprotected(store):
            return "PINs are not kept in this store (\(store)): every process of the user can read a PIN's hash there (and try every PIN offline) and rewrite its failure count. Keep PIN records in an encrypted file vault."
        case let .reauthenticationRequired(what):
            return "re-authentication required: \(what)."
        case let .kernelKeyringUnavailable(detail):
            return "the kernel keyring cannot hold a re-authentication window here (\(detail)); Lockbox will ask each time instead and never writes the window to disk."
        case let .sessionExpired(service, account):
            return "session expired: the refresh token for '\(account)' on '\(service)' was rejected, so the tokens were cleared. Sign in again."
        case let .noTokens(service, account):
            return "no tokens are stored for '\(account)' on '\(service)'."
        case let .recordedBackendUnavailable(backend, settingsPath, reason):
            let reason = reason.hasSuffix(".") ? String(reason.dropLast()) : reason
            return "this profile keeps its credentials in the \(backend) store (recorded in \(settingsPath)), which is not available: \(reason). Lockbox will not switch to another, empty store."
        }
    }
}
