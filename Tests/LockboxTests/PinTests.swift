import Foundation
import LockboxTesting
import Synchronization
import SystemPackage
import Testing

@testable import Lockbox

/// A clock the test moves by hand: wall time, boot ID and time since boot.
final class TestClock: PinClock {
    private let instant: Mutex<PinInstant>

    init(wall: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        instant = Mutex(PinInstant(wall: wall, bootID: "boot-1", sinceBoot: 1000))
    }

    func now() -> PinInstant { instant.withLock { $0 } }

    /// Real time passing: both clocks move.
    func advance(_ seconds: Double) {
        instant.withLock {
            $0.wall = $0.wall.addingTimeInterval(seconds)
            $0.sinceBoot += seconds
        }
    }

    /// Someone sets the wall clock; the boot clock is untouched.
    func setWall(by seconds: Double) { instant.withLock { $0.wall = $0.wall.addingTimeInterval(seconds) } }

    /// A reboot: new boot ID, boot clock restarts, wall clock as given.
    func reboot(wallBy seconds: Double) {
        instant.withLock {
            $0.bootID = "boot-\(UUID())"
            $0.sinceBoot = 5
            $0.wall = $0.wall.addingTimeInterval(seconds)
        }
    }
}

/// Cheap hashing, so tests run the real Argon2id code quickly.
let cheapHash: KDFParameters = { do { return try KDFParameters(opsLimit: 1, memoryLimitBytes: 8 * 1024) } catch { fatalError() } }()

struct PinFixture {
    let folder: TemporaryFolder
    let clock = TestClock()
    let guardian: PinGuard
    let store: any SecretStore
    let profile = PinProfile(service: "kids", name: "max")

    init(fileStore: Bool = true, hash: KDFParameters = cheapHash) throws {
        folder = try TemporaryFolder()
        if fileStore {
            let key = folder.file("k")
            try KeyFile.generate(at: key)
            store = try EncryptedFileStore.create(at: folder.file("v.lockbox"), credentials: [.keyFile(key)])
        } else {
            store = MemoryStore()
        }
        guardian = PinGuard(store: store, hashParameters: hash, clock: clock, lockDirectory: folder.file("locks"))
    }

    func guardian(hash: KDFParameters) -> PinGuard {
        PinGuard(store: store, hashParameters: hash, clock: clock, lockDirectory: folder.file("locks"))
    }
}

func pin(_ text: String) -> SecretBytes { SecretBytes(utf8: text) }

/// Argon2id that counts its calls and can be told to fail hashing (as when memory runs out).
final class CountingHasher: Sendable {
    private let counts = Mutex((hashes: 0, verifications: 0, failHashing: false))
    var hashes: Int { counts.withLock { $0.hashes } }
    var verifications: Int { counts.withLock { $0.verifications } }
    func failHashing(_ fail: Bool) { counts.withLock { $0.failHashing = fail } }

    var hasher: PinHasher {
        PinHasher(
            hash: { [self] pin, parameters in
                let fail = counts.withLock {
                    $0.hashes += 1
                    return $0.failHashing
                }
                return fail ? nil : PinHasher.argon2id.hash(pin, parameters)
            },
            verify: { [self] hash, pin in
                counts.withLock { $0.verifications += 1 }
                return PinHasher.argon2id.verify(hash, pin)
            })
    }
}

/// The case of the error `body` throws, as a short name, or "ok".
func outcome(_ body: () throws -> Void) -> String {
    do {
        try body()
        return "ok"
    } catch let error as LockboxError {
        switch error {
        case .wrongPin(_, let failures, let retryAt): return "wrong(\(failures)\(retryAt == nil ? "" : ",locked"))"
        case .pinLockedOut(_, _, let seconds): return "lockedOut(\(Int(seconds.rounded())))"
        case .pinDisabled(_, let failures): return "disabled(\(failures))"
        case .pinWiped: return "wiped"
        case .pinNotSet: return "notSet"
        case .pinRejected(let rule): return "rejected: \(rule)"
        default: return "\(error)"
        }
    } catch {
        return "\(error)"
    }
}

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

/// Real processes: the `lockbox pin` commands against a file vault.
@Suite("PINs through the CLI")
struct PinCLITests {
    let folder: TemporaryFolder
    let environment: [String: String]

    init() throws {
        folder = try TemporaryFolder()
        let runtime = folder.file("run").string
        try FileManager.default.createDirectory(
            atPath: runtime, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        environment = [
            "LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("k.key").string,
            "XDG_CONFIG_HOME": folder.file("config").string, "XDG_RUNTIME_DIR": runtime,
        ]
        // Format 1: killedVerifyCounts reads the vault through EncryptedFileStore.
        let created = try runLockbox(
            ["init", "--format", "1", "--generate-key-file", folder.file("k.key").string], environment: environment)
        #expect(created.status == 0, "\(created.stderr)")
    }

    private func pinCommand(_ arguments: [String], _ input: String) throws -> ProcessResult {
        try runLockbox(["pin"] + arguments + ["--hash-cost", "interactive"], stdin: Data(input.utf8), environment: environment)
    }

    /// The profile's `pin status --json`, parsed.
    private func status(_ name: String) throws -> [String: Any] {
        let result = try pinCommand(["status", "kids", name, "--json"], "")
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any], "\(result.stdoutString)")
    }

    @Test("set twice-entered, 5 wrong tries lock, the 6th is refused at once with the retry time, then the right PIN resets")
    func lockoutEndToEnd() throws {
        #expect(try pinCommand(["set", "kids", "max"], "1234\n1234\n").status == 34)
        #expect(try pinCommand(["set", "kids", "max"], "0000\n0000\n").status == 34)
        #expect(try pinCommand(["set", "kids", "max"], "2580\n2580\n").status == 34)
        #expect(try pinCommand(["set", "kids", "max"], "4739\n4793\n").status == 64, "the two entries differ")
        // An hour-long lockout, so how long each process takes cannot end it during the test.
        var result = try pinCommand(["set", "kids", "max", "--lockout-delays", "0,0,0,0,3600"], "4739\n4739\n")
        #expect(result.status == 0, "\(result.stderr)")
        for _ in 1...4 { #expect(try pinCommand(["verify", "kids", "max"], "9999\n").status == 30) }
        result = try pinCommand(["verify", "kids", "max"], "9999\n")
        #expect(result.status == 30)
        #expect(result.stderr.contains("error[\(LockboxError.Code.wrongPin)]") && result.stderr.contains("Locked until"))
        result = try pinCommand(["verify", "kids", "max"], "4739\n")
        #expect(result.status == 31, "locked out, even with the right PIN: \(result.stderr)")
        #expect(result.stderr.contains("error[\(LockboxError.Code.pinLockedOut)]") && result.stderr.contains("try again in"))
        var json = try status("max")
        #expect(json["failures"] as? Int == 5, "refused tries are not counted: \(json)")
        #expect(json["lockedUntil"] != nil)
        #expect(!String(describing: json).contains("argon2"))
        // A one-second lockout ends on its own: tries are refused (31) until it has passed, however
        // slow the machine, then the right PIN works (0) and clears the count.
        #expect(try pinCommand(["set", "kids", "mia", "--lockout-delays", "0,0,0,0,1"], "4739\n4739\n").status == 0)
        for _ in 1...5 { #expect(try pinCommand(["verify", "kids", "mia"], "9999\n").status == 30) }
        var statuses: [Int32] = []
        let deadline = Date().addingTimeInterval(120)
        repeat {
            statuses.append(try pinCommand(["verify", "kids", "mia"], "4739\n").status)
            if statuses.last == 31 { usleep(200_000) }
        } while statuses.last == 31 && Date() < deadline
        #expect(statuses.last == 0 && statuses.dropLast().allSatisfy { $0 == 31 }, "\(statuses)")
        json = try status("mia")
        #expect(json["failures"] as? Int == 0 && json["lockedUntil"] == nil, "\(json)")
        #expect(try pinCommand(["verify", "kids", "nobody"], "4739\n").status == 33)
    }

    @Test("a verify killed with SIGKILL right after a wrong guess still counts it")
    func killedVerifyCounts() throws {
        let set = try pinCommand(["set", "kids", "max", "--lockout-delays", "0"], "4739\n4739\n")
        #expect(set.status == 0, "\(set.stderr)")
        // The test reads the vault itself (no process launch per look), so it sees the count the
        // moment the verifier has written it and kills it then, while the wrong PIN is still being
        // compared. A verifier that finished first (a comparison faster than one look) proves
        // nothing either way: the count is cleared and the try repeated, up to 10 times.
        let store = try EncryptedFileStore.open(at: folder.file("v.lockbox"), credential: .keyFile(folder.file("k.key")))
        let pins = PinGuard(store: store)
        let profile = PinProfile(service: "kids", name: "max")
        var killedAfterCount = 0
        for _ in 0..<10 where killedAfterCount == 0 {
            #expect(try pins.status(profile).failures == 0)
            let process = Process()
            process.executableURL = lockboxBinary
            process.arguments = ["pin", "verify", "kids", "max", "--hash-cost", "moderate"]
            process.environment = environment.merging(["PATH": "/usr/bin:/bin"]) { a, _ in a }
            let input = Pipe()
            process.standardInput = input
            process.standardError = FileHandle.nullDevice
            try process.run()
            try? input.fileHandleForWriting.write(contentsOf: Data("9999\n".utf8))
            try input.fileHandleForWriting.close()
            var counted = false
            while !counted && process.isRunning {
                counted = try pins.status(profile).failures == 1
                if !counted { usleep(1000) }
            }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            // Whatever happened, the wrong try is counted once.
            #expect(try pins.status(profile).failures == 1)
            if process.terminationReason == .uncaughtSignal {
                #expect(counted, "killed only after the count was seen")
                killedAfterCount += 1
            } else {
                #expect(process.terminationStatus == 30, "a verifier that finished reports the wrong PIN")
                try pins.reset(profile)
            }
        }
        #expect(killedAfterCount == 1, "no verifier was still comparing when its count was seen")
    }

    @Test("8 processes guessing at once are all counted")
    func parallelGuesses() async throws {
        #expect(try pinCommand(["set", "kids", "max", "--lockout-delays", "0"], "4739\n4739\n").status == 0)
        let environment = self.environment
        let statuses = await withTaskGroup(of: Int32.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    (try? runLockbox(
                        ["pin", "verify", "kids", "max", "--hash-cost", "interactive"], stdin: Data("9999\n".utf8),
                        environment: environment))?.status ?? -1
                }
            }
            var all: [Int32] = []
            for await status in group { all.append(status) }
            return all
        }
        #expect(statuses == [Int32](repeating: 30, count: 8))
        #expect(try pinCommand(["status", "kids", "max", "--json"], "").jsonObject?["failures"] as? Int == 8)
    }
}
