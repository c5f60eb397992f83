import ArgumentParser
import Testing

@testable import LockboxCLI
@testable import LockboxTestSupport

/// `LockboxCommand.parseCommand` parses `get`, `set`, `delete`, `list` and `git-credential` by
/// their own definitions (a third of a file-vault `get`'s instructions were the root's
/// parse). These tests hold it to the root parser's behaviour: over a table of command lines
/// (successes, unknown options, missing and extra arguments, failed validation, help, `--version`,
/// completion-script and dump-help requests, global options before the subcommand), the command
/// parsed, or the message and exit status of the failure, are the same both ways.
@Suite("Parsing a hot command on its own")
struct ParseFastPathTests {
    /// Command lines as `main` passes them to the parser (after the program name).
    static let commandLines: [[String]] = [
        // Successes, parsed on their own.
        ["get", "S", "A"],
        ["get", "S", "A", "--store", "file"],
        ["get", "--vault", "/tmp/v.lockbox", "--key-file", "/tmp/k", "S", "A"],
        ["get", "--profile", "work", "--passphrase-fd", "3", "S", "A"],
        ["get", "--", "-S", "--A"],
        ["get", "--store=secret-service", "S", "A"],
        ["get", "--backend", "file", "S", "A"],
        ["set", "S", "A"],
        ["set", "S", "A", "--kind", "token", "--label", "L", "--attribute", "a=b", "--attribute", "c=", "--raw", "--protected"],
        ["set", "--allow-empty", "S", "A"],
        ["delete", "S", "A"],
        ["delete", "--store", "secret-service", "S", "A"],
        ["set", "S", "A", "--vault", "/tmp/v", "--passphrase-fd", "3"],
        ["get", "S", "A", "--tpm-pin-fd", "4", "--profile=p"],
        ["get", "--store", "postgres", "--postgres-url-file", "/tmp/u", "S", "A"],
        ["get", "--vault=", "S", "A"],
        ["get", "--passphrase-fd", "+3", "S", "A"],
        ["get", "--vault=-x", "S", "A"],
        ["get", "--store", "file", "--store", "file", "S", "A"],
        ["get", "", "A"],
        ["get", "--passphrase-fd", "99999999999", "S", "A"],
        ["get", "--vault", "-x", "S", "A"],
        ["get", "S", "A", "--store"],
        ["get", "--store", "file", "--backend", "file", "S", "A"],
        ["list"],
        ["list", "--service", "S", "--json"],
        ["list", "--json-lines"],
        ["list", "--service=S", "--store", "file"],
        ["list", "--json", "--json"],
        ["list", "--json=yes"],
        ["list", "--service"],
        ["git-credential", "get"],
        ["git-credential", "store", "--key-file", "/tmp/k"],
        ["git-credential", "unknown-operation"],
        // Global options before the subcommand (hoisted by main).
        ["--store", "file", "get", "S", "A"],
        ["--vault=/tmp/v", "--key-file", "/tmp/k", "list"],
        // Failures: the root parser's message and exit status.
        ["get"],
        ["get", "S"],
        ["get", "S", "A", "extra"],
        ["get", "--bogus", "S", "A"],
        ["get", "--store", "nonsense", "S", "A"],
        ["get", "--store", "file", "--backend", "secret-service", "S", "A"],
        ["get", "--passphrase-fd", "x", "S", "A"],
        ["get", "--vault"],
        ["set", "--passphrase-fd", "0", "S", "A"],
        ["set", "S", "A", "--attribute", "no-equals"],
        ["set", "S", "A", "--raw=yes"],
        ["delete"],
        ["list", "--json", "--json-lines"],
        ["list", "extra"],
        ["git-credential"],
        ["git-credential", "get", "more"],
        ["GET", "S", "A"],
        [],
        // Help, version, completion scripts, dump-help: the root answers them.
        ["get", "--help"],
        ["get", "-h"],
        ["get", "S", "A", "--help"],
        ["set", "--help-hidden"],
        ["help", "get"],
        ["get", "S", "A", "--version"],
        ["get", "--generate-completion-script", "bash"],
        ["list", "--generate-completion-script"],
        ["delete", "--experimental-dump-help"],
        // Not among the hot commands: the root parses them as before.
        ["wipe", "--all", "--yes"],
        ["pin", "verify", "--help"],
    ]

    /// What a parse gave: the command's type and its fields, or the failure as `main` reports it.
    enum Outcome: Equatable {
        case command(type: String, fields: String)
        case failure(message: String, exitStatus: Int32)
    }

    static func outcome(_ parse: () throws -> any ParsableCommand) -> Outcome {
        do {
            let command = try parse()
            var fields = ""
            dump(command, to: &fields)
            // An option group's title and visibility only shape help; a parse from the root does not
            // carry them over (it decodes the group), a command built by the short path keeps its
            // declaration's. The parsed values are what must agree.
            let parsed = fields.split(separator: "\n", omittingEmptySubsequences: false).filter {
                !$0.contains("_visibility: ArgumentParser.ArgumentVisibility") && !$0.contains("- base: ArgumentParser.ArgumentVisibility")
                    && !$0.contains("- title: ")
            }
            return .command(type: String(reflecting: type(of: command)), fields: parsed.joined(separator: "\n"))
        } catch {
            return .failure(message: LockboxCommand.fullMessage(for: error), exitStatus: LockboxCommand.exitCode(for: error).rawValue)
        }
    }

    @Test(
        "the same command, or the same message and exit status, as the root parser; only the hot commands' successes take the short path",
        arguments: commandLines)
    func sameAsTheRoot(commandLine: [String]) {
        let arguments = LockboxCommand.hoistingGlobalOptions(commandLine)
        let root = Self.outcome { try LockboxCommand.parseAsRoot(arguments) }
        let fast = Self.outcome { try LockboxCommand.parseCommand(arguments) }
        #expect(fast == root, "lockbox \(commandLine.joined(separator: " "))")
        // Exactly the root's successful parses of a hot command take the short path (the root's
        // help is a "success" too, of a help command, which the short path leaves to the root).
        var rootParsedAHotCommand = false
        if case .command(let type, _) = root {
            rootParsedAHotCommand = LockboxCommand.parsedOnTheirOwn.contains { String(reflecting: $0) == type }
        }
        #expect((LockboxCommand.parseOnItsOwn(arguments) != nil) == rootParsedAHotCommand, "lockbox \(commandLine.joined(separator: " "))")
        // What the direct parse accepts, the root parses to the same command (checked above,
        // since parseCommand tries it first); it accepts nothing the root refuses.
        if LockboxCommand.parseDirectly(arguments) != nil {
            #expect(rootParsedAHotCommand, "lockbox \(commandLine.joined(separator: " "))")
        }
    }

    /// The command lines the direct parse takes (all of them successes of the root, above).
    static let parsedDirectly: Set<[String]> = [
        ["get", "S", "A"], ["get", "S", "A", "--store", "file"], ["get", "--vault", "/tmp/v.lockbox", "--key-file", "/tmp/k", "S", "A"],
        ["get", "--profile", "work", "--passphrase-fd", "3", "S", "A"], ["get", "--store=secret-service", "S", "A"],
        ["get", "--backend", "file", "S", "A"], ["set", "S", "A"], ["delete", "S", "A"],
        ["delete", "--store", "secret-service", "S", "A"], ["set", "S", "A", "--vault", "/tmp/v", "--passphrase-fd", "3"],
        ["get", "S", "A", "--tpm-pin-fd", "4", "--profile=p"], ["get", "--store", "postgres", "--postgres-url-file", "/tmp/u", "S", "A"],
        ["get", "--passphrase-fd", "+3", "S", "A"], ["get", "--vault=-x", "S", "A"],
        ["get", "--store", "file", "--backend", "file", "S", "A"], ["--store", "file", "get", "S", "A"],
        ["list"], ["list", "--service", "S", "--json"], ["list", "--json-lines"], ["list", "--service=S", "--store", "file"],
        ["--vault=/tmp/v", "--key-file", "/tmp/k", "list"],
    ]

    @Test(
        "get, set and delete with only a service, an account and vault options, and list with those and its own, skip swift-argument-parser; nothing else does",
        arguments: commandLines)
    func directParse(commandLine: [String]) {
        let direct = LockboxCommand.parseDirectly(LockboxCommand.hoistingGlobalOptions(commandLine))
        #expect((direct != nil) == Self.parsedDirectly.contains(commandLine), "lockbox \(commandLine.joined(separator: " "))")
    }

    @Test("every hot command declares the configuration that skips the completion-script check")
    func configurations() {
        for command in LockboxCommand.parsedOnTheirOwn {
            #expect(command.configuration._superCommandName == "lockbox", "\(command)")
            #expect(LockboxCommand.configuration.subcommands.contains { $0 == command }, "\(command)")
        }
    }
}
