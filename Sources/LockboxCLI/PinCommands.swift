import ArgumentParser
import FoundationEssentials
import Lockbox
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

struct Pin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract:
            "PINs for PIN profiles (a person of an app, e.g. kids max): Argon2id hashes in the store, with lockout after wrong tries.",
        discussion: """
            PINs come from a no-echo prompt on the terminal, or from standard input one per line \
            (`set` reads the PIN twice; `change` reads the old PIN, then the new one twice). Never \
            from an argument.
            PINs are kept only in an encrypted file vault: in the Secret Service every process of your \
            user could read a PIN's hash and reset its failure count, so there `set`, `verify`, `change` \
            and `reset` stop with exit 36 before asking for a PIN (`status` and `remove` still work, to \
            clean up older records). Use `--store file`.
            Exit codes: 30 wrong PIN, 31 locked out (the message says when to retry), 32 PIN disabled \
            after 100 failures, 33 no PIN set, 34 PIN refused by the policy, 35 PIN wiped after too many failures, \
            36 the store cannot keep PINs (the Secret Service).
            Example: lockbox pin set kids max
            """,
        subcommands: [
            SetPin.self, VerifyPin.self, ChangePin.self, RemovePin.self, PinStatusCommand.self, ResetPin.self,
            Calibrate.self,
        ])

    /// Without a subcommand: a usage error (exit 64), not help with exit 0.
    func run() throws { throw ValidationError("name a subcommand; `lockbox pin --help` lists them") }
}

/// What every `pin` subcommand shares: the store, the profile, and hashing cost.
struct PinOptions: ParsableArguments {
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service (app) the PIN profile belongs to, e.g. kids.") var service: String
    @Argument(help: "The PIN profile (not --profile, which names a store choice), e.g. max.") var profileName: String
    @Option(help: "Argon2id cost for new hashes; an older hash is upgraded on the next successful verify.")
    var hashCost: KDFPreset = .moderate
    @Flag(help: "Allow letters and symbols (a passcode), not only digits.") var alphanumeric = false

    var profile: PinProfile { PinProfile(service: service, name: profileName) }

    /// The guard over the profile's store. With `checkingStore`, a store other processes of the
    /// user can read and rewrite (the Secret Service) is refused here, before any PIN is asked for.
    func guardian(checkingStore: Bool = true) throws -> PinGuard {
        let store = try vaultOptions.storeOpener().openStore()
        if checkingStore && store.isOpenToOtherProcessesOfUser {
            throw LockboxError.pinStoreUnprotected(store: "\(type(of: store))")
        }
        return PinGuard(store: store, policy: PinPolicy(allowsNonDigits: alphanumeric), hashParameters: hashCost.parameters)
    }
}

/// Reads PINs: a no-echo prompt on a terminal, else one line of standard input each.
enum PinInput {
    static func read(_ prompt: String) throws -> SecretBytes {
        if isatty(STDIN_FILENO) == 1, let typed = try Terminal.readHidden(prompt: prompt) { return typed }
        let line = try SecretInput.read(from: .standardInput, limit: 1024, stopAtNewline: true, what: "PIN")
        guard line.count > 0 else { throw CLIError.noInput("no PIN on standard input (one PIN per line)") }
        return line
    }

    static func readTwice(_ prompt: String) throws -> SecretBytes {
        let first = try read(prompt)
        let second = try read("Repeat to confirm: ")
        guard first == second else { throw CLIError.mismatch("PIN") }
        return first
    }
}

struct SetPin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Set the PIN of a PIN profile that has none (asked twice).",
        discussion: "Example: lockbox pin set kids max --wipe-after 10 --wipe-item savings")
    @OptionGroup var options: PinOptions
    @Option(
        help: ArgumentHelp(
            "Seconds locked after the 1st, 2nd, … consecutive failure; the last repeats. Default: 0,0,0,0,60,300,900,900,3600.",
            valueName: "s,s,…"))
    var lockoutDelays: String?
    @Option(
        help: ArgumentHelp("Wipe the PIN (and --wipe-item accounts) after this many consecutive failures. Off by default.", valueName: "n"))
    var wipeAfter: Int?
    @Option(help: ArgumentHelp("An account of the same service to wipe with the PIN; repeatable.", valueName: "account")) var wipeItem:
        [String] = []
    @Option(help: ArgumentHelp("Disable the PIN after this many consecutive failures (at most 100).", valueName: "n")) var disableAfter:
        Int = LockoutPolicy.hardLimit

    func run() throws {
        var lockout = LockoutPolicy.default
        if lockoutDelays != nil || wipeAfter != nil || disableAfter != LockoutPolicy.hardLimit {
            let delays =
                try lockoutDelays.map { text in
                    try text.split(separator: ",").map { part -> Double in
                        guard let value = Double(part.trimmingWhiteSpace()) else {
                            throw ValidationError("--lockout-delays takes seconds separated by commas, e.g. 0,0,0,0,60,300")
                        }
                        return value
                    }
                } ?? LockoutPolicy.default.delays
            lockout = try LockoutPolicy(delays: delays, wipeAfter: wipeAfter, disableAfter: disableAfter)
        }
        let guardian = try options.guardian()
        let pin = try PinInput.readTwice("New PIN for '\(options.profileName)': ")
        try guardian.set(
            options.profile, pin: pin, lockout: lockout,
            wipeItems: wipeItem.map { ItemKey(service: options.service, account: $0) })
        Console.status("PIN set for '\(options.profileName)' on '\(options.service)'.")
    }
}

struct VerifyPin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify", abstract: "Check a PIN (exit 0 if right).",
        discussion: "Example: lockbox pin verify kids max")
    @OptionGroup var options: PinOptions

    func run() throws {
        let guardian = try options.guardian()
        try guardian.verify(options.profile, pin: try PinInput.read("PIN for '\(options.profileName)': "))
        Console.status("PIN accepted.")
    }
}

struct ChangePin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "change", abstract: "Change a PIN: the old one, then the new one twice.",
        discussion: "Example: lockbox pin change kids max")
    @OptionGroup var options: PinOptions

    func run() throws {
        let guardian = try options.guardian()
        let old = try PinInput.read("Current PIN for '\(options.profileName)': ")
        let new = try PinInput.readTwice("New PIN: ")
        try guardian.change(options.profile, from: old, to: new)
        Console.status("PIN changed.")
    }
}

struct RemovePin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove a PIN profile's PIN and its counters.",
        discussion: "Example: lockbox pin remove kids max")
    @OptionGroup var options: PinOptions

    func run() throws {
        guard try options.guardian(checkingStore: false).remove(options.profile) else {
            throw LockboxError.pinNotSet(profile: options.profile.description)
        }
        Console.status("PIN removed for '\(options.profileName)'.")
    }
}

struct PinStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Failures and lockout of a PIN profile; nothing secret.",
        discussion: "Example: lockbox pin status kids max --json")
    @OptionGroup var options: PinOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let status = try options.guardian(checkingStore: false).status(options.profile)
        if json {
            struct Report: Encodable {
                var failures: Int, disabled: Bool, delays: [Double], disableAfter: Int, lockedUntil: Date?, wipeAfter: Int?
            }
            try Console.printJSON(
                Report(
                    failures: status.failures, disabled: status.disabled, delays: status.lockout.delays,
                    disableAfter: status.lockout.disableAfter, lockedUntil: status.lockedUntil,
                    wipeAfter: status.lockout.wipeAfter))
            return
        }
        print("failures  \(status.failures)")
        if let until = status.lockedUntil {
            print("locked    until \(until.formatted(.iso8601)) (\(Int(until.timeIntervalSinceNow.rounded(.up))) s)")
        } else {
            print("locked    no")
        }
        print("disabled  \(status.disabled ? "yes (reset with `lockbox pin reset`)" : "no")")
    }
}

struct ResetPin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract: "Clear failures and re-enable a disabled PIN, on a higher authority's word.",
        discussion:
            "With --by, another PIN profile's PIN (asked like any PIN); without it, the file vault's passphrase: from --passphrase-fd, else asked (again, even if a key file opened the vault).\nExample: lockbox pin reset kids max --by parent"
    )
    @OptionGroup var options: PinOptions
    @Option(help: ArgumentHelp("Another PIN profile of the same service whose PIN authorises the reset.", valueName: "profile")) var by:
        String?

    func run() throws {
        let guardian = try options.guardian()
        if let by {
            let pin = try PinInput.read("PIN for '\(by)': ")
            try guardian.reset(options.profile, authorizedBy: PinProfile(service: options.service, name: by), pin: pin)
        } else {
            // The vault passphrase is the higher authority: it must open a passphrase slot now.
            // --passphrase-fd (the descriptor read once, whether or not it opened the store), else
            // the terminal, else a line of standard input.
            guard
                let passphrase = try options.vaultOptions.passphraseFd.map({ try VaultOptions.passphrase(fromDescriptor: $0) })
                    ?? Terminal.readHidden(prompt: "Vault passphrase: ") ?? stdinPassphrase()
            else {
                throw CLIError.noInput("no passphrase to authorise the reset: --passphrase-fd N, a terminal, or a line of standard input")
            }
            _ = try FileVault.open(at: options.vaultOptions.vaultPath, credential: .passphrase(passphrase))
            try guardian.reset(options.profile)
        }
        Console.status("PIN reset for '\(options.profileName)'.")
    }

    private func stdinPassphrase() throws -> SecretBytes? {
        let line = try SecretInput.read(from: .standardInput, limit: 4096, stopAtNewline: true, what: "passphrase")
        return line.count > 0 ? line : nil
    }
}

struct Calibrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "calibrate",
        abstract: "Measure Argon2id here and suggest PIN hash parameters for a target time.",
        discussion: "Example: lockbox pin calibrate --target 0.5")
    @Option(help: ArgumentHelp("Seconds one verification should take.", valueName: "seconds")) var target: Double = 0.35
    @Option(help: ArgumentHelp("Memory in MiB (at least 64).", valueName: "MiB")) var memory: Int = 256

    func validate() throws {
        guard (64...4096).contains(memory) else { throw ValidationError("--memory takes 64 to 4096 (MiB)") }
        guard (0.01...60).contains(target) else { throw ValidationError("--target takes seconds from 0.01 to 60") }
    }

    func run() throws {
        let results = try PinHashCalibration.measure(target: target, memoryMiB: memory)
        print("passes  memory   seconds")
        for row in results.rows {
            print(
                Console.rightAligned("\(row.parameters.opsLimit)", width: 6) + "  "
                    + Console.rightAligned("\(row.parameters.memoryLimitBytes >> 20)", width: 4) + " MiB  "
                    + Console.decimal(row.seconds, places: 3))
        }
        print("Suggested: \(results.suggested) (about \(Console.decimal(results.suggestedSeconds, places: 2)) s per verification).")
        print("Lockbox's default is \(PinGuard.defaultHashParameters).")
    }
}
