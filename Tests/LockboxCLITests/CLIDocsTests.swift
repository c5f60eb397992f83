import Foundation
import Testing

@testable import LockboxCLI
@testable import LockboxTestSupport

/// The CLI reference, man page and shell completions that scripts/dev/gen-cli-docs.sh generates from
/// the `lockbox` binary: the committed files must be current, the bash completion must work in a
/// real bash, and the documents must cover every command the binary's own `--help` lists.
@Suite("CLI docs and completions")
struct CLIDocsTests {
    /// The package root (this file is Tests/LockboxCLITests/CLIDocsTests.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func committed(_ relative: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(relative), encoding: .utf8)
    }

    // MARK: What the binary itself says

    /// The subcommands `lockbox PATH --help` lists under SUBCOMMANDS (empty for a leaf command).
    static func listedSubcommands(_ path: [String]) throws -> [String] {
        let result = try runLockbox(path + ["--help"])
        #expect(result.status == 0, "lockbox \(path.joined(separator: " ")) --help: \(result.stderr)")
        var names: [String] = []
        var inSection = false
        for line in result.stdoutString.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "SUBCOMMANDS:" {
                inSection = true
                continue
            }
            guard inSection else { continue }
            // Entries are indented by two spaces; wrapped abstracts by many more.
            if let match = line.wholeMatch(of: /[ ]{2}([a-z][a-z0-9-]*)(?:[ ].*)?/) { names.append(String(match.1)) }
            if line.isEmpty && !names.isEmpty { break }
        }
        return names
    }

    /// Every command path `--help` reaches: ["init"], …, ["pin", "set"], ….
    static func listedCommandPaths() throws -> [[String]] {
        var paths: [[String]] = []
        for name in try listedSubcommands([]) {
            paths.append([name])
            paths += try listedSubcommands([name]).map { [name, $0] }
        }
        return paths
    }

    /// The long options `lockbox PATH --help` lists, without --help and --version.
    static func listedOptions(_ path: [String]) throws -> [String] {
        let help = try runLockbox(path + ["--help"]).stdoutString
        let options = help.matches(of: /(?m)^[ ]{2}(?:-[a-z],[ ])?(--[a-z][a-z0-9-]*)/).map { String($0.1) }
        return options.filter { $0 != "--help" && $0 != "--version" }
    }

    /// The codes listed after "Exit codes:" in `lockbox help exit-codes`, one per line.
    static func exitCodesFromHelp() throws -> [Int] {
        let help = try runLockbox(["help", "exit-codes"]).stdoutString
        guard let start = help.range(of: "Exit codes:") else {
            Issue.record("`lockbox help exit-codes` has no \"Exit codes:\" paragraph")
            return []
        }
        // "0 ok", "1 unexpected failure [tpm-failure]", …: a number at the start of a line.
        return help[start.upperBound...].matches(of: /(?m)^\s*(\d+)[ ]/).compactMap { Int($0.1) }
    }

    // MARK: Running shells

    /// Runs `executable` (found on PATH) with `arguments` and a small, fixed environment.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        process.environment = environment ?? ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory(), "LC_ALL": "C.UTF-8"]
        process.currentDirectoryURL = root
        return try runProcess(process)
    }

    /// Bytes handed from a reader thread to the waiting one (the semaphore orders the accesses).
    static func installed(_ program: String) -> Bool {
        ["/usr/local/bin", "/usr/bin", "/bin"].contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(program)") }
    }

    /// Sources `script` in a fresh non-interactive bash, then completes `words` (the last one is
    /// the word being completed) the way bash does on TAB: it sets COMP_WORDS, COMP_CWORD,
    /// COMP_LINE and COMP_POINT and calls the function `complete -p lockbox` names.
    /// Returns that `complete -p` line and the words offered (COMPREPLY).
    static func bashComplete(script: URL, _ words: [String]) throws -> (spec: String, offered: [String]) {
        let driver = #"""
            source "$1" || exit 90
            shift
            spec="$(complete -p lockbox)" || exit 91
            printf 'SPEC %s\n' "$spec"
            function="$(sed -n 's/.* -F \([^ ]*\) .*/\1/p' <<<"$spec")"
            [ -n "$function" ] || exit 92
            COMP_WORDS=("$@")
            COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
            COMP_LINE="${COMP_WORDS[*]}"
            COMP_POINT=${#COMP_LINE}
            COMPREPLY=()
            "$function" lockbox "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            for word in "${COMPREPLY[@]}"; do printf 'OFFER %s\n' "$word"; done
            """#
        let result = try run("bash", ["--norc", "--noprofile", "-c", driver, "bash", script.path] + words)
        #expect(result.status == 0, "bash exited \(result.status): \(result.stderr)")
        var spec = ""
        var offered: [String] = []
        for line in result.stdoutString.split(separator: "\n") {
            if line.hasPrefix("SPEC ") { spec = String(line.dropFirst(5)) }
            if line.hasPrefix("OFFER ") { offered.append(String(line.dropFirst(6))) }
        }
        return (spec, offered)
    }

    static let bashScript = root.appendingPathComponent("completions/lockbox.bash")

    // MARK: Tests

    @Test("the committed docs and completions are what scripts/dev/gen-cli-docs.sh makes from this binary")
    func committedFilesAreCurrent() throws {
        let result = try Self.run(
            "bash", ["scripts/dev/gen-cli-docs.sh", "--check", "--binary", lockboxBinary.path],
            environment: ProcessInfo.processInfo.environment)
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test("--check fails and names the file when a committed file is stale or missing")
    func checkCatchesStaleFiles() throws {
        // A copy of what the generator reads and compares, in a folder of its own.
        let folder = try TemporaryFolder()
        let copy = URL(fileURLWithPath: folder.path.string)
        let files = FileManager.default
        for relative in [
            "scripts/dev/gen-cli-docs.sh", "scripts/dev/gen-cli-docs.py", "Sources", "docs/CLI.md", "docs/man/lockbox.1",
            "completions/lockbox.bash", "completions/_lockbox", "completions/lockbox.fish",
        ] {
            let target = copy.appendingPathComponent(relative)
            try files.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            try files.copyItem(at: Self.root.appendingPathComponent(relative), to: target)
        }
        let check = {
            try Self.run(
                "bash",
                [
                    copy.appendingPathComponent("scripts/dev/gen-cli-docs.sh").path, "--check",
                    "--binary", lockboxBinary.path,
                ],
                environment: ProcessInfo.processInfo.environment)
        }

        var result = try check()
        #expect(result.status == 0, "an unchanged copy must pass: \(result.stderr)")

        let cliMD = copy.appendingPathComponent("docs/CLI.md")
        try (try String(contentsOf: cliMD, encoding: .utf8) + "A hand edit.\n").write(to: cliMD, atomically: true, encoding: .utf8)
        try files.removeItem(at: copy.appendingPathComponent("completions/_lockbox"))
        result = try check()
        #expect(result.status == 1)
        #expect(result.stderr.contains("docs/CLI.md is out of date: run scripts/dev/gen-cli-docs.sh"), "\(result.stderr)")
        #expect(result.stderr.contains("completions/_lockbox is missing: run scripts/dev/gen-cli-docs.sh"), "\(result.stderr)")
        #expect(!result.stderr.contains("lockbox.1 is out of date"), "only the changed files are named")
    }

    @Test("bash: the completion script registers for lockbox and offers the subcommands --help lists")
    func bashCompletesSubcommands() throws {
        let listed = try Self.listedSubcommands([])
        for name in ["get", "set", "pin", "unlock", "export"] {
            #expect(listed.contains(name), "`lockbox --help` should list \(name)")
        }

        let (spec, offered) = try Self.bashComplete(script: Self.bashScript, ["lockbox", ""])
        #expect(spec.hasPrefix("complete ") && spec.contains(" -F ") && spec.hasSuffix(" lockbox"), "complete -p lockbox: \(spec)")
        #expect(Set(listed).isSubset(of: offered), "offered \(offered), missing \(Set(listed).subtracting(offered))")
        #expect(!offered.contains("verify") && !offered.contains("calibrate"), "pin's subcommands belong after `pin`")

        // A prefix narrows the offer, as on a real TAB.
        let narrowed = try Self.bashComplete(script: Self.bashScript, ["lockbox", "un"]).offered
        #expect(narrowed.contains("unlock") && narrowed == listed.filter { $0.hasPrefix("un") }, "offered \(narrowed)")
    }

    @Test("bash: after `lockbox pin` the completion offers pin's subcommands, and option values after an option")
    func bashCompletesNestedCommandsAndValues() throws {
        let pinCommands = try Self.listedSubcommands(["pin"])
        #expect(Set(["set", "verify", "change", "remove", "status", "reset", "calibrate"]).isSubset(of: pinCommands))

        let offered = try Self.bashComplete(script: Self.bashScript, ["lockbox", "pin", ""]).offered
        #expect(Set(pinCommands).isSubset(of: offered), "offered \(offered)")
        #expect(!offered.contains("unlock") && !offered.contains("export"), "top-level commands are not pin's")

        let kdf = try Self.bashComplete(script: Self.bashScript, ["lockbox", "init", "--kdf", ""]).offered
        #expect(Set(kdf) == ["interactive", "moderate", "sensitive"])
    }

    @Test("zsh and fish: the scripts are generated and name every subcommand")
    func zshAndFishScripts() throws {
        let topLevel = try Self.listedSubcommands([])
        let pinCommands = try Self.listedSubcommands(["pin"])
        #expect(!topLevel.isEmpty && !pinCommands.isEmpty)

        let zsh = try Self.committed("completions/_lockbox")
        #expect(zsh.hasPrefix("#compdef lockbox\n"))
        for name in topLevel + pinCommands {
            // zsh describes each subcommand as 'name:abstract'.
            #expect(zsh.contains("'\(name):"), "zsh script lacks \(name)")
        }
        let fish = try Self.committed("completions/lockbox.fish")
        #expect(fish.contains("complete -c 'lockbox'"))
        for name in topLevel {
            #expect(fish.contains("\"lockbox\" -eq 1' -fa '\(name)'"), "fish script does not offer \(name) after lockbox")
        }
        for name in pinCommands {
            #expect(fish.contains("\"lockbox pin\" -eq 1' -fa '\(name)'"), "fish script does not offer \(name) after lockbox pin")
        }

        // Syntax, only where the shell is already installed (the tests install nothing).
        if Self.installed("zsh") {
            let result = try Self.run("zsh", ["-n", "completions/_lockbox"])
            #expect(result.status == 0, "zsh -n: \(result.stderr)")
        }
        if Self.installed("fish") {
            let result = try Self.run("fish", ["--no-execute", "completions/lockbox.fish"])
            #expect(result.status == 0, "fish --no-execute: \(result.stderr)")
        }
    }

    @Test("--experimental-dump-help, CLI.md and the man page cover every command and option --help lists")
    func docsCoverEveryCommand() throws {
        let paths = try Self.listedCommandPaths()
        #expect(paths.count > 20)

        // The JSON the generator reads describes the same commands.
        let dump = try runLockbox(["--experimental-dump-help"])
        #expect(dump.status == 0)
        let json = try #require(try JSONSerialization.jsonObject(with: dump.stdout) as? [String: Any])
        var dumped: Set<[String]> = []
        func walk(_ command: [String: Any], _ path: [String]) {
            for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                guard let name = sub["commandName"] as? String, name != "help" else { continue }
                dumped.insert(path + [name])
                walk(sub, path + [name])
            }
        }
        walk(try #require(json["command"] as? [String: Any]), [])
        #expect(dumped == Set(paths), "--help and --experimental-dump-help disagree: \(dumped.symmetricDifference(paths))")

        let markdown = try Self.committed("docs/CLI.md")
        let man = try Self.committed("docs/man/lockbox.1")
        for path in paths {
            let name = "lockbox " + path.joined(separator: " ")
            let heading = "\n### `\(name)`\n"
            guard let start = markdown.range(of: heading) else {
                Issue.record("docs/CLI.md has no section for \(name)")
                continue
            }
            #expect(
                man.contains(".SS \"\(name.replacingOccurrences(of: "-", with: "\\-"))\"\n"),
                "the man page has no section for \(name)")
            // Every option the command's --help lists appears in its own section.
            let rest = markdown[start.upperBound...]
            let section = rest[..<(rest.range(of: "\n#")?.lowerBound ?? rest.endIndex)]
            for option in try Self.listedOptions(path) {
                #expect(section.contains("`\(option)"), "docs/CLI.md's section for \(name) does not mention \(option)")
            }
        }
    }

    @Test("the exit-code tables list exactly the codes of `lockbox help exit-codes` and of ExitStatus.swift")
    func exitCodeTables() throws {
        let fromHelp = try Self.exitCodesFromHelp()
        #expect(fromHelp.contains(0) && fromHelp.contains(64))

        let source = try Self.committed("Sources/LockboxCLI/ExitStatus.swift")
        let fromSource = source.matches(of: /(?m)^\s*case \w+ = (\d+)\s*$/).compactMap { Int($0.1) }
        #expect(Set(fromSource) == Set(fromHelp), "ExitStatus.swift and `lockbox help exit-codes` differ")

        let markdown = try Self.committed("docs/CLI.md")
        let exitSection = try #require(markdown.range(of: "\n## Exit codes\n"))
        let table = markdown[exitSection.upperBound...]
        let tableEnd = table.range(of: "\n## ")?.lowerBound ?? table.endIndex
        let fromMarkdown = table[..<tableEnd].matches(of: /(?m)^\| (\d+) \|/).compactMap { Int($0.1) }
        #expect(fromMarkdown == fromHelp.sorted())
        // The one error table: every error code in the row of the exit code it maps to.
        for (code, entry) in ErrorTable.entries {
            let row = table[..<tableEnd].split(separator: "\n").first { $0.hasPrefix("| \(entry.exit.rawValue) |") }
            #expect(row?.contains("`\(code.rawValue)`") == true, "docs/CLI.md: \(code) not in the row of exit \(entry.exit.rawValue)")
        }

        let man = try Self.committed("docs/man/lockbox.1")
        let manSection = try #require(man.range(of: ".SH EXIT STATUS\n"))
        let manEnd = man.range(of: "\n.SH ", range: manSection.upperBound..<man.endIndex)?.lowerBound ?? man.endIndex
        let fromMan = man[manSection.upperBound..<manEnd].matches(of: /(?m)^\\fB(\d+)\\fR$/).compactMap { Int($0.1) }
        #expect(fromMan == fromHelp.sorted())
    }
}
