import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxSessionWindows

/// `10m`, `30s`, `1h`, `90` (seconds).
struct WindowLength: ExpressibleByArgument {
    var duration: Duration

    init?(argument: String) {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600]
        var text = Substring(argument)
        var scale = 1.0
        if let last = text.last, let unit = units[last] {
            scale = unit
            text = text.dropLast()
        }
        guard let value = Double(text), value > 0, value * scale <= 24 * 3600 else { return nil }
        duration = .milliseconds(Int64(value * scale * 1000))
    }

    static var defaultValueDescription: String { "5m" }
}

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Prove who you are once (PIN or passphrase); protected items then open without asking until the window ends.",
        discussion: """
            The window lives in the kernel keyring of this login session (never on disk): later \
            lockbox commands in the session use it, and for the file vault need neither the \
            passphrase nor the key file. It ends after --for, on `lockbox lock`, when the PIN or \
            passphrase changes, or when the session ends. With --pin, the profile's PIN is checked \
            (subject to its lockout); otherwise the vault passphrase is asked — a key file is a \
            service's credential, not a person's, and cannot open a window.
            Example: lockbox unlock --for 10m
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Option(
        name: .customLong("for"), help: ArgumentHelp("How long the window stays open: 30s, 10m, 1h. Default: 5m.", valueName: "duration"))
    var length: WindowLength?
    @Option(help: ArgumentHelp("Open the window with this profile's PIN instead of the passphrase.", valueName: "service/profile"))
    var pin: String?

    func run() throws {
        // The window lives in the session keyring: without one, say so before any PIN or
        // passphrase is asked for and hashed.
        try SessionWindow.requireSessionKeyring()
        let duration = length?.duration ?? .seconds(300)
        let pinProfile = try pin.map { text -> PinProfile in
            let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw ValidationError("--pin takes SERVICE/PROFILE, e.g. kids/max")
            }
            return PinProfile(service: parts[0], name: parts[1])
        }
        if let pinProfile {
            let (store, _, resolution) = try vaultOptions.storeOpener().open()
            let entered = try PinInput.read("PIN for '\(pinProfile.name)': ")
            try PinGuard(store: store).verify(pinProfile, pin: entered)
            let fingerprint = try PinGuard(store: store).fingerprint(pinProfile) ?? ""
            if let fileVault = store as? any KeySlotManaging {
                try SessionWindow.open(for: fileVault, duration: duration, openedBy: "pin \(pinProfile)", pin: pinProfile)
            } else if let scope = try SessionWindow.scope(for: resolution) {
                try SessionWindow.open(
                    scope: scope, duration: duration,
                    openedBy: "pin \(pinProfile)", credentialFingerprint: "",
                    pin: (pinProfile, fingerprint))
            }
        } else {
            let opener = try vaultOptions.storeOpener()
            let resolution = try opener.resolveStore()
            if resolution.storeKind == .secretService {
                throw LockboxError.invalidArgument(
                    "the Secret Service store has no passphrase of Lockbox's: unlock with --pin SERVICE/PROFILE")
            }
            let path = opener.configuration.vaultPath
            if !FileManager.default.fileExists(atPath: path.string) { throw LockboxError.vaultNotFound(path: path.string) }
            let passphrase: SecretBytes
            if let fd = vaultOptions.passphraseFd {
                passphrase = try SecretInput.passphrase(fromDescriptor: fd, what: "passphrase")
            } else if let typed = try Terminal.readHidden(prompt: "Vault passphrase: ") {
                passphrase = typed
            } else {
                throw CLIError.noInput("unlock needs the vault passphrase (--passphrase-fd N, or a terminal) or --pin SERVICE/PROFILE")
            }
            // Opening with the passphrase alone proves it (a key file would not count).
            let store = try resolution.opening { try FileVault.open(at: path, credential: .passphrase(passphrase)) }
            try SessionWindow.open(for: store, duration: duration, openedBy: "passphrase")
        }
        Console.status("Unlocked for \(Int(duration.components.seconds)) s. `lockbox lock` closes the window now.")
    }
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock", abstract: "Close the re-authentication window now.",
        discussion: "Example: lockbox lock")
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions

    func run() throws {
        let closed = try windowScope(vaultOptions).map { SessionWindow.close(scope: $0) } ?? false
        Console.status(closed ? "Locked: the window is closed." : "No window was open.")
    }
}

struct WindowStatus: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show whether a re-authentication window is open, and for how long.",
        discussion: "Example: lockbox status --json")
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Flag(help: "Print JSON: open, remainingSeconds, openedBy.") var json = false

    /// `status --json`.
    struct Report: Encodable {
        var open: Bool
        var remainingSeconds: Int?
        var openedBy: String?
    }

    func run() throws {
        let window = try windowScope(vaultOptions).flatMap { SessionWindow.status(scope: $0) }
        if json {
            try Console.printJSON(
                Report(open: window != nil, remainingSeconds: window.map { Int($0.remaining.rounded(.up)) }, openedBy: window?.openedBy))
            return
        }
        if let status = window {
            print("unlocked: \(Int(status.remaining.rounded(.up))) s left (opened by \(status.openedBy))")
        } else {
            print("locked: no re-authentication window is open")
        }
    }
}

/// The window scope of the store this invocation would use (the one ``StoreSelection`` chooses
/// for `get` too), found without any credential; `nil` when no window can exist (no vault yet).
func windowScope(_ options: VaultOptions) throws -> String? {
    try SessionWindow.scope(for: options.storeOpener().resolveStore())
}
