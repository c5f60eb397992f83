import ArgumentParser
import Lockbox

#if canImport(Glibc)
    import Glibc
#endif

/// `lockbox exit-codes` (and `lockbox help exit-codes`, which prints its help): every exit code
/// with its meaning and the error codes behind it, kept out of `lockbox --help`, which stays short.
struct ExitCodes: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exit-codes",
        abstract: "List lockbox's exit codes and the error codes (error[CODE]) behind each.",
        discussion: """
            Every failure exits with the code of its kind, so scripts can tell them apart; the \
            message on standard error starts with `lockbox: error[CODE]:`, the stable error code.
            Example: lockbox help exit-codes

            Exit codes:
            \(ExitStatus.table)
            """)

    func run() throws {
        print(ExitStatus.table)
    }
}

extension ExitStatus {
    /// One line per exit code: `5 wrong passphrase or key [wrong-credential]` (the entries of
    /// ``summary``), what `lockbox exit-codes` prints and its help lists.
    static var table: String {
        allCases.map { status in
            let codes = ErrorTable.codes(for: status)
            return "\(status.rawValue) \(status.meaning)" + (codes.isEmpty ? "" : " [\(codes.map(\.rawValue).joined(separator: " "))]")
        }.joined(separator: "\n")
    }
}

/// What the command line's help and usage errors add to swift-argument-parser's: `--help-all`,
/// the closing line that names the hidden vault options, and "did you mean" for a mistyped command.
enum HelpSupport {
    /// `--help-all`: help with the vault options (argument-parser's `--help-hidden`, which also works).
    static let helpAll = "--help-all"

    /// `arguments` with `--help-all` (before any `--`) as argument-parser's `--help-hidden`.
    static func translatingHelpAll(_ arguments: [String]) -> [String] {
        let end = arguments.firstIndex(of: "--") ?? arguments.endIndex
        var result = arguments
        for index in arguments.startIndex..<end where arguments[index] == helpAll { result[index] = "--help-hidden" }
        return result
    }

    /// The command `arguments` (without the program name) name, following subcommand names from
    /// the root (`help` skipped, as `lockbox help get` means `get`), with the path of names.
    static func command(namedBy arguments: [String]) -> (type: any ParsableCommand.Type, path: [String], next: String?) {
        var command: any ParsableCommand.Type = LockboxCommand.self
        var path: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" { break }
            if argument.hasPrefix("-") {
                // A global option before the command takes the next argument as its value.
                if LockboxCommand.globalOptions.contains(argument) { index += 1 }
                continue
            }
            if path.isEmpty && argument == "help" && command == LockboxCommand.self { continue }
            guard !command.configuration.subcommands.isEmpty else { return (command, path, nil) }
            guard let sub = command.configuration.subcommands.first(where: { $0.configuration.commandName == argument }) else {
                return (command, path, argument)
            }
            command = sub
            path.append(argument)
        }
        return (command, path, nil)
    }

    /// `help` (argument-parser's help screen) with a closing section that names the vault
    /// options when the command takes them and the screen does not show them (`--help`, not
    /// `--help-all`).
    static func addingVaultOptionsLine(to help: String, arguments: [String]) -> String {
        guard help.hasPrefix("OVERVIEW:") || help.hasPrefix("USAGE:") else { return help }
        let (command, _, _) = command(namedBy: arguments)
        let heading = VaultOptions.title.uppercased() + ":"
        guard !help.contains(heading),
            LockboxCommand.helpMessage(for: command, includeHidden: true, columns: 10_000).contains(heading)
        else { return help }
        var text = help
        while text.hasSuffix("\n") { text.removeLast() }
        return text + "\n\n\(heading)\n  \(VaultOptions.shortSummary), … (see \(helpAll))\n"
    }

    /// For a command line whose subcommand name is not one of lockbox's: the usage error to
    /// print instead of argument-parser's, suggesting the closest name (never repeating what was
    /// typed); `nil` when the error is about something else.
    static func mistypedCommandMessage(_ arguments: [String]) -> String? {
        let (command, path, next) = command(namedBy: arguments)
        guard let typed = next else { return nil }
        let names =
            command.configuration.subcommands.compactMap { $0.configuration.shouldDisplay ? $0.configuration.commandName : nil }
            + (path.isEmpty ? ["help"] : [])
        let parent = (["lockbox"] + path).joined(separator: " ")
        let closest = names.map { ($0, editDistance(typed, $0)) }.min { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }
        if let (name, distance) = closest, distance <= max(1, min(2, name.count / 3)) {
            return "Error: \(parent) has no such command (what was typed is not repeated). Did you mean `\(parent) \(name)`?\n"
                + "`\(parent) --help` lists the commands."
        }
        return nil
    }

    /// argument-parser's message `Unknown option '--x'` with its "Did you mean" suggestion among
    /// every option of the command, the hidden vault options included (argument-parser suggests
    /// only the options its help shows); the message unchanged when it has one or none is close.
    static func suggestingHiddenOptions(in message: String, arguments: [String]) -> String {
        guard !message.contains("Did you mean"),
            let match = message.firstMatch(of: /Unknown option '(--[A-Za-z0-9][A-Za-z0-9-]*)'/)
        else { return message }
        let typed = String(match.1)
        let (command, _, _) = command(namedBy: arguments)
        let help = LockboxCommand.helpMessage(for: command, includeHidden: true, columns: 10_000)
        var names: Set<String> = []
        for found in help.matches(of: /(?:^|[^A-Za-z0-9-])(--[A-Za-z][A-Za-z0-9-]*)/) { names.insert(String(found.output.1)) }
        // argument-parser's rule: the closest name less than 4 edits away.
        var best: (name: String, distance: Int)?
        for name in names.sorted() {
            let distance = editDistance(typed, name)
            if distance < 4, distance < best?.distance ?? Int.max { best = (name, distance) }
        }
        guard let best else { return message }
        let whole = String(match.0)
        return message.replacing(whole, with: whole + ". Did you mean '\(best.name)'?")
    }

    /// The optimal-string-alignment distance of `a` and `b` (insertions, deletions,
    /// substitutions and swaps of neighbours each count one), on characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
