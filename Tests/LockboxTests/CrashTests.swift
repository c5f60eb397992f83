import Foundation
import SystemPackage
import Testing
@testable import Lockbox

/// Writers killed with SIGKILL at random moments: the vault must always open, and every write a
/// writer acknowledged (exit 0) before the kill must be there.
@Suite("Crash safety")
struct CrashTests {
    @Test("SIGKILLed writers never tear the vault or lose acknowledged writes")
    func killedWriters() throws {
        let folder = try TemporaryFolder()
        let vault = folder.file("v.lockbox").string, key = folder.file("v.key").string
        #expect(try runLockbox(["init", "--vault", vault, "--generate-key-file", key]).status == 0)
        var acknowledged: [String: String] = [:]
        var generator = SystemRandomNumberGenerator()
        let rounds = 60
        for round in 0..<rounds {
            let account = "round-\(round)"
            let value = "value-\(round)-" + String(repeating: "x", count: Int.random(in: 1...2000, using: &generator))
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
            usleep(UInt32.random(in: 0...90_000, using: &generator))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if process.terminationReason == .exit && process.terminationStatus == 0 {
                acknowledged[account] = value
            }
            // After every round the vault opens and holds every acknowledged write.
            let store = try EncryptedFileStore.open(at: FilePath(vault), credential: .keyFile(FilePath(key)))
            let view = Vault(store: store)
            for (account, value) in acknowledged {
                #expect(try view.string(service: "crash", account: account) == value, "round \(round): \(account) lost")
            }
        }
        // A later write clears whatever temporary files killed writers left behind.
        let store = try EncryptedFileStore.open(at: FilePath(vault), credential: .keyFile(FilePath(key)))
        try Vault(store: store).set("after", service: "crash", account: "final")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path.string).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty, "stale temporary files: \(leftovers)")
        // Both outcomes must have happened, or the test proved nothing about one of them.
        #expect(acknowledged.count > 0 && acknowledged.count < rounds, "\(acknowledged.count) of \(rounds) writes completed")
        print("crash test: \(acknowledged.count) of \(rounds) writes completed before their kill")
    }
}
