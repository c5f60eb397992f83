import Foundation
import LockboxTesting
import Synchronization
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

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
