import Foundation
import LockboxTesting
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

@Suite("Server PIN preset, refusals without waiting, the test kit's fault-injecting store")
struct ServerPinTests {
    let folder: TemporaryFolder
    let profile = PinProfile(service: "svc", name: "alice")
    init() throws { folder = try TemporaryFolder() }

    let diskFull = LockboxError.io(operation: "writing the vault", path: "/test", errno: .noSpace)

    @Test("the server preset is OWASP's m=19 MiB, t=2, p=1 with one write per verify; calibration never goes below it")
    func serverPresetFigures() throws {
        #expect(PinPreset.server.hashParameters.memoryLimitBytes == 19_456 * 1024)
        #expect(PinPreset.server.hashParameters.opsLimit == 2)
        #expect(PinPreset.server.failureRecording == .afterComparing)
        #expect(PinPreset.desktop.hashParameters == PinGuard.defaultHashParameters)
        #expect(PinPreset.desktop.failureRecording == .beforeComparing)
        let calibrated = try PinPreset.calibratedServer(target: 0.000_001)
        #expect(calibrated.hashParameters == PinPreset.server.hashParameters)
        expectError(.invalidArgument("the calibration target must be a positive number of seconds")) {
            try PinPreset.calibratedServer(target: .nan)
        }
    }

    @Test("server preset: at most one durable write per verify; desktop: two for a right PIN")
    func writesPerVerify() throws {
        let store = FaultInjectingStore()
        let server = PinGuard(store: store, preset: .testingServer)
        try server.set(profile, pin: pin("4739"))
        store.resetCounts()
        try server.verify(profile, pin: pin("4739"))
        #expect(store.writeCalls == 0, "a right PIN with no failures before it writes nothing")
        #expect(outcome { try server.verify(profile, pin: pin("0000")) } == "wrong(1)")
        #expect(store.writeCalls == 1)
        try server.verify(profile, pin: pin("4739"))
        #expect(store.writeCalls == 2, "the success after a failure writes the reset, once")
        #expect(try server.status(profile).failures == 0)

        let desktop = PinGuard(store: store, preset: .testingDesktop)
        store.resetCounts()
        try desktop.verify(profile, pin: pin("4739"))
        #expect(store.writeCalls == 2, "desktop: the count before comparing, the reset after")
    }

    @Test("desktop: a store failure while counting the try stops the verify before the PIN is compared")
    func countWriteFailureStopsVerify() throws {
        let store = FaultInjectingStore()
        let counter = CountingHasher()
        let pins = PinGuard(store: store, hashParameters: .testing, hasher: counter.hasher)
        try pins.set(profile, pin: pin("4739"))
        store.failCall(1, of: .set, with: diskFull)
        expectError(diskFull) { try pins.verify(profile, pin: pin("4739")) }
        #expect(counter.verifications == 0, "nothing is compared unless the try was counted")
        try pins.verify(profile, pin: pin("4739"))
        #expect(counter.verifications == 1)
    }

    @Test("a refusal while locked out: no hash, no write, and no wait behind a verify holding the lock", arguments: [true, false])
    func refusalDoesNotWait(server: Bool) async throws {
        let store = FaultInjectingStore()
        let gate = Gate()
        let counter = CountingHasher()
        let clock = TestClock()
        let heldClock = TestClock()
        let lockout = try LockoutPolicy(delays: [60])
        let recording: PinPreset.FailureRecording = server ? .afterComparing : .beforeComparing
        let refusing = PinGuard(store: store, hashParameters: .testing, clock: clock, hasher: counter.hasher, failureRecording: recording)
        try await refusing.set(profile, pin: pin("4739"), lockout: lockout)
        if server {
            // One wrong try locks the profile for 60 s; the verify that will hold the lock reads a
            // clock 61 s later, so it gets past the refusal and into the comparison.
            #expect(outcome { try refusing.verify(profile, pin: pin("0000")) } == "wrong(1,locked)")
            heldClock.advance(61)
        }
        // Desktop: the holder's own try, counted before its comparison, starts the lockout.
        // Its own executor: a hash parked at the gate holds a hash slot, and the shared executor's
        // slots (one on 2 cores) are the other tests' too.
        let holder = PinGuard(
            store: store, hashParameters: .testing, clock: server ? heldClock : clock, hasher: gate.hasher,
            failureRecording: recording, executor: BlockingExecutor())
        let watchdog = Watchdog(opening: gate)
        let holding = Thread { _ = try? holder.verify(profile, pin: pin("0000")) }
        holding.start()
        #expect(gate.waitForEntered(1))

        store.resetCounts()
        let hashesBefore = (counter.hashes, counter.verifications)
        // The blocking refusal, on this thread: no cooperative pool involved.
        #expect(outcome { try refusing.verify(profile, pin: pin("4739")) }.hasPrefix("lockedOut"))
        #expect(gate.counts.inside == 1, "the refusal came while the other verify still held the lock")
        #expect(store.writeCalls == 0, "a refusal writes nothing")
        #expect(!watchdog.firedValue)
        // The async refusal. In the full suite other tests can keep the cooperative pool busy for
        // minutes, long enough for the watchdog to open the gate; then only the outcome and the
        // absence of hashing are judged (the blocking refusal above proved the no-wait path).
        do {
            try await refusing.verify(profile, pin: pin("4739"))
            Issue.record("the async verify was not refused")
        } catch LockboxError.pinLockedOut {}
        if !watchdog.firedValue {
            #expect(gate.counts.inside == 1, "the async refusal came while the other verify still held the lock")
            #expect(store.writeCalls == 0, "a refusal writes nothing")
        }
        #expect((counter.hashes, counter.verifications) == hashesBefore, "a refusal hashes nothing")
        watchdog.finish()
        gate.open()
    }

    @Test("over a MemoryStore the item locks are in-process only: no lock file, threads and tasks take turns")
    func memoryStoreLocksWriteNoFiles() async throws {
        let store = MemoryStore()
        let gate = Gate()
        // Its own executor, so the hash parked at the gate holds none of the shared executor's slots.
        let pins = PinGuard(store: store, hashParameters: .testing, hasher: gate.hasher, executor: BlockingExecutor())
        #expect(pins.profileLock.directory == nil)
        #expect(TokenRefresher(store: store).lock.directory == nil)
        #expect(DeviceIdentity(store: store).lock.directory == nil)
        #expect(DeviceIdentity(store: FaultInjectingStore()).lock.directory == nil, "the fault-injecting store forwards the answer")
        #expect(DeviceIdentity(store: FaultInjectingStore(wrapping: try KeyFileVault().store)).lock.directory != nil)

        try await pins.set(profile, pin: pin("4739"))
        let blocking = Thread { _ = try? pins.verify(profile, pin: pin("4739")) }
        blocking.start()
        #expect(await eventually { gate.counts.inside == 1 })
        let waiting = Task { try await pins.verify(profile, pin: pin("4739")) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(gate.counts.entered == 1, "the task waits for the thread's lock")
        gate.open()
        try await waiting.value
        #expect(gate.counts.entered == 2 && gate.counts.peak == 1)
    }

    @Test("the fault-injecting store fails the Nth call, acts locked, adds latency and counts calls")
    func faultInjectingStore() async throws {
        let store = FaultInjectingStore()
        let vault = Vault(store: store)
        store.failCall(2, of: .set, with: diskFull)
        try await vault.set("one", service: "svc", account: "a")
        expectError(diskFull) { try vault.set("two", service: "svc", account: "b") }
        try await vault.set("three", service: "svc", account: "c")
        #expect(store.calls(.set) == 3)
        #expect(try await vault.list(service: "svc").count == 2)

        store.actLocked()
        expectError(.keyringLocked(collection: "FaultInjectingStore")) { try vault.get(service: "svc", account: "a") }
        await #expect(throws: LockboxError.keyringLocked(collection: "FaultInjectingStore")) {
            try await vault.get(service: "svc", account: "a")
        }
        store.actLocked(false)

        store.failCall(1, with: diskFull)
        expectError(diskFull) { try vault.list() }
        store.setLatency(.milliseconds(1))
        #expect(try await vault.string(service: "svc", account: "a") == "one")
        store.setLatency(.zero)

        // A token refresh whose write fails passes the error on and keeps the old tokens.
        let tokens = TokenRefresher(store: store)
        let expired = TokenSet(
            accessToken: SecretBytes(utf8: "old"), refreshToken: SecretBytes(utf8: "r"), expiresAt: Date(timeIntervalSinceNow: -10))
        try await tokens.save(expired, service: "api", account: "alice")
        store.failCall(1, of: .set, with: diskFull)
        await #expect(throws: diskFull) {
            _ = try await tokens.validAccessToken(service: "api", account: "alice") { _ in
                TokenSet(accessToken: SecretBytes(utf8: "new"), expiresAt: Date(timeIntervalSinceNow: 3600))
            }
        }
        #expect(try await tokens.load(service: "api", account: "alice")?.accessToken == SecretBytes(utf8: "old"))
    }
}
