import ArgumentParser
import Foundation
import Lockbox
import SystemPackage

/// The options every command that opens a vault shares: where it is and how to unlock it.
struct VaultOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).",
        valueName: "path"))
    var vault: String?

    @Option(name: .long, help: ArgumentHelp(
        "Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.",
        valueName: "path"))
    var keyFile: String?

    @Option(name: .long, help: ArgumentHelp(
        "Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.",
        valueName: "fd"))
    var passphraseFd: Int32?

    /// The vault path: --vault, then $LOCKBOX_VAULT, then the XDG default.
    var vaultPath: FilePath {
        if let vault { return FilePath(vault) }
        let environment = ProcessInfo.processInfo.environment
        if let fromEnvironment = environment["LOCKBOX_VAULT"], !fromEnvironment.isEmpty {
            return FilePath(fromEnvironment)
        }
        return EncryptedFileStore.defaultPath(environment: environment)
    }

    /// The key file: --key-file, then $LOCKBOX_KEY_FILE (a path, not a secret).
    var keyFilePath: FilePath? {
        if let keyFile { return FilePath(keyFile) }
        if let fromEnvironment = ProcessInfo.processInfo.environment["LOCKBOX_KEY_FILE"], !fromEnvironment.isEmpty {
            return FilePath(fromEnvironment)
        }
        return nil
    }

    /// The credentials given: key file and/or passphrase from a descriptor; with neither, a
    /// no-echo prompt on the terminal.
    func unlockCredentials() throws -> [VaultCredential] {
        var credentials: [VaultCredential] = []
        if let keyFilePath { credentials.append(.keyFile(keyFilePath)) }
        if let passphraseFd {
            credentials.append(.passphrase(try SecretInput.passphrase(fromDescriptor: passphraseFd, what: "passphrase")))
        }
        if credentials.isEmpty {
            guard let typed = try Terminal.readHidden(prompt: "Passphrase for \(vaultPath.string): ") else {
                throw CLIError.noInput(
                    "no way to unlock the vault: give --key-file PATH (or LOCKBOX_KEY_FILE) or --passphrase-fd N; there is no terminal to prompt on")
            }
            credentials.append(.passphrase(typed))
        }
        return credentials
    }

    /// Opens the vault with the credentials given.
    func openStore() throws -> EncryptedFileStore {
        let path = vaultPath
        // Say "no vault" before asking for a passphrase that could not help.
        if !FileManager.default.fileExists(atPath: path.string) { throw LockboxError.vaultNotFound(path: path.string) }
        return try EncryptedFileStore.open(at: path, credentials: try unlockCredentials())
    }
}

/// Argon2id cost presets, as `--kdf` takes them.
enum KDFPreset: String, ExpressibleByArgument, CaseIterable {
    case interactive, moderate, sensitive

    var parameters: KDFParameters {
        switch self {
        case .interactive: return .interactive
        case .moderate: return .moderate
        case .sensitive: return .sensitive
        }
    }
}
