import Foundation
import Testing

@testable import LockboxCLI
@testable import LockboxTestSupport

/// The command line as a newcomer meets it: the first run that remembers its key file, a locked
/// vault's error that names only the ways this vault opens, short help with an example in every
/// command, a suggestion for a mistyped command, and one confirmation rule for every command that
/// removes or replaces credentials.
@Suite("CLI usability")
struct CLIUsabilityTests {
    let fixture: CLIFixture
    var folder: TemporaryFolder { fixture.folder }

    init() throws { fixture = try CLIFixture() }

    /// The fixture's environment (its own settings file and data folder).
    var environment: [String: String] { ["XDG_CONFIG_HOME": folder.path.string, "XDG_DATA_HOME": folder.path.string] }

    /// `lockbox arguments` in a new session (`setsid`), so it has no terminal to ask on whatever
    /// runs the tests.
    func withoutTerminal(_ arguments: [String], stdin: String = "", extra: [String: String] = [:]) throws -> ProcessResult {
        try runProcess(
            URL(fileURLWithPath: "/usr/bin/setsid"), ["--wait", lockboxBinary.path] + arguments, stdin: Data(stdin.utf8),
            environment: environment.merging(extra) { $1 })
    }

    // MARK: The first run

    @Test("newcomer path: init --generate-key-file PATH, then set, get and list with no key-file option or variable")
    func newcomerPath() throws {
        let created = try withoutTerminal(["init", "--generate-key-file", fixture.key])
        #expect(created.status == 0, "\(created.stderr)")
        let set = try withoutTerminal(["set", "com.example.api", "alice"], stdin: "s3cret\n")
        #expect(set.status == 0, "\(set.stderr)")
        let get = try withoutTerminal(["get", "com.example.api", "alice"])
        #expect(get.status == 0 && get.stdoutString == "s3cret", "\(get.stderr)")
        let list = try withoutTerminal(["list", "--json"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.jsonArray?.map { "\($0["service"] ?? "")/\($0["account"] ?? "")" } == ["com.example.api/alice"])
        // Another profile has no key file recorded: the same vault is locked there.
        let other = try withoutTerminal(["get", "com.example.api", "alice", "--profile", "other", "--vault", defaultVault])
        #expect(other.status == 40 && other.errorCode == .reauthenticationRequired, "\(other.stderr)")
    }

    /// The default vault path under the fixture's XDG_DATA_HOME.
    var defaultVault: String { folder.file("lockbox/vault.lockbox").string }

    @Test("a locked vault's error lists the ways this vault opens, and never one it does not have")
    func lockedVaultNamesItsSlots() throws {
        // A key-file slot only: the key file, and no `lockbox unlock` (it needs a passphrase or PIN).
        #expect(try fixture.run(["init", "--vault", fixture.vault, "--generate-key-file", fixture.key]).status == 0)
        var result = try withoutTerminal(["get", "s", "a", "--vault", fixture.vault, "--profile", "elsewhere"])
        #expect(result.status == 40 && result.errorCode == .reauthenticationRequired, "\(result.stderr)")
        #expect(result.stderr.contains("its key file (slot 0): --key-file PATH or LOCKBOX_KEY_FILE"), "\(result.stderr)")
        #expect(!result.stderr.contains("unlock") && !result.stderr.contains("passphrase ("), "\(result.stderr)")
        // A passphrase slot besides: both ways, the passphrase's with `lockbox unlock`.
        let passphrase = try fixture.lineFile("pass", "correct horse battery staple")
        let both = folder.file("both.lockbox").string
        result = try fixture.run(
            ["init", "--vault", both, "--key-file", fixture.key, "--passphrase-fd", "3", "--kdf", "interactive"],
            redirect: "3<\(passphrase)")
        #expect(result.status == 0, "\(result.stderr)")
        result = try withoutTerminal(["list", "--vault", both, "--profile", "elsewhere"])
        #expect(result.status == 40, "\(result.stderr)")
        #expect(
            result.stderr.contains("its key file (slot 0)") && result.stderr.contains("its passphrase (slot 1)")
                && result.stderr.contains("lockbox unlock"), "\(result.stderr)")
        // The message is the CLI's own: the generic "Run `lockbox unlock`" advice is not added.
        #expect(!result.stderr.contains("Run `lockbox unlock`"), "\(result.stderr)")
    }

    @Test("a missing key file's advice names where the path came from, not only `init`")
    func missingKeyFileAdvice() throws {
        #expect(try fixture.run(["init", "--vault", fixture.vault, "--generate-key-file", fixture.key]).status == 0)
        let result = try withoutTerminal(["get", "s", "a", "--vault", fixture.vault, "--key-file", folder.file("gone.key").string])
        #expect(result.status == 11 && result.errorCode == .invalidKeyFile, "\(result.stderr)")
        #expect(result.stderr.contains("Check the path") && result.stderr.contains("slot add-key-file --generate"), "\(result.stderr)")
    }

    // MARK: Help

    @Test("`get --help` is short, ends with the vault options' line; `--help-all` shows them in full")
    func shortHelp() throws {
        let help = try runLockbox(["get", "--help"])
        #expect(help.status == 0)
        let lines = help.stdoutString.filter { $0 == "\n" }.count
        #expect(lines <= 20, "get --help has \(lines) lines:\n\(help.stdoutString)")
        #expect(help.stdoutString.contains("Example: lockbox get"))
        #expect(help.stdoutString.contains("VAULT OPTIONS:") && help.stdoutString.contains("--help-all"))
        #expect(!help.stdoutString.contains("--tpm-pin-fd <fd>") && !help.stdoutString.contains("--backend"))
        for flag in ["--help-all", "--help-hidden"] {
            let all = try runLockbox(["get", flag])
            #expect(all.status == 0 && all.stdoutString.contains("--key-file <path>") && all.stdoutString.contains("--tpm-pin-fd <fd>"))
            #expect(!all.stdoutString.contains("--backend"), "the old name stays out of every help")
        }
        // The root help: no exit-code paragraph before USAGE; the codes have their own page.
        let root = try runLockbox(["--help"]).stdoutString
        #expect(!root.contains("Exit codes:") && root.contains("help exit-codes"))
        let codes = try runLockbox(["help", "exit-codes"])
        #expect(codes.status == 0 && codes.stdoutString.contains("40 re-authentication required"), "\(codes.stderr)")
        let table = try runLockbox(["exit-codes"])
        #expect(table.status == 0)
        #expect(table.stdoutString.split(separator: "\n").count == ExitStatus.allCases.count)
    }

    @Test("every command's help has an example; the man page has EXAMPLES")
    func everyCommandHasAnExample() throws {
        let paths = try CLIDocsTests.listedCommandPaths()
        #expect(paths.count > 20)
        for path in paths {
            let help = try runLockbox(path + ["--help"]).stdoutString
            #expect(help.contains("Example"), "lockbox \(path.joined(separator: " ")) --help has no example")
        }
        let man = try CLIDocsTests.committed("docs/man/lockbox.1")
        #expect(man.contains("\n.SH EXAMPLES\n"))
    }

    @Test("a mistyped command gets a suggestion, without repeating it and without the paragraph about secrets")
    func mistypedCommand() throws {
        let cases: [(typed: [String], expected: String, word: String)] = [
            (["lsit"], "lockbox list", "lsit"), (["slot", "lsit"], "lockbox slot list", "lsit"),
            (["--vault", "v", "gte", "s", "a"], "lockbox get", "gte"), (["pin", "sett", "kids", "max"], "lockbox pin set", "sett"),
        ]
        for (typed, expected, word) in cases {
            let result = try runLockbox(typed)
            #expect(result.status == 64, "\(typed): \(result.stderr)")
            #expect(result.stderr.contains("Did you mean `\(expected)`?"), "\(typed): \(result.stderr)")
            #expect(!result.stderr.contains(word) && !result.stderr.contains("rotate"), "\(typed): \(result.stderr)")
        }
        // Nothing close: argument-parser's error, the argument not shown, and the paragraph stays.
        let far = try runLockbox(["Tr0ub4dor&3"])
        #expect(far.status == 64 && !far.stderr.contains("Tr0ub4dor") && far.stderr.contains("rotate"), "\(far.stderr)")
    }

    // MARK: Confirmation

    @Test(
        "signout, slot remove, device-id --reset, wipe and import --on-conflict overwrite: refused without a terminal and --yes, nothing changed"
    )
    func confirmationRule() throws {
        let key = ["--vault", fixture.vault, "--key-file", fixture.key]
        #expect(try fixture.run(["init", "--generate-key-file", fixture.key, "--vault", fixture.vault]).status == 0)
        #expect(try withoutTerminal(["set", "app", "alice"] + key, stdin: "one").status == 0)
        let id = try withoutTerminal(["device-id", "app"] + key).stdoutString
        #expect(id.count > 30)
        #expect(try withoutTerminal(["slot", "add-key-file", "--generate", folder.file("second.key").string] + key).status == 0)

        let refusals: [[String]] = [
            ["signout", "app"], ["slot", "remove", "1"], ["device-id", "app", "--reset"], ["wipe", "--service", "app"],
        ]
        for arguments in refusals {
            let result = try withoutTerminal(arguments + key)
            #expect(result.status == 13 && result.errorCode == .notConfirmed, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("--yes"), "\(arguments): \(result.stderr)")
        }
        // Nothing was removed or replaced.
        #expect(try withoutTerminal(["get", "app", "alice"] + key).stdoutString == "one")
        #expect(try withoutTerminal(["device-id", "app"] + key).stdoutString == id)
        #expect(try withoutTerminal(["slot", "list", "--json"] + key).jsonArray?.count == 2)

        // import --on-conflict overwrite replaces items: the same rule.
        let passphrase = try fixture.lineFile("backup-pass", "backup passphrase here")
        let backup = folder.file("backup.lockbox").string
        var result = try runProcess(
            URL(fileURLWithPath: "/usr/bin/setsid"),
            [
                "--wait", "/bin/sh", "-c", "exec \"$0\" \"$@\" 3<\"$P\"", lockboxBinary.path, "export", "--to", backup,
                "--backup-passphrase-fd", "3", "--kdf", "interactive",
            ] + key,
            environment: environment.merging(["P": passphrase]) { $1 })
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try withoutTerminal(["set", "app", "alice"] + key, stdin: "two").status == 0)
        let importing = ["import", backup, "--backup-passphrase-fd", "3", "--on-conflict", "overwrite"] + key
        func runImport(_ extra: [String]) throws -> ProcessResult {
            try runProcess(
                URL(fileURLWithPath: "/usr/bin/setsid"),
                ["--wait", "/bin/sh", "-c", "exec \"$0\" \"$@\" 3<\"$P\"", lockboxBinary.path] + importing + extra,
                environment: environment.merging(["P": passphrase]) { $1 })
        }
        result = try runImport([])
        #expect(result.status == 13 && result.errorCode == .notConfirmed, "\(result.stderr)")
        #expect(try withoutTerminal(["get", "app", "alice"] + key).stdoutString == "two")
        result = try runImport(["--yes"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try withoutTerminal(["get", "app", "alice"] + key).stdoutString == "one")

        // With --yes each goes ahead.
        #expect(try withoutTerminal(["device-id", "app", "--reset", "--yes"] + key).stdoutString != id)
        #expect(try withoutTerminal(["slot", "remove", "1", "--yes"] + key).status == 0)
        #expect(try withoutTerminal(["slot", "list", "--json"] + key).jsonArray?.count == 1)
        result = try withoutTerminal(["signout", "app", "--yes"] + key)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try withoutTerminal(["get", "app", "alice"] + key).status == 2)
    }

    // MARK: JSON

    /// The problems of `text` as the CLI's JSON dialect: not JSON, a key that is not camelCase,
    /// an empty array or object not written `[]` / `{}`, a non-empty container on one line.
    static func dialectProblems(_ text: String) -> [String] {
        guard let value = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]) else {
            return ["not JSON: \(text.prefix(200))"]
        }
        var problems: [String] = []
        func walk(_ value: Any) {
            if let object = value as? [String: Any] {
                for (key, member) in object {
                    if key.wholeMatch(of: /[a-z][a-zA-Z0-9]*/) == nil { problems.append("key '\(key)' is not camelCase") }
                    walk(member)
                }
            } else if let array = value as? [Any] {
                array.forEach(walk)
            }
        }
        walk(value)
        if text.contains(/\[\s*\n\s*\]/) || text.contains(/\{\s*\n\s*\}/) { problems.append("an empty container spread over lines") }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if (trimmed.hasPrefix("{") || trimmed.hasPrefix("[")) && trimmed.count > 2 && !trimmed.contains("\n") {
            problems.append("compact, not pretty-printed")
        }
        return problems
    }

    @Test("every command's --json output, and its errors, in one dialect: camelCase, pretty, [] for empty")
    func oneJSONDialect() throws {
        let key = ["--vault", fixture.vault, "--key-file", fixture.key]
        #expect(try fixture.run(["init", "--generate-key-file", fixture.key, "--vault", fixture.vault]).status == 0)
        #expect(try withoutTerminal(["set", "app", "alice"] + key, stdin: "one").status == 0)
        let tokens = #"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-1"}"#
        #expect(try withoutTerminal(["token", "set", "api", "alice"] + key, stdin: tokens).status == 0)
        #expect(
            try withoutTerminal(["pin", "set", "kids", "max", "--hash-cost", "interactive"] + key, stdin: "739164\n739164\n").status == 0)
        let passphrase = try fixture.lineFile("backup-pass", "backup passphrase here")
        let backup = folder.file("backup.lockbox").string
        func withDescriptor3(_ arguments: [String]) throws -> ProcessResult {
            try runProcess(
                URL(fileURLWithPath: "/usr/bin/setsid"),
                ["--wait", "/bin/sh", "-c", "exec \"$0\" \"$@\" 3<\"$P\"", lockboxBinary.path] + arguments,
                environment: environment.merging(["P": passphrase]) { $1 })
        }
        #expect(try withDescriptor3(["export", "--to", backup, "--backup-passphrase-fd", "3", "--kdf", "interactive"] + key).status == 0)

        // Every command whose help offers --json, with a command line that exercises it.
        let runs: [[String]: () throws -> ProcessResult] = [
            ["list"]: { try self.withoutTerminal(["list", "--json"] + key) },
            ["slot", "list"]: { try self.withoutTerminal(["slot", "list", "--json"] + key) },
            ["slot", "fingerprint"]: { try self.withoutTerminal(["slot", "fingerprint", self.fixture.key, "--json"]) },
            ["token", "get"]: { try self.withoutTerminal(["token", "get", "api", "alice", "--json"] + key) },
            ["token", "status"]: { try self.withoutTerminal(["token", "status", "api", "alice", "--json"] + key) },
            ["pin", "status"]: { try self.withoutTerminal(["pin", "status", "kids", "max", "--json"] + key) },
            ["status"]: { try self.withoutTerminal(["status", "--json"] + key) },
            ["device-id"]: { try self.withoutTerminal(["device-id", "app", "--json"] + key) },
            ["signout"]: { try self.withoutTerminal(["signout", "api", "--json", "--yes"] + key) },
            ["import"]: { try withDescriptor3(["import", backup, "--backup-passphrase-fd", "3", "--json"] + key) },
            ["migrate"]: {
                try self.withoutTerminal(
                    ["migrate", "--from", "file", "--to", "secret-service", "--all", "--json"] + key,
                    extra: ["XDG_RUNTIME_DIR": self.folder.path.string, "DBUS_SESSION_BUS_ADDRESS": ""])
            },
            ["doctor"]: { try self.withoutTerminal(["doctor", "--json"] + key) },
            ["selftest"]: { try self.withoutTerminal(["selftest", "--json"]) },
        ]
        var offered: Set<[String]> = []
        for path in try CLIDocsTests.listedCommandPaths() where try CLIDocsTests.listedOptions(path).contains("--json") {
            offered.insert(path)
        }
        #expect(offered == Set(runs.keys), "commands with --json: \(offered.symmetricDifference(Set(runs.keys)))")
        for (path, run) in runs.sorted(by: { $0.key.joined(separator: " ") < $1.key.joined(separator: " ") }) {
            let result = try run()
            // Success: the report on standard output. Failure: the error object on standard error.
            let text = result.status == 0 ? result.stdoutString : result.stderr
            let problems = Self.dialectProblems(text)
            #expect(problems.isEmpty, "lockbox \(path.joined(separator: " ")) --json (exit \(result.status)): \(problems)\n\(text)")
            if result.status != 0, let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] {
                #expect(object["exitCode"] as? Int == Int(result.status) && object["code"] is String, "\(path): \(text)")
            }
        }
        // An empty list is `[]`; a failure with --json is a JSON object with its code.
        #expect(try withoutTerminal(["list", "--service", "none", "--json"] + key).stdoutString == "[]\n")
        let missing = try withoutTerminal(["token", "get", "nobody", "x", "--json"] + key)
        #expect(missing.status == 52, "\(missing.stderr)")
        let error = try #require(try JSONSerialization.jsonObject(with: Data(missing.stderr.utf8)) as? [String: Any], "\(missing.stderr)")
        #expect(
            error["code"] as? String == "no-tokens" && error["exitCode"] as? Int == 52 && (error["message"] as? String)?.isEmpty == false)
        let usage = try withoutTerminal(["list", "--json", "--bogus"] + key)
        #expect(usage.status == 64 && Self.dialectProblems(usage.stderr).isEmpty, "\(usage.stderr)")
        #expect((try? JSONSerialization.jsonObject(with: Data(usage.stderr.utf8)) as? [String: Any])?["code"] as? String == "usage")
    }

    // MARK: Progress

    /// Runs `arguments` with standard input, output and error on a new pseudo-terminal (python3's
    /// `pty`), reading everything it writes; the exit status, the seconds it ran and its output.
    func onPseudoTerminal(_ arguments: [String]) throws -> (status: Int, seconds: Double, output: String) {
        let script = """
            import json, os, pty, sys, time
            start = time.monotonic()
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            chunks = []
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            _, status = os.waitpid(pid, 0)
            print(json.dumps({"status": os.waitstatus_to_exitcode(status), "seconds": time.monotonic() - start,
                              "output": b"".join(chunks).decode("utf-8", "replace")}))
            """
        let result = try runProcess(
            URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script, lockboxBinary.path] + arguments,
            environment: environment)
        let object = try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any], "\(result.stderr)")
        return (object["status"] as? Int ?? -1, object["seconds"] as? Double ?? 0, object["output"] as? String ?? "")
    }

    /// Items in the progress-line tests: enough that each command runs for a second or more
    /// (30,000 take a debug build 1.5-3 s per pass on 2 cores). A sanitized `lockbox`
    /// (LOCKBOX_SANITIZER_BUILD) is several times slower, so a third runs as long there.
    var bulkItems: Int { ProcessInfo.processInfo.environment["LOCKBOX_SANITIZER_BUILD"] == "1" ? 10_000 : 30_000 }
    /// ``bulkItems`` as the progress line writes it (thousands grouped with commas).
    var bulkItemsGrouped: String { bulkItems == 30_000 ? "30,000" : "10,000" }

    @Test(
        "import --json-lines of 30,000 items (10,000 sanitized): on a terminal a progress line redrawn at most ~10 times a second; on a pipe only the summary"
    )
    func importProgress() throws {
        let key = ["--vault", fixture.vault, "--key-file", fixture.key]
        #expect(try fixture.run(["init", "--generate-key-file", fixture.key, "--vault", fixture.vault]).status == 0)
        var lines = ""
        lines.reserveCapacity(bulkItems * 64)
        for index in 0..<bulkItems { lines += #"{"service":"bulk","account":"a\#(index)","secret_b64":"c2VjcmV0"}"# + "\n" }
        let input = folder.file("items.jsonl").string
        try Data(lines.utf8).write(to: URL(fileURLWithPath: input))

        let terminal = try onPseudoTerminal(["import", "--json-lines", input] + key)
        #expect(terminal.status == 0, "\(terminal.output.suffix(500))")
        let draws = terminal.output.matches(of: /\rimporting [0-9,]+ items/).count
        // At most one draw per 100 ms (and a little slack for the scheduler), and at least one when it ran long enough.
        #expect(Double(draws) <= terminal.seconds * 10 + 2, "\(draws) redraws in \(terminal.seconds) s")
        if terminal.seconds > 1 { #expect(draws >= 1, "no progress line in \(terminal.seconds) s") }
        #expect(terminal.output.contains("/s"), "the line shows the rate")
        // The line is cleared before the summary, which stands on a line of its own.
        #expect(
            terminal.output.contains("\r\u{1B}[KImported \(bulkItems) item(s) from JSON lines in one batch.\r\n"),
            "\(terminal.output.suffix(200))")

        // On a pipe: the summary alone.
        let piped = try fixture.run(["import", "--json-lines", input] + key)
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(piped.stderr == "Imported \(bulkItems) item(s) from JSON lines in one batch.\n", "\(piped.stderr.prefix(300))")
        #expect(
            try fixture.run(["list", "--service", "bulk", "--json-lines"] + key).stdoutString.split(separator: "\n").count == bulkItems)
    }

    @Test(
        "convert and rotate-key of 30,000 items (10,000 sanitized): on a terminal a progress line per pass redrawn at most ~10 times a second; on a pipe only the summary"
    )
    func convertAndRotateProgress() throws {
        #expect(try fixture.run(["init", "--format", "1", "--generate-key-file", fixture.key, "--vault", fixture.vault]).status == 0)
        var lines = ""
        lines.reserveCapacity(bulkItems * 64)
        for index in 0..<bulkItems { lines += #"{"service":"bulk","account":"a\#(index)","secret_b64":"c2VjcmV0"}"# + "\n" }
        let input = folder.file("items.jsonl").string
        try Data(lines.utf8).write(to: URL(fileURLWithPath: input))
        let imported = try fixture.run(["import", "--json-lines", input, "--vault", fixture.vault, "--key-file", fixture.key])
        #expect(imported.status == 0, "\(imported.stderr)")
        // The same format-1 vault twice: one converted on a terminal, one on a pipe.
        let piped = folder.file("piped.lockbox").string
        try FileManager.default.copyItem(atPath: fixture.vault, toPath: piped)

        /// The draws of `labels` in `output`, checked against the throttle and the time it ran.
        func checkLine(_ run: (status: Int, seconds: Double, output: String), labels: String, summary: String) throws {
            #expect(run.status == 0, "\(run.output.suffix(500))")
            let draws = run.output.matches(of: try Regex("\r(\(labels)) [0-9,]+/\(bulkItemsGrouped) items")).count
            #expect(Double(draws) <= run.seconds * 10 + 2, "\(draws) redraws in \(run.seconds) s")
            if run.seconds > 1 { #expect(draws >= 1, "no progress line in \(run.seconds) s") }
            #expect(run.output.contains("/s"), "the line shows the rate")
            // The line is cleared before the summary, which stands on a line of its own.
            #expect(run.output.contains("\r\u{1B}[K" + summary + "\r\n"), "\(run.output.suffix(300))")
        }

        let converted = "to format 2: \(bulkItems) item(s), each checked against the format-1 vault."
        let terminal = try onPseudoTerminal(["convert", "--vault", fixture.vault, "--key-file", fixture.key])
        try checkLine(terminal, labels: "converting|checking", summary: "Converted \(fixture.vault) " + converted)
        #expect(
            terminal.output.contains("\rconverting ") && terminal.output.contains("\rchecking "),
            "both passes: \(terminal.output.suffix(300))")
        let convertedOnPipe = try fixture.run(["convert", "--vault", piped, "--key-file", fixture.key])
        #expect(
            convertedOnPipe.status == 0 && convertedOnPipe.stderr == "Converted \(piped) \(converted)\n",
            "\(convertedOnPipe.stderr.prefix(300))")

        let rotated = "Data key rotated; \(bulkItems) item(s) re-encrypted, 1 key slot(s) rewrapped."
        try checkLine(
            try onPseudoTerminal(["rotate-key", "--vault", fixture.vault, "--key-file", fixture.key]), labels: "rotating", summary: rotated)
        let rotatedOnPipe = try fixture.run(["rotate-key", "--vault", piped, "--key-file", fixture.key])
        #expect(rotatedOnPipe.status == 0 && rotatedOnPipe.stderr == rotated + "\n", "\(rotatedOnPipe.stderr.prefix(300))")
        for vault in [fixture.vault, piped] {
            let listed = try fixture.run(["list", "--service", "bulk", "--json-lines", "--vault", vault, "--key-file", fixture.key])
            #expect(listed.stdoutString.split(separator: "\n").count == bulkItems, "\(listed.stderr)")
        }
    }

    // MARK: Small traps

    @Test("token get of an expired access token: exit 53 without --refresh-with, printed with --allow-expired")
    func expiredAccessToken() throws {
        let key = ["--vault", fixture.vault, "--key-file", fixture.key]
        #expect(try fixture.run(["init", "--generate-key-file", fixture.key, "--vault", fixture.vault]).status == 0)
        // Expires in 30 s: within the default leeway of 60 s, so already expired for lockbox.
        let soon = #"{"access_token":"at-old","token_type":"Bearer","expires_in":30,"refresh_token":"rt-1"}"#
        #expect(try withoutTerminal(["token", "set", "api", "alice"] + key, stdin: soon).status == 0)
        var result = try withoutTerminal(["token", "get", "api", "alice"] + key)
        #expect(result.status == 53 && result.errorCode == .accessTokenExpired && result.stdout.isEmpty, "\(result.stderr)")
        #expect(result.stderr.contains("--refresh-with") && result.stderr.contains("--allow-expired"), "\(result.stderr)")
        result = try withoutTerminal(["token", "get", "api", "alice", "--json"] + key)
        #expect(result.status == 53 && result.stdout.isEmpty && !result.stderr.contains("at-old"), "\(result.stderr)")
        result = try withoutTerminal(["token", "get", "api", "alice", "--allow-expired"] + key)
        #expect(result.status == 0 && result.stdoutString == "at-old", "\(result.stderr)")
        result = try withoutTerminal(["token", "get", "api", "alice", "--leeway", "0"] + key)
        #expect(result.status == 0 && result.stdoutString == "at-old", "30 s left and no leeway: still good; \(result.stderr)")
        result = try withoutTerminal(["token", "get", "api", "alice", "--field", "refresh"] + key)
        #expect(result.status == 0 && result.stdoutString == "rt-1", "the refresh token is not the expired one: \(result.stderr)")
        let fresh = #"{"access_token":"at-new","token_type":"Bearer","expires_in":3600}"#
        #expect(try withoutTerminal(["token", "set", "api", "alice"] + key, stdin: fresh).status == 0)
        result = try withoutTerminal(["token", "get", "api", "alice"] + key)
        #expect(result.status == 0 && result.stdoutString == "at-new", "\(result.stderr)")
    }

    @Test("pin reset takes the vault passphrase from --passphrase-fd")
    func pinResetPassphraseDescriptor() throws {
        let passphrase = try fixture.lineFile("pass", "correct horse battery staple")
        func withPassphrase(_ arguments: [String], stdin: String = "") throws -> ProcessResult {
            try runProcess(
                URL(fileURLWithPath: "/usr/bin/setsid"),
                ["--wait", "/bin/sh", "-c", "exec \"$0\" \"$@\" 3<\"$P\"", lockboxBinary.path] + arguments
                    + ["--vault", fixture.vault, "--passphrase-fd", "3"],
                stdin: Data(stdin.utf8), environment: environment.merging(["P": passphrase]) { $1 })
        }
        var result = try withPassphrase(["init", "--kdf", "interactive"])
        #expect(result.status == 0, "\(result.stderr)")
        result = try withPassphrase(
            ["pin", "set", "kids", "max", "--hash-cost", "interactive", "--disable-after", "2"], stdin: "739164\n739164\n")
        #expect(result.status == 0, "\(result.stderr)")
        for _ in 0..<2 { _ = try withPassphrase(["pin", "verify", "kids", "max"], stdin: "111111\n") }
        #expect(try withPassphrase(["pin", "status", "kids", "max", "--json"]).jsonObject?["disabled"] as? Bool == true)
        // Standard input is empty: the passphrase comes from descriptor 3 alone.
        result = try withPassphrase(["pin", "reset", "kids", "max"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try withPassphrase(["pin", "status", "kids", "max", "--json"]).jsonObject?["disabled"] as? Bool == false)
        #expect(try withPassphrase(["pin", "verify", "kids", "max"], stdin: "739164\n").status == 0)
    }

    @Test("unlock without a login session keyring exits 41 before hashing the passphrase (a wrong one is not even checked)")
    func unlockChecksTheKeyringFirst() throws {
        let passphrase = try fixture.lineFile("pass", "vault pass")
        let wrong = try fixture.lineFile("wrong", "not the vault pass")
        let environment = ["LOCKBOX_VAULT": fixture.vault, "XDG_CONFIG_HOME": folder.file("config").string]
        #expect(
            try runLockbox(
                ["init", "--passphrase-fd", "3", "--kdf", "interactive"], environment: environment,
                shellRedirect: "3<'\(passphrase)'"
            ).status == 0)
        let outside = "keyctl session _uid_ses.$(id -u)"
        let probe = try runBash("\(outside) sh -c 'test \"$(keyctl id @s)\" = \"$(keyctl id @us)\"'")
        #expect(probe.status == 0, "keyctl cannot reach the user's default session keyring here: \(probe.stderr)")
        let result = try runBash("\(outside) \"$L\" unlock --for 30s --passphrase-fd 3 3<'\(wrong)'", environment: environment)
        #expect(
            result.status == 41 && result.errorCode == .kernelKeyringUnavailable,
            "a wrong passphrase would be exit 5 after Argon2id: \(result.stderr)")
    }

    @Test("a new vault passphrase needs 8 characters, not one repeated; --allow-weak-passphrase overrides; nothing is left behind")
    func passphrasePolicy() throws {
        func withPassphrase(_ arguments: [String], _ passphrase: String) throws -> ProcessResult {
            let file = try fixture.lineFile("p\(abs(passphrase.hashValue))", passphrase)
            return try fixture.run(arguments, redirect: "3<'\(file)'")
        }
        for weak in ["short", "1234567", "aaaaaaaaaaaa", "éééééééééé"] {
            let result = try withPassphrase(
                [
                    "init", "--vault", fixture.vault, "--generate-key-file", fixture.key, "--with-passphrase",
                    "--passphrase-fd", "3", "--kdf", "interactive",
                ], weak)
            #expect(result.status == 18 && result.errorCode == .passphraseRejected, "'\(weak)': \(result.stderr)")
            #expect(!result.stderr.contains(weak), "the passphrase is not repeated")
            #expect(
                !FileManager.default.fileExists(atPath: fixture.vault) && !FileManager.default.fileExists(atPath: fixture.key),
                "nothing is made for a refused passphrase")
        }
        var result = try withPassphrase(["init", "--vault", fixture.vault, "--passphrase-fd", "3", "--kdf", "interactive"], "décembre")
        #expect(result.status == 0, "8 characters (9 bytes) pass: \(result.stderr)")
        let other = folder.file("weak.lockbox").string
        result = try withPassphrase(
            ["init", "--vault", other, "--passphrase-fd", "3", "--kdf", "interactive", "--allow-weak-passphrase"], "pw")
        #expect(result.status == 0, "\(result.stderr)")
        // passwd and slot add-passphrase apply the same rule to the new passphrase.
        let current = try fixture.lineFile("current", "décembre")
        let short = try fixture.lineFile("short", "tiny")
        result = try fixture.run(
            ["passwd", "--vault", fixture.vault, "--passphrase-fd", "3", "--new-passphrase-fd", "4", "--kdf", "interactive"],
            redirect: "3<'\(current)' 4<'\(short)'")
        #expect(result.status == 18, "\(result.stderr)")
        result = try fixture.run(
            [
                "slot", "add-passphrase", "--vault", fixture.vault, "--passphrase-fd", "3", "--new-passphrase-fd", "4",
                "--kdf", "interactive",
            ], redirect: "3<'\(current)' 4<'\(short)'")
        #expect(result.status == 18, "\(result.stderr)")
        #expect(
            try fixture.run(
                ["slot", "list", "--json", "--vault", fixture.vault, "--passphrase-fd", "3"],
                redirect: "3<'\(current)'"
            ).jsonArray?.count == 1, "no slot was added")
    }

    @Test("doctor checks only what the profile's store needs, and the session keyring unlock needs")
    func doctorChecksWhatTheStoreNeeds() throws {
        #expect(try fixture.run(["init", "--generate-key-file", fixture.key]).status == 0)
        // No session bus at all: a file-vault profile does not need one.
        let result = try withoutTerminal(
            ["doctor", "--json"], extra: ["DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": folder.path.string])
        #expect(result.status == 0, "\(result.stderr)\n\(result.stdoutString)")
        let report = try #require(result.jsonObject, "\(result.stdoutString)")
        let names = (report["checks"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(report["storeForThisRun"] as? String == "file" && report["ready"] as? Bool == true)
        #expect(!names.contains("D-Bus session bus") && !names.contains("Secret Service provider"), "\(names)")
        #expect(names.contains("file vault") && names.contains("key file") && names.contains("session keyring"), "\(names)")
    }
}
