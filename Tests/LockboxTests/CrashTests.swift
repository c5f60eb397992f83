import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// Writers killed with SIGKILL at random moments: the vault must always open, every write a
/// writer acknowledged (exit 0) before the kill must be there, and an item whose writer was
/// killed holds its old value or the new one, nothing else. This is the one crash-injection test:
/// the test command runs it with 60 rounds at least;
/// LOCKBOX_CRASH_ROUNDS=N runs N rounds (a soak run, docs/SECURITY-TESTING.md §3).
@Suite("Crash safety")
struct CrashTests {
    @Test("SIGKILLed writers never tear the vault or lose acknowledged writes (format 1 and format 2)", arguments: [1, 2])
    func killedWriters(format: Int) throws {
        let folder = try TemporaryFolder()
        let vault = folder.file("v.lockbox").string
        let key = folder.file("v.key").string
        #expect(try runLockbox(["init", "--vault", vault, "--generate-key-file", key, "--format", "\(format)"]).status == 0)
        func open() throws -> any SecretStore {
            format == 2
                ? try SQLiteVaultStore.open(at: FilePath(vault), credentials: [.keyFile(FilePath(key))])
                : try EncryptedFileStore.open(at: FilePath(vault), credential: .keyFile(FilePath(key)))
        }
        var acknowledged: [String: String] = [:]
        var generator = SystemRandomNumberGenerator()
        // Kill at a random moment in [0, 2 × estimate]. The estimate starts at one uncut write's
        // time and follows the outcomes (longer after a kill, shorter after a completed write), so
        // about half the writers are killed however fast or loaded the machine is. The invariant
        // is checked after every round; the test runs until it has seen at least 10 of each
        // outcome (and 60 rounds, or LOCKBOX_CRASH_ROUNDS), or fails after 400 rounds (or 4 × the
        // rounds asked for). Every other round overwrites an item an earlier round stored.
        let minimumRounds = ProcessInfo.processInfo.environment["LOCKBOX_CRASH_ROUNDS"].flatMap { Int($0) }.map { max(60, $0) } ?? 60
        let maximumRounds = max(400, 4 * minimumRounds)
        func startWriter(_ account: String, _ value: String) throws -> Process {
            let process = Process()
            process.executableURL = lockboxBinary
            process.arguments = ["set", "--vault", vault, "--key-file", key, "crash", account]
            process.environment = ["PATH": "/usr/bin:/bin"]
            let input = Pipe()
            process.standardInput = input
            process.standardError = FileHandle.nullDevice
            try process.run()
            _ = ignoreBrokenPipes
            try? input.fileHandleForWriting.write(contentsOf: Data(value.utf8))
            try input.fileHandleForWriting.close()
            return process
        }
        let calibrationStart = Date()
        let calibration = try startWriter("calibration", "uncut")
        calibration.waitUntilExit()
        #expect(calibration.terminationStatus == 0)
        acknowledged["calibration"] = "uncut"
        var estimate = max(0.005, Date().timeIntervalSince(calibrationStart))
        var killed = 0
        var completed = 0
        var round = 0
        var overwritesKilled = 0
        while round < maximumRounds && (round < minimumRounds || killed < 10 || completed < 10) {
            // Every other round overwrites an item an earlier round stored; every third round a
            // second writer starts beside the first (it waits for the vault's lock, or holds it
            // while the first waits) and is killed at the same moment.
            let overwritten = round % 2 == 1 ? acknowledged.keys.randomElement(using: &generator) : nil
            var writers: [(account: String, value: String, process: Process)] = []
            for index in 0..<(round % 3 == 2 ? 2 : 1) {
                let account = index == 0 ? (overwritten ?? "round-\(round)") : "round-\(round)-beside"
                let value = "value-\(round).\(index)-" + String(repeating: "x", count: Int.random(in: 1...2000, using: &generator))
                writers.append((account, value, try startWriter(account, value)))
            }
            usleep(UInt32(Double.random(in: 0...(2 * estimate), using: &generator) * 1_000_000))
            for writer in writers where writer.process.isRunning { kill(writer.process.processIdentifier, SIGKILL) }
            for (index, writer) in writers.enumerated() {
                writer.process.waitUntilExit()
                let stored = writer.process.terminationReason == .exit && writer.process.terminationStatus == 0
                if stored {
                    acknowledged[writer.account] = writer.value
                } else {
                    #expect(writer.process.terminationReason == .uncaughtSignal, "round \(round): a writer failed without a kill")
                }
                // The first writer's outcome steers the kill time and counts toward the outcomes.
                guard index == 0 else { continue }
                if stored {
                    completed += 1
                    estimate *= 0.9
                } else {
                    killed += 1
                    estimate *= 1.1
                }
            }
            // After every round the vault opens and holds every acknowledged write; a killed
            // writer's item holds the old value or the new one (then the new one is what counts).
            let store = try open()
            let view = Vault(store: store)
            for writer in writers where acknowledged[writer.account] != writer.value {
                let now: String?
                do { now = try view.string(service: "crash", account: writer.account) } catch LockboxError.itemNotFound { now = nil }
                #expect(
                    now == acknowledged[writer.account] || now == writer.value,
                    "round \(round): \(writer.account) holds a value no writer wrote")
                if writer.account == overwritten { overwritesKilled += 1 }
                acknowledged[writer.account] = now
            }
            for (account, value) in acknowledged {
                #expect(try view.string(service: "crash", account: account) == value, "round \(round): \(account) lost")
            }
            round += 1
        }
        // A later write clears whatever temporary files killed writers left behind.
        let store = try open()
        try Vault(store: store).set("after", service: "crash", account: "final")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path.string).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty, "stale temporary files: \(leftovers)")
        // Both outcomes must have happened, or the test proved nothing about one of them.
        #expect(killed >= 10 && completed >= 10, "\(completed) of \(round) writes completed before their kill")
        #expect(overwritesKilled >= 1, "no overwrite was killed, so none was checked for old-or-new")
        print(
            "crash test: \(completed) of \(round) writes completed before their kill, \(overwritesKilled) killed overwrites (kill window up to \(Int(2 * estimate * 1000)) ms)"
        )
    }
}
