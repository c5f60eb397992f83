import Foundation
import LockboxTPM
import Testing

@testable import Lockbox
@testable import LockboxCLI
@testable import LockboxTestSupport

/// One of each library error, with made-up details.
let everyLockboxError: [LockboxError] = [
    .itemNotFound(service: "s", account: "a"), .vaultNotFound(path: "/v"), .vaultAlreadyExists(path: "/v"),
    .wrongCredential(path: "/v"), .corruptVault(path: "/v", reason: "r"),
    .unsupportedFormatVersion(path: "/v", found: 9, supported: 1), .insecurePermissions(path: "/v", detail: "d"),
    .vaultBusy(path: "/v", waitedSeconds: 1), .credentialsChanged(path: "/v"), .invalidKeyFile(path: "/k", reason: "no such file"),
    .invalidArgument("r"), .keySlot("there is no key slot 3"), .io(operation: "o", path: "/v", errno: .ioError),
    .noSessionBus(detail: "d"), .secretServiceUnavailable(detail: "d"), .keyringLocked(collection: "default"),
    .secretServiceTimeout(operation: "o", seconds: 5), .secretServiceFailed(operation: "o", detail: "d"),
    .undecodableItem(service: "s", account: "a", reason: "r"),
    .recordedStoreUnavailable(store: "file", settingsPath: "/s", reason: "r"), .pinRejected(rule: "r"),
    .wrongPin(profile: "p", failures: 1, retryAt: nil), .pinLockedOut(profile: "p", retryAt: Date(), seconds: 60),
    .pinDisabled(profile: "p", failures: 100), .pinNotSet(profile: "p"), .pinWiped(profile: "p", failures: 10),
    .pinStoreUnprotected(store: "SecretServiceStore"),
    .reauthenticationRequired("r"), .kernelKeyringUnavailable(detail: "d"), .sessionExpired(service: "s", account: "a"),
    .noTokens(service: "s", account: "a"),
    .itemExpired(service: "s", account: "a", expired: Date(timeIntervalSince1970: 1_800_000_000)),
    .noPreviousVersion(service: "s", account: "a"),
]

/// One TPM error of each `TPMError.Failure`, from the response codes tpm2-tss returns for them.
let everyTPMError: [TPMError] = [
    TPMError(function: "Esys_Initialize", responseCode: 0x0A_000A),  // TCTI layer: no TPM
    TPMError(function: "Esys_Unseal", responseCode: 0x98E),  // TPM_RC_AUTH_FAIL, session 1
    TPMError(function: "Esys_Unseal", responseCode: 0x921),  // TPM_RC_LOCKOUT
    TPMError(function: "Esys_Unseal", responseCode: 0x99D),  // TPM_RC_POLICY_FAIL, session 1
    TPMError(function: "Esys_Load", responseCode: 0x29F),  // TPM_RC_INTEGRITY, parameter 2
    TPMError(function: "Esys_Create", responseCode: 0x07_0001),  // ESYS general failure
]

@Suite("Error codes and the CLI's error table")
struct ErrorCodeTests {
    @Test("every error has one store-neutral category; each category has a member; the codes' categories are fixed")
    func categories() {
        var byCategory: [LockboxError.Category: Set<LockboxError.Code>] = [:]
        for error in everyLockboxError as [any LockboxCodedError] + everyTPMError as [any LockboxCodedError] {
            #expect(LockboxError.Category.all.contains(error.category), "\(error.code) has an unlisted category")
            byCategory[error.category, default: []].insert(error.code)
        }
        #expect(Set(byCategory.keys) == Set(LockboxError.Category.all), "a category no error has")
        #expect(Set(LockboxError.Category.all.map(\.rawValue)).count == LockboxError.Category.all.count)
        let expected: [LockboxError.Category: Set<LockboxError.Code>] = [
            .noEntry: [.itemNotFound, .vaultNotFound, .pinNotSet, .noTokens, .itemExpired, .noPreviousVersion],
            .alreadyExists: [.vaultAlreadyExists],
            .badData: [.corruptVault, .unsupportedFormatVersion, .undecodableItem],
            .noStorageAccess: [
                .insecurePermissions, .vaultBusy, .noSessionBus, .secretServiceUnavailable, .keyringLocked,
                .secretServiceTimeout, .recordedStoreUnavailable, .kernelKeyringUnavailable, .pinStoreUnprotected,
                .tpmUnavailable, .tpmForeignSlot,
            ],
            .platformFailure: [.ioFailure, .secretServiceFailed, .tpmFailure],
            .invalidArgument: [.invalidArgument, .invalidKeyFile, .keySlotRefused, .pinRejected],
            .authenticationFailed: [
                .wrongCredential, .wrongPin, .credentialsChanged, .sessionExpired,
                .tpmAuthorizationFailed, .tpmPCRMismatch,
            ],
            .authenticationRequired: [.reauthenticationRequired],
            .lockedOut: [.pinLockedOut, .pinDisabled, .pinWiped, .tpmLockedOut],
        ]
        #expect(byCategory == expected)
        #expect(LockboxError.keyringLocked(collection: "login").category.rawValue == "no-storage-access")
    }

    @Test("TPM failures have their own codes and rows in the one table, with the exit codes they always had")
    func tpmErrorsInTheTable() {
        #expect(everyTPMError.map(\.code) == TPMError.codes)
        #expect(Set(TPMError.codes).isDisjoint(with: LockboxError.Code.all))
        let exits: [LockboxError.Code: Int32] = [
            .tpmUnavailable: 60, .tpmAuthorizationFailed: 30, .tpmLockedOut: 61, .tpmPCRMismatch: 62, .tpmForeignSlot: 63, .tpmFailure: 1,
        ]
        for error in everyTPMError {
            #expect(ErrorTable.entries[error.code] != nil, "\(error.code) has no row")
            #expect(ExitStatus(for: error).rawValue == exits[error.code], "\(error.code)")
        }
        // The library's message names no lockbox command; the CLI's advice does.
        let lockout = everyTPMError[2]
        #expect(!lockout.description.contains("`lockbox"))
        #expect(ErrorTable.message(for: lockout).contains("lockbox doctor"))
    }

    @Test("`lockbox exit-codes` names every error code under its exit code")
    func helpListsTheTable() {
        let table = ExitStatus.table
        for (code, entry) in ErrorTable.entries {
            let item = table.split(separator: "\n").first { $0.hasPrefix("\(entry.exit.rawValue) ") }
            #expect(item?.contains(code.rawValue) == true, "\(code) not listed under \(entry.exit.rawValue)")
        }
    }

    @Test("every case has its own stable code, and the list of codes is complete")
    func codesAreDistinct() {
        let codes = everyLockboxError.map(\.code)
        #expect(Set(codes).count == everyLockboxError.count)
        #expect(Set(codes) == Set(LockboxError.Code.all))
        #expect(LockboxError.wrongCredential(path: "/v").code.rawValue == "wrong-credential")
    }

    @Test("the CLI's one table maps every code to its exit code, the numbers scripts already use")
    func tableCoversEveryCode() {
        for code in LockboxError.Code.all + TPMError.codes { #expect(ErrorTable.entries[code] != nil, "\(code) has no exit code") }
        #expect(
            ErrorTable.entries.count == LockboxError.Code.all.count + TPMError.codes.count + LockboxError.Code.cli.count
                + LockboxError.Code.postgres.count,
            "a row for an unknown code")
        let cliErrors: [any LockboxCodedError] = [
            CLIError.noInput("m"), CLIError.noTerminal("PIN"), CLIError.mismatch("PIN"),
            CLIError.notConfirmed("m"), RefreshFailed(detail: "d"),
            CLIError.itemExists(service: "s", account: "a"), CLIError.itemChanged(service: "s", account: "a"),
            CLIError.accessTokenExpired(service: "s", account: "a"), CLIError.passphraseRejected("m"),
        ]
        #expect(cliErrors.map(\.code) == LockboxError.Code.cli)
        #expect(cliErrors.map { ExitStatus(for: $0).rawValue } == [64, 64, 64, 13, 51, 14, 15, 53, 18], "the exits these always had")
        let expected: [LockboxError.Code: Int32] = [
            .itemNotFound: 2, .vaultNotFound: 3, .vaultAlreadyExists: 4, .wrongCredential: 5, .corruptVault: 6,
            .unsupportedFormatVersion: 7, .insecurePermissions: 8, .vaultBusy: 9, .credentialsChanged: 10, .invalidKeyFile: 11,
            .keySlotRefused: 12, .noSessionBus: 20, .secretServiceUnavailable: 21, .keyringLocked: 22,
            .secretServiceTimeout: 23, .secretServiceFailed: 24, .undecodableItem: 25, .recordedStoreUnavailable: 26,
            .postgresProgramMissing: 27, .postgresUnavailable: 27, .postgresConnectionLost: 27, .postgresRefused: 27,
            .postgresSchemaTooNew: 27, .postgresNotRunning: 27, .postgresSchemaNotCurrent: 28, .postgresReadOnly: 29,
            .wrongPin: 30, .pinLockedOut: 31, .pinDisabled: 32, .pinNotSet: 33, .pinRejected: 34, .pinWiped: 35, .pinStoreUnprotected: 36,
            .reauthenticationRequired: 40, .kernelKeyringUnavailable: 41, .sessionExpired: 50, .noTokens: 52,
            .itemExpired: 16, .noPreviousVersion: 17,
            .invalidArgument: 64, .ioFailure: 74,
        ]
        for (code, status) in expected { #expect(ErrorTable.entry(for: code).exit.rawValue == status, "\(code)") }
        for error in everyLockboxError { #expect(ExitStatus(for: error) == ErrorTable.entry(for: error.code).exit) }
    }

    @Test("no library message names a CLI command, option or environment variable; the CLI adds its advice")
    func libraryMessagesAreLibraryTerms() {
        for error in everyLockboxError {
            let text = error.description
            #expect(!text.contains("`lockbox"), "\(error.code): \(text)")
            #expect(!text.contains("--"), "\(error.code): \(text)")
            #expect(!text.contains("LOCKBOX_"), "\(error.code): \(text)")
        }
        // LockboxTPM's errors, one per failure kind (a TCTI-layer code, the TPM's own codes).
        let tpmErrors = [
            TPMError(function: "Tss2_TctiLdr_Initialize", responseCode: 0x0A_000A), TPMError(function: "Esys_Unseal", responseCode: 0x98E),
            TPMError(function: "Esys_Unseal", responseCode: 0x921), TPMError(function: "Esys_PolicyPCR", responseCode: 0x128),
            TPMError(function: "Esys_Load", responseCode: 0x09F), TPMError(function: "Esys_Startup", responseCode: 0x101),
        ]
        #expect(tpmErrors.map(\.code) == TPMError.codes)
        for error in tpmErrors {
            let text = error.description
            #expect(!text.contains("`lockbox") && !text.contains("--") && !text.contains("LOCKBOX_"), "\(error.code): \(text)")
            #expect(!text.contains("tpm2_"), "\(error.code) names a tpm2-tools command: \(text)")
        }
        let tpmAdvice = ErrorTable.message(for: tpmErrors[0])
        #expect(tpmAdvice.hasPrefix(tpmErrors[0].description) && tpmAdvice.contains("LOCKBOX_TPM_TCTI"))
        let advised = ErrorTable.message(for: LockboxError.vaultNotFound(path: "/v"))
        #expect(advised.hasPrefix(LockboxError.vaultNotFound(path: "/v").description) && advised.contains("lockbox init"))
    }
}
