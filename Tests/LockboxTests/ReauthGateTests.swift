import Foundation
import Synchronization
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// A monotonic clock the test moves by hand.
final class ManualClock: Sendable {
    private let seconds = Mutex<Double>(100)
    var read: ReauthGate.Clock { { [self] in seconds.withLock { $0 } } }
    func advance(_ delta: Double) { seconds.withLock { $0 += delta } }
}

@Suite("Re-authentication windows (in process)")
struct ReauthGateTests {
    @Test("a window opens after a PIN, expires after the absolute timeout, and lock() closes it")
    func opensAndExpires() throws {
        let f = try PinFixture()
        try f.guardian.set(f.profile, pin: pin("4739"))
        let clock = ManualClock()
        let gate = ReauthGate(absoluteTimeout: .seconds(300), clock: clock.read)
        #expect(throws: LockboxError.self) { try gate.requireFreshAuthentication() }
        #expect(throws: LockboxError.self) { try gate.open(verifying: pin("0000"), for: f.profile, with: f.guardian) }
        #expect(!gate.isOpen, "a wrong PIN opens nothing")
        try gate.open(verifying: pin("4739"), for: f.profile, with: f.guardian)
        try gate.requireFreshAuthentication()
        clock.advance(299)
        try gate.requireFreshAuthentication()
        #expect(gate.remaining == .seconds(1))
        clock.advance(1)
        #expect(throws: LockboxError.self) { try gate.requireFreshAuthentication() }
        try gate.open(verifying: pin("4739"), for: f.profile, with: f.guardian)
        gate.lock()
        #expect(throws: LockboxError.self) { try gate.requireFreshAuthentication() }
    }

    @Test("an idle timeout closes an unused window; use extends it, up to the absolute limit")
    func idleTimeout() throws {
        let clock = ManualClock()
        let gate = ReauthGate(absoluteTimeout: .seconds(1800), idleTimeout: .seconds(60), clock: clock.read)
        try gate.open { "credential" }
        for _ in 0..<10 {
            clock.advance(59)
            try gate.requireFreshAuthentication()  // each use extends the idle window
        }
        clock.advance(61)
        #expect(throws: LockboxError.self) { try gate.requireFreshAuthentication() }
        try gate.open { "credential" }
        for _ in 0..<32 {
            clock.advance(59)
            _ = try? gate.requireFreshAuthentication()
        }
        #expect(!gate.isOpen, "never beyond the absolute timeout")
    }

    @Test("changing or removing the PIN closes windows it opened")
    func pinChangeCloses() throws {
        let f = try PinFixture()
        try f.guardian.set(f.profile, pin: pin("4739"))
        let gate = ReauthGate()
        try gate.open(verifying: pin("4739"), for: f.profile, with: f.guardian)
        try f.guardian.change(f.profile, from: pin("4739"), to: pin("8316"))
        #expect(throws: LockboxError.self) { try gate.requireFreshAuthentication() }
        try gate.open(verifying: pin("8316"), for: f.profile, with: f.guardian)
        try f.guardian.remove(f.profile)
        #expect(throws: LockboxError.self) { try gate.requireFreshAuthentication() }
    }

    @Test("changing the vault passphrase closes windows it opened")
    func passphraseChangeCloses() throws {
        let fixture = try KeyFileVault(passphrase: "old pass")
        let gate = ReauthGate()
        #expect(throws: LockboxError.self) { try gate.open(verifyingPassphrase: secret("nope"), of: fixture.store) }
        try gate.open(verifyingPassphrase: secret("old pass"), of: fixture.store)
        try gate.requireFreshAuthentication()
        try fixture.store.changePassphrase(to: secret("new pass"), kdf: testKDF, slot: 1)
        #expect(throws: LockboxError.self) { try gate.requireFreshAuthentication() }
    }

    @Test("the fallback chain: window, then PIN (with its lockout), then passphrase")
    func fallbackChain() throws {
        let fixture = try KeyFileVault(passphrase: "vault pass")
        let clock = TestClock()
        let pins = PinGuard(store: fixture.store, hashParameters: cheapHash, clock: clock, lockDirectory: fixture.folder.file("locks"))
        let profile = PinProfile(service: "driver", name: "quick")
        try pins.set(profile, pin: pin("4739"))
        let gate = ReauthGate()
        var asked: [String] = []
        let pinStep = { (entered: String) in
            (
                profile: profile, guard: pins,
                read: { () throws -> SecretBytes in
                    asked.append("pin")
                    return pin(entered)
                }
            )
        }
        let passStep = (
            store: fixture.store,
            read: { () throws -> SecretBytes in
                asked.append("passphrase")
                return secret("vault pass")
            }
        )
        // A wrong PIN is reported (ask again); the passphrase is not tried.
        #expect(throws: LockboxError.self) { try gate.authenticate(pin: pinStep("0000"), passphrase: passStep) }
        #expect(asked == ["pin"])
        // Lock the PIN out: the passphrase path still works.
        for _ in 0..<4 { _ = outcome { try pins.verify(profile, pin: pin("0000")) } }
        asked = []
        try gate.authenticate(pin: pinStep("4739"), passphrase: passStep)
        #expect(asked == ["pin", "passphrase"])
        // Inside the window nothing is asked.
        asked = []
        try gate.authenticate(pin: pinStep("4739"), passphrase: passStep)
        #expect(asked.isEmpty)
    }

    @Test("protected items need a fresh window; unprotected ones and listings do not", arguments: [true, false])
    func protectedItems(fileStore: Bool) throws {
        let f = try PinFixture(fileStore: fileStore)
        try f.guardian.set(f.profile, pin: pin("4739"))
        let clock = ManualClock()
        let gate = ReauthGate(absoluteTimeout: .seconds(60), clock: clock.read)
        let vault = Vault(store: f.store, freshness: gate)
        try vault.set("parent-only", service: "screen", account: "parent-token", access: .freshAuthentication)
        try vault.set("always", service: "screen", account: "child-token")
        #expect(try vault.string(service: "screen", account: "child-token") == "always")
        let error = caughtError { try vault.get(service: "screen", account: "parent-token") }
        if case .reauthenticationRequired = error {} else { Issue.record("got \(String(describing: error))") }
        let listed = try vault.list(service: "screen")
        #expect(listed.first { $0.account == "parent-token" }?.access == .freshAuthentication)
        try gate.open(verifying: pin("4739"), for: f.profile, with: f.guardian)
        #expect(try vault.string(service: "screen", account: "parent-token") == "parent-only")
        clock.advance(60)
        #expect(throws: LockboxError.self) { try vault.get(service: "screen", account: "parent-token") }
        // A vault without a gate never reads protected items.
        #expect(throws: LockboxError.self) { try Vault(store: f.store).get(service: "screen", account: "parent-token") }
        // The policy survives reopening the file.
        if fileStore {
            #expect(try f.store.metadata(ItemKey(service: "screen", account: "parent-token"))?.access == .freshAuthentication)
        }
        #expect(throws: LockboxError.self) { try vault.set("x", service: "s", account: "a", attributes: ["lockbox.access": "always"]) }
    }
}
