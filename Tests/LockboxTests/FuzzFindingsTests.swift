import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxSelfTest
@testable import LockboxTestSupport

/// Issues the fuzzers found in library code (docs/SECURITY-TESTING.md, "Findings"), fixed and
/// kept as regression tests.
@Suite("Fuzzing findings")
struct FuzzFindingsTests {
    // MARK: Finding 1: timestamps beyond ±2^51 ms changed when a vault was rewritten

    @Test("timestamps outside ±2^48 ms are clamped once, then stable; inside they are exact (finding 1)")
    func farTimestampsRoundTrip() {
        let limit = VaultPayload.timestampLimit
        for value: Int64 in [(1 << 53) - 2999, -((1 << 53) - 2999), (1 << 52) + 3, .max, .min] {
            let once = VaultPayload.milliseconds(VaultPayload.date(milliseconds: value))
            #expect(once == (value > 0 ? limit : -limit))
            #expect(VaultPayload.milliseconds(VaultPayload.date(milliseconds: once)) == once, "stable after clamping")
        }
        for value: Int64 in [limit, -limit, limit - 2999, (1 << 47) + 3] {
            #expect(VaultPayload.milliseconds(VaultPayload.date(milliseconds: value)) == value)
        }
    }

    @Test("an item's creation time is unchanged when another item is written (finding 1, through the store)")
    func farTimestampSurvivesARewrite() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("far.lockbox")
        let key = SecretBytes(copying: (0..<32).map { UInt8($0) })
        let created: Int64 = VaultPayload.timestampLimit - 2999
        let item = VaultEntry(
            metadata: ItemMetadata(
                key: ItemKey(service: "s", account: "far"), kind: .generic, label: "",
                created: VaultPayload.date(milliseconds: created),
                modified: VaultPayload.date(milliseconds: created)),
            secret: SecretBytes(utf8: "x"))
        let built = try VaultVectorBuilder.build(
            .init(
                vaultID: Array(repeating: 1, count: 16), generation: 1, dataKey: SecretBytes(copying: Array(repeating: 2, count: 32)),
                bodyNonce: Array(repeating: 3, count: 24),
                slots: [.init(source: .key(key), salt: Array(repeating: 4, count: 16), nonce: Array(repeating: 5, count: 24))],
                entries: [item]))
        try Data(built.file).write(to: URL(fileURLWithPath: path.string))
        chmod(path.string, 0o600)

        // Another item is stored: the store re-encodes "far" from what it decoded.
        try EncryptedFileStore.open(at: path, credential: .key(key)).set(
            SecretBytes(utf8: "y"), for: ItemKey(service: "s", account: "other"), options: ItemOptions())
        let reopened = try EncryptedFileStore.open(at: path, credential: .key(key))
        let after = try #require(try reopened.metadata(ItemKey(service: "s", account: "far")))
        #expect(VaultPayload.milliseconds(after.created) == created)
    }

    // MARK: Findings 2 and 3: PIN records the decoder accepted but PinGuard trapped on

    /// Stores `record` as the PIN record of kids/max in a fresh vault, then runs `lockbox`
    /// with `arguments` (+ the vault options) and a PIN on standard input.
    func runPinCommand(record: String, _ arguments: [String]) throws -> (reason: Process.TerminationReason, status: Int32) {
        let folder = try TemporaryFolder()
        let vault = folder.file("v.lockbox").string
        let key = folder.file("v.key").string
        #expect(try runLockbox(["init", "--vault", vault, "--generate-key-file", key]).status == 0)
        #expect(
            try runLockbox(
                ["set", "--vault", vault, "--key-file", key, "--kind", "pin-hash", "kids", "pin:max"],
                stdin: Data(record.utf8)
            ).status == 0)
        let runtime = folder.file("run")
        mkdir(runtime.string, 0o700)
        let process = Process()
        process.executableURL = lockboxBinary
        process.arguments = arguments + ["--vault", vault, "--key-file", key, "kids", "max"]
        process.environment = [
            "PATH": "/usr/bin:/bin", "HOME": folder.path.string, "XDG_RUNTIME_DIR": runtime.string,
            "SWIFT_BACKTRACE": "enable=no",
        ]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        _ = ignoreBrokenPipes
        try? input.fileHandleForWriting.write(contentsOf: Data("4739\n".utf8))
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        return (process.terminationReason, process.terminationStatus)
    }

    @Test("a PIN record with an empty delay list is refused or handled, not a crash (finding 2)")
    func emptyDelayList() throws {
        let verify = try runPinCommand(
            record: #"{"hash":"x","lockout":{"delays":[],"disableAfter":100},"wipeItems":[],"failures":0,"disabled":false}"#,
            ["pin", "verify"])
        let status = try runPinCommand(
            record:
                #"{"hash":"x","lockout":{"delays":[],"disableAfter":100},"wipeItems":[],"failures":3,"lastAttempt":{"wall":0,"bootID":"b","sinceBoot":1},"disabled":false}"#,
            ["pin", "status"])
        // Fixed: LockoutPolicy decodes through its checking initialiser; the record is reported as undecodable.
        #expect(verify.reason == .exit, "lockbox pin verify died of a signal")
        #expect(status.reason == .exit, "lockbox pin status died of a signal")
        #expect(verify.status == 25 && status.status == 25, "undecodable item (25): verify \(verify.status), status \(status.status)")
    }

    @Test("a PIN record with the failure count at Int.max is refused or handled, not a crash (finding 3)")
    func failureCountAtTheLimit() throws {
        let verify = try runPinCommand(
            record:
                #"{"hash":"x","lockout":{"delays":[0],"disableAfter":100},"wipeItems":[],"failures":9223372036854775807,"disabled":false}"#,
            ["pin", "verify"])
        // Fixed: a failure count outside 0...100 makes the record undecodable instead of trapping.
        #expect(verify.reason == .exit, "lockbox pin verify died of a signal")
        #expect(verify.status == 25, "undecodable item (25), got \(verify.status)")
    }

    // MARK: Finding 4: recorded times lost their fractional seconds when the file was rewritten

    @Test("recording a profile keeps the other profiles' recorded times exactly (finding 4)")
    func settingsKeepFractionalSeconds() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("settings.json")
        let json = #"{"profiles":{"default":{"backend":"file","reason":"requested explicitly","recorded":"2026-01-02T03:04:05.5Z"}}}"#
        try Data(json.utf8).write(to: URL(fileURLWithPath: path.string))
        let before = try #require(try StoreSettings.load(from: path).profiles["default"])
        try StoreSettings.record(.secretService, for: "desktop", reason: "requested explicitly", at: path)
        let after = try #require(try StoreSettings.load(from: path).profiles["default"])
        // Fixed: the settings file keeps fractional seconds.
        #expect(after.recorded == before.recorded)
    }

    // MARK: Finding 5: recording a profile moved the other profiles' times down by a millisecond

    @Test("recording a profile keeps another profile's millisecond time exactly (finding 5)")
    func settingsKeepMilliseconds() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("settings.json")
        // A time as StoreSettings.record itself writes it.
        let json = #"{"profiles":{"default":{"backend":"file","reason":"requested explicitly","recorded":"2026-11-21T05:57:03.183Z"}}}"#
        try Data(json.utf8).write(to: URL(fileURLWithPath: path.string))
        let before = try #require(try StoreSettings.load(from: path).profiles["default"])
        try StoreSettings.record(.secretService, for: "desktop", reason: "requested explicitly", at: path)
        let after = try #require(try StoreSettings.load(from: path).profiles["default"])
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path.string)), as: UTF8.self)
        // Fixed: milliseconds are written as an integer, and read times are rounded to them.
        #expect(after.recorded == before.recorded)
        #expect(text.contains("2026-11-21T05:57:03.183Z"))
    }

    // MARK: Finding 6: a stored token record with an empty access token loaded, but could not be stored again

    @Test("a stored token record with an empty access token is undecodable, not a session (finding 6)")
    func emptyStoredAccessToken() throws {
        let key = ItemKey(service: "api", account: "alice")
        let record = #"{"access_token":"","token_type":"Bearer","expires_at_ms":1800003600000,"subject":"alice"}"#
        // Before the fix this loaded, and the session then failed to save after its first refresh.
        expectError(.undecodableItem(service: "api", account: "alice", reason: "it is not a Lockbox token set")) {
            _ = try TokenSet.decode(SecretBytes(utf8: record), key: key)
        }
        let store = MemoryStore()
        try store.set(SecretBytes(utf8: record), for: key, options: ItemOptions(kind: .token))
        #expect(throws: LockboxError.self) { _ = try TokenRefresher(store: store).load(service: "api", account: "alice") }
    }

    @Test("a token that is not UTF-8 text is refused when saved, never stored as something else")
    func nonTextTokensAreRefused() throws {
        let store = MemoryStore()
        let tokens = TokenRefresher(store: store)
        let binary = TokenSet(accessToken: SecretBytes(copying: [0xFF, 0xFE, 0x00]), tokenType: "Bearer")
        #expect(throws: LockboxError.self) { try tokens.save(binary, service: "api", account: "alice") }
        let binaryRefresh = TokenSet(accessToken: SecretBytes(utf8: "ok"), refreshToken: SecretBytes(copying: [0xC3]))
        #expect(throws: LockboxError.self) { try tokens.save(binaryRefresh, service: "api", account: "alice") }
        #expect(try store.get(ItemKey(service: "api", account: "alice")) == nil)
    }

    @Test("a token error response repeats only a well-formed RFC 6749 error code")
    func tokenErrorTextIsNotEchoed() {
        let known = caughtError { _ = try TokenSet(oauthResponse: Data(#"{"error":"invalid_client"}"#.utf8)) }
        #expect(String(describing: known).contains("invalid_client"))
        let odd = #"{"error":"token \"eyJhbGciOiJIUzI1NiJ9.secret\" rejected"}"#
        let echoed = caughtError { _ = try TokenSet(oauthResponse: Data(odd.utf8)) }
        #expect(echoed != nil)
        #expect(!String(describing: echoed).contains("eyJhbGciOiJIUzI1NiJ9"))
        // A short token-like value is not a code either, even without spaces or quotes.
        let tokenLike = caughtError { _ = try TokenSet(oauthResponse: Data(#"{"error":"Xk29Pq"}"#.utf8)) }
        #expect(!String(describing: tokenLike).contains("Xk29Pq"))
        // A null expires_in means "not given" (RFC 6749 makes it optional), not an error.
        let tokens = try? TokenSet(oauthResponse: Data(#"{"access_token":"a","token_type":"Bearer","expires_in":null}"#.utf8))
        #expect(tokens?.expiresAt == nil && tokens != nil)
    }
}
