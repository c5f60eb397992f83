import Foundation
import Testing
@testable import Lockbox
@testable import lockbox

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
    .recordedBackendUnavailable(backend: "file", settingsPath: "/s", reason: "r"), .pinRejected(rule: "r"),
    .wrongPin(profile: "p", failures: 1, retryAt: nil), .pinLockedOut(profile: "p", retryAt: Date(), seconds: 60),
    .pinDisabled(profile: "p", failures: 100), .pinNotSet(profile: "p"), .pinWiped(profile: "p", failures: 10),
    .pinStoreUnprotected(store: "SecretServiceStore"),
    .reauthenticationRequired("r"), .kernelKeyringUnavailable(detail: "d"), .sessionExpired(service: "s", account: "a"),
    .noTokens(service: "s", account: "a"),
]

@Suite("Error codes and the CLI's error table")
struct ErrorCodeTests {
    @Test("every case has its own stable code, and the list of codes is complete")
    func codesAreDistinct() {
        let codes = everyLockboxError.map(\.code)
        #expect(Set(codes).count == everyLockboxError.count)
        #expect(Set(codes) == Set(LockboxError.Code.all))
        #expect(LockboxError.wrongCredential(path: "/v").code.rawValue == "wrong-credential")
    }

    @Test("the CLI's one table maps every code to its exit code, the numbers scripts already use")
    func tableCoversEveryCode() {
        for code in LockboxError.Code.all { #expect(ErrorTable.entries[code] != nil, "\(code) has no exit code") }
        let expected: [LockboxError.Code: Int32] = [
            .itemNotFound: 2, .vaultNotFound: 3, .vaultAlreadyExists: 4, .wrongCredential: 5, .corruptVault: 6,
            .unsupportedFormatVersion: 7, .insecurePermissions: 8, .vaultBusy: 9, .credentialsChanged: 10, .invalidKeyFile: 11,
            .keySlotRefused: 12, .noSessionBus: 20, .secretServiceUnavailable: 21, .keyringLocked: 22,
            .secretServiceTimeout: 23, .secretServiceFailed: 24, .undecodableItem: 25, .recordedStoreUnavailable: 26,
            .wrongPin: 30, .pinLockedOut: 31, .pinDisabled: 32, .pinNotSet: 33, .pinRejected: 34, .pinWiped: 35, .pinStoreUnprotected: 36,
            .reauthenticationRequired: 40, .kernelKeyringUnavailable: 41, .sessionExpired: 50, .noTokens: 52,
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
        let advised = ErrorTable.message(for: .vaultNotFound(path: "/v"))
        #expect(advised.hasPrefix(LockboxError.vaultNotFound(path: "/v").description) && advised.contains("lockbox init"))
    }
}
