import Foundation
import Testing

@testable import Lockbox
@testable import LockboxCLI
@testable import LockboxTestSupport

/// `lockbox exec` and `lockbox docker-credential` through the real binary on a key-file vault:
/// what the program receives and where, exit statuses, signals, and the registry helper's
/// protocol byte for byte.
@Suite("exec and the registry credential helper")
struct ExecAndRegistryTests {
    let folder: TemporaryFolder
    let environment: [String: String]
    /// A secret with a space, quotes and a non-ASCII letter, so quoting mistakes show.
    let secretValue = "s3 cr\"3t-'é"

    init() throws {
        folder = try TemporaryFolder()
        environment = try keyFileVaultEnvironment(in: folder)
        let stored = try runLockbox(["set", "db", "app"], stdin: Data(secretValue.utf8), environment: environment)
        #expect(stored.status == 0, "\(stored.stderr)")
    }

    private func lockbox(_ arguments: [String], _ stdin: String = "") throws -> ProcessResult {
        try runLockbox(arguments, stdin: Data(stdin.utf8), environment: environment)
    }

    private func path(_ name: String) -> String { folder.file(name).string }

    private func contents(_ name: String) -> String? {
        FileManager.default.contents(atPath: path(name)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Polls for `name` to exist, up to `seconds` (tests never use a shell's `wait`).
    private func waitForFile(_ name: String, seconds: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if FileManager.default.fileExists(atPath: path(name)) { return true }
            usleep(20_000)
        }
        return false
    }

    // MARK: exec

    @Test("--env puts the secret in the program's environment, never in its command line")
    func environmentVariable() throws {
        var result = try lockbox([
            "exec", "--env", "DB_PASSWORD=db/app", "--", "sh", "-c", "test \"$DB_PASSWORD\" = \"$1\"", "sh", secretValue,
        ])
        #expect(result.status == 0, "the variable holds the secret exactly: \(result.stderr)")
        result = try lockbox(["exec", "--env", "DB_PASSWORD=db/app", "--", "sh", "-c", "test \"$DB_PASSWORD\" = wrong"])
        #expect(result.status == 1, "the program's failure is lockbox's")
        let script = "tr '\\0' ' ' < /proc/$$/cmdline > \"$1/cmdline\"; tr '\\0' '\\n' < /proc/$$/environ > \"$1/environ\""
        result = try lockbox(["exec", "--env", "DB_PASSWORD=db/app", "--", "sh", "-c", script, "sh", folder.path.string])
        #expect(result.status == 0, "\(result.stderr)")
        let commandLine = try #require(contents("cmdline"))
        #expect(commandLine.contains("/proc/$$/cmdline"), "the child's command line was read: \(commandLine)")
        #expect(!commandLine.contains(secretValue) && !commandLine.contains("s3 cr"))
        #expect(contents("environ")?.contains("DB_PASSWORD=\(secretValue)\n") == true, "the environment holds it")
        #expect(!result.stdoutString.contains("s3 cr") && !result.stderr.contains("s3 cr"))
    }

    @Test("the program's exit status is lockbox's; 128+N for signal N; 127 for a program not found")
    func exitStatus() throws {
        #expect(try lockbox(["exec", "--env", "A=db/app", "--", "sh", "-c", "exit 7"]).status == 7)
        #expect(try lockbox(["exec", "--", "sh", "-c", "exit 0"]).status == 0, "no secret at all is allowed")
        #expect(try lockbox(["exec", "--", "sh", "-c", "kill -TERM $$"]).status == 128 + SIGTERM)
        let missing = try lockbox(["exec", "--", "/nonexistent/program"])
        #expect(missing.status == 127 && missing.stderr.contains("/nonexistent/program"), "\(missing.stderr)")
        let notExecutable = try lockbox(["exec", "--", folder.file("v.key").string])
        #expect(notExecutable.status == 126, "\(notExecutable.stderr)")
        // After --, everything is the program's, even what looks like lockbox's own options.
        let passed = try lockbox([
            "exec", "--env", "A=db/app", "--", "sh", "-c", "printf '%s|' \"$@\"", "sh", "--verbose", "--vault", "x", "-h", "--",
        ])
        #expect(passed.status == 0 && passed.stdoutString == "--verbose|--vault|x|-h|--|", "\(passed.stdoutString) \(passed.stderr)")
        let output = try lockbox(["exec", "--", "sh", "-c", "printf out; printf err >&2; cat"], "in")
        #expect(output.stdoutString == "outin" && output.stderr == "err", "standard streams pass through")
    }

    @Test("a missing item fails with exit 2, naming it, before the program starts")
    func missingItem() throws {
        let marker = path("ran")
        let result = try lockbox(["exec", "--env", "A=db/app", "--env", "B=db/absent", "--", "sh", "-c", "touch \"$1\"", "sh", marker])
        #expect(result.status == 2 && result.errorCode == .itemNotFound, "\(result.stderr)")
        #expect(result.stderr.contains("'absent' on 'db'"), "names the item: \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker), "the program did not run")
        let fd = try lockbox(["exec", "--fd", "3=nothing/here", "--", "sh", "-c", "touch \"$1\"", "sh", marker])
        #expect(fd.status == 2 && !FileManager.default.fileExists(atPath: marker))
    }

    @Test("usage errors: no command, bad specifications, a descriptor of the standard streams")
    func usageErrors() throws {
        for arguments in [
            ["exec", "--env", "A=db/app"], ["exec", "--env", "A=db", "--", "true"], ["exec", "--env", "1A=db/app", "--", "true"],
            ["exec", "--env", "A=db/app", "--env", "A=db/app", "--", "true"], ["exec", "--fd", "1=db/app", "--", "true"],
            ["exec", "--fd", "x=db/app", "--", "true"], ["exec", "--fd", "3=db/app", "--fd", "3=db/app", "--", "true"],
            ["exec", "--passphrase-fd", "3", "--fd", "3=db/app", "--", "true"], ["exec", "--env", "A=db/app", "sh"],
        ] {
            let result = try lockbox(arguments)
            #expect(result.status == 64, "\(arguments): \(result.status) \(result.stderr)")
        }
    }

    @Test("SIGINT, SIGTERM and SIGHUP sent to lockbox reach the program, and lockbox waits for it")
    func signalsForwarded() throws {
        for (signal, name) in [(SIGINT, "INT"), (SIGTERM, "TERM"), (SIGHUP, "HUP")] {
            let ready = "ready-\(name)"
            let caught = "caught-\(name)"
            let script = "trap 'echo caught > \"$1/\(caught)\"; exit 3' \(name); echo > \"$1/\(ready)\"; while :; do sleep 0.05; done"
            let process = Process()
            process.executableURL = lockboxBinary
            process.arguments = ["exec", "--env", "A=db/app", "--", "sh", "-c", script, "sh", folder.path.string]
            var env = ["PATH": "/usr/bin:/bin"]
            env.merge(environment) { _, new in new }
            process.environment = env
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            #expect(waitForFile(ready), "the program started")
            kill(process.processIdentifier, signal)
            process.waitUntilExit()
            #expect(contents(caught) == "caught\n", "the program's trap ran for SIG\(name)")
            #expect(process.terminationStatus == 3, "lockbox waited and returned the program's status after SIG\(name)")
        }
    }

    @Test("a secret with a NUL byte cannot be a variable (exit 64, the program not started) but can be a descriptor")
    func nulSecret() throws {
        #expect(try lockbox(["set", "--raw", "bin", "blob"], "a\u{0}b").status == 0)
        var result = try lockbox(["exec", "--env", "B=bin/blob", "--", "touch", path("ran")])
        #expect(result.status == 64 && result.stderr.contains("--fd"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path("ran")))
        result = try lockbox(["exec", "--fd", "3=bin/blob", "--", "sh", "-c", "cat <&3"])
        #expect(result.status == 0 && result.stdout == Data("a\u{0}b".utf8))
    }

    @Test("--env-file resolves lockbox:// references and passes other values as they are")
    func environmentFile() throws {
        let file = path("ci.env")
        try Data(
            """
            # CI settings
            DB_PASSWORD=lockbox://db/app

            export REGION="eu west"
              PLAIN='a=b'
            OVERRIDDEN=from-file\r
            EMPTY=
            """.utf8
        ).write(to: URL(fileURLWithPath: file))
        let script = "printf '%s|%s|%s|%s|%s' \"$DB_PASSWORD\" \"$REGION\" \"$PLAIN\" \"$OVERRIDDEN\" \"${EMPTY-unset}\""
        var result = try lockbox(["exec", "--env-file", file, "--env", "OVERRIDDEN=db/app", "--", "sh", "-c", script])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutString == "\(secretValue)|eu west|a=b|\(secretValue)|")
        try Data("GOOD=1\nthis is not an assignment hunter2\n".utf8).write(to: URL(fileURLWithPath: file))
        result = try lockbox(["exec", "--env-file", file, "--", "true"])
        #expect(result.status == 64 && result.stderr.contains("line 2") && !result.stderr.contains("hunter2"), "\(result.stderr)")
        try Data("A=lockbox://db/absent\n".utf8).write(to: URL(fileURLWithPath: file))
        result = try lockbox(["exec", "--env-file", file, "--", "touch", path("ran")])
        #expect(result.status == 2 && !FileManager.default.fileExists(atPath: path("ran")))
        result = try lockbox(["exec", "--env-file", path("no-such.env"), "--", "true"])
        #expect(result.status == 74, "\(result.stderr)")
    }

    @Test("--fd hands the secret on a descriptor, not in the environment")
    func descriptor() throws {
        let script = "cat <&3 > \"$1/from-3\"; cat /dev/fd/7 > \"$1/from-7\"; env > \"$1/env\""
        var result = try lockbox(["exec", "--fd", "3=db/app", "--fd", "7=db/app", "--", "sh", "-c", script, "sh", folder.path.string])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(contents("from-3") == secretValue && contents("from-7") == secretValue, "exactly the secret, no newline added")
        #expect(contents("env")?.contains("s3 cr") == false)
        // lockbox holds descriptors 5 and 9 (below and above the highest one handed); the program
        // gets its own descriptors only, but the one `ls` opens to read the folder.
        result = try runLockbox(
            ["exec", "--fd", "3=db/app", "--fd", "7=db/app", "--", "ls", "-l", "/proc/self/fd"],
            environment: environment, shellRedirect: "5</dev/null 9</dev/null")
        let descriptors = Set(
            result.stdoutString.split(separator: "\n").filter { !$0.hasSuffix("/fd") }.compactMap { line in
                line.range(of: " -> ").flatMap { line[..<$0.lowerBound].split(separator: " ").last.map(String.init) }
            })
        #expect(descriptors == ["0", "1", "2", "3", "7"], "no other descriptor of lockbox reaches the program: \(result.stdoutString)")
        #expect(try lockbox(["exec", "--fd", "3=db/app", "--", "sh", "-c", "printf x >&3"]).status != 0, "the file is read-only")
    }

    @Test("env files parse comments, export, quotes; errors name the line, never the value")
    func environmentFileParser() throws {
        let parsed = try EnvironmentFile.parse("# c\n\nexport A=lockbox://git:https://h/x/u\nB=\"q\"\n", name: "f")
        #expect(parsed.count == 2)
        guard case .item(let item) = parsed.first?.value else {
            Issue.record("A is a reference")
            return
        }
        #expect(item.service == "git:https://h/x" && item.account == "u", "split at the last slash")
        guard case .text(let text) = parsed.last?.value else {
            Issue.record("B is text")
            return
        }
        #expect(text == "q")
        #expect(throws: LockboxError.self) { try EnvironmentFile.parse("A=lockbox://nope\n", name: "f") }
    }

    // MARK: docker-credential

    @Test("store, get, list and erase speak the docker-credential-helpers protocol exactly")
    func registryProtocol() throws {
        let stored = #"{"ServerURL":"localhost:5000","Username":"ci","Secret":"p\"w\\d \u00e9\ud83d\ude00"}"#
        var result = try lockbox(["docker-credential", "store"], stored)
        #expect(result.status == 0 && result.stdout.isEmpty, "\(result.stdoutString) \(result.stderr)")
        result = try lockbox(["get", "docker:localhost:5000", "ci"])
        #expect(result.stdoutString == "p\"w\\d é😀", "stored decoded")
        result = try lockbox(["docker-credential", "get"], "localhost:5000\n")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutString == #"{"ServerURL":"localhost:5000","Username":"ci","Secret":"p\"w\\d é😀"}"# + "\n")
        let decoded = try #require(result.jsonObject)
        #expect(decoded["Secret"] as? String == "p\"w\\d é😀")
        // A new user for the server replaces the old one.
        result = try lockbox(["docker-credential", "store"], #"{"ServerURL":"localhost:5000","Username":"deploy","Secret":"x"}"#)
        #expect(result.status == 0)
        _ = try lockbox(["docker-credential", "store"], #"{"ServerURL":"https://index.docker.io/v1/","Username":"me","Secret":"y"}"#)
        result = try lockbox(["docker-credential", "list"])
        #expect(result.stdoutString == #"{"https://index.docker.io/v1/":"me","localhost:5000":"deploy"}"# + "\n")
        result = try lockbox(["docker-credential", "erase"], "localhost:5000")
        #expect(result.status == 0 && result.stdout.isEmpty)
        result = try lockbox(["docker-credential", "get"], "localhost:5000")
        #expect(result.status == 1 && result.stdoutString == "credentials not found in native keychain\n", "\(result.stdoutString)")
        result = try lockbox(["docker-credential", "erase"], "localhost:5000")
        #expect(result.status == 1 && result.stdoutString == "credentials not found in native keychain\n")
        #expect(try lockbox(["list", "--json", "--service", "docker:localhost:5000"]).jsonArray?.isEmpty == true)
    }

    @Test("the protocol's errors: messages on standard output with exit 1")
    func registryErrors() throws {
        var result = try lockbox(["docker-credential", "store"], #"{"ServerURL":"r","Secret":"s"}"#)
        #expect(result.status == 1 && result.stdoutString == "no credentials username\n")
        result = try lockbox(["docker-credential", "get"], "  \n")
        #expect(result.status == 1 && result.stdoutString == "no credentials server URL\n")
        result = try lockbox(["docker-credential", "store"], #"{"ServerURL":"r","Username":"u","Secret":"hunter2"#)
        #expect(result.status == 1 && !result.stdoutString.contains("hunter2"), "\(result.stdoutString)")
        result = try lockbox(["docker-credential", "frobnicate"])
        #expect(result.status == 1 && result.stdoutString.contains("unknown action"))
        // A vault that cannot be opened: lockbox's code, and a message the client can show.
        result = try runLockbox(
            ["docker-credential", "list"], environment: environment.merging(["LOCKBOX_KEY_FILE": path("none.key")]) { _, new in new })
        #expect(
            result.status == 11 && result.stdoutString.hasPrefix("lockbox: error[") && result.errorCode != nil,
            "\(result.status) \(result.stdoutString)")
    }

    @Test("invoked through a link named docker-credential-lockbox it is the helper")
    func registryLinkName() throws {
        let link = path("docker-credential-lockbox")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: lockboxBinary.path)
        var result = try runProcess(
            URL(fileURLWithPath: link), ["store"], stdin: Data(#"{"ServerURL":"l:1","Username":"u","Secret":"s"}"#.utf8),
            environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        result = try runProcess(URL(fileURLWithPath: link), ["get"], stdin: Data("l:1".utf8), environment: environment)
        #expect(result.stdoutString == #"{"ServerURL":"l:1","Username":"u","Secret":"s"}"# + "\n")
        result = try runProcess(URL(fileURLWithPath: link), ["version"], environment: environment)
        #expect(result.status == 0 && result.stdoutString.hasPrefix("docker-credential-lockbox (lockbox) "))
    }

    @Test("the JSON reader decodes escapes into secret bytes and refuses what is not an object of strings")
    func flatJSON() throws {
        let fields = try FlatJSONObject.parse(secret(#" { "a" : "x\ty\u0041" , "b": null, "c":"\/" } "#))
        #expect(fields["a"]?.stringValue() == "x\tyA" && fields["b"] == nil && fields["c"]?.stringValue() == "/")
        for bad in [#"{"a":1}"#, #"{"a":"x"} x"#, #"["a"]"#, #"{"a":"\ud800"}"#, #"{"a":"x"#, "{\"a\":\"\u{1}\"}"] {
            #expect(throws: FlatJSONObject.Malformed.self, "\(bad)") { try FlatJSONObject.parse(secret(bad)) }
        }
        let encoded = FlatJSONObject.encode([("k", .secret(secret("a\"\\\n\u{1}")))])
        #expect(encoded.stringValue() == #"{"k":"a\"\\\n\u0001"}"# + "\n")
    }
}
