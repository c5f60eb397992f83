import ArgumentParser
import CLinux
import Dispatch
import FoundationEssentials
import Lockbox
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "OAuth token sets: store, read, refresh once across processes, clear.",
        discussion: """
            Exit codes: 50 session expired (the refresh token was rejected; tokens cleared), \
            51 the refresh failed for another reason (tokens kept), 52 no tokens stored, 53 the access \
            token has expired and nothing refreshed it.
            Example: lockbox token status com.example.api alice
            """,
        subcommands: [SetTokens.self, GetToken.self, TokenStatusCommand.self, ClearTokens.self])

    /// Without a subcommand: a usage error (exit 64), not help with exit 0.
    func run() throws { throw ValidationError("name a subcommand; `lockbox token --help` lists them") }
}

struct SetTokens: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Store a token set from an OAuth 2.0 token response (RFC 6749 §5.1 JSON) on standard input.",
        discussion: "Example: curl -s -d @grant https://idp.example/token | lockbox token set com.example.api alice")
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Argument(help: "The account.") var account: String
    @Option(help: "The user the session belongs to.") var subject: String?

    func run() throws {
        let store = try vaultOptions.storeOpener().openStore()
        let json = try SecretInput.read(from: .standardInput, limit: 1 << 20, stopAtNewline: false, what: "token response")
        let data = json.withUnsafeBytes { Data($0) }
        try TokenRefresher(store: store).save(oauthResponse: data, service: service, account: account, subject: subject)
        Console.status("Tokens stored for '\(account)' on '\(service)'.")
    }
}

struct GetToken: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print a token. With --refresh-with, an expired access token is refreshed first — once, however many processes ask.",
        discussion: """
            --refresh-with runs COMMAND with /bin/sh; it gets the refresh token on standard input \
            (never in its arguments or environment) and must print the OAuth token response JSON. \
            An `invalid_grant` error response means the session expired (tokens cleared, exit 50); \
            a non-zero exit or anything else is a transient failure (tokens kept, exit 51). Without \
            --refresh-with, an access token that has expired (or expires within --leeway) is not printed \
            (exit 53) unless --allow-expired is given.
            Example: lockbox token get com.example.api alice --refresh-with ./refresh.sh
            """)
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Argument(help: "The account.") var account: String
    @Option(help: "Which token: access or refresh.") var field: TokenField = .access
    @Flag(help: "Print the whole token set as JSON (tokens included): accessToken, tokenType, refreshToken, expiresAt, scope, subject.")
    var json = false
    @Option(help: ArgumentHelp("A command that refreshes the tokens (it is described in this command's help).", valueName: "command"))
    var refreshWith: String?
    @Option(help: ArgumentHelp("Seconds before expiry that a token counts as expired.", valueName: "seconds")) var leeway: Double = 60
    @Flag(help: "Print the access token even when it has expired (else exit 53 without --refresh-with).") var allowExpired = false

    enum TokenField: String, ExpressibleByArgument { case access, refresh }

    func validate() throws {
        // NaN, infinities and huge values would crash the conversion to a Duration.
        guard (0...86_400).contains(leeway) else { throw ValidationError("--leeway takes seconds from 0 to 86400") }
    }

    func run() throws {
        let tokens = TokenRefresher(store: try vaultOptions.storeOpener().openStore(), leeway: .milliseconds(Int64(leeway * 1000)))
        if let refreshWith {
            _ = try blockingAwait {
                try await tokens.validAccessToken(service: service, account: account) { current in
                    try Self.runRefresher(refreshWith, current)
                }
            }
        }
        guard let set = try tokens.load(service: service, account: account) else {
            throw LockboxError.noTokens(service: service, account: account)
        }
        // An access token Lockbox itself counts as expired is not handed out as if it were good.
        if (field == .access || json) && !allowExpired && !set.isValid(at: Date(), leeway: .milliseconds(Int64(leeway * 1000))) {
            throw CLIError.accessTokenExpired(service: service, account: account)
        }
        if json {
            /// The token set in the CLI's JSON dialect (camelCase, pretty-printed, like every `--json`).
            struct Tokens: Encodable {
                var accessToken: String, tokenType: String, refreshToken: String?, expiresAt: Date?, scope: String?, subject: String?
            }
            let tokens = Tokens(
                accessToken: set.accessToken.stringValue() ?? "", tokenType: set.tokenType,
                refreshToken: set.refreshToken?.stringValue(), expiresAt: set.expiresAt, scope: set.scope,
                subject: set.subject)
            try Console.printJSON(tokens)
            return
        }
        guard let token = field == .access ? set.accessToken : set.refreshToken else {
            throw LockboxError.invalidArgument("no refresh token is stored for '\(account)' on '\(service)'")
        }
        _ = try token.withUnsafeBytes { try FileDescriptor.standardOutput.writeAll($0) }
        if isatty(STDOUT_FILENO) == 1 { _ = try FileDescriptor.standardOutput.writeAll("\n".utf8) }
    }

    /// Runs the refresher with the refresh token on its standard input; parses its output.
    static func runRefresher(_ command: String, _ current: TokenSet) throws -> TokenSet {
        let (output, status) = try runShell(command) { input in
            // A refresher that exits without reading is its own failure, reported below (SIGPIPE
            // is ignored: the write fails with EPIPE).
            if let refresh = current.refreshToken { _ = try? refresh.withUnsafeBytes { try input.writeAll($0) } }
        }
        let data = Data(output)
        if (try? JSONDecoder().decode(TokenSet.OAuthResponse.self, from: data))?.error == "invalid_grant" {
            throw TokenRefreshError.rejected("the refresher answered invalid_grant")
        }
        guard status == 0 else {
            throw RefreshFailed(
                detail: status > 0
                    ? "the refresh command exited with status \(status)"
                    : "the refresh command was killed by signal \(-status)")
        }
        do {
            return try TokenSet(oauthResponse: data, previous: current)
        } catch let error as LockboxError {
            throw RefreshFailed(detail: error.description)
        }
    }
}

struct TokenStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "When the access token expires; never a token.",
        discussion: "Example: lockbox token status com.example.api alice --json")
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Argument(help: "The account.") var account: String
    @Flag(help: "Print JSON: expiresAt, expiresInSeconds (negative once expired), refreshToken (stored or not), tokenType, scope, subject.")
    var json = false

    /// `token status --json`: about the tokens, never a token.
    struct Report: Encodable {
        var expiresAt: Date?
        var expiresInSeconds: Int?
        var refreshToken: Bool
        var tokenType: String
        var scope: String?
        var subject: String?
    }

    func run() throws {
        guard let set = try TokenRefresher(store: try vaultOptions.storeOpener().openStore()).load(service: service, account: account)
        else {
            throw LockboxError.noTokens(service: service, account: account)
        }
        if json {
            try Console.printJSON(
                Report(
                    expiresAt: set.expiresAt, expiresInSeconds: set.expiresAt.map { Int($0.timeIntervalSinceNow.rounded()) },
                    refreshToken: set.refreshToken != nil, tokenType: set.tokenType, scope: set.scope, subject: set.subject))
            return
        }
        if let expires = set.expiresAt {
            let left = Int(expires.timeIntervalSinceNow.rounded())
            print(
                left > 0
                    ? "access token expires in \(left) s (at \(expires.formatted(.iso8601)))"
                    : "access token expired \(-left) s ago (at \(expires.formatted(.iso8601)))")
        } else {
            print("access token: no expiry given")
        }
        print("refresh token: \(set.refreshToken == nil ? "none" : "stored")")
        print("type: \(set.tokenType)" + (set.scope.map { ", scope: \($0)" } ?? "") + (set.subject.map { ", subject: \($0)" } ?? ""))
    }
}

struct ClearTokens: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear", abstract: "Remove a token set.",
        discussion: "Example: lockbox token clear com.example.api alice")
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Argument(help: "The account.") var account: String

    func run() throws {
        guard try TokenRefresher(store: try vaultOptions.storeOpener().openStore()).clear(service: service, account: account) else {
            throw LockboxError.noTokens(service: service, account: account)
        }
        Console.status("Tokens cleared for '\(account)' on '\(service)'.")
    }
}

struct DeviceID: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-id",
        abstract: "Print the service's stable device ID, creating it on first use (one, even under concurrent first calls).",
        discussion: "Example: lockbox device-id com.example.app")
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Option(help: "Another account for the ID, e.g. guest:alice.") var account: String = DeviceIdentity.defaultAccount
    @Flag(help: "Make a new ID, replacing the stored one (asked to confirm on a terminal; --yes without one).") var reset = false
    @Flag(help: ArgumentHelp(Confirmation.yesHelp)) var yes = false
    @Flag(help: "Print JSON: service, account, deviceId, reset.") var json = false

    /// `device-id --json`.
    struct Report: Encodable {
        var service, account, deviceId: String
        var reset: Bool
    }

    func run() throws {
        let identity = DeviceIdentity(store: try vaultOptions.storeOpener().openStore())
        if reset {
            try Confirmation.require(
                yes: yes, question: "Replace the device ID of '\(service)' with a new one?",
                what: "replace the device ID of '\(service)'")
        }
        let id = reset ? try identity.reset(service: service, account: account) : try identity.deviceID(service: service, account: account)
        if json {
            try Console.printJSON(Report(service: service, account: account, deviceId: id.uuidString.lowercased(), reset: reset))
            return
        }
        print(id.uuidString.lowercased())
    }
}

struct SignOutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signout",
        abstract: "Clear everything a service stored: tokens, PINs, protected items, device ID (unless --keep-device-id).",
        discussion: "Example: lockbox signout com.example.app --keep-device-id")
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Flag(help: "Keep the device ID.") var keepDeviceId = false
    @Flag(help: ArgumentHelp(Confirmation.yesHelp)) var yes = false
    @Flag(help: "Print JSON: service, removed and kept (each a list of account and kind).") var json = false

    /// `signout --json`.
    struct Report: Encodable {
        struct Item: Encodable { var account, kind: String }
        var service: String
        var removed, kept: [Item]
    }

    func run() throws {
        let store = try vaultOptions.storeOpener().openStore()
        try Confirmation.require(
            yes: yes,
            question: "Remove everything '\(service)' stored (tokens, PINs, protected items\(keepDeviceId ? "" : ", device ID"))?",
            what: "sign out of '\(service)'")
        let report = try SignOut.run(service: service, store: store, keepDeviceID: keepDeviceId)
        if json {
            try Console.printJSON(
                Report(
                    service: service, removed: report.removed.map { Report.Item(account: $0.account, kind: "\($0.kind)") },
                    kept: report.kept.map { Report.Item(account: $0.account, kind: "\($0.kind)") }))
            return
        }
        for item in report.removed { print("removed  \(item.account)  (\(item.kind))") }
        for item in report.kept { print("kept     \(item.account)  (\(item.kind))") }
        Console.status("Signed out of '\(service)': \(report.removed.count) item(s) removed.")
    }
}

/// Runs `/bin/sh -c command` with this process's environment and standard error, a pipe on its
/// standard input (which `feed` writes to before it is closed) and one on its standard output
/// (read to its end); no other descriptor of ours reaches it, and its signals start at their
/// defaults (lockbox ignores SIGPIPE). Returns the output and the exit status, or minus the signal
/// that ended the command.
func runShell(_ command: String, feed: (FileDescriptor) throws -> Void) throws -> (output: [UInt8], status: Int32) {
    var inputPipe: [Int32] = [-1, -1]
    var outputPipe: [Int32] = [-1, -1]
    guard lockbox_pipe_cloexec(&inputPipe) == 0 else { throw Errno(rawValue: errno) }
    guard lockbox_pipe_cloexec(&outputPipe) == 0 else {
        close(inputPipe[0])
        close(inputPipe[1])
        throw Errno(rawValue: errno)
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, inputPipe[0], STDIN_FILENO)
    posix_spawn_file_actions_adddup2(&actions, outputPipe[1], STDOUT_FILENO)
    lockbox_spawn_close_from(&actions, 3)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var all = sigset_t()
    var none = sigset_t()
    sigfillset(&all)
    sigemptyset(&none)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
    let words: [String] = ["/bin/sh", "-c", command]
    let arguments: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
    defer { arguments.forEach { free($0) } }
    var child: pid_t = 0
    let spawned = posix_spawn(&child, "/bin/sh", &actions, &attributes, arguments, environ)
    close(inputPipe[0])
    close(outputPipe[1])
    let input = FileDescriptor(rawValue: inputPipe[1])
    let output = FileDescriptor(rawValue: outputPipe[0])
    guard spawned == 0 else {
        try? input.close()
        try? output.close()
        throw Errno(rawValue: spawned)
    }
    try? feed(input)
    try? input.close()
    let data = (try? output.readToEnd(limit: 1 << 20)) ?? []
    try? output.close()
    var status: Int32 = 0
    while waitpid(child, &status, 0) == -1 && errno == EINTR {}
    // WIFEXITED / WEXITSTATUS / WTERMSIG, which are macros.
    let exited = status & 0x7F == 0
    return (data, exited ? (status >> 8) & 0xFF : -(status & 0x7F))
}

/// Runs async work from a synchronous command and waits for it.
func blockingAwait<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.set(.success(try await work())) } catch { box.set(.failure(error)) }
        done.signal()
    }
    done.wait()
    return try box.get()
}

private final class ResultBox<T: Sendable>: @unchecked Sendable {
    private let result = Locked<Result<T, any Error>?>(nil)
    func set(_ value: Result<T, any Error>) { result.withLock { $0 = value } }
    func get() throws -> T {
        guard let result = result.withLock({ $0 }) else { throw LockboxError.invalidArgument("no result") }
        return try result.get()
    }
}
