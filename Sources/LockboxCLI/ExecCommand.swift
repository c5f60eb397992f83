import ArgumentParser
import CLinux
import FoundationEssentials
import Lockbox
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// `lockbox exec`: runs a program with secrets of the vault in its environment or on descriptors
/// of its own, so no secret passes through a shell variable, an argument or a log.
struct Exec: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run a program with secrets from the vault in its environment or on its descriptors.",
        discussion: """
            Every secret named is read before the program starts: a missing item fails with exit 2, \
            naming it, and the program does not run. Secrets never appear in arguments. SERVICE/ACCOUNT \
            is split at its last slash, so a service may hold slashes (a URL) and an account may not.

            --env-file reads lines NAME=VALUE (an optional `export ` before NAME; blank lines and lines \
            starting with # are skipped; a value in matching single or double quotes loses them). A VALUE \
            lockbox://SERVICE/ACCOUNT is replaced by that item's secret; other values are passed as they \
            are. --env wins over --env-file, and both over lockbox's own environment, which the program \
            inherits.

            --fd N=SERVICE/ACCOUNT hands the secret on descriptor N (3 or more) instead: a sealed, \
            read-only in-memory file holding exactly the secret, which the program reads like any file \
            (e.g. `cat <&3`, or /dev/fd/3). That is safer than the environment: /proc/PID/environ is \
            readable by every process of the same user, and environments are copied into crash \
            reports, debug dumps and every process the program starts.

            The program inherits standard input, output and error. SIGINT, SIGTERM and SIGHUP sent \
            to lockbox are passed on to it (signals the terminal sends to the whole foreground process \
            group reach it directly and are not sent twice), and lockbox waits for it to end. Its exit \
            status is lockbox's, or 128+N when signal N ended it; 127 if it could not be found, 126 if \
            it could not be run.

            Example: lockbox exec --env DB_PASSWORD=db/app -- ./migrate
            Example, with references in ci.env: lockbox exec --env-file ci.env -- make deploy
            Example, on descriptor 3: lockbox exec --fd 3=db/app -- myapp --password-file /dev/fd/3
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Option(
        name: .customLong("env"),
        help: ArgumentHelp(
            "Set variable NAME to the secret of item SERVICE/ACCOUNT; repeatable.", valueName: "NAME=SERVICE/ACCOUNT"))
    var environmentSpecs: [String] = []
    @Option(
        name: .customLong("env-file"),
        help: ArgumentHelp(
            "Set the variables of FILE, resolving values lockbox://SERVICE/ACCOUNT from the vault; repeatable.", valueName: "FILE"))
    var environmentFiles: [String] = []
    @Option(
        name: .customLong("fd"),
        help: ArgumentHelp(
            "Hand the secret of SERVICE/ACCOUNT on descriptor N (3 or more) of the program; repeatable.", valueName: "N=SERVICE/ACCOUNT"))
    var descriptorSpecs: [String] = []
    @Argument(parsing: .postTerminator, help: ArgumentHelp("The program and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    /// The largest `--fd` descriptor number.
    static let highestDescriptor: Int32 = 1023
    /// The longest env file read.
    static let environmentFileLimit = 1 << 20

    func validate() throws {
        guard !command.isEmpty else {
            throw ValidationError("name the program to run after --, e.g. lockbox exec --env A=svc/acct -- prog")
        }
        _ = try environmentAssignments()
        let descriptors = try descriptorAssignments()
        if let passphraseFd = vaultOptions.passphraseFd, descriptors.contains(where: { $0.descriptor == passphraseFd }) {
            throw ValidationError("--fd \(passphraseFd) is also --passphrase-fd; hand the secret on another descriptor")
        }
    }

    /// `--env` as (name, item), each name once.
    func environmentAssignments() throws -> [(name: String, item: ItemReference)] {
        var seen: Set<String> = []
        return try environmentSpecs.map { spec in
            guard let equals = spec.firstIndex(of: "=") else { throw ValidationError("--env takes NAME=SERVICE/ACCOUNT") }
            let name = String(spec[..<equals])
            guard EnvironmentFile.isVariableName(name) else {
                throw ValidationError("--env: '\(name)' is not a variable name (letters, digits and _, not starting with a digit)")
            }
            guard seen.insert(name).inserted else { throw ValidationError("--env \(name) is given twice") }
            guard let item = ItemReference(String(spec[spec.index(after: equals)...])) else {
                throw ValidationError("--env \(name)= takes SERVICE/ACCOUNT, both non-empty")
            }
            return (name, item)
        }
    }

    /// `--fd` as (descriptor, item), each descriptor once.
    func descriptorAssignments() throws -> [(descriptor: Int32, item: ItemReference)] {
        var seen: Set<Int32> = []
        return try descriptorSpecs.map { spec in
            guard let equals = spec.firstIndex(of: "="), let descriptor = Int32(spec[..<equals]),
                (3...Self.highestDescriptor).contains(descriptor)
            else {
                throw ValidationError(
                    "--fd takes N=SERVICE/ACCOUNT with N from 3 to \(Self.highestDescriptor) (0-2 are the standard streams)")
            }
            guard seen.insert(descriptor).inserted else { throw ValidationError("--fd \(descriptor) is given twice") }
            guard let item = ItemReference(String(spec[spec.index(after: equals)...])) else {
                throw ValidationError("--fd \(descriptor)= takes SERVICE/ACCOUNT, both non-empty")
            }
            return (descriptor, item)
        }
    }

    func run() throws {
        // Later sources win: the env files in order, then --env.
        var variables: [(name: String, value: EnvironmentFile.Value)] = []
        for path in environmentFiles { variables += try EnvironmentFile.read(path: path) }
        variables += try environmentAssignments().map { (name: $0.name, value: EnvironmentFile.Value.item($0.item)) }
        let descriptors = try descriptorAssignments()

        // Every secret is read before anything runs, so a missing one stops the program from starting.
        var secrets: [ItemReference: SecretBytes] = [:]
        let items = variables.compactMap { if case .item(let item) = $0.value { item } else { nil } } + descriptors.map(\.item)
        if !items.isEmpty {
            let vault = try vaultOptions.storeOpener().openVault()
            for item in items where secrets[item] == nil {
                do {
                    secrets[item] = try vault.require(service: item.service, account: item.account)
                } catch let error as LockboxError {
                    if case .itemNotFound = error { Console.status("lockbox: exec: \(item) is not stored; the program was not started.") }
                    throw error
                }
            }
        }
        PostgresCommands.support.withLock { $0 }?.closeAll()
        var environment: [(name: String, value: EnvironmentValue)] = []
        for (name, value) in variables {
            switch value {
            case .text(let text): environment.append((name, .text(text)))
            case .item(let item):
                guard let secret = secrets[item] else { continue }
                guard secret.withUnsafeBytes({ !$0.contains(0) }) else {
                    throw LockboxError.invalidArgument(
                        "the secret of \(item) holds a NUL byte, which an environment variable cannot carry; hand it with --fd instead")
                }
                environment.append((name, .secret(secret)))
            }
        }
        let handed = try descriptors.map { assignment in
            (assignment.descriptor, try SecretFile.holding(secrets[assignment.item] ?? SecretBytes(count: 0) { _ in }))
        }
        // From here the block holds the only copy of each variable's secret, wiped once the
        // program has started (lockbox ends with exit(3), which runs no deinitializer).
        var block = EnvironmentBlock(inherited: environ, setting: environment)
        Trace.log("exec: \(environment.count) variable(s), \(handed.count) descriptor(s); starting the program")
        environment.removeAll()
        secrets.removeAll()
        let status = try ChildProcess.run(command, environment: &block, descriptors: handed)
        Trace.log("done: exit \(status) (the program's)")
        LockboxCommand.exitIfStandardOutputFailed()
        Glibc.exit(status)
    }
}

/// An item named on the command line or in an env file: `SERVICE/ACCOUNT`, split at the last slash.
struct ItemReference: Hashable, CustomStringConvertible {
    var service: String
    var account: String

    /// Parses `SERVICE/ACCOUNT`; `nil` unless both parts are non-empty.
    init?(_ text: String) {
        guard let slash = text.lastIndex(of: "/") else { return nil }
        service = String(text[..<slash])
        account = String(text[text.index(after: slash)...])
        guard !service.isEmpty, !account.isEmpty else { return nil }
    }

    var description: String { "'\(account)' on '\(service)'" }
}

/// An env file for `lockbox exec --env-file`, the shape `op run --env-file` reads.
enum EnvironmentFile {
    /// What a line sets a variable to.
    enum Value {
        /// The value as written (quotes removed).
        case text(String)
        /// The secret of this item (`lockbox://SERVICE/ACCOUNT`).
        case item(ItemReference)
    }

    /// The prefix of a value that names an item.
    static let referenceScheme = "lockbox://"

    /// Whether `name` is a portable variable name: letters, digits and `_`, not starting with a digit.
    static func isVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
    }

    /// The assignments of the file at `path`, in order.
    static func read(path: String) throws -> [(name: String, value: Value)] {
        let bytes: [UInt8]
        do {
            let file = try FileDescriptor.open(FilePath(path), .readOnly, options: .closeOnExec)
            defer { try? file.close() }
            bytes = try file.readToEnd(limit: Exec.environmentFileLimit)
        } catch let error as Errno {
            throw LockboxError.io(operation: "reading the env file", path: path, errno: error)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw LockboxError.invalidArgument("the env file \(path) is not UTF-8 text")
        }
        return try parse(text, name: path)
    }

    /// The assignments of `text`; errors name the file (`name`) and the line, never a value.
    static func parse(_ text: String, name: String) throws -> [(name: String, value: Value)] {
        var assignments: [(name: String, value: Value)] = []
        // "\r\n" is one Character in Swift: both line ends split.
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).enumerated() {
            var line = line
            line = line.drop { $0 == " " || $0 == "\t" }
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") { line = line.dropFirst("export ".count).drop { $0 == " " } }
            guard let equals = line.firstIndex(of: "="), isVariableName(String(line[..<equals])) else {
                throw LockboxError.invalidArgument("\(name), line \(index + 1): expected NAME=VALUE with NAME of letters, digits and _")
            }
            var value = line[line.index(after: equals)...]
            if value.count >= 2, let quote = value.first, quote == "\"" || quote == "'", value.last == quote {
                value = value.dropFirst().dropLast()
            }
            if value.hasPrefix(referenceScheme) {
                guard let item = ItemReference(String(value.dropFirst(referenceScheme.count))) else {
                    throw LockboxError.invalidArgument(
                        "\(name), line \(index + 1): a reference is lockbox://SERVICE/ACCOUNT, both non-empty")
                }
                assignments.append((String(line[..<equals]), .item(item)))
            } else {
                assignments.append((String(line[..<equals]), .text(String(value))))
            }
        }
        return assignments
    }
}

/// A variable for the program: plain text, or a secret kept in ``SecretBytes``.
enum EnvironmentValue {
    case text(String)
    case secret(SecretBytes)
}

/// A sealed in-memory file (memfd) holding one secret, for `exec --fd`.
enum SecretFile {
    /// A close-on-exec descriptor of a new memfd holding `secret`, sealed against writing,
    /// growing and shrinking, positioned at its start.
    static func holding(_ secret: SecretBytes) throws -> FileDescriptor {
        let raw = lockbox_memfd_secret()
        guard raw >= 0 else {
            throw LockboxError.io(operation: "creating an in-memory file for", path: "a secret", errno: Errno(rawValue: errno))
        }
        let file = FileDescriptor(rawValue: raw)
        do {
            _ = try secret.withUnsafeBytes { try file.writeAll($0) }
            guard lockbox_memfd_seal(raw) == 0 else { throw Errno(rawValue: errno) }
            _ = try file.seek(offset: 0, from: .start)
        } catch let error as Errno {
            try? file.close()
            throw LockboxError.io(operation: "writing the in-memory file of", path: "a secret", errno: error)
        }
        return file
    }
}

/// The write end of the pipe the signal handler of ``ChildProcess`` writes forwarded signals to;
/// set before the handler is installed and never changed afterwards.
nonisolated(unsafe) private var forwardedSignalsPipe: Int32 = -1

/// Starts a program and waits for it, forwarding signals: what `lockbox exec` does.
enum ChildProcess {
    /// The signals passed on to the program.
    static let forwardedSignals = [SIGINT, SIGTERM, SIGHUP]

    /// Runs `command` (found on lockbox's PATH) with `environment`, and `descriptors` on the
    /// given numbers; the standard streams are inherited. Returns its exit status, 128+N for
    /// signal N, 127 when it was not found and 126 when it could not be run. `environment` is
    /// wiped and every descriptor of `descriptors` closed once it has started.
    static func run(
        _ command: [String], environment environmentBlock: inout EnvironmentBlock,
        descriptors: [(Int32, FileDescriptor)]
    ) throws -> Int32 {
        defer { environmentBlock.wipe() }
        var handed: [(target: Int32, source: Int32)] = []
        defer { handed.forEach { _ = close($0.source) } }
        // Every source above every target, so no dup2 replaces a source still to be handed.
        let floor = (descriptors.map(\.0).max() ?? 2) + 1
        for (target, file) in descriptors {
            let source = fcntl(file.rawValue, F_DUPFD_CLOEXEC, floor)
            try? file.close()
            guard source >= 0 else {
                throw LockboxError.io(operation: "duplicating", path: "a secret's descriptor", errno: Errno(rawValue: errno))
            }
            handed.append((target, source))
        }
        // Installed before the program starts: a signal that comes meanwhile is passed on once it runs.
        // The handlers stay until lockbox exits, so a late signal cannot end lockbox before it reports the status.
        let reader = try installForwarding()

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let targets = Set(handed.map(\.target))
        let highestTarget = targets.max() ?? 2
        // Descriptors of lockbox below the highest target that would stay open are closed one by one.
        for fd in Int32(3)...max(3, highestTarget) where !targets.contains(fd) {
            let flags = fcntl(fd, F_GETFD)
            if flags >= 0 && flags & FD_CLOEXEC == 0 { posix_spawn_file_actions_addclose(&actions, fd) }
        }
        for (target, source) in handed { posix_spawn_file_actions_adddup2(&actions, source, target) }
        lockbox_spawn_close_from(&actions, highestTarget + 1)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // lockbox ignores SIGPIPE; the program starts with it at its default and nothing blocked.
        // Signals lockbox handles return to their defaults on exec; those it was started with ignored stay ignored.
        var defaults = sigset_t()
        var none = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { arguments.forEach { free($0) } }
        var child: pid_t = 0
        let spawned = environmentBlock.withPointers { envp in
            posix_spawnp(&child, command[0], &actions, &attributes, arguments, envp)
        }
        environmentBlock.wipe()
        handed.forEach { _ = close($0.source) }
        handed.removeAll()
        guard spawned == 0 else {
            let status: Int32 = spawned == ENOENT ? 127 : 126
            Console.status("lockbox: exec: cannot run \(command[0]): \(String(cString: strerror(spawned)))")
            Trace.log("failed: exit \(status)")
            return status
        }
        Trace.log("exec: started process \(child)")
        return wait(for: child, forwardingFrom: reader)
    }

    /// Waits for `child` to end, passing on every signal number read from `reader`.
    private static func wait(for child: pid_t, forwardingFrom reader: Int32) -> Int32 {
        let pidfd = lockbox_pidfd_open(child)
        defer { if pidfd >= 0 { close(pidfd) } }
        while true {
            var status: Int32 = 0
            let reaped = waitpid(child, &status, WNOHANG)
            if reaped == child {
                // WIFEXITED / WEXITSTATUS / WTERMSIG, which are macros.
                let signal = status & 0x7F
                return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
            }
            if reaped == -1 && errno != EINTR {
                Console.status("lockbox: exec: lost track of process \(child): \(String(cString: strerror(errno)))")
                return ExitStatus.failure.rawValue
            }
            var polled = [pollfd(fd: reader, events: Int16(POLLIN), revents: 0)]
            if pidfd >= 0 { polled.append(pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)) }
            // Without a pidfd (Linux before 5.3) the child is looked at every 100 ms.
            _ = poll(&polled, nfds_t(polled.count), pidfd >= 0 ? -1 : 100)
            if polled[0].revents & Int16(POLLIN) != 0 {
                var signals = [UInt8](repeating: 0, count: 16)
                let count = read(reader, &signals, signals.count)
                for signal in signals.prefix(max(0, count)) {
                    Trace.log("exec: passing signal \(signal) on to process \(child)")
                    kill(child, Int32(signal))
                }
            }
        }
    }

    /// Installs the forwarding handler for each of ``forwardedSignals`` that lockbox was not
    /// started with ignored (as `nohup` leaves SIGHUP), and unblocks them; returns the read end
    /// of the pipe it writes to.
    private static func installForwarding() throws -> Int32 {
        var pipeEnds: [Int32] = [-1, -1]
        guard lockbox_pipe_cloexec(&pipeEnds) == 0 else {
            throw LockboxError.io(operation: "creating", path: "a pipe for signals", errno: Errno(rawValue: errno))
        }
        _ = fcntl(pipeEnds[1], F_SETFL, fcntl(pipeEnds[1], F_GETFL) | O_NONBLOCK)
        forwardedSignalsPipe = pipeEnds[1]
        // waitpid needs SIGCHLD not ignored (else children are reaped by the kernel).
        signal(SIGCHLD, SIG_DFL)
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for number in forwardedSignals {
            if isIgnored(number) { continue }
            var action = sigaction()
            action.__sigaction_handler.sa_sigaction = { number, info, _ in
                // The terminal's signals (sent by the kernel) go to the whole foreground process
                // group, the program included: passing them on would deliver them twice.
                let sentByKernel = info.map { $0.pointee.si_code == 0x80 } ?? false  // SI_KERNEL
                guard !sentByKernel else { return }
                let saved = errno
                var byte = UInt8(truncatingIfNeeded: number)
                _ = write(forwardedSignalsPipe, &byte, 1)
                errno = saved
            }
            action.sa_flags = SA_SIGINFO | SA_RESTART
            sigemptyset(&action.sa_mask)
            sigaction(number, &action, nil)
            sigaddset(&unblock, number)
        }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        return pipeEnds[0]
    }

    /// Whether signal `number` is ignored (SIG_IGN, the function pointer 1).
    private static func isIgnored(_ number: Int32) -> Bool {
        var current = sigaction()
        sigaction(number, nil, &current)
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == 1
    }
}

/// The program's environment as `NAME=VALUE` C strings: lockbox's own variables but those set,
/// then the ones set. Secrets are copied into one ``SecretBytes`` block, wiped by ``wipe()``.
struct EnvironmentBlock {
    private var plain: [UnsafeMutablePointer<CChar>?] = []
    private var secretBlock: SecretBytes?
    /// The offsets of each secret variable's C string in `secretBlock`.
    private var secretOffsets: [Int] = []

    init(inherited: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, setting variables: [(name: String, value: EnvironmentValue)]) {
        var lastIndex: [String: Int] = [:]
        for (index, variable) in variables.enumerated() { lastIndex[variable.name] = index }
        var pointer = inherited
        while let entry = pointer?.pointee {
            let text = String(cString: entry)
            let name = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? text
            if lastIndex[name] == nil { plain.append(strdup(entry)) }
            pointer = pointer?.successor()
        }
        var secrets: [(name: String, secret: SecretBytes)] = []
        for (index, variable) in variables.enumerated() where lastIndex[variable.name] == index {
            switch variable.value {
            case .text(let value): plain.append(strdup("\(variable.name)=\(value)"))
            case .secret(let secret): secrets.append((variable.name, secret))
            }
        }
        guard !secrets.isEmpty else { return }
        let total = secrets.reduce(0) { $0 + $1.name.utf8.count + 1 + $1.secret.count + 1 }
        var offsets: [Int] = []
        secretBlock = SecretBytes(count: total) { buffer in
            var offset = 0
            for (name, secret) in secrets {
                offsets.append(offset)
                for byte in name.utf8 + [UInt8(ascii: "=")] {
                    buffer[offset] = byte
                    offset += 1
                }
                secret.withUnsafeBytes { bytes in
                    UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<(offset + bytes.count)]).copyMemory(from: bytes)
                }
                offset += secret.count + 1  // the NUL is already there: SecretBytes start zeroed
            }
        }
        secretOffsets = offsets
    }

    /// Calls `body` with the NULL-terminated array of the variables.
    func withPointers<Result>(_ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>?) -> Result) -> Result {
        func call(_ secrets: [UnsafeMutablePointer<CChar>?]) -> Result {
            (plain + secrets + [nil]).withUnsafeBufferPointer { body($0.baseAddress) }
        }
        guard let secretBlock else { return call([]) }
        return secretBlock.withUnsafeBytes { bytes in
            // posix_spawn only reads the strings; SecretBytes hands out a read-only view.
            let base = UnsafeMutableRawPointer(mutating: bytes.baseAddress)
            return call(secretOffsets.map { offset in base.map { ($0 + offset).assumingMemoryBound(to: CChar.self) } })
        }
    }

    /// Frees the copies and wipes the secrets (their block is zeroed when released).
    mutating func wipe() {
        plain.forEach { free($0) }
        plain.removeAll()
        secretBlock = nil
        secretOffsets.removeAll()
    }
}
