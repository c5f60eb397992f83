import ArgumentParser
import Lockbox

/// Errors of the command line itself (input and confirmation), beside the library's ``LockboxError``.
enum CLIError: Error, CustomStringConvertible {
    case noInput(String)
    case noTerminal(String)
    case mismatch(String)
    case notConfirmed(String)

    var description: String {
        switch self {
        case let .noInput(message): return message
        case let .noTerminal(what):
            return "no terminal to ask for the \(what) on. Pass it through a file descriptor (see --help), or run from a terminal."
        case let .mismatch(what): return "the two \(what) entries differ; nothing was changed"
        case let .notConfirmed(message): return message
        }
    }
}

/// The CLI's exit codes: one per kind of failure, so scripts can tell them apart.
/// README.md lists them; keep the two in step.
enum ExitStatus: Int32, CaseIterable {
    case success = 0
    case failure = 1
    case notFound = 2
    case vaultNotFound = 3
    case vaultExists = 4
    case wrongCredential = 5
    case corrupt = 6
    case unsupportedVersion = 7
    case insecurePermissions = 8
    case busy = 9
    case credentialsChanged = 10
    case invalidKeyFile = 11
    case keySlotRefused = 12
    case cancelled = 13
    case noSessionBus = 20
    case noSecretService = 21
    case keyringLocked = 22
    case secretServiceTimeout = 23
    case secretServiceFailed = 24
    case undecodableItem = 25
    case recordedStoreUnavailable = 26
    case wrongPin = 30
    case pinLockedOut = 31
    case pinDisabled = 32
    case pinNotSet = 33
    case pinRejected = 34
    case pinWiped = 35
    case pinStoreUnprotected = 36
    case reauthenticationRequired = 40
    case kernelKeyringUnavailable = 41
    case sessionExpired = 50
    case refreshFailed = 51
    case noTokens = 52
    case usage = 64
    case ioError = 74

    init(for error: any Error) {
        switch error {
        case let error as LockboxError:
            switch error {
            case .itemNotFound: self = .notFound
            case .vaultNotFound: self = .vaultNotFound
            case .vaultAlreadyExists: self = .vaultExists
            case .wrongCredential: self = .wrongCredential
            case .corruptVault: self = .corrupt
            case .unsupportedFormatVersion: self = .unsupportedVersion
            case .insecurePermissions: self = .insecurePermissions
            case .vaultBusy: self = .busy
            case .credentialsChanged: self = .credentialsChanged
            case .invalidKeyFile: self = .invalidKeyFile
            case .keySlot: self = .keySlotRefused
            case .invalidArgument: self = .usage
            case .io: self = .ioError
            case .noSessionBus: self = .noSessionBus
            case .secretServiceUnavailable: self = .noSecretService
            case .keyringLocked: self = .keyringLocked
            case .secretServiceTimeout: self = .secretServiceTimeout
            case .secretServiceFailed: self = .secretServiceFailed
            case .undecodableItem: self = .undecodableItem
            case .recordedBackendUnavailable: self = .recordedStoreUnavailable
            case .wrongPin: self = .wrongPin
            case .pinLockedOut: self = .pinLockedOut
            case .pinDisabled: self = .pinDisabled
            case .pinNotSet: self = .pinNotSet
            case .pinRejected: self = .pinRejected
            case .pinWiped: self = .pinWiped
            case .pinStoreUnprotected: self = .pinStoreUnprotected
            case .reauthenticationRequired: self = .reauthenticationRequired
            case .kernelKeyringUnavailable: self = .kernelKeyringUnavailable
            case .sessionExpired: self = .sessionExpired
            case .noTokens: self = .noTokens
            }
        case is RefreshFailed:
            self = .refreshFailed
        case let error as CLIError:
            switch error {
            case .noInput, .noTerminal, .mismatch: self = .usage
            case .notConfirmed: self = .cancelled
            }
        default:
            self = .failure
        }
    }
}
