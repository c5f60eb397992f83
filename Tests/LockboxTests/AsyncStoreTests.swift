import Foundation
import LockboxTesting
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// Runs `body` on a thread of its own (not the cooperative pool) and returns its result: how the
/// tests call the blocking API, as the CLI does.
func onPlainThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result(catching: body)) }.start()
    }
}

@Suite("Async stores: Vault, PinGuard, TokenRefresher, DeviceIdentity, Transfer and SignOut over an AsyncSecretStore")
struct AsyncStoreTests {
    let folder: TemporaryFolder
    init() throws { folder = try TemporaryFolder() }

    @Test("a vault over a suspending store: set, get, list, delete, async and blocking alike; the async path starts no executor thread")
    func vaultOverAsyncStore() async throws {
        let store = SuspendingStore()
        store.setLatency(.milliseconds(1))
        let executor = BlockingExecutor(threadCount: 2)
        let vault = Vault(store: store, executor: executor)
        try await vault.set("s3cret", service: "svc", account: "alice")
        #expect(try await vault.string(service: "svc", account: "alice") == "s3cret")
        #expect(try await vault.list(service: "svc").map(\.key.account) == ["alice"])
        #expect(store.faults.calls(.set) == 1 && store.faults.calls(.item) == 1 && store.faults.calls(.list) == 1)
        #expect(executor.statistics.threads == 0, "an async store is awaited, never offloaded to a thread")

        // The blocking methods run the same code on the calling thread, awaiting the same store.
        let read = try await onPlainThread { () throws -> String? in
            try vault.set("b10cking", service: "svc", account: "bob")
            return try vault.string(service: "svc", account: "bob")
        }
        #expect(read == "b10cking")
        #expect(store.faults.calls(.set) == 2)
        #expect(try await vault.delete(service: "svc", account: "alice"))
        #expect(try await vault.get(service: "svc", account: "alice") == nil)
        #expect(executor.statistics.threads == 0)

        // A store failure reaches the caller with its code, on both paths.
        store.faults.failCall(1, of: .set, with: LockboxError.io(operation: "writing", path: "db", errno: .noSpace))
        #expect(await caughtError { try await vault.set("x", service: "svc", account: "carol") }?.code == .ioFailure)
        store.faults.actLocked()
        let lockedCode = try await onPlainThread { caughtError { try vault.get(service: "svc", account: "bob") }?.code }
        #expect(lockedCode == .keyringLocked)
        store.faults.actLocked(false)
        // The blocking view of the async store is the same store.
        #expect(try store.blocking().get(ItemKey(service: "svc", account: "bob"))?.stringValue() == "b10cking")
    }

    @Test("PIN set, verify, wrong tries, lockout refusal and reset through a suspending store; a failed count write is the store's error")
    func pinGuardOverAsyncStore() async throws {
        let store = SuspendingStore()
        let executor = BlockingExecutor(threadCount: 2)
        let pins = PinGuard(store: store, preset: .testingServer, lockDirectory: folder.file("locks"), executor: executor)
        let profile = PinProfile(service: "svc", name: "alice")
        try await pins.set(profile, pin: pin("4739"), lockout: LockoutPolicy(delays: [0, 0, 3600]))
        try await pins.verify(profile, pin: pin("4739"))
        #expect(await caughtError { try await pins.verify(profile, pin: pin("0000")) }?.code == .wrongPin)
        // The blocking verify awaits the same store on its own thread, and counts the same way.
        let blockingCode = try await onPlainThread { caughtError { try pins.verify(profile, pin: pin("0001")) }?.code }
        #expect(blockingCode == .wrongPin)
        #expect(try await pins.status(profile).failures == 2)
        #expect(await caughtError { try await pins.verify(profile, pin: pin("0002")) }?.code == .wrongPin)
        // Locked out: refused from one read, with no hash and no write.
        let writesBefore = store.faults.writeCalls
        #expect(await caughtError { try await pins.verify(profile, pin: pin("4739")) }?.code == .pinLockedOut)
        #expect(store.faults.writeCalls == writesBefore)
        try await pins.reset(profile)
        #expect(try await pins.status(profile).failures == 0)

        // Server preset: the wrong try's count is its one write; when that write fails the caller
        // gets the store's error, and the count is not lost silently as a success would be.
        store.faults.failCall(1, of: .set, with: LockboxError.io(operation: "writing", path: "db", errno: .noSpace))
        #expect(await caughtError { try await pins.verify(profile, pin: pin("0000")) }?.code == .ioFailure)
        try await pins.verify(profile, pin: pin("4739"))
        #expect(try await pins.remove(profile))
        #expect(await caughtError { try await pins.verify(profile, pin: pin("4739")) }?.code == .pinNotSet)
    }

    @Test("20 verifies waiting on a store that holds its answers hold no executor thread, and the cooperative pool stays free")
    func verifiesWaitingOnTheStoreHoldNoThread() async throws {
        let store = SuspendingStore()
        let executor = BlockingExecutor(threadCount: 2)
        let pins = PinGuard(store: store, preset: .testingServer, lockDirectory: folder.file("locks"), executor: executor)
        let profiles = (0..<20).map { PinProfile(service: "svc", name: "user\($0)") }
        for profile in profiles { try await pins.set(profile, pin: pin("4739")) }

        store.holdAnswers()
        let verifies = profiles.map { profile in Task.immediate { try await pins.verify(profile, pin: pin("4739")) } }
        #expect(await eventually { store.callsWaiting == 20 }, "every verify is waiting for the store's answer")
        #expect(await eventually { executor.statistics.running == 0 }, "no thread is blocked on the store")
        let steps = await trivialTaskSteps()
        #expect(steps == 1_000)
        store.releaseAnswers()
        for verify in verifies { try await verify.value }
        #expect(store.callsWaiting == 0)
    }

    @Test("a token refresh through a suspending store runs once for 10 concurrent callers; a rejected refresh clears the tokens")
    func tokenRefreshOverAsyncStore() async throws {
        let store = SuspendingStore()
        store.setLatency(.milliseconds(2))
        let tokens = TokenRefresher(store: store, lockDirectory: folder.file("token-locks"), executor: BlockingExecutor(threadCount: 2))
        let expired = TokenSet(
            accessToken: SecretBytes(utf8: "old"), refreshToken: SecretBytes(utf8: "rt"), expiresAt: Date().addingTimeInterval(-10))
        try await tokens.save(expired, service: "api", account: "alice")
        let refreshes = Locked(0)
        let results = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    try await tokens.validAccessToken(service: "api", account: "alice") { current in
                        refreshes.withLock { $0 += 1 }
                        return TokenSet(
                            accessToken: SecretBytes(utf8: "new"), refreshToken: current.refreshToken,
                            expiresAt: Date().addingTimeInterval(3600))
                    }.stringValue()
                }
            }
            return try await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: "new", count: 10))
        #expect(refreshes.withLock { $0 } == 1)
        #expect(try await tokens.load(service: "api", account: "alice")?.accessToken.stringValue() == "new")
        let blockingLoad = try await onPlainThread { try tokens.load(service: "api", account: "alice")?.accessToken.stringValue() }
        #expect(blockingLoad == "new")

        // The refresh's write fails: the error is passed on and the old tokens are kept.
        try await tokens.save(expired, service: "api", account: "bob")
        store.faults.failCall(1, of: .set, with: LockboxError.io(operation: "writing", path: "db", errno: .noSpace))
        let failed = await caughtError {
            try await tokens.validAccessToken(service: "api", account: "bob") { _ in
                TokenSet(accessToken: SecretBytes(utf8: "lost"), expiresAt: Date().addingTimeInterval(3600))
            }
        }
        #expect(failed?.code == .ioFailure)
        #expect(try await tokens.load(service: "api", account: "bob")?.accessToken.stringValue() == "old")

        let rejected = await caughtError {
            try await tokens.validAccessToken(service: "api", account: "bob") { _ in throw TokenRefreshError.rejected("invalid_grant") }
        }
        #expect(rejected?.code == .sessionExpired)
        #expect(try await tokens.load(service: "api", account: "bob") == nil)
        #expect(try await tokens.clear(service: "api", account: "alice"))
    }

    @Test("get-or-create through a suspending store: 10 concurrent first uses and a blocking one make one device ID")
    func deviceIDOverAsyncStore() async throws {
        let store = SuspendingStore()
        store.setLatency(.milliseconds(1))
        let devices = DeviceIdentity(store: store, lockDirectory: folder.file("id-locks"), executor: BlockingExecutor(threadCount: 2))
        let ids = try await withThrowingTaskGroup(of: UUID.self) { group in
            for _ in 0..<10 { group.addTask { try await devices.deviceID(service: "app") } }
            return try await group.reduce(into: Set<UUID>()) { $0.insert($1) }
        }
        #expect(ids.count == 1)
        #expect(store.faults.calls(.set) == 1, "one ID was created, once")
        let blocking = try await onPlainThread { try devices.deviceID(service: "app") }
        #expect(ids == [blocking])
        let guest = try await devices.guestID(service: "app", name: "kiosk")
        #expect(try await devices.guestID(service: "app", name: "kiosk") == guest)
        let renewed = try await devices.reset(service: "app")
        #expect(renewed != blocking)
        #expect(try await devices.deviceID(service: "app") == renewed)
        // A failing store read is an error, not a new ID.
        store.faults.failCall(1, of: .get, with: LockboxError.keyringLocked(collection: "db"))
        #expect(await caughtError { try await devices.deviceID(service: "app") }?.code == .keyringLocked)
        #expect(try await devices.deviceID(service: "app") == renewed)
    }

    @Test("transfer between suspending stores, and sign-out from one")
    func transferAndSignOutOverAsyncStores() async throws {
        let source = SuspendingStore()
        let destination = SuspendingStore()
        let vault = Vault(store: source)
        for account in ["a", "b", "c"] { try await vault.set("secret-" + account, service: "svc", account: account) }
        _ = try await DeviceIdentity(store: source).deviceID(service: "svc")
        let report = try await Transfer.run(from: source, to: destination, service: "svc")
        #expect(report.copied.count == 4)
        #expect(try await Vault(store: destination).string(service: "svc", account: "b") == "secret-b")
        let again = try await Transfer.run(from: source, to: destination, service: "svc")
        #expect(again.alreadyPresent.count == 4 && again.copied.isEmpty)

        let signOut = try await SignOut.run(service: "svc", store: source, keepDeviceID: true)
        #expect(signOut.removed.count == 3 && signOut.kept.map(\.kind) == [.deviceID])
        #expect(try await source.list(service: "svc").count == 1)
    }
}
