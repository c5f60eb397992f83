import Foundation
import Testing

@testable import Lockbox

/// A fresh folder for one CLI test: a vault path and a key path in it, and the `lockbox` binary
/// run with the folder as XDG_CONFIG_HOME and XDG_DATA_HOME (so no settings file or default
/// vault is shared with another test). CLITests and TPMCLITests build on it.
struct CLIFixture {
    let folder: TemporaryFolder
    /// The vault file (not created).
    let vault: String
    /// The key file (not created).
    let key: String

    init() throws {
        folder = try TemporaryFolder()
        vault = folder.file("vault.lockbox").string
        key = folder.file("vault.key").string
    }

    /// Runs `lockbox` with `arguments`, `stdin`, the fixture's environment plus `environment`,
    /// and, if given, a shell redirect such as `3<FILE`.
    func run(_ arguments: [String], stdin: String = "", environment: [String: String] = [:], redirect: String? = nil) throws
        -> ProcessResult
    {
        let base = ["XDG_CONFIG_HOME": folder.path.string, "XDG_DATA_HOME": folder.path.string]
        return try runLockbox(
            arguments, stdin: Data(stdin.utf8), environment: base.merging(environment) { _, new in new },
            shellRedirect: redirect)
    }

    /// `arguments` with the fixture's vault and key file.
    func withKey(_ arguments: [String]) -> [String] { arguments + ["--vault", vault, "--key-file", key] }

    /// A new file of the folder holding `line` and a newline (a passphrase or PIN to pass
    /// through a descriptor); its path.
    func lineFile(_ name: String, _ line: String) throws -> String {
        let path = folder.file(name).string
        try Data((line + "\n").utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}

/// Creates a vault with a key file in `folder` and returns the environment under which `lockbox`
/// uses it: LOCKBOX_VAULT and LOCKBOX_KEY_FILE, with HOME and XDG_CONFIG_HOME in the folder.
func keyFileVaultEnvironment(in folder: TemporaryFolder) throws -> [String: String] {
    let created = try runLockbox(["init", "--vault", folder.file("v.lockbox").string, "--generate-key-file", folder.file("v.key").string])
    #expect(created.status == 0, "\(created.stderr)")
    return [
        "LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("v.key").string,
        "HOME": folder.path.string, "XDG_CONFIG_HOME": folder.file("config").string,
    ]
}

extension ProcessResult {
    /// The stable code of the failure lockbox reported (`lockbox: error[CODE]: …` on standard
    /// error), or `nil` if it reported none.
    var errorCode: LockboxError.Code? {
        guard let match = stderr.firstMatch(of: #/lockbox: error\[([a-z0-9-]+)\]: /#) else { return nil }
        return LockboxError.Code(rawValue: String(match.1))
    }

    /// Standard output parsed as a JSON object (`nil` if it is not one).
    var jsonObject: [String: Any]? { (try? JSONSerialization.jsonObject(with: stdout)) as? [String: Any] }

    /// Standard output parsed as a JSON array of objects (`nil` if it is not one).
    var jsonArray: [[String: Any]]? { (try? JSONSerialization.jsonObject(with: stdout)) as? [[String: Any]] }
}

/// Runs `script` with bash (for `$'\xff'` arguments and namespace wrappers), `$L` naming the
/// lockbox binary, in the environment ``runLockbox(_:stdin:environment:shellRedirect:)`` gives.
func runBash(_ script: String, stdin: Data = Data(), environment: [String: String] = [:]) throws -> ProcessResult {
    try runProcess(
        URL(fileURLWithPath: "/bin/bash"), ["-c", script], stdin: stdin,
        environment: environment.merging(["L": lockboxBinary.path]) { mine, _ in mine })
}

/// The environment of a file vault made with `lockbox init --generate-key-file` in `folder`
/// (`v.lockbox`, key file `k.key`, settings under `config`), in `format` (`nil`: the default).
func cliVaultWithKeyFile(in folder: TemporaryFolder, format: Int? = nil) throws -> [String: String] {
    let environment = [
        "LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": folder.file("k.key").string,
        "XDG_CONFIG_HOME": folder.file("config").string,
    ]
    let formatArguments = format.map { ["--format", "\($0)"] } ?? []
    let created = try runLockbox(["init", "--generate-key-file", folder.file("k.key").string] + formatArguments, environment: environment)
    #expect(created.status == 0, "\(created.stderr)")
    return environment
}

/// Whether a namespace-based attack can be tried here. Where it cannot, the test says so on
/// standard error and, under CI=true, fails: it never passes silently.
func attackCanRun(_ probe: String, what: String) throws -> Bool {
    let result = try runBash(probe)
    if result.status == 0 { return true }
    notTested(what, because: "`\(probe)` exited \(result.status): \(result.stderr)", requiredInCI: true)
    return false
}
