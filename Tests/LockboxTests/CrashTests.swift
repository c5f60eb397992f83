import Foundation
import SystemPackage
import Testing
@testable import Lockbox

/// Writers killed with SIGKILL at random moments: the vault must always open, and every write a
/// writer acknowledged (exit 0) before the kill must be there.
@Suite("Crash safety")
struct CrashTests {
    @Test("SIGKILLed writers never tear the vault or lose acknowledged writes (format 1 and format 2)", arguments: [1, 2])
    func killedWriters(format: Int) throws {
        let folder = try TemporaryFolder()
        let vault = folder.file("v.lockbox").string, key = folder.file("v.key").string
        #expect(try runLockbox(["init", "--vault", vault, "--generate-key-file", key, "--format", "\(format)"]).status == 0)
        func open() throws -> any SecretStore {
            format == 2 ? try SQLiteVaultStore.open(at: FilePath(vault), credentials: [.keyFile(FilePath(key))])
                : try EncryptedFileStore.open(at: FilePath(vault), credential: .keyFile(FilePath(key)))
        }
        var acknowledged: [String: String] = [:]
        var generator = SystemRandomNumberGenerator()
        // Kill at a random moment in [0, 2 × estimate]. The estimate starts at one uncut write's
        // time and follows the outcomes (longer after a kill, shorter after a completed write), so
        // about half the writers are killed however fast or loaded the machine is. The invariant
        // is checked after every round; the test runs until it has seen at least 10 of each
        // outcome (and 60 rounds), or fails after 400 rounds.
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
        var killed = 0, completed = 0, round = 0
        while round < 400 && (round < 60 || killed < 10 || completed < 10) {
            let account = "round-\(round)"
            let value = "value-\(round)-" + String(repeating: "x", count: Int.random(in: 1...2000, using: &generator))
            let process = try startWriter(account, value)
            usleep(UInt32(Double.random(in: 0...(2 * estimate), using: &generator) * 1_000_000))
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            if process.terminationReason == .exit && process.terminationStatus == 0 {
                acknowledged[account] = value
                completed += 1
                estimate *= 0.9
            } else {
                #expect(process.terminationReason == .uncaughtSignal, "round \(round): the writer failed without a kill")
                killed += 1
                estimate *= 1.1
            }
            // After every round the vault opens and holds every acknowledged write.
            let store = try open()
            let view = Vault(store: store)
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
        print("crash test: \(completed) of \(round) writes completed before their kill (kill window up to \(Int(2 * estimate * 1000)) ms)")
    }
}
