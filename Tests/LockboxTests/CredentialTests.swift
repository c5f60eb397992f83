import Foundation
import Synchronization
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// A clock tests set by hand.
final class FixedDate: Sendable {
    private let date = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var read: @Sendable () -> Date { { [self] in date.withLock { $0 } } }
    func advance(_ seconds: Double) { date.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// A thread-safe counter closures can capture.
final class Counter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

@Suite("Tokens, device identity and sign-out")
struct CredentialTests {
    let folder: TemporaryFolder
    let store: EncryptedFileStore
    let clock = FixedDate()

    init() throws {
        folder = try TemporaryFolder()
        let key = folder.file("k")
        try KeyFile.generate(at: key)
        store = try EncryptedFileStore.create(at: folder.file("v.lockbox"), credentials: [.keyFile(key)])
    }

    func tokens(leeway: Duration = .seconds(60)) -> TokenRefresher {
        TokenRefresher(store: store, leeway: leeway, now: clock.read, lockDirectory: folder.file("locks"))
    }

    @Test("an OAuth response becomes one item with an absolute expiry; nothing prints a token")
    func oauthParsing() throws {
        let tokens = tokens()
        try tokens.save(oauthResponse: oauth("at-1", expiresIn: 120), service: "api", account: "alice", subject: "u-42")
        let loaded = try #require(try tokens.load(service: "api", account: "alice"))
        #expect(loaded.accessToken == SecretBytes(utf8: "at-1"))
        #expect(loaded.refreshToken == SecretBytes(utf8: "rt"))
        #expect(loaded.expiresAt == clock.read().addingTimeInterval(120))
        #expect(loaded.scope == "read write" && loaded.subject == "u-42" && loaded.tokenType == "Bearer")
        #expect(!"\(loaded)".contains("at-1") && !String(reflecting: loaded).contains("at-1"))
        #expect(try store.list(service: "api").count == 1)
        #expect(try store.metadata(ItemKey(service: "api", account: "alice"))?.kind == .token)
        for bad in [
            #"{"token_type":"Bearer"}"#, #"{"access_token":"a"}"#, #"{"access_token":"a","token_type":"B","expires_in":"soon"}"#, "[1]",
        ] {
            #expect(throws: LockboxError.self) { try TokenSet(oauthResponse: Data(bad.utf8)) }
        }
        #expect(throws: TokenRefreshError.self) { try TokenSet(oauthResponse: Data(#"{"error":"invalid_grant"}"#.utf8)) }
    }

    @Test("100 concurrent callers with an expired token cause exactly one refresh")
    func singleFlight() async throws {
        let tokens = tokens()
        try await tokens.save(oauthResponse: oauth("old", expiresIn: 30), service: "api", account: "alice")
        let calls = Counter()
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    let token = try await tokens.validAccessToken(service: "api", account: "alice") { current in
                        calls.increment()
                        try await Task.sleep(for: .milliseconds(200))
                        return TokenSet(
                            accessToken: SecretBytes(utf8: "new"), refreshToken: current.refreshToken,
                            expiresAt: Date(timeIntervalSince1970: 1_800_003_600))
                    }
                    return token.stringValue() ?? ""
                }
            }
            var all: [String] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(calls.count == 1)
        #expect(results == [String](repeating: "new", count: 100))
        #expect(try await tokens.load(service: "api", account: "alice")?.accessToken == SecretBytes(utf8: "new"))
    }

    @Test("a token the server rejected (401) is refreshed once for every caller that saw it")
    func refreshAfterRejection() async throws {
        let tokens = tokens()
        try await tokens.save(oauthResponse: oauth("rejected", expiresIn: 3600), service: "api", account: "alice")
        let calls = Counter()
        let refresher: @Sendable (TokenSet) async throws -> TokenSet = { _ in
            calls.increment()
            try await Task.sleep(for: .milliseconds(100))
            return TokenSet(accessToken: SecretBytes(utf8: "renewed"), expiresAt: Date(timeIntervalSince1970: 1_900_000_000))
        }
        let results = try await withThrowingTaskGroup(of: SecretBytes.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    try await tokens.accessToken(
                        afterRejecting: SecretBytes(utf8: "rejected"), service: "api", account: "alice", refresh: refresher)
                }
            }
            var all: [SecretBytes] = []
            for try await token in group { all.append(token) }
            return all
        }
        #expect(calls.count == 1)
        #expect(results.allSatisfy { $0 == SecretBytes(utf8: "renewed") })
        // A late caller still holding the old rejected token gets the new one without a refresh.
        #expect(
            try await tokens.accessToken(
                afterRejecting: SecretBytes(utf8: "rejected"), service: "api", account: "alice", refresh: refresher)
                == SecretBytes(utf8: "renewed"))
        #expect(calls.count == 1)
    }

    @Test("the leeway decides when a token counts as expired")
    func leeway() async throws {
        try await tokens().save(oauthResponse: oauth("at", expiresIn: 30), service: "api", account: "alice")
        let refreshed = Counter()
        let refresher: @Sendable (TokenSet) async throws -> TokenSet = { _ in
            refreshed.increment()
            return TokenSet(accessToken: SecretBytes(utf8: "fresh"), expiresAt: Date(timeIntervalSince1970: 1_900_000_000))
        }
        #expect(
            try await tokens(leeway: .seconds(10)).validAccessToken(service: "api", account: "alice", refresh: refresher)
                == SecretBytes(utf8: "at"))
        #expect(refreshed.count == 0)
        #expect(
            try await tokens(leeway: .seconds(60)).validAccessToken(service: "api", account: "alice", refresh: refresher)
                == SecretBytes(utf8: "fresh"))
        #expect(refreshed.count == 1)
    }

    @Test("a rejected refresh clears the tokens (session expired); a transient failure keeps them")
    func refreshFailures() async throws {
        let tokens = tokens()
        let events = tokens.events()
        try await tokens.save(oauthResponse: oauth("at", expiresIn: 0), service: "api", account: "alice")
        struct Offline: Error {}
        await #expect(throws: Offline.self) {
            _ = try await tokens.validAccessToken(service: "api", account: "alice") { _ in throw Offline() }
        }
        #expect(try await tokens.load(service: "api", account: "alice") != nil, "a network failure keeps the tokens")
        do {
            _ = try await tokens.validAccessToken(service: "api", account: "alice") { _ in throw TokenRefreshError.rejected("revoked") }
            Issue.record("expected sessionExpired")
        } catch let error as LockboxError {
            #expect(error == .sessionExpired(service: "api", account: "alice"))
        }
        #expect(try await tokens.load(service: "api", account: "alice") == nil)
        await #expect(throws: LockboxError.self) {
            _ = try await tokens.validAccessToken(service: "api", account: "alice") { $0 }
        }
        var seen: [SessionEvent] = []
        for await event in events {
            seen.append(event)
            if seen.count == 2 { break }
        }
        let key = ItemKey(service: "api", account: "alice")
        #expect(seen == [.signedIn(key), .signedOut(key)])
    }

    @Test("processes racing on an expired token call the refresher once")
    func crossProcessRefresh() async throws {
        let env = [
            "LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("k").string,
            "XDG_CONFIG_HOME": folder.file("config").string, "XDG_RUNTIME_DIR": folder.file("run").string,
        ]
        try FileManager.default.createDirectory(
            atPath: folder.file("run").string, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        #expect(
            try runLockbox(["token", "set", "api", "alice"], stdin: oauth("at-0", expiresIn: 0, refresh: "rt-0"), environment: env).status
                == 0)
        let counter = folder.file("calls").string
        let refresher = folder.file("refresh.sh").string
        try """
        #!/bin/sh
        read old
        echo "$old" >> '\(counter)'
        sleep 0.5
        printf '{"access_token":"at-new","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-new"}'
        """.write(toFile: refresher, atomically: true, encoding: .utf8)
        // Run by `sh`, which opens it for reading, rather than executed itself: a process another
        // test forks while this file's write descriptor is open inherits it, and executing the
        // file while that child holds it fails with ETXTBSY ("Text file busy").
        let refreshCommand = "/bin/sh '\(refresher)'"
        let outputs = await withTaskGroup(of: String.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    (try? runLockbox(["token", "get", "api", "alice", "--refresh-with", refreshCommand], environment: env))?.stdoutString
                        ?? "failed"
                }
            }
            var all: [String] = []
            for await output in group { all.append(output) }
            return all
        }
        #expect(outputs == [String](repeating: "at-new", count: 4))
        let calls = try String(contentsOfFile: counter, encoding: .utf8).split(separator: "\n")
        #expect(calls == ["rt-0"], "one refresh, which got the refresh token on stdin")
        // The refreshed set is stored: an hour left (the refresher said 3600 s), and a refresh token.
        let status = try runLockbox(["token", "status", "api", "alice", "--json"], environment: env)
        let report = status.jsonObject
        #expect((report?["expiresInSeconds"] as? Int).map { (3000...3600).contains($0) } == true, "\(status.stdoutString)")
        #expect(report?["refreshToken"] as? Bool == true && report?["tokenType"] as? String == "Bearer", "\(status.stdoutString)")
        #expect(!status.stdoutString.contains("at-new") && !status.stdoutString.contains("rt-new"), "never a token")
    }

    @Test("a refresher that fails, or is killed by a signal, is exit 51 with its status or signal; the tokens are kept")
    func failingRefresher() throws {
        let env = [
            "LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("k").string,
            "XDG_CONFIG_HOME": folder.file("config").string, "XDG_RUNTIME_DIR": folder.file("run").string,
        ]
        try FileManager.default.createDirectory(
            atPath: folder.file("run").string, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        #expect(
            try runLockbox(["token", "set", "api", "bob"], stdin: oauth("at-0", expiresIn: 0, refresh: "rt-0"), environment: env).status
                == 0)
        for (command, detail) in [("cat >/dev/null; exit 4", "exited with status 4"), ("kill -9 $$", "was killed by signal 9")] {
            let result = try runLockbox(["token", "get", "api", "bob", "--refresh-with", command], environment: env)
            #expect(result.status == 51 && result.stderr.contains("lockbox: error[refresh-failed]: "), "\(command): \(result.stderr)")
            #expect(result.stderr.contains("the refresh command \(detail)") && !result.stderr.contains("rt-0"), "\(result.stderr)")
        }
        let kept = try runLockbox(["token", "status", "api", "bob", "--json"], environment: env)
        #expect(kept.status == 0 && kept.jsonObject?["refreshToken"] as? Bool == true, "\(kept.stdoutString)")
    }

    @Test("8 processes asking for a device ID for the first time all get the same one")
    func deviceIDRace() async throws {
        let env = [
            "LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("k").string,
            "XDG_CONFIG_HOME": folder.file("config").string, "XDG_RUNTIME_DIR": folder.file("run").string,
        ]
        try FileManager.default.createDirectory(
            atPath: folder.file("run").string, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let ids = await withTaskGroup(of: String.self) { group in
            for _ in 0..<8 {
                group.addTask { (try? runLockbox(["device-id", "game"], environment: env))?.stdoutString ?? "failed" }
            }
            var all: [String] = []
            for await id in group { all.append(id.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return all
        }
        #expect(Set(ids).count == 1)
        #expect(UUID(uuidString: ids[0]) != nil)
        let again = try runLockbox(["device-id", "game"], environment: env).stdoutString.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(again == ids[0])
        let reset = try runLockbox(["device-id", "game", "--reset", "--yes"], environment: env).stdoutString.trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(reset != ids[0])
    }

    @Test("device and guest IDs are stable; sign-out clears everything but a kept device ID")
    func identityAndSignOut() throws {
        let identity = DeviceIdentity(store: store, lockDirectory: folder.file("locks"))
        let device = try identity.deviceID(service: "kids")
        #expect(try identity.deviceID(service: "kids") == device)
        let guest = try identity.guestID(service: "kids", name: "player1")
        #expect(try guest != device && identity.guestID(service: "kids", name: "player1") == guest)
        try tokens().save(oauthResponse: oauth("at"), service: "kids", account: "parent")
        let pins = PinGuard(store: store, hashParameters: cheapHash, lockDirectory: folder.file("locks"))
        try pins.set(PinProfile(service: "kids", name: "max"), pin: pin("4739"))
        try Vault(store: store).set("secret", service: "kids", account: "protected", access: .freshAuthentication)
        try Vault(store: store).set("other app", service: "other", account: "x")
        var report = try SignOut.run(service: "kids", store: store, keepDeviceID: true)
        #expect(Set(report.removed.map(\.account)) == ["guest:player1", "parent", "pin:max", "protected"])
        #expect(report.kept.map(\.account) == ["device-id"])
        #expect(try identity.deviceID(service: "kids") == device)
        report = try SignOut.run(service: "kids", store: store)
        #expect(report.removed.map(\.account) == ["device-id"])
        #expect(try store.list(service: "kids").isEmpty)
        #expect(try store.list(service: "other").count == 1)
    }
}

@Suite("Key file decoding")
struct KeyFileDecodingTests {
    @Test("64 hex digits in either case, with or without a line end, decode through sodium_hex2bin; anything else is refused")
    func hexKeyFiles() {
        let key = (0..<32).map { UInt8($0 * 7 + 3) }
        let lower = key.hexString
        let upper = key.hexString.uppercased()
        for text in [lower, upper, lower + "\n", upper + "\r\n"] {
            #expect(KeyFile.decode(SecretBytes(utf8: text)) == SecretBytes(copying: key), "\(text.debugDescription)")
        }
        let raw = SecretBytes(copying: key)
        #expect(KeyFile.decode(raw) == raw, "32 raw bytes are the key")
        var notHex = Array(lower.utf8)
        notHex[40] = UInt8(ascii: "g")
        for bad in [
            String(decoding: notHex, as: UTF8.self), String(lower.dropLast()), lower + "0", " " + String(lower.dropFirst()),
            String(lower.dropLast(2)) + "\n\n", lower + ":",
        ] {
            #expect(KeyFile.decode(SecretBytes(utf8: bad)) == nil, "\(bad.debugDescription)")
        }
    }
}
