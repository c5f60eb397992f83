import ArgumentParser
import Lockbox
import LockboxTPM

/// Errors of the command line itself (input and confirmation), beside the library's ``LockboxError``;
/// they have codes and rows in ``ErrorTable`` like the library's.
enum CLIError: LockboxCodedError {
    case noInput(String)
    case noTerminal(String)
    case mismatch(String)
    case notConfirmed(String)
    /// `set --no-clobber` found an item there.
    case itemExists(service: String, account: String)
    /// `set --if-current-fd` found another secret there.
    case itemChanged(service: String, account: String)
    /// `token get` found the access token expired (within the leeway), and nothing refreshes it.
    case accessTokenExpired(service: String, account: String)
    /// A new vault passphrase breaks the passphrase policy (``PassphrasePolicy``).
    case passphraseRejected(String)

    var description: String {
        switch self {
        case .noInput(let message): return message
        case .noTerminal(let what):
            return "no terminal to ask for the \(what) on. Pass it through a file descriptor (see --help), or run from a terminal."
        case .mismatch(let what): return "the two \(what) entries differ; nothing was changed"
        case .notConfirmed(let message): return message
        case .itemExists(let service, let account):
            return "an item for account '\(account)' on service '\(service)' exists, so nothing was stored (--no-clobber)"
        case .itemChanged(let service, let account):
            return
                "the item for account '\(account)' on service '\(service)' no longer holds the secret given as current (or is gone), so nothing was stored"
        case .accessTokenExpired(let service, let account):
            return "the access token for '\(account)' on '\(service)' has expired (or expires within the leeway), so it was not printed"
        case .passphraseRejected(let message): return message
        }
    }

    var code: LockboxError.Code {
        switch self {
        case .noInput: return .noInput
        case .noTerminal: return .noTerminal
        case .mismatch: return .entriesDiffer
        case .notConfirmed: return .notConfirmed
        case .itemExists: return .itemExists
        case .itemChanged: return .itemChanged
        case .accessTokenExpired: return .accessTokenExpired
        case .passphraseRejected: return .passphraseRejected
        }
    }

    /// Requests to fix (give the input, confirm), or a write whose condition did not hold.
    var category: LockboxError.Category {
        switch self {
        case .itemExists: return .alreadyExists
        case .itemChanged: return .authenticationFailed
        case .accessTokenExpired: return .authenticationRequired
        default: return .invalidArgument
        }
    }
}

/// An error of the CLI's whose message already says what to do, so the table's advice for its
/// code, written for the library's error, is not added.
protocol AdvisingError: LockboxCodedError {}

/// A transient refresh failure (network, server error) of `token get --refresh-with`: the tokens stay.
struct RefreshFailed: LockboxCodedError {
    var detail: String
    var description: String { "the refresh failed (\(detail)); the stored tokens were kept. Retry later." }
    var code: LockboxError.Code { .refreshFailed }
    var category: LockboxError.Category { .platformFailure }
}

extension LockboxError.Code {
    /// A secret could not be read from its descriptor, or was empty (the CLI's).
    static let noInput = LockboxError.Code(rawValue: "no-input")
    /// No terminal to ask a secret on (the CLI's).
    static let noTerminal = LockboxError.Code(rawValue: "no-terminal")
    /// The two entries of a new secret differ (the CLI's).
    static let entriesDiffer = LockboxError.Code(rawValue: "entries-differ")
    /// A destructive command was not confirmed (the CLI's).
    static let notConfirmed = LockboxError.Code(rawValue: "not-confirmed")
    /// `set --no-clobber` found an item (the CLI's).
    static let itemExists = LockboxError.Code(rawValue: "item-exists")
    /// `set --if-current-fd` found another secret (the CLI's).
    static let itemChanged = LockboxError.Code(rawValue: "item-changed")
    /// A token refresh failed transiently (the CLI's refresher).
    static let refreshFailed = LockboxError.Code(rawValue: "refresh-failed")
    /// `token get` would print an expired access token (the CLI's).
    static let accessTokenExpired = LockboxError.Code(rawValue: "access-token-expired")
    /// A new vault passphrase breaks the passphrase policy (the CLI's).
    static let passphraseRejected = LockboxError.Code(rawValue: "passphrase-rejected")

    /// `lockbox-postgres` is missing beside `lockbox` (the CLI's).
    static let postgresProgramMissing = LockboxError.Code(rawValue: "postgres-program-missing")
    /// LockboxPostgres's `PostgresStoreError` codes, the same texts (LockboxPostgresTests checks
    /// them against the library's): the database unreachable or not answering in time, the
    /// connection lost mid-operation, an operation refused (a SQLSTATE), a schema newer than this Lockbox.
    static let postgresUnavailable = LockboxError.Code(rawValue: "postgres-unavailable")
    static let postgresConnectionLost = LockboxError.Code(rawValue: "postgres-connection-lost")
    static let postgresRefused = LockboxError.Code(rawValue: "postgres-refused")
    static let postgresSchemaTooNew = LockboxError.Code(rawValue: "postgres-schema-too-new")
    /// The store's pool no longer runs (a library service's; `lockbox` never sees it).
    static let postgresNotRunning = LockboxError.Code(rawValue: "postgres-not-running")
    /// The database's Lockbox schema is missing or older than this Lockbox needs (exit 28): the
    /// owner role runs `migrate-schema`.
    static let postgresSchemaNotCurrent = LockboxError.Code(rawValue: "postgres-schema-not-current")
    /// A write reached a read-only server, a hot standby (SQLSTATE 25006; exit 29): writes need
    /// the primary.
    static let postgresReadOnly = LockboxError.Code(rawValue: "postgres-read-only")
    /// The PostgreSQL store's codes (exit 27, 28 for a schema to migrate, 29 for a write sent to a standby).
    static let postgres: [LockboxError.Code] = [
        .postgresProgramMissing, .postgresUnavailable, .postgresConnectionLost, .postgresRefused, .postgresSchemaTooNew,
        .postgresSchemaNotCurrent, .postgresReadOnly, .postgresNotRunning,
    ]

    /// The codes of the CLI's own errors (``CLIError``, ``RefreshFailed``).
    static let cli: [LockboxError.Code] = [
        .noInput, .noTerminal, .entriesDiffer, .notConfirmed, .refreshFailed, .itemExists, .itemChanged,
        .accessTokenExpired, .passphraseRejected,
    ]
}

/// The CLI's exit codes: one per kind of failure, so scripts can tell them apart. The library's
/// errors map to them through ``ErrorTable``; `lockbox exit-codes` lists them from ``meaning``
/// (and docs/CLI.md and the man page are generated from that).
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
    case itemExists = 14
    case itemChanged = 15
    case itemExpired = 16
    case noPreviousVersion = 17
    case passphraseRejected = 18
    case noSessionBus = 20
    case noSecretService = 21
    case keyringLocked = 22
    case secretServiceTimeout = 23
    case secretServiceFailed = 24
    case undecodableItem = 25
    case recordedStoreUnavailable = 26
    case postgresFailed = 27
    case postgresSchemaNotCurrent = 28
    case postgresReadOnly = 29
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
    case accessTokenExpired = 53
    case noTPM = 60
    case tpmLockedOut = 61
    case tpmPCRMismatch = 62
    case tpmForeignSlot = 63
    case usage = 64
    case ioError = 74

    init(for error: any Error) {
        switch error {
        case let error as any LockboxCodedError:
            self = ErrorTable.entry(for: error.code).exit
        default:
            self = .failure
        }
    }
}

extension ExitStatus {
    /// What the code means, as `lockbox exit-codes` lists it.
    var meaning: String {
        switch self {
        case .success: return "ok"
        case .failure: return "unexpected failure"
        case .notFound: return "item not found"
        case .vaultNotFound: return "no vault"
        case .vaultExists: return "vault exists"
        case .wrongCredential: return "wrong passphrase or key"
        case .corrupt: return "corrupt or tampered vault"
        case .unsupportedVersion: return "unsupported format version"
        case .insecurePermissions: return "insecure permissions"
        case .busy: return "vault busy"
        case .credentialsChanged: return "vault re-keyed meanwhile"
        case .invalidKeyFile: return "unusable key file"
        case .keySlotRefused: return "key-slot change refused"
        case .cancelled: return "not confirmed"
        case .itemExists: return "item exists"
        case .itemChanged: return "item changed meanwhile"
        case .itemExpired: return "item expired"
        case .noPreviousVersion: return "no previous version kept"
        case .passphraseRejected: return "passphrase refused by policy"
        case .noSessionBus: return "no D-Bus session bus"
        case .noSecretService: return "no Secret Service provider"
        case .keyringLocked: return "keyring locked"
        case .secretServiceTimeout: return "Secret Service timed out"
        case .secretServiceFailed: return "Secret Service failed (e.g. provider went away)"
        case .undecodableItem: return "item cannot be decoded"
        case .recordedStoreUnavailable: return "the recorded store is unavailable"
        case .postgresFailed: return "PostgreSQL store unreachable or failing"
        case .postgresSchemaNotCurrent: return "PostgreSQL schema missing or older: run migrate-schema as its owner"
        case .postgresReadOnly: return "PostgreSQL server read-only (a hot standby): writes need the primary"
        case .wrongPin: return "wrong PIN"
        case .pinLockedOut: return "PIN locked out"
        case .pinDisabled: return "PIN disabled"
        case .pinNotSet: return "no PIN set"
        case .pinRejected: return "PIN refused by policy"
        case .pinWiped: return "PIN wiped"
        case .pinStoreUnprotected: return "store cannot keep PINs (the Secret Service)"
        case .reauthenticationRequired: return "re-authentication required"
        case .kernelKeyringUnavailable: return "kernel keyring unavailable"
        case .sessionExpired: return "session expired"
        case .refreshFailed: return "token refresh failed"
        case .noTokens: return "no tokens stored"
        case .accessTokenExpired: return "access token expired"
        case .noTPM: return "no TPM reachable"
        case .tpmLockedOut: return "TPM in dictionary-attack lockout"
        case .tpmPCRMismatch: return "TPM PCR values changed"
        case .tpmForeignSlot: return "TPM slot from another or cleared TPM"
        case .usage: return "usage error"
        case .ioError: return "I/O error"
        }
    }
}

/// The one table from an error's ``LockboxError/Code`` (a ``LockboxError``'s or a `TPMError`'s)
/// to the CLI's exit code and advice (what to do, in terms of lockbox's commands and options; the
/// library's message says only what happened). `ExitStatus(for:)`, the error output, `lockbox
/// exit-codes` (so docs/CLI.md and the man page) and the tests read it.
enum ErrorTable {
    struct Entry {
        /// The exit code.
        var exit: ExitStatus
        /// What to do next, from the error's details; `nil` when the message says enough.
        var advice: @Sendable (any LockboxCodedError) -> String?

        init(exit: ExitStatus, advice: @escaping @Sendable (any LockboxCodedError) -> String? = { _ in nil }) {
            self.exit = exit
            self.advice = advice
        }

        /// An entry whose advice reads the details of a ``LockboxError``.
        static func lockbox(_ exit: ExitStatus, advice: @escaping @Sendable (LockboxError) -> String?) -> Entry {
            Entry(exit: exit) { error in (error as? LockboxError).flatMap(advice) }
        }
    }

    static let entries: [LockboxError.Code: Entry] = [
        .itemNotFound: .lockbox(.notFound) { error in
            guard case .itemNotFound(let service, _) = error else { return nil }
            return "List what is stored with `lockbox list --service \(service)`."
        },
        .vaultNotFound: Entry(exit: .vaultNotFound) { _ in
            "Create one with `lockbox init`, or point to an existing one with --vault or LOCKBOX_VAULT."
        },
        .vaultAlreadyExists: Entry(exit: .vaultExists) { _ in "Choose another path with --vault, or remove the old vault deliberately." },
        .wrongCredential: Entry(exit: .wrongCredential) { _ in "Check the passphrase or the --key-file path." },
        .corruptVault: Entry(exit: .corrupt),
        .unsupportedFormatVersion: Entry(exit: .unsupportedVersion),
        .insecurePermissions: Entry(exit: .insecurePermissions),
        .vaultBusy: Entry(exit: .busy),
        .credentialsChanged: Entry(exit: .credentialsChanged),
        .invalidKeyFile: .lockbox(.invalidKeyFile) { error in
            guard case .invalidKeyFile(_, let reason) = error, reason == "no such file" else { return nil }
            return "Check the path (--key-file, LOCKBOX_KEY_FILE, or the one `lockbox init` recorded for this profile). "
                + "A new key file: `lockbox init --generate-key-file PATH` for a new vault, "
                + "`lockbox slot add-key-file --generate PATH` (opened with another credential) for this one."
        },
        .invalidArgument: Entry(exit: .usage),
        .keySlotRefused: .lockbox(.keySlotRefused) { error in
            guard case .keySlot(let reason) = error else { return nil }
            if reason.hasPrefix("there is no key slot") || reason.hasSuffix("is not a passphrase slot") {
                return "`lockbox slot list` shows the slots."
            }
            if reason.hasPrefix("the vault has no passphrase slot") { return "Add one with `lockbox slot add-passphrase`." }
            if reason.hasSuffix("say which one to change") { return "Name it with --slot." }
            if reason.hasSuffix("or drop the unmatched slots.") { return "--drop-unmatched-slots removes them." }
            return nil
        },
        .ioFailure: Entry(exit: .ioError),
        .noSessionBus: Entry(exit: .noSessionBus) { _ in "Log in to a desktop session, or use the file vault with --store file." },
        .secretServiceUnavailable: Entry(exit: .noSecretService) { _ in
            "Start gnome-keyring or KeePassXC (with Secret Service integration), or use the file vault with --store file."
        },
        .keyringLocked: Entry(exit: .keyringLocked) { _ in
            "Unlock your keyring (log in to the desktop, or open Passwords and Keys), or use the file vault with --store file."
        },
        .secretServiceTimeout: Entry(exit: .secretServiceTimeout) { _ in "Unlock your keyring, or use the file vault with --store file." },
        .secretServiceFailed: Entry(exit: .secretServiceFailed),
        .undecodableItem: .lockbox(.undecodableItem) { error in
            guard case .undecodableItem(let service, let account, _) = error else { return nil }
            return "Inspect it with `secret-tool search service '\(service)' username '\(account)'`."
        },
        .recordedStoreUnavailable: Entry(exit: .recordedStoreUnavailable) { _ in
            "Make that store available, or name a store explicitly with --store."
        },
        .postgresProgramMissing: Entry(exit: .postgresFailed),
        .postgresUnavailable: Entry(exit: .postgresFailed) { _ in
            "Check the URL in LOCKBOX_POSTGRES_URL or the --postgres-url-file file, and that the server accepts connections."
        },
        .postgresConnectionLost: Entry(exit: .postgresFailed) { _ in "Run the command again: it connects anew." },
        .postgresRefused: Entry(exit: .postgresFailed) { _ in
            "The SQLSTATE says why (28P01: wrong password, 42501: no privilege)."
        },
        .postgresSchemaTooNew: Entry(exit: .postgresFailed),
        .postgresNotRunning: Entry(exit: .postgresFailed),
        .postgresSchemaNotCurrent: Entry(exit: .postgresSchemaNotCurrent),
        .postgresReadOnly: Entry(exit: .postgresReadOnly) { _ in
            "Put the primary's address in the URL (LOCKBOX_POSTGRES_URL, or the file of --postgres-url-file or LOCKBOX_POSTGRES_URL_FILE), "
                + "or list the primary and the standby with target_session_attrs=read-write "
                + "(or prefer-standby: reads on the standby, writes on the primary)."
        },
        .pinRejected: Entry(exit: .pinRejected),
        .wrongPin: Entry(exit: .wrongPin),
        .pinLockedOut: Entry(exit: .pinLockedOut),
        .pinDisabled: Entry(exit: .pinDisabled) { _ in "Reset it with `lockbox pin reset`." },
        .pinNotSet: Entry(exit: .pinNotSet) { _ in "Set one with `lockbox pin set`." },
        .pinWiped: Entry(exit: .pinWiped),
        .pinStoreUnprotected: Entry(exit: .pinStoreUnprotected) { _ in "Keep PINs in the file vault: run `lockbox pin` with --store file."
        },
        .reauthenticationRequired: Entry(exit: .reauthenticationRequired) { _ in
            "Run `lockbox unlock` (PIN or passphrase) and retry within the window."
        },
        .kernelKeyringUnavailable: Entry(exit: .kernelKeyringUnavailable),
        .sessionExpired: Entry(exit: .sessionExpired),
        .noTokens: Entry(exit: .noTokens) { _ in "Store them with `lockbox token set`." },
        .itemExpired: .lockbox(.itemExpired) { error in
            guard case .itemExpired(let service, let account, _) = error else { return nil }
            return
                "Store a new value with `lockbox set`, read it anyway with `lockbox get --allow-expired '\(service)' '\(account)'`, or remove expired items with `lockbox wipe --expired`."
        },
        .noPreviousVersion: Entry(exit: .noPreviousVersion) { _ in "Keep one on the next rotation with `lockbox set --keep-previous`." },
        // TPM failures (LockboxTPM's TPMError): a refused PIN exits as any wrong PIN does.
        .tpmUnavailable: Entry(exit: .noTPM) { error in
            if (error as? TPMError)?.timeout != nil {
                return
                    "Restart the TPM's service (swtpm, tpm2-abrmd) or the machine, or give it longer with LOCKBOX_TPM_TIMEOUT (seconds); otherwise open the vault with --key-file or --passphrase-fd."
            }
            return
                "Check that the machine has a TPM 2.0 (/dev/tpmrm0) and that you may use it (group tss), or set LOCKBOX_TPM_TCTI; otherwise open the vault with --key-file or --passphrase-fd."
        },
        .tpmAuthorizationFailed: Entry(exit: .wrongPin),
        .tpmLockedOut: Entry(exit: .tpmLockedOut) { _ in
            "`lockbox doctor` shows when the TPM accepts PINs again; an administrator can reset it with `tpm2_dictionarylockout --clear-lockout`."
        },
        .tpmPCRMismatch: Entry(exit: .tpmPCRMismatch) { _ in
            "Then `lockbox slot remove` the TPM slot and `lockbox slot add-tpm` again."
        },
        .tpmForeignSlot: Entry(exit: .tpmForeignSlot) { _ in
            "Open the vault with --key-file or --passphrase-fd; `lockbox slot remove` the TPM slot and `lockbox slot add-tpm` on this machine."
        },
        .tpmFailure: Entry(exit: .failure),
        // The CLI's own errors (CLIError, RefreshFailed).
        .noInput: Entry(exit: .usage),
        .noTerminal: Entry(exit: .usage),
        .entriesDiffer: Entry(exit: .usage),
        .notConfirmed: Entry(exit: .cancelled),
        .itemExists: Entry(exit: .itemExists) { _ in "Leave out --no-clobber to replace it." },
        .itemChanged: Entry(exit: .itemChanged) { _ in "Read the item again (`lockbox get`) and decide on the new value." },
        .refreshFailed: Entry(exit: .refreshFailed),
        .passphraseRejected: Entry(exit: .passphraseRejected),
        .accessTokenExpired: Entry(exit: .accessTokenExpired) { _ in
            "Refresh it with `lockbox token get --refresh-with COMMAND`, or print it anyway with --allow-expired."
        },
    ]

    /// The entry for `code`; a code this CLI does not know (a newer library) is an unexpected failure.
    static func entry(for code: LockboxError.Code) -> Entry {
        entries[code] ?? Entry(exit: .failure)
    }

    /// The error codes that exit with `status`, sorted.
    static func codes(for status: ExitStatus) -> [LockboxError.Code] {
        entries.filter { $0.value.exit == status }.keys.sorted { $0.rawValue < $1.rawValue }
    }

    /// The line lockbox prints for `error` (after `error[CODE]: `): the library's message, then
    /// the CLI's advice (unless the error gives its own, ``AdvisingError``).
    static func message(for error: any LockboxCodedError) -> String {
        guard !(error is any AdvisingError), let advice = entry(for: error.code).advice(error) else { return error.description }
        return error.description + " " + advice
    }
}
