import Foundation
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// The `lockbox` process protects the secrets in its memory: it is non-dumpable
/// (`prctl(PR_SET_DUMPABLE, 0)`) and has no core-dump allowance, checked from outside on a real
/// process while it waits for a passphrase.
@Suite("Process hardening")
struct HardeningTests {
    /// The uid that owns `/proc/PID/environ`: the process's own uid while it is dumpable, root
    /// once it is not (proc(5), "/proc/pid"). Telling them apart needs a process that is not root.
    static func procOwner(_ pid: Int32) -> uid_t? {
        var info = stat()
        return stat("/proc/\(pid)/environ", &info) == 0 ? info.st_uid : nil
    }

    static func coreLimit(_ pid: Int32) -> String? {
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/limits") else { return nil }
        defer { try? handle.close() }
        let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix("Max core file size") }.map(String.init)
    }

    /// Starts `arguments` as user `nobody` through setpriv, with stdin an open, silent pipe.
    static func startAsNobody(_ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "--"] + arguments
        let stdin = Pipe()
        process.standardInput = stdin
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.environment = [
            "PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent",
            "LOCKBOX_BACKEND": "file",
        ]
        try process.run()
        return (process, stdin)
    }

    /// Waits until `/proc/PID/exe` is `binary` (setpriv has exec'd it) and the process sleeps.
    static func waitUntilWaiting(_ pid: Int32, binary: String) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
            if exe == binary, let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/stat") {
                let stat = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
                try? handle.close()
                // Field 3, after "(comm)": S = sleeping (blocked reading the passphrase).
                if let close = stat.lastIndex(of: ")"), stat[stat.index(close, offsetBy: 2)] == "S" { return true }
            }
            usleep(20_000)
        }
        return false
    }

    @Test("lockbox is non-dumpable with no core-dump allowance while it holds a passphrase prompt; a plain process is not")
    func cliIsNonDumpable() throws {
        guard
            prerequisiteMet(
                geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
                "cliIsNonDumpable needs root, setpriv")
        else { return }
        // Control: an ordinary process running as nobody owns its /proc files, so the check can tell.
        let (control, controlInput) = try Self.startAsNobody(["/bin/cat"])
        defer {
            control.terminate()
            control.waitUntilExit()
        }
        #expect(Self.waitUntilWaiting(control.processIdentifier, binary: "/usr/bin/cat"))
        #expect(Self.procOwner(control.processIdentifier) == 65534, "an ordinary process owns /proc/PID/environ")
        try controlInput.fileHandleForWriting.close()

        let folder = try TemporaryFolder()
        chmod(folder.path.string, 0o777)
        // Blocks reading the new vault's passphrase from fd 0, a pipe that stays silent.
        let (lockbox, input) = try Self.startAsNobody([
            lockboxBinary.path, "init", "--vault", folder.file("v.lockbox").string,
            "--passphrase-fd", "0", "--kdf", "interactive",
        ])
        defer {
            if lockbox.isRunning { lockbox.terminate() }
            lockbox.waitUntilExit()
        }
        #expect(Self.waitUntilWaiting(lockbox.processIdentifier, binary: lockboxBinary.resolvingSymlinksInPath().path))
        #expect(Self.procOwner(lockbox.processIdentifier) == 0, "PR_SET_DUMPABLE 0 makes /proc/PID/environ root's")
        let limit = try #require(Self.coreLimit(lockbox.processIdentifier))
        #expect(
            limit.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"],
            "core dumps are off: \(limit)")
        try input.fileHandleForWriting.close()
        lockbox.waitUntilExit()
        #expect(lockbox.terminationStatus != 0, "an empty passphrase is refused")
    }

    @Test("lockbox doctor reports the protections in force, and says when secrets cannot be locked in RAM")
    func doctorReportsHardening() throws {
        guard
            prerequisiteMet(
                geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
                "doctorReportsHardening needs root, setpriv")
        else { return }
        struct Report: Decodable {
            var hardening: ProcessHardening.Status
            var checks: [Check]
        }
        struct Check: Decodable {
            var name: String
            var ok: Bool
            var fix: String?
        }
        func doctor(memlockKiB: String) throws -> (Report, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            // As nobody, so RLIMIT_MEMLOCK applies (root may always lock memory).
            process.arguments = [
                "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/bin/bash", "-c",
                "ulimit -l \(memlockKiB) && exec \"$0\" doctor --backend file --vault /nonexistent/v --json", lockboxBinary.path,
            ]
            process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (try JSONDecoder().decode(Report.self, from: data), String(decoding: data, as: UTF8.self))
        }
        let (normal, _) = try doctor(memlockKiB: "8192")
        #expect(normal.hardening.nonDumpable && normal.hardening.coreDumpsOff)
        #expect(normal.hardening.secretsExcludedFromDumps)
        if !runningUnderSanitizer {  // the sanitizers make mlock a no-op
            #expect(normal.hardening.secretsLocked && normal.hardening.lockableBytes == 8192 * 1024)
            #expect(normal.checks.first { $0.name == "secret memory" }?.ok == true)
        }
        let (starved, text) = try doctor(memlockKiB: "0")
        #expect(!starved.hardening.secretsLocked && starved.hardening.lockableBytes == 0, "\(text)")
        let check = try #require(starved.checks.first { $0.name == "secret memory" })
        #expect(!check.ok && (check.fix ?? "").contains("LimitMEMLOCK"))
    }
}
