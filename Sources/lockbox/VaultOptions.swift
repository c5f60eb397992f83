import ArgumentParser
import Foundation
import Lockbox
import SystemPackage

/// `--backend`: a store, or `auto`.
enum BackendRequest: String, ExpressibleByArgument, CaseIterable {
    case auto
    case secretService = "secret-service"
    case file
}

/// The options every command that opens a store shares: which store, where the file vault is
/// and how to unlock it.
struct VaultOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, or file. Default: $LOCKBOX_BACKEND, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file.",
        valueName: "store"))
    var backend: BackendRequest?

    @Option(name: .long, help: ArgumentHelp(
        "The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.",
        valueName: "name"))
    var profile: String?

    @Option(name: .long, help: ArgumentHelp(
        "The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).",
        valueName: "path"), completion: .file())
    var vault: String?

    @Option(name: .long, help: ArgumentHelp(
        "Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.",
        valueName: "path"), completion: .file())
    var keyFile: String?

    @Option(name: .long, help: ArgumentHelp(
        "Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.",
        valueName: "fd"))
    var passphraseFd: Int32?

    @Option(name: .customLong("tpm-pin-fd"), help: ArgumentHelp(
        "Read the PIN of the vault's TPM2 slot from this open file descriptor (else it is asked on the terminal).",
        valueName: "fd"))
    var tpmPinFd: Int32?

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
        if let keyFilePath {
            Trace.log("credential: key file \(keyFilePath.string)")
            credentials.append(.keyFile(keyFilePath))
        }
        if let passphraseFd {
            Trace.log("credential: passphrase from file descriptor \(passphraseFd)")
            credentials.append(.passphrase(try SecretInput.passphrase(fromDescriptor: passphraseFd, what: "passphrase")))
        }
        if credentials.isEmpty, let tpm = try tpmCredential() {
            return [tpm]
        }
        if credentials.isEmpty {
            Trace.log("credential: none given; asking on the terminal")
            guard let typed = try Terminal.readHidden(prompt: "Passphrase for \(vaultPath.string): ") else {
                throw LockboxError.reauthenticationRequired(
                    "the vault is locked: no window is open, no key file (--key-file, LOCKBOX_KEY_FILE) or --passphrase-fd was given, and there is no terminal to ask on")
            }
            credentials.append(.passphrase(typed))
        }
        return credentials
    }

    private var environment: [String: String] { ProcessInfo.processInfo.environment }

    var profileName: String { profile ?? environment["LOCKBOX_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default" }

    var settingsPath: FilePath { BackendSettings.defaultPath(environment: environment) }

    /// Whether anything names the file vault or its credentials: that means the file store.
    private var namesFileVault: Bool {
        vault != nil || keyFile != nil || passphraseFd != nil
            || !(environment["LOCKBOX_VAULT"] ?? "").isEmpty || !(environment["LOCKBOX_KEY_FILE"] ?? "").isEmpty
    }

    /// The store asked for: --backend, then $LOCKBOX_BACKEND, then `file` if a vault or key is
    /// named, else `auto`.
    func requestedBackend() throws -> BackendRequest {
        if let backend { return backend }
        if let fromEnvironment = environment["LOCKBOX_BACKEND"], !fromEnvironment.isEmpty {
            guard let parsed = BackendRequest(rawValue: fromEnvironment) else {
                throw LockboxError.invalidArgument("LOCKBOX_BACKEND is '\(fromEnvironment)'; use auto, secret-service or file")
            }
            return parsed
        }
        return namesFileVault ? .file : .auto
    }

    /// Opens the store this invocation should use, and records the choice for the profile the
    /// first time one is made. With `auto` and a recorded store that is unavailable, it fails
    /// loudly rather than switch to another, empty store.
    func openStore() throws -> any SecretStore {
        try openStoreDetailed().store
    }

    /// A vault over the store this invocation uses, able to read protected items when this
    /// invocation is freshly authenticated: inside a session window (`lockbox unlock`), or with
    /// the vault passphrase given just now.
    func openVault() throws -> Vault {
        let (store, fresh) = try openStoreDetailed()
        return Vault(store: store, freshness: fresh ? InvocationFreshness.fresh : InvocationFreshness.stale)
    }

    /// The store, and whether this invocation counts as freshly authenticated.
    func openStoreDetailed() throws -> (store: any SecretStore, fresh: Bool) {
        let request = try requestedBackend()
        let recorded = try BackendSettings.load(from: settingsPath).profiles[profileName]
        Trace.log("store requested: \(request.rawValue); settings \(settingsPath.string), profile '\(profileName)' "
            + (recorded.map { "recorded \($0.backend.rawValue) (\($0.reason))" } ?? "has no recorded store"))
        // The settings keep the first choice per profile; once one is recorded there is nothing to write.
        func recordIfNew(_ backend: Backend, reason: String) throws {
            if recorded == nil {
                Trace.log("recording \(backend.rawValue) for profile '\(profileName)': \(reason)")
                try record(backend, reason: reason)
            }
        }
        switch request {
        case .file:
            let opened = try openFileStoreDetailed()
            try recordIfNew(.file, reason: "requested explicitly (--backend file, or a vault or key file named)")
            return opened
        case .secretService:
            let store = try SecretServiceStore()
            try recordIfNew(.secretService, reason: "requested explicitly (--backend secret-service)")
            return (store, try secretServiceWindowOpen(store))
        case .auto:
            if let recorded {
                do {
                    switch recorded.backend {
                    case .file: return try openFileStoreDetailed()
                    case .secretService:
                        let store = try SecretServiceStore()
                        return (store, try secretServiceWindowOpen(store))
                    }
                } catch let error as LockboxError {
                    switch error {
                    case .vaultNotFound, .noSessionBus, .secretServiceUnavailable, .secretServiceTimeout:
                        throw LockboxError.recordedBackendUnavailable(
                            backend: recorded.backend.rawValue, settingsPath: settingsPath.string, reason: error.description)
                    default:
                        throw error
                    }
                }
            }
            var why = "no Secret Service"
            do {
                let store = try SecretServiceStore()
                if try !store.isLocked() {
                    try recordIfNew(.secretService, reason: "chosen automatically: the Secret Service was reachable and unlocked")
                    return (store, try secretServiceWindowOpen(store))
                }
                why = "the Secret Service's default collection was locked"
            } catch let error as LockboxError {
                why = error.description
            }
            Trace.log("not using the Secret Service: \(why)")
            let opened = try openFileStoreDetailed()
            try recordIfNew(.file, reason: "chosen automatically: \(why)")
            return opened
        }
    }

    /// The window scope of the Secret Service for this profile.
    var secretServiceWindowScope: String { SessionWindow.scope(secretServiceProfile: profileName) }

    private func secretServiceWindowOpen(_ store: SecretServiceStore) throws -> Bool {
        let open = try SessionWindow.isOpen(scope: secretServiceWindowScope, store: store)
        Trace.log("store: Secret Service; re-authentication window \(open ? "open" : "not open")")
        return open
    }

    private func record(_ backend: Backend, reason: String) throws {
        try BackendSettings.record(backend, for: profileName, reason: reason, at: settingsPath)
    }

    /// Opens the file vault with the credentials given (commands that only make sense for it).
    func openFileStore() throws -> EncryptedFileStore {
        try openFileStoreDetailed().store
    }

    /// Opens the file vault: through its session window if one is open (no credential needed),
    /// else with the credentials given. Fresh when a window or a passphrase opened it.
    func openFileStoreDetailed(useWindow: Bool = true) throws -> (store: EncryptedFileStore, fresh: Bool) {
        let path = vaultPath
        // Say "no vault" before asking for a passphrase that could not help.
        if !FileManager.default.fileExists(atPath: path.string) { throw LockboxError.vaultNotFound(path: path.string) }
        Trace.log("store: file vault \(path.string)")
        if useWindow, let store = try SessionWindow.openStore(at: path) {
            Trace.log("opened through the session window (no credential needed)")
            return (store, true)
        }
        let credentials = try unlockCredentials()
        let store = try EncryptedFileStore.open(at: path, credentials: credentials)
        let slots = try store.keySlots()
        Trace.log("opened: key slot(s) \(slots.indices.filter { slots[$0].openedThisHandle }.map(String.init).joined(separator: ", ")) of \(slots.count)")
        let passphraseOpened = slots.contains { $0.openedThisHandle && $0.kind == .passphrase }
        let byPassphrase = passphraseOpened && credentials.contains { if case .passphrase = $0 { true } else { false } }
        return (store, byPassphrase)
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

/// Whether this invocation is freshly authenticated, decided once when the store was opened.
enum InvocationFreshness: FreshAuthentication {
    case fresh, stale

    func requireFreshAuthentication() throws {
        if self == .stale {
            throw LockboxError.reauthenticationRequired("this item is protected, and no re-authentication window is open")
        }
    }
}
