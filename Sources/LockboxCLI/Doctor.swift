import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxSessionWindows
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check which store is configured and whether each part works, with the fix for each problem.",
        discussion: """
            Checks only what the store this profile would use needs (the session bus and keyring for \
            the Secret Service; the vault file, key file and TPM for the file vault), and whether the \
            session keyring that `lockbox unlock` keeps its windows in is there (advice: no store needs it). \
            Exits 0 when the store this profile would use is ready, else with that problem's exit code. \
            For a vault with TPM2 key slots it checks, without using a try of the TPM's dictionary-attack \
            limit, whether each slot would unseal here (60 no TPM answers, 61 lockout, 62 PCRs changed, \
            63 another or a cleared TPM), and shows the TPM's failed tries and time to recovery.
            Example: lockbox doctor --json
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Flag(help: "Print the report as JSON.") var json = false

    struct Check: Encodable {
        var name: String
        var ok: Bool
        var detail: String
        var fix: String?
    }

    struct Report: Encodable {
        var profile: String
        var settingsFile: String
        var recordedStore: String?
        var recordedReason: String?
        var storeForThisRun: String
        var why: String
        var ready: Bool
        var checks: [Check]
        var libsodium: String
        var libsecret: String
        var hardening: ProcessHardening.Status
    }

    func run() throws {
        var checks: [Check] = []
        let settingsPath = vaultOptions.settingsPath
        // The options parsed once; PostgreSQL is refused here, before any check runs.
        let opener = try vaultOptions.storeOpener()
        let request = try opener.selection().request
        // Which store this run would use, and why: the library's resolver decides, as for every
        // other command (nothing is recorded here; the first command that opens the store does).
        // Only that store's parts are checked: a profile on the file vault has no use for a
        // session bus, one on the Secret Service none for a vault file.
        let resolution = try opener.resolveStore()
        let store = resolution.storeKind

        // The Secret Service, part by part, through the provider this selection opens it with.
        let environment = CommandEnvironment.values
        let busAddress = environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        var secretServiceProblem: LockboxError?
        if store == .secretService {
            let secretService = try Self.secretServiceChecks(
                provider: resolution.selection.provider(for: .secretService), configuration: opener.configuration,
                busAddress: busAddress)
            checks += secretService.checks
            secretServiceProblem = secretService.problem
        }

        // The file vault.
        let vaultPath = vaultOptions.vaultPath
        var fileProblem: LockboxError?
        var tpm: (checks: [Check], problem: (any LockboxCodedError)?) = ([], nil)
        if store == .file {
            if let status = try? vaultPath.stat() {
                let mode = status.permissions.rawValue & 0o7777
                if mode & 0o077 != 0 {
                    fileProblem = .insecurePermissions(path: vaultPath.string, detail: "mode \(String(mode, radix: 8))")
                    checks.append(
                        Check(
                            name: "file vault", ok: false,
                            detail: "\(vaultPath.string): mode \(String(mode, radix: 8)), readable or writable by others",
                            fix: "chmod 600 \(vaultPath.string)"))
                } else if UInt32(status.userID.rawValue) != geteuid() {
                    fileProblem = .insecurePermissions(path: vaultPath.string, detail: "not owned by you")
                    checks.append(
                        Check(
                            name: "file vault", ok: false, detail: "\(vaultPath.string): owned by user ID \(status.userID.rawValue)",
                            fix: "run as its owner, or copy it to a file you own"))
                } else {
                    checks.append(
                        Check(
                            name: "file vault", ok: true,
                            detail: "\(vaultPath.string): present, mode \(String(mode, radix: 8)), "
                                + (FileVault.format(at: vaultPath) == .two ? "format 2 (SQLite)" : "format 1")))
                }
            } else {
                fileProblem = .vaultNotFound(path: vaultPath.string)
                checks.append(
                    Check(
                        name: "file vault", ok: false, detail: "\(vaultPath.string): not created yet",
                        fix: "lockbox init --vault \(vaultPath.string)   (or --generate-key-file PATH for a service)"))
            }
            if let keyFile = vaultOptions.keyFilePath {
                if let status = try? keyFile.stat() {
                    let mode = status.permissions.rawValue & 0o7777
                    let safe = mode & 0o077 == 0
                    checks.append(
                        Check(
                            name: "key file", ok: safe, detail: "\(keyFile.string): mode \(String(mode, radix: 8))",
                            fix: safe ? nil : "chmod 600 \(keyFile.string)"))
                    if !safe && fileProblem == nil { fileProblem = .insecurePermissions(path: keyFile.string, detail: "key file mode") }
                } else {
                    checks.append(
                        Check(
                            name: "key file", ok: false, detail: "\(keyFile.string): missing",
                            fix: "lockbox init --generate-key-file \(keyFile.string), or point --key-file at the right file"))
                    if fileProblem == nil { fileProblem = .invalidKeyFile(path: keyFile.string, reason: "missing") }
                }
            }
            tpm = Self.tpmChecks(vaultPath: vaultPath)
            checks += tpm.checks
        }

        // What `lockbox unlock` needs: a session keyring of this login session. Advice only:
        // every store works without windows.
        do {
            try SessionWindow.requireSessionKeyring()
            checks.append(Check(name: "session keyring", ok: true, detail: "this login session has one (for `lockbox unlock` windows)"))
        } catch {
            checks.append(
                Check(
                    name: "session keyring", ok: false, detail: "\(error)",
                    fix: "only `lockbox unlock` needs it: run inside a login session with pam_keyinit, or under `keyctl session`"))
        }

        // What protects secrets in this process (the same as in every lockbox command): advice,
        // never a reason to refuse, since an unlocked buffer still works.
        let hardening = ProcessHardening.status()
        checks.append(
            Check(
                name: "process hardening", ok: hardening.nonDumpable && hardening.coreDumpsOff,
                detail: hardening.nonDumpable && hardening.coreDumpsOff
                    ? "non-dumpable, core dumps off"
                    : "dumpable \(!hardening.nonDumpable), core dumps \(hardening.coreDumpsOff ? "off" : "on")",
                fix: hardening.nonDumpable && hardening.coreDumpsOff ? nil : "report this: lockbox sets both at start-up"))
        let limit = hardening.lockableBytes.map { "RLIMIT_MEMLOCK \($0 / 1024) KiB" } ?? "RLIMIT_MEMLOCK unlimited"
        checks.append(
            Check(
                name: "secret memory", ok: hardening.secretsLocked && hardening.secretsExcludedFromDumps,
                detail: (hardening.secretsLocked ? "locked in RAM" : "NOT locked in RAM (may be swapped)")
                    + (hardening.secretsExcludedFromDumps ? ", excluded from core dumps" : ", NOT excluded from core dumps")
                    + " (\(limit))",
                fix: hardening.secretsLocked
                    ? nil
                    : "raise the locked-memory limit (`ulimit -l`, systemd LimitMEMLOCK=, /etc/security/limits.conf) or use encrypted swap")
        )

        let why = resolution.reason + (resolution.isNewChoice && request == .auto ? " (the first command will record it)" : "")
        let blocking: (any LockboxCodedError)? = store == .secretService ? secretServiceProblem : fileProblem ?? tpm.problem
        let report = Report(
            profile: vaultOptions.profileName, settingsFile: settingsPath.string,
            recordedStore: resolution.recorded?.storeKind.rawValue, recordedReason: resolution.recorded?.reason,
            storeForThisRun: store.rawValue, why: why, ready: blocking == nil, checks: checks,
            libsodium: LibraryVersions.sodium, libsecret: LibraryVersions.libsecret, hardening: hardening)

        if json {
            try Console.printJSON(report)
        } else {
            print("profile        \(report.profile)  (settings: \(report.settingsFile))")
            print("recorded store \(report.recordedStore ?? "none yet")")
            print("store in use   \(report.storeForThisRun): \(report.why)")
            print("libraries      libsodium \(report.libsodium), libsecret \(report.libsecret)")
            for check in checks {
                print("\(check.ok ? "ok     " : "PROBLEM") \(check.name): \(check.detail)")
                if let fix = check.fix { print("        fix: \(fix)") }
            }
            if report.ready {
                print("Ready: the \(store.rawValue) store can be used.")
            } else if store == .file && fileProblem == nil {
                print("Not ready: the vault's TPM2 slot cannot open here (see above); its other slots still can.")
            } else {
                print("Not ready: the \(store.rawValue) store cannot be used (see above).")
            }
        }
        if let blocking { throw ExitCode(ExitStatus(for: blocking).rawValue) }
    }

    /// The checks of the Secret Service, part by part (the session bus, a provider answering, the
    /// default collection unlocked), made by opening it through `provider` — the one the store
    /// selection opens it with — and the problem that keeps it from being used, if any.
    static func secretServiceChecks(provider: (any StoreProvider)?, configuration: LockboxConfiguration, busAddress: String) throws
        -> (checks: [Check], problem: LockboxError?)
    {
        var checks: [Check] = []
        var problem: LockboxError?
        do {
            // Opened through the store provider seam, as every command opens it: connecting is opening.
            guard let provider else {
                throw LockboxError.secretServiceUnavailable(detail: "this program has no Secret Service provider")
            }
            let store = try provider.open(StoreOpenRequest(configuration: configuration, credentials: { [] })).store
            checks.append(Check(name: "D-Bus session bus", ok: true, detail: busAddress.isEmpty ? "reachable" : busAddress))
            checks.append(Check(name: "Secret Service provider", ok: true, detail: "org.freedesktop.secrets answers"))
            if try (store as? any LockableSecretStore)?.isLocked() == true {
                problem = .keyringLocked(collection: "default")
                checks.append(
                    Check(
                        name: "default collection", ok: false, detail: "locked",
                        fix: "unlock your keyring (log in to the desktop, or open Passwords and Keys), or use --store file"))
            } else {
                checks.append(Check(name: "default collection", ok: true, detail: "unlocked"))
            }
        } catch let error as LockboxError {
            problem = error
            switch error {
            case .noSessionBus:
                checks.append(
                    Check(
                        name: "D-Bus session bus", ok: false, detail: error.description,
                        fix:
                            "run inside a desktop login session, or start one for a shell with `dbus-run-session -- $SHELL`; otherwise use --store file"
                    ))
            case .secretServiceUnavailable:
                checks.append(Check(name: "D-Bus session bus", ok: true, detail: busAddress.isEmpty ? "reachable" : busAddress))
                checks.append(
                    Check(
                        name: "Secret Service provider", ok: false, detail: error.description,
                        fix:
                            "start one: `gnome-keyring-daemon --start --components=secrets`, or enable KeePassXC's Secret Service integration; otherwise use --store file"
                    ))
            default:
                checks.append(
                    Check(
                        name: "Secret Service", ok: false, detail: error.description,
                        fix: "restart your keyring daemon, or use --store file"))
            }
        }
        return (checks, problem)
    }
}
