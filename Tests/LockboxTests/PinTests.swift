import Foundation
import LockboxTesting
import Synchronization
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

@Suite("PINs: lockout, hashing and policy")
struct PinGuardTests {
    @Test("the default schedule: 4 free tries, then 1, 5, 15, 15 minutes and 1 hour", arguments: [true, false])
    func defaultSchedule(fileStore: Bool) throws {
        let f = try PinFixture(fileStore: fileStore)
        try f.guardian.set(f.profile, pin: pin("4739"))
        for failure in 1...4 { #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wrong(\(failure))") }
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wrong(5,locked)")
        let expected: [(failures: Int, delay: Double)] = [(5, 60), (6, 300), (7, 900), (8, 900), (9, 3600), (10, 3600)]
        for (failures, delay) in expected {
            // Refused at once, even with the right PIN, until the delay has passed.
            #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "lockedOut(\(Int(delay)))")
            f.clock.advance(delay - 1)
            #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "lockedOut(1)")
            #expect(try f.guardian.status(f.profile).failures == failures, "refused tries are not counted")
            f.clock.advance(1)
            if failures < 10 {
                #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wrong(\(failures + 1),locked)")
            }
        }
        // After the last lockout the right PIN works and resets everything.
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "ok")
        let status = try f.guardian.status(f.profile)
        #expect(status.failures == 0 && status.lockedUntil == nil)
    }

    @Test("a success resets the count")
    func successResets() throws {
        let f = try PinFixture()
        try f.guardian.set(f.profile, pin: pin("4739"))
        for _ in 1...4 { _ = outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } }
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "ok")
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wrong(1)")
    }

    @Test("moving the wall clock, either way, changes nothing within a boot")
    func wallClockWithinBoot() throws {
        let f = try PinFixture()
        try f.guardian.set(f.profile, pin: pin("4739"))
        for _ in 1...5 { _ = outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } }
        f.clock.setWall(by: -86_400)
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "lockedOut(60)")
        f.clock.setWall(by: +86_400 * 30)
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "lockedOut(60)")
        f.clock.advance(60)
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "ok")
    }

    @Test("after a reboot with the clock set back, the lockout restarts from now")
    func clockBackAcrossReboot() throws {
        let f = try PinFixture()
        try f.guardian.set(f.profile, pin: pin("4739"))
        for _ in 1...6 {
            f.clock.advance(61)
            _ = outcome { try f.guardian.verify(f.profile, pin: pin("0000")) }
        }
        #expect(try f.guardian.status(f.profile).failures == 6)  // locked for 300 s
        f.clock.advance(200)
        f.clock.reboot(wallBy: -3600)  // wall clock now an hour before the last attempt
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "lockedOut(300)")
        f.clock.advance(299)
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "lockedOut(1)")
        f.clock.advance(1)
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "ok")
    }

    @Test("profiles have independent counters")
    func independentProfiles() throws {
        let f = try PinFixture()
        let sister = PinProfile(service: "kids", name: "mia")
        let other = PinProfile(service: "driver", name: "max")
        try f.guardian.set(f.profile, pin: pin("4739"))
        try f.guardian.set(sister, pin: pin("8316"))
        try f.guardian.set(other, pin: pin("5094"))
        for _ in 1...5 { _ = outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } }
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "lockedOut(60)")
        #expect(outcome { try f.guardian.verify(sister, pin: pin("8316")) } == "ok")
        #expect(outcome { try f.guardian.verify(other, pin: pin("5094")) } == "ok")
        #expect(outcome { try f.guardian.verify(sister, pin: pin("4739")) } == "wrong(1)")
    }

    @Test("a successful verify rehashes when the parameters changed")
    func rehash() throws {
        let f = try PinFixture()
        try f.guardian.set(f.profile, pin: pin("4739"))
        let stored = { () throws -> String in
            let bytes = try #require(try f.store.get(f.profile.itemKey))
            return bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        #expect(try stored().contains("m=8,t=1"))
        let stronger = try KDFParameters(opsLimit: 2, memoryLimitBytes: 16 * 1024)
        let upgraded = f.guardian(hash: stronger)
        #expect(outcome { try upgraded.verify(f.profile, pin: pin("0000")) } == "wrong(1)")
        #expect(try stored().contains("m=8,t=1"), "a wrong PIN does not rehash")
        #expect(outcome { try upgraded.verify(f.profile, pin: pin("4739")) } == "ok")
        #expect(try stored().contains("m=16,t=2"))
        #expect(outcome { try upgraded.verify(f.profile, pin: pin("4739")) } == "ok")
    }

    @Test("a correct PIN whose rehash fails is a success: the count is cleared and the old hash kept")
    func rehashFailureIsNoFailure() throws {
        let f = try PinFixture()
        try f.guardian.set(f.profile, pin: pin("4739"))
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wrong(1)")
        let counter = CountingHasher()
        counter.failHashing(true)
        let stronger = try KDFParameters(opsLimit: 2, memoryLimitBytes: 16 * 1024)
        let upgrading = PinGuard(
            store: f.store, hashParameters: stronger, clock: f.clock, lockDirectory: f.folder.file("locks"),
            hasher: counter.hasher)
        #expect(outcome { try upgrading.verify(f.profile, pin: pin("4739")) } == "ok")
        #expect(counter.hashes == 1, "the rehash was tried (and failed)")
        #expect(try f.guardian.status(f.profile).failures == 0, "a right answer never counts as a wrong one")
        let record = try #require(try f.store.get(f.profile.itemKey)).withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        #expect(record.contains("m=8,t=1"), "the old hash is kept")
        // The next success upgrades it.
        counter.failHashing(false)
        #expect(outcome { try upgrading.verify(f.profile, pin: pin("4739")) } == "ok")
        #expect(
            try #require(try f.store.get(f.profile.itemKey)).withUnsafeBytes { String(decoding: $0, as: UTF8.self) }.contains("m=16,t=2"))
    }

    @Test("while locked out, a try is refused without hashing")
    func lockedOutTriesAreNotHashed() throws {
        let f = try PinFixture()
        let counter = CountingHasher()
        let counted = PinGuard(
            store: f.store, hashParameters: cheapHash, clock: f.clock, lockDirectory: f.folder.file("locks"),
            hasher: counter.hasher)
        try counted.set(f.profile, pin: pin("4739"))
        for _ in 1...5 { _ = outcome { try counted.verify(f.profile, pin: pin("0000")) } }
        #expect(counter.verifications == 5)
        for _ in 1...3 { #expect(outcome { try counted.verify(f.profile, pin: pin("4739")) } == "lockedOut(60)") }
        #expect(counter.verifications == 5, "no comparison ran while locked out")
        #expect(counter.hashes == 1, "only set hashed")
        f.clock.advance(60)
        #expect(outcome { try counted.verify(f.profile, pin: pin("4739")) } == "ok")
        #expect(counter.verifications == 6)
    }

    @Test("the default policy refuses common and malformed PINs, naming the rule")
    func policy() throws {
        let f = try PinFixture(fileStore: false)
        for (candidate, rule) in [
            ("1234", "run"), ("0000", "repeated"), ("2580", "blocklist"), ("1212", "blocklist"),
            ("1987", "blocklist"), ("123", "at least 4"), ("1234567890123", "at most 12"),
            ("12a4", "only the digits"), ("123456", "run"), ("121212", "blocklist"), ("251299", "blocklist"),
        ] {
            let result = outcome { try f.guardian.set(f.profile, pin: pin(candidate)) }
            #expect(result.hasPrefix("rejected") && result.contains(rule), "\(candidate): \(result)")
        }
        #expect(outcome { try f.guardian.set(f.profile, pin: pin("4739")) } == "ok")
        let passcodes = PinGuard(
            store: MemoryStore(), policy: PinPolicy(allowsNonDigits: true), hashParameters: cheapHash,
            clock: f.clock, lockDirectory: f.folder.file("locks"))
        #expect(outcome { try passcodes.set(f.profile, pin: pin("tr0ub4dor")) } == "ok")
        #expect(outcome { try f.guardian.set(PinProfile(service: "kids", name: "new"), pin: pin("4739")) } == "ok")
        // A PIN already set is not replaced by `set` (an argument error; `change` takes the old PIN).
        #expect(caughtError { try f.guardian.set(f.profile, pin: pin("8316")) }?.code == .invalidArgument)
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "ok", "the old PIN still holds")
    }

    @Test("the blocklists cover about a tenth of the 4- and 6-digit spaces")
    func blocklistSize() {
        let four = PinBlocklist.fraction(length: 4)
        let six = PinBlocklist.fraction(length: 6)
        #expect((0.07...0.13).contains(four), "\(four)")
        #expect((0.07...0.13).contains(six), "\(six)")
        for top in PinBlocklist.dataGeneticsTop20 {
            #expect(PinBlocklist.contains(top.map { Int(String($0)) ?? 0 }))
        }
    }

    @Test("100 consecutive failures disable the PIN until another profile or the owner resets it")
    func hardLimit() throws {
        let f = try PinFixture(fileStore: false)
        let noDelay = try LockoutPolicy(delays: [0])
        try f.guardian.set(f.profile, pin: pin("4739"), lockout: noDelay)
        let parent = PinProfile(service: "kids", name: "parent")
        try f.guardian.set(parent, pin: pin("8316"))
        for failure in 1...99 { #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wrong(\(failure))") }
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "disabled(100)")
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "disabled(100)", "even the right PIN")
        #expect(outcome { try f.guardian.reset(f.profile, authorizedBy: parent, pin: pin("0000")) } == "wrong(1)")
        #expect(outcome { try f.guardian.reset(f.profile, authorizedBy: parent, pin: pin("8316")) } == "ok")
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "ok")
        #expect(throws: LockboxError.self) { try LockoutPolicy(delays: [0], disableAfter: 101) }
    }

    @Test("when enabled, N failures wipe the PIN and the items listed with it")
    func wipeAfter() throws {
        let f = try PinFixture()
        let vault = Vault(store: f.store)
        try vault.set("session", service: "kids", account: "max-token")
        try vault.set("keep", service: "kids", account: "other")
        try f.guardian.set(
            f.profile, pin: pin("4739"), lockout: LockoutPolicy(delays: [0], wipeAfter: 3),
            wipeItems: [ItemKey(service: "kids", account: "max-token")])
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wrong(1)")
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wrong(2)")
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("0000")) } == "wiped")
        #expect(try vault.get(service: "kids", account: "max-token") == nil)
        #expect(try vault.string(service: "kids", account: "other") == "keep")
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "notSet")
    }

    @Test("a wipe cut short is done by the next try, which is not evaluated even with the right PIN")
    func wipeCutShort() throws {
        let folder = try TemporaryFolder()
        let store = FaultInjectingStore()
        let guardian = PinGuard(store: store, hashParameters: cheapHash, clock: TestClock(), lockDirectory: folder.file("locks"))
        let profile = PinProfile(service: "kids", name: "max")
        let vault = Vault(store: store)
        try vault.set("session", service: "kids", account: "max-token")
        try guardian.set(
            profile, pin: pin("4739"), lockout: LockoutPolicy(delays: [0], wipeAfter: 3),
            wipeItems: [ItemKey(service: "kids", account: "max-token")])
        #expect(outcome { try guardian.verify(profile, pin: pin("0000")) } == "wrong(1)")
        #expect(outcome { try guardian.verify(profile, pin: pin("0000")) } == "wrong(2)")
        // The third wrong guess is counted, and the wipe stops at its first delete (as if the
        // process died there).
        store.failCall(1, of: .delete, with: LockboxError.invalidArgument("the process died"))
        #expect(outcome { try guardian.verify(profile, pin: pin("0000")) } != "wiped")
        #expect(try vault.get(service: "kids", account: "max-token") != nil)
        // The right PIN now is not evaluated: the wipe is due, and done.
        #expect(outcome { try guardian.verify(profile, pin: pin("4739")) } == "wiped")
        #expect(try vault.get(service: "kids", account: "max-token") == nil)
        #expect(outcome { try guardian.verify(profile, pin: pin("4739")) } == "notSet")
    }

    @Test("change needs the old PIN; remove clears everything")
    func changeAndRemove() throws {
        let f = try PinFixture()
        try f.guardian.set(f.profile, pin: pin("4739"))
        #expect(outcome { try f.guardian.change(f.profile, from: pin("0000"), to: pin("8316")) } == "wrong(1)")
        #expect(outcome { try f.guardian.change(f.profile, from: pin("4739"), to: pin("1111")) }.hasPrefix("rejected"))
        #expect(outcome { try f.guardian.change(f.profile, from: pin("4739"), to: pin("8316")) } == "ok")
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("4739")) } == "wrong(1)")
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("8316")) } == "ok")
        #expect(try f.guardian.remove(f.profile))
        #expect(outcome { try f.guardian.verify(f.profile, pin: pin("8316")) } == "notSet")
    }
}
