import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxSecretService
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The entry point of both executables: `lockbox` (Sources/LockboxMain) and `lockbox-postgres`
/// (Sources/LockboxPostgresCLI, which sets ``PostgresCommands/support`` first).
package enum LockboxTool {
    /// Runs the command line of this process and exits with its status.
    package static func main() { LockboxCommand.main() }
}

struct LockboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lockbox",
        abstract: "Keep credentials in an encrypted vault, addressed by service and account.",
        discussion: """
            Secrets never travel in arguments: `set` reads standard input (or prompts without echo on \
            a terminal), and passphrases come from a prompt or --passphrase-fd. A service unlocks with \
            a key file (--key-file or LOCKBOX_KEY_FILE).

            --verbose (anywhere) or LOCKBOX_LOG=debug traces what lockbox decides and does on standard \
            error: store choice, paths, credential kinds, timings; never secrets or argument values.

            The vault options (\(VaultOptions.summary)) are shown by `lockbox COMMAND --help-all`; \
            the exit codes by `lockbox help exit-codes`.
            Example: lockbox init --generate-key-file ~/.config/lockbox/vault.key
            Example: lockbox set com.example.api alice < token.txt
            Example: lockbox get com.example.api alice
            """,
        version: version,
        subcommands: [
            Init.self, SetItem.self, GetItem.self, DeleteItem.self, ListItems.self, Wipe.self, RestoreItem.self,
            Passwd.self, RotateKey.self, Convert.self, Slot.self, Pin.self, Unlock.self, Lock.self, WindowStatus.self, Token.self,
            DeviceID.self, SignOutCommand.self, Migrate.self, MigrateSchema.self, Export.self, Import.self, Doctor.self, SelfTest.self,
            Exec.self, GitCredential.self, DockerCredential.self, ExitCodes.self,
        ]
    )

    /// What `lockbox --version` prints: the library's version (one source, `LockboxRelease`).
    static let version = LockboxRelease.version

    /// Without a subcommand: a usage error (exit 64), not help with exit 0.
    func run() throws { throw ValidationError("name a subcommand; `lockbox --help` lists them") }

    /// Runs the command, mapping every failure to its documented exit code and a one-line message.
    static func main() {
        // No core dumps, no ptrace by other processes: a crash or debugger must not leak secrets.
        ProcessHardening.apply()
        // A reader that goes away (`lockbox get | head -c 8`, a refresher that exits early) is an
        // error to report, not a signal that kills us mid-write.
        signal(SIGPIPE, SIG_IGN)
        // This process's libcrypto users (the Secret Service session, tpm2-tss) look nothing up by
        // legacy name and interpose no allocator: a session may load libcrypto as the process's own.
        SecretServiceStore.libcryptoProcessIsOurs()
        do {
            try refuseArgumentsThatAreNotUTF8()
            if CommandLine.arguments.count == 2, CommandLine.arguments[1] == "--version",
                helperArguments(of: CommandLine.arguments) == ["--version"]
            {
                printVersion()
            }
            let arguments = HelpSupport.translatingHelpAll(
                Trace.configure(helperArguments(of: CommandLine.arguments), environment: CommandEnvironment.values))
            try refuseUnknownShortOptions(arguments)
            var command = try parseCommand(hoistingGlobalOptions(arguments))
            Trace.log("command: \(commandPath(of: command)) (\(arguments.count) arguments; their values are not logged)")
            try command.run()
            PostgresCommands.support.withLock { $0 }?.closeAll()
            exitIfStandardOutputFailed()
            Trace.log("done: exit 0")
        } catch let error as Errno where error == .brokenPipe {
            brokenPipe()
        } catch let failure as ProtocolFailure {
            failure.report()
        } catch let error as any LockboxCodedError {
            let error = RecordedSecretService.translating(error)
            fail(error, message: ErrorTable.message(for: error))
        } catch {
            usageFailure(error)
        }
    }

    /// The links to lockbox that other programs run as their credential helper, and the command each stands for.
    static let helperPrograms = [
        GitCredential.helperProgramName: GitCredential.configuration.commandName ?? "git-credential",
        DockerCredential.helperProgramName: DockerCredential.configuration.commandName ?? "docker-credential",
    ]

    /// The arguments to parse (without the program name): invoked through a link named as in
    /// ``helperPrograms`` (`git-credential-lockbox get`), the command it stands for with the
    /// arguments after it.
    static func helperArguments(of commandLine: [String]) -> [String] {
        let arguments = Array(commandLine.dropFirst())
        // The names compared first: building ``helperPrograms`` reads the two commands'
        // configurations, which costs every start-up a scan of the binary's conformance records.
        guard let program = commandLine.first, let name = FilePath(program).lastComponent?.string,
            name == GitCredential.helperProgramName || name == DockerCredential.helperProgramName,
            let command = helperPrograms[name]
        else { return arguments }
        return [command] + arguments
    }

    /// The commands scripts, prompts and git run in loops, which `parseCommand` parses with their
    /// own definitions when the command line starts with their name (start-up cost). Each declares its
    /// configuration with ``ArgumentParser/CommandConfiguration/parsedOnItsOwn()``.
    static let parsedOnTheirOwn: [any ParsableCommand.Type] = [
        GetItem.self, SetItem.self, DeleteItem.self, ListItems.self, GitCredential.self,
    ]

    /// The command `arguments` (without the program name, global options already hoisted) ask for.
    ///
    /// When the first argument names one of ``parsedOnTheirOwn``, the rest is parsed by that
    /// command's definition alone: what swift-argument-parser does once the root's parse reaches
    /// the subcommand, without the root's command tree and its check for a completion-script
    /// request (two extra parses of the whole command line): 16.7 M → 11.2 M instructions for a
    /// file-vault `get` (callgrind, `make release`). Anything that is not a successful parse of
    /// exactly that command there (an error, `--help`, `--version`, `--generate-completion-script`,
    /// `--experimental-dump-help`, a failed `validate()`) is parsed again from the root, so what is
    /// printed and the exit status are the root parser's, unchanged. The commands' `validate()`
    /// only inspects the parsed values, so running it twice changes nothing. `ParseFastPathTests`
    /// compares both ways over a table of command lines.
    static func parseCommand(_ arguments: [String]) throws -> any ParsableCommand {
        try parseDirectly(arguments) ?? parseOnItsOwn(arguments) ?? parseAsRoot(arguments)
    }

    /// The options of ``VaultOptions`` that ``parseDirectly(_:)`` reads, each taking one value:
    /// the global ones and `--tpm-pin-fd`.
    static let directOptions = globalOptions.union(["--tpm-pin-fd"])

    /// `get`, `set` and `delete` with a service, an account and ``VaultOptions`` alone, and `list`
    /// with those options, `--service` and `--json` or `--json-lines` (the way scripts, prompts
    /// and the benchmarks call them), parsed without swift-argument-parser: its
    /// parse of even one command reflects over the command's properties and instantiates each
    /// property wrapper's generic type, and every first conformance check on the way scans all of
    /// the binary's conformance records (about half of a file-vault `get`; docs/PERFORMANCE.md).
    /// `nil`, for ``parseOnItsOwn(_:)`` and then the root to parse, whenever the
    /// command line is anything else: another command or option, an option given twice, a value
    /// missing, empty, starting with `-` or not one the option takes, an empty argument, `--`,
    /// positional arguments other than a service and an account (for `list`, any at all), or a
    /// failed `validate()`. What it returns is what the parser would: every property set
    /// (`ParseFastPathTests` compares the two over its table).
    static func parseDirectly(_ arguments: [String]) -> (any ParsableCommand)? {
        guard let name = arguments.first, ["get", "set", "delete", "list"].contains(name) else { return nil }
        // `list` also takes --service and its two output flags, and no positional argument.
        let valueOptions = name == "list" ? directOptions.union(["--service"]) : directOptions
        let flagOptions: Set<String> = name == "list" ? ["--json", "--json-lines"] : []
        var values: [String: String] = [:]
        var flags: Set<String> = []
        var positionals: [String] = []
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard !argument.isEmpty else { return nil }
            guard argument.hasPrefix("-") else {
                positionals.append(argument)
                continue
            }
            if flagOptions.contains(argument) {
                guard flags.insert(argument).inserted else { return nil }
                continue
            }
            var option = argument
            var value: String?
            if let equals = argument.firstIndex(of: "=") {
                option = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
                // swift-argument-parser reads `--vault=` as `--vault` with the next argument.
                guard value != "" else { return nil }
            }
            guard valueOptions.contains(option), values[option] == nil else { return nil }
            if value == nil {
                guard index < arguments.count, !arguments[index].hasPrefix("-") else { return nil }
                value = arguments[index]
                index += 1
            }
            values[option] = value
        }
        guard positionals.count == (name == "list" ? 0 : 2) else { return nil }
        var options = VaultOptions()
        func storeArgument(_ option: String) -> StoreRequest?? {
            guard let text = values[option] else { return .some(nil) }
            return StoreRequest(argument: text).map { .some($0) }
        }
        func descriptor(_ option: String) -> Int32?? {
            guard let text = values[option] else { return .some(nil) }
            return Int32(text).map { .some($0) }
        }
        guard let store = storeArgument("--store"), let backendAlias = storeArgument("--backend"),
            let passphraseFd = descriptor("--passphrase-fd"), let tpmPinFd = descriptor("--tpm-pin-fd")
        else { return nil }
        options.store = store
        options.backendAlias = backendAlias
        options.postgresURLFile = values["--postgres-url-file"]
        options.profile = values["--profile"]
        options.vault = values["--vault"]
        options.keyFile = values["--key-file"]
        options.passphraseFd = passphraseFd
        options.tpmPinFd = tpmPinFd
        var command: any ParsableCommand
        switch name {
        case "get":
            var get = GetItem()
            (get.vaultOptions, get.service, get.account) = (options, positionals[0], positionals[1])
            (get.allowExpired, get.previous) = (false, false)
            command = get
        case "delete":
            var delete = DeleteItem()
            (delete.vaultOptions, delete.service, delete.account) = (options, positionals[0], positionals[1])
            command = delete
        case "list":
            var list = ListItems()
            (list.vaultOptions, list.service) = (options, values["--service"])
            (list.json, list.jsonLines) = (flags.contains("--json"), flags.contains("--json-lines"))
            list.expired = false
            command = list
        default:
            var set = SetItem()
            (set.vaultOptions, set.service, set.account) = (options, positionals[0], positionals[1])
            (set.kind, set.label, set.attributes, set.raw, set.allowEmpty, set.protected) = (nil, nil, [], false, false, nil)
            (set.noClobber, set.ifCurrentFd) = (false, nil)
            (set.expires, set.keepPrevious, set.grace) = (nil, false, nil)
            command = set
        }
        do {
            try options.validate()
            try command.validate()
        } catch {
            return nil
        }
        return command
    }

    /// The command of ``parsedOnTheirOwn`` that `arguments` name, parsed by its own definition;
    /// `nil` when the first argument names none of them or that parse is anything but a success
    /// for exactly that command (then ``parseCommand(_:)`` parses from the root).
    static func parseOnItsOwn(_ arguments: [String]) -> (any ParsableCommand)? {
        guard let name = arguments.first,
            let command = parsedOnTheirOwn.first(where: { $0.configuration.commandName == name }),
            let parsed = try? command.parseAsRoot(Array(arguments.dropFirst())),
            type(of: parsed) == command
        else { return nil }
        return parsed
    }

    /// `lockbox --version` alone, answered before the argument parser (whose first parse reflects
    /// over every command: more than half of the command's start-up) with exactly what the parser prints for it: the version and a newline on
    /// standard output, exit 0, nothing traced. `--version` anywhere else (after `--verbose`,
    /// after a subcommand) still goes through the parser.
    static func printVersion() -> Never {
        print(version)
        Glibc.exit(ExitStatus.success.rawValue)
    }

    /// Reports an argument-parsing failure without repeating what was typed: a secret must never
    /// be an argument, but when one is given anyway ("lockbox set svc acct hunter2") the error
    /// message must not copy it into logs as well. Help and `--version` print as usual.
    static func usageFailure(_ error: any Error) -> Never {
        let code = exitCode(for: error)
        let typed = helperArguments(of: CommandLine.arguments)
        guard code != .success else {
            // Help screens end with the line naming the (hidden) vault options; the rest as argument-parser prints it.
            let help = fullMessage(for: error)
            guard help.hasPrefix("OVERVIEW:") || help.hasPrefix("USAGE:") else { exit(withError: error) }
            print(HelpSupport.addingVaultOptionsLine(to: help, arguments: typed), terminator: "")
            exitIfStandardOutputFailed()
            Glibc.exit(ExitStatus.success.rawValue)
        }
        // A mistyped command name: a suggestion, and no paragraph about secrets (a close
        // misspelling of a command is not one); nothing typed is repeated.
        if code == .validationFailure, let mistyped = HelpSupport.mistypedCommandMessage(typed) {
            if wantsJSONErrors {
                writeJSONError(code: "usage", exitCode: code.rawValue, message: mistyped)
                Glibc.exit(code.rawValue)
            }
            let text = mistyped + "\n"
            text.withCString { _ = write(STDERR_FILENO, $0, strlen($0)) }
            Glibc.exit(code.rawValue)
        }
        let parsersMessage = HelpSupport.suggestingHiddenOptions(in: fullMessage(for: error), arguments: typed)
        let (message, redacted) = redactingArguments(in: parsersMessage, arguments: Array(CommandLine.arguments.dropFirst()))
        if wantsJSONErrors {
            writeJSONError(code: "usage", exitCode: code.rawValue, message: message)
            Glibc.exit(code.rawValue)
        }
        var text = message
        if redacted {
            text +=
                "\n(Arguments are not repeated in errors. Secrets are never arguments: `set` reads standard input or "
                + "prompts, passphrases come from a prompt or --passphrase-fd. If you typed a secret on the command line, "
                + "it is in your shell history and was visible to other processes: rotate it.)"
        }
        text += "\n"
        text.withUTF8 { bytes in _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
        Glibc.exit(code.rawValue)
    }

    /// `message` with every quoted value the user typed replaced by `'<not shown>'`: every
    /// argument that is not exactly an option or command name of lockbox (so `-hunter2` and
    /// `--Tr0ub4dor` are hidden too, and everything after `--`), and the value part of
    /// `--option=value`. Known names stay, so the message still says which option was wrong.
    static func redactingArguments(in message: String, arguments: [String]) -> (String, Bool) {
        var values: Set<String> = []
        for argument in arguments where !argument.isEmpty && !knownNames.contains(argument) {
            values.insert(argument)
            if argument.hasPrefix("-"), let equals = argument.firstIndex(of: "=") {
                values.insert(String(argument[argument.index(after: equals)...]))
            }
        }
        var result = message
        var redacted = false
        // Longest first, so a value that contains another is replaced whole.
        for value in values.filter({ !$0.isEmpty }).sorted(by: { $0.count > $1.count }) {
            let quoted = "'\(value)'"
            if result.contains(quoted) {
                result = result.replacing(quoted, with: "'<not shown>'")
                redacted = true
            }
        }
        return (result, redacted)
    }

    /// Swift decodes each argument as UTF-8, replacing invalid bytes with U+FFFD, so the names
    /// `a\xff` and `a\xfe` would both become `a\u{FFFD}` and address one item (and a path would
    /// name another file). Such an argument is a usage error instead, named by its position.
    static func refuseArgumentsThatAreNotUTF8() throws {
        for index in 1..<max(1, Int(CommandLine.argc)) {
            guard let raw = CommandLine.unsafeArgv[index], String(validatingCString: raw) == nil else { continue }
            let previous = index > 1 ? CommandLine.unsafeArgv[index - 1].flatMap { String(validatingCString: $0) } : nil
            let option =
                previous.map { $0.hasPrefix("--") && !$0.contains("=") && knownNames.contains($0) ? " (the value of \($0))" : "" } ?? ""
            throw LockboxError.invalidArgument(
                "argument \(index)\(option) is not valid UTF-8. Service names, account names, profiles and paths must be UTF-8 text; "
                    + "Lockbox does not guess at other encodings, so two different names never address one item.")
        }
    }

    /// Lockbox has no short options but `-h`. swift-argument-parser reads `-hunter2` as `-h`
    /// plus more and prints help, so a secret pasted after a command would be silently dropped
    /// with exit 0; such an argument is a usage error instead (its text not repeated).
    static func refuseUnknownShortOptions(_ arguments: [String]) throws {
        let end = arguments.firstIndex(of: "--") ?? arguments.endIndex
        for argument in arguments[..<end] where argument.count > 2 && argument.hasPrefix("-") && !argument.hasPrefix("--") {
            if !knownNames.contains(argument) {
                throw ValidationError("'\(argument)' is not an option of lockbox (its only short option is -h).")
            }
        }
    }

    /// Every command name and every option name the commands declare, as their help shows
    /// them, plus argument-parser's built-in flags: what usage errors may repeat.
    static let knownNames: Set<String> = {
        // Plus the hidden --backend (the old name of --store), which help does not show.
        var names: Set<String> = [
            "-h", "--help", "--version", "--verbose", "--generate-completion-script", "--experimental-dump-help",
            "--backend", "--help-all", "--help-hidden",
        ]
        let option = /(?:^|[^A-Za-z0-9-])(--?[A-Za-z][A-Za-z0-9-]*)/
        func collect(_ command: any ParsableCommand.Type) {
            if let name = command.configuration.commandName { names.insert(name) }
            for match in LockboxCommand.helpMessage(for: command, includeHidden: true, columns: 10_000).matches(of: option) {
                names.insert(String(match.output.1))
            }
            command.configuration.subcommands.forEach(collect)
        }
        collect(LockboxCommand.self)
        return names
    }()

    /// Options every subcommand takes, which people also write before the subcommand
    /// (`lockbox --store file get S A`; `--backend` is the old name of `--store`).
    static let globalOptions: Set<String> = [
        "--store", "--backend", "--profile", "--vault", "--key-file", "--passphrase-fd",
        "--postgres-url-file",
    ]

    /// Moves global options written before the subcommand to the end of the arguments (before
    /// a `--`, if any), where the subcommand's own parser reads them.
    static func hoistingGlobalOptions(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            guard globalOptions.contains(name) else { break }
            leading.append(argument)
            if !argument.contains("="), index + 1 < arguments.count {
                leading.append(arguments[index + 1])
                index += 1
            }
            index += 1
        }
        guard !leading.isEmpty, index < arguments.count else { return arguments }
        var rest = Array(arguments[index...])
        let insertAt = rest.firstIndex(of: "--") ?? rest.endIndex
        rest.insert(contentsOf: leading, at: insertAt)
        return rest
    }

    /// "pin verify" for a parsed `pin verify` command: the names of the commands, never values.
    static func commandPath(of command: any ParsableCommand) -> String {
        var path: [String] = []
        func find(_ type: any ParsableCommand.Type, _ trail: [String]) -> Bool {
            let here = trail + [type.configuration.commandName ?? "\(type)"]
            if type == Swift.type(of: command) {
                path = here
                return true
            }
            return type.configuration.subcommands.contains { find($0, here) }
        }
        _ = find(LockboxCommand.self, [])
        return path.dropFirst().joined(separator: " ")
    }

    /// The reader of standard output went away (`lockbox get … | head -c 8`): exit 74 (I/O)
    /// without a message, as other Unix tools end quietly there.
    static func brokenPipe() -> Never {
        Trace.log("failed: exit \(ExitStatus.ioError.rawValue): standard output was closed by its reader")
        Glibc.exit(ExitStatus.ioError.rawValue)
    }

    /// `print` buffers and drops write errors: flush, and fail with exit 74 if standard output
    /// could not take everything (quietly for a broken pipe).
    static func exitIfStandardOutputFailed() {
        guard fflush(nil) != 0 else { return }
        let code = errno
        if code == EPIPE { brokenPipe() }
        fail(LockboxError.io(operation: "writing", path: "standard output", errno: Errno(rawValue: code)))
    }

    private static func fail(_ error: any LockboxCodedError, message text: String? = nil) -> Never {
        let text = text ?? error.description
        let status = ExitStatus(for: error)
        Trace.log("failed: exit \(status.rawValue): error[\(error.code)]: \(text)")
        if wantsJSONErrors {
            writeJSONError(code: error.code.rawValue, exitCode: status.rawValue, message: text)
        } else {
            var message = "lockbox: error[\(error.code)]: \(text)\n"
            message.withUTF8 { bytes in _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
        }
        Glibc.exit(status.rawValue)
    }

    /// Whether errors are reported as JSON: `--json` is on the command line (before any `--`).
    static var wantsJSONErrors: Bool {
        let arguments = Array(CommandLine.arguments.dropFirst())
        return arguments[..<(arguments.firstIndex(of: "--") ?? arguments.endIndex)].contains("--json")
    }

    /// An error as the JSON object on standard error that `--json` asks for: `code` (the stable
    /// error code, `usage` for a command-line error), `exitCode` and `message`, in the CLI's JSON
    /// dialect (docs/CLI.md, "JSON output").
    static func writeJSONError(code: String, exitCode: Int32, message: String) {
        struct Failure: Encodable { var code: String, exitCode: Int32, message: String }
        var text =
            ((try? Console.jsonText(Failure(code: code, exitCode: exitCode, message: message)))
                ?? #"{"code": "failure", "exitCode": 1, "message": "the error could not be encoded"}"#) + "\n"
        text.withUTF8 { bytes in _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count) }
    }
}

extension CommandConfiguration {
    /// This configuration for a command in ``LockboxCommand/parsedOnTheirOwn``: named as a
    /// subcommand of `lockbox` (`_superCommandName`), which makes swift-argument-parser, when it
    /// parses the command as its root, skip the completion-script check that only the real root
    /// answers. In the whole command tree, whose root is `lockbox`, the name changes nothing:
    /// help, usage and completions read it from the root only (the generated docs stay the same).
    func parsedOnItsOwn() -> CommandConfiguration {
        var configuration = self
        configuration._superCommandName = "lockbox"
        return configuration
    }
}
