import ArgumentParser
import FoundationEssentials
import Lockbox
import SystemPackage

/// `lockbox git-credential get|store|erase`: git's credential-helper protocol (gitcredentials(7),
/// git-credential(1)) over the store this invocation opens, so git keeps its passwords in the
/// file vault or the Secret Service instead of `~/.git-credentials`.
///
/// A credential for `PROTOCOL://HOST[/PATH]` is the item with service `git:PROTOCOL://HOST[/PATH]`
/// and account = the user name (see ``GitCredentialDescription/service``), so `lockbox list` and
/// `lockbox wipe --service` see and remove it like any other item.
struct GitCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "Be git's credential helper: get, store or erase the credential git describes on standard input.",
        discussion: """
            Set up: git config --global credential.helper '!lockbox git-credential' (or put a link named \
            git-credential-lockbox to lockbox on PATH and use credential.helper lockbox). Git appends the \
            operation and writes the credential's attributes (protocol, host, path, username, password, \
            password_expiry_utc, oauth_refresh_token) to standard input; `get` answers on standard output, or prints nothing \
            when nothing matches. Other attributes and other operations are ignored, as git's protocol asks.

            The credential for PROTOCOL://HOST[/PATH] is stored as service git:PROTOCOL://HOST[/PATH] and \
            account USERNAME (kind password); the path is part of it only when git sends one, i.e. with \
            credential.useHttpPath for http(s). `get` without a user name answers with the most recently \
            stored one; a credential whose password_expiry_utc has passed is not returned. `erase` with a \
            password removes the stored credential only if it holds that password (so rejecting a \
            mistyped password keeps the good one). An unchanged credential is not rewritten, and one \
            stored with `lockbox set --protected` stays protected. password_expiry_utc is the item's expiry \
            (`lockbox list` shows it; `lockbox wipe --expired` removes the credential once it passed); \
            oauth_refresh_token is kept with the credential (not listed on its own), returned by `get` \
            and erased with it.

            Unlocking without a prompt: open a window (`lockbox unlock`), or name a key file \
            (LOCKBOX_KEY_FILE, or '!lockbox git-credential --key-file PATH'); on a desktop the Secret \
            Service needs nothing. Otherwise the passphrase is asked on the terminal.
            Example: git config --global credential.helper lockbox
            """
    ).parsedOnItsOwn()

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The operation git appends: get, store or erase. Any other is ignored.") var operation: String

    /// The operations of git's helper protocol.
    enum Operation: String {
        case get, store, erase
    }

    /// The name under which git finds the helper for `credential.helper lockbox`.
    static let helperProgramName = "git-credential-lockbox"

    func run() throws {
        guard let operation = Operation(rawValue: operation) else {
            Trace.log("git-credential: operation not known to this helper; ignored, as git's protocol asks")
            return
        }
        let description = try GitCredentialDescription.read(from: .standardInput)
        guard let service = description.service else {
            Trace.log("git-credential: no protocol given; nothing to do")
            return
        }
        Trace.log(
            "git-credential \(operation.rawValue): service '\(service)', user name \(description.username == nil ? "not given" : "given")")
        switch operation {
        case .get: try get(description, service: service)
        case .store: try store(description, service: service)
        case .erase: try erase(description, service: service)
        }
    }

    /// Prints `username`, `password` (and `password_expiry_utc` if recorded) of the matching
    /// credential, or nothing.
    private func get(_ description: GitCredentialDescription, service: String) throws {
        let vault = try vaultOptions.storeOpener().openVault()
        let candidates: [ItemMetadata]
        if let username = description.username {
            guard !username.isEmpty else { return }  // no item has an empty account
            candidates = try vault.metadata(service: service, account: username).map { [$0] } ?? []
        } else {
            candidates = try vault.list(service: service).sorted { $0.modified > $1.modified }
        }
        let now = Date().timeIntervalSince1970
        for item in candidates {
            if let expiry = GitCredentialDescription.expiry(of: item), Double(expiry) <= now || item.isExpired() {
                Trace.log("git-credential: '\(item.key.account)' expired at \(expiry); not returned")
                continue
            }
            guard GitCredentialDescription.isTransmittable(item.key.account) else {
                Console.status(
                    "lockbox: the user name of an item of '\(service)' holds a newline or NUL, which git's protocol cannot carry; skipped")
                continue
            }
            guard let password = try vault.get(service: service, account: item.key.account, allowExpired: true) else { continue }
            let refreshToken = try vault.companion(.oauthRefreshToken, service: service, account: item.key.account)
            let transmittable = password.withUnsafeBytes { !$0.contains(UInt8(ascii: "\n")) && !$0.contains(0) }
            guard transmittable else {
                Console.status(
                    "lockbox: the password of '\(item.key.account)' on '\(service)' holds a newline or NUL, which git's protocol cannot carry; skipped"
                )
                continue
            }
            let output = FileDescriptor.standardOutput
            _ = try output.writeAll("username=\(item.key.account)\npassword=".utf8)
            _ = try password.withUnsafeBytes { try output.writeAll($0) }
            _ = try output.writeAll("\n".utf8)
            if let expiry = GitCredentialDescription.expiry(of: item) {
                _ = try output.writeAll("password_expiry_utc=\(expiry)\n".utf8)
            }
            if let refreshToken, refreshToken.withUnsafeBytes({ !$0.contains(UInt8(ascii: "\n")) && !$0.contains(0) }) {
                _ = try output.writeAll("\(GitCredentialDescription.refreshTokenAttribute)=".utf8)
                _ = try refreshToken.withUnsafeBytes { try output.writeAll($0) }
                _ = try output.writeAll("\n".utf8)
            }
            return
        }
    }

    /// Stores the password under (service, username); a description without both is ignored.
    private func store(_ description: GitCredentialDescription, service: String) throws {
        guard let username = description.username, let password = description.password else {
            Trace.log("git-credential: store without a user name and password; nothing to store")
            return
        }
        guard !username.isEmpty else {
            Console.status("lockbox: git gave an empty user name; Lockbox items need an account, so nothing was stored")
            return
        }
        var attributes = ["protocol": description.protocolName ?? "", "host": description.host ?? ""]
        if let path = description.path { attributes["path"] = path }
        // password_expiry_utc is the item's expiry, the one every item has.
        let expires = try description.passwordExpiry.map { seconds -> Date in
            guard abs(seconds) < 1 << 38 else { throw LockboxError.invalidArgument("git sent a password_expiry_utc out of range") }
            return Date(timeIntervalSince1970: Double(seconds))
        }
        let vault = try vaultOptions.storeOpener().openVault()
        let existing = try vault.metadata(service: service, account: username)
        // git approves after every successful use: an unchanged credential is not rewritten.
        if let existing, existing.kind == .password, existing.attributes == attributes,
            GitCredentialDescription.expiry(of: existing) == description.passwordExpiry,
            let stored = try? vault.get(service: service, account: username, allowExpired: true), stored == password,
            (try? vault.companion(.oauthRefreshToken, service: service, account: username)) == description.refreshToken
        {
            Trace.log("git-credential: '\(username)' on '\(service)' is unchanged; not rewritten")
            return
        }
        // A credential the user protected (`lockbox set --protected`) stays protected.
        let access = existing?.access ?? .always
        try vault.set(
            password, service: service, account: username,
            changes: ItemChanges(
                kind: .password, label: "Git credential for \(service.dropFirst(GitCredentialDescription.servicePrefix.count))",
                attributes: attributes, access: access, expires: expires))
        // The refresh token git sent goes with the password; none sent, none kept (it belonged
        // to the password replaced).
        try vault.setCompanion(
            .oauthRefreshToken, description.refreshToken, service: service, account: username, kind: .token, access: access)
        Trace.log(
            "git-credential: stored '\(username)' on '\(service)'\(description.refreshToken == nil ? "" : " with its OAuth refresh token")")
    }

    /// Removes the matching credentials: of that user (or all users of the service), and only
    /// where the stored password equals the one given, if one is given.
    private func erase(_ description: GitCredentialDescription, service: String) throws {
        let vault = try vaultOptions.storeOpener().openVault()
        let accounts = try description.username.map { $0.isEmpty ? [] : [$0] } ?? vault.list(service: service).map(\.key.account)
        for account in accounts {
            // With a password: compared and deleted in one step of the store (one transaction of
            // the file vault), so a new password stored meanwhile is never erased for the old one.
            let erased =
                try description.password.map { try vault.delete(service: service, account: account, ifCurrent: $0) }
                ?? vault.delete(service: service, account: account)
            Trace.log(
                erased
                    ? "git-credential: erased '\(account)' on '\(service)'"
                    : "git-credential: '\(account)' on '\(service)' holds another password (or none); kept")
        }
    }
}

/// A credential as git's helper protocol describes it: `key=value` lines up to a blank line or
/// the end of input. The password lives in ``SecretBytes``; the other attributes are not secret.
struct GitCredentialDescription {
    var protocolName: String?
    var host: String?
    var path: String?
    var username: String?
    var password: SecretBytes?
    /// `password_expiry_utc`: when the password stops working, in seconds since the epoch.
    var passwordExpiry: Int64?
    /// `oauth_refresh_token`: what renews an OAuth access token used as the password.
    var refreshToken: SecretBytes?

    /// Services of git credentials start with this.
    static let servicePrefix = "git:"
    /// git's name of the expiry (an item's ``ItemMetadata/expires``; credentials stored before
    /// Lockbox had expiries keep it as an attribute of this name, still read).
    static let expiryAttribute = "password_expiry_utc"
    /// git's name of the OAuth refresh token.
    static let refreshTokenAttribute = "oauth_refresh_token"
    /// The longest line read: a password of the largest secret size plus its key.
    static let lineLimit = ItemLimits.maxSecretBytes + 64

    /// `git:PROTOCOL://HOST[/PATH]`; `nil` without a protocol (git always sends one). An empty
    /// path counts as none.
    var service: String? {
        guard let protocolName, !protocolName.isEmpty else { return nil }
        var service = "\(Self.servicePrefix)\(protocolName)://\(host ?? "")"
        if let path, !path.isEmpty { service += "/" + path }
        return service
    }

    /// Reads lines up to a blank line or the end of input, one at a time, so nothing after the
    /// blank line is consumed. Unknown attributes are ignored; a line without `=` is an error.
    static func read(from input: FileDescriptor) throws -> GitCredentialDescription {
        var description = GitCredentialDescription()
        while true {
            let line = try SecretInput.read(from: input, limit: lineLimit, stopAtNewline: true, what: "credential line")
            if line.count == 0 { return description }
            try line.withUnsafeBytes { bytes in
                guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else {
                    throw LockboxError.invalidArgument("git sent a credential line without '='")
                }
                let key = String(decoding: bytes[..<equals], as: UTF8.self)
                let value = UnsafeRawBufferPointer(rebasing: bytes[(equals + 1)...])
                if key == "password" {
                    description.password = SecretBytes(copying: value)
                    return
                }
                if key == refreshTokenAttribute {
                    description.refreshToken = value.isEmpty ? nil : SecretBytes(copying: value)
                    return
                }
                // Invalid UTF-8 is refused, never folded into U+FFFD: two different hosts, paths
                // or user names must never become one item's address.
                guard let text = String(validating: value, as: UTF8.self) else {
                    if ["protocol", "host", "path", "username"].contains(key) {
                        throw LockboxError.invalidArgument(
                            "git sent a '\(key)' that is not valid UTF-8; Lockbox stores no credential under it")
                    }
                    return
                }
                switch key {
                case "protocol": description.protocolName = text
                case "host": description.host = text
                case "path": description.path = text
                case "username": description.username = text
                case expiryAttribute: description.passwordExpiry = Int64(text)
                default: break  // e.g. url, wwwauth[], capability[]
                }
            }
        }
    }

    /// The recorded `password_expiry_utc` of a stored credential, if any.
    static func expiry(of item: ItemMetadata) -> Int64? {
        if let expires = item.expires { return Int64((expires.timeIntervalSince1970).rounded(.down)) }
        return item.attributes[expiryAttribute].flatMap { Int64($0) }
    }

    /// Whether git's line protocol can carry `value` (no newline, no NUL).
    static func isTransmittable(_ value: String) -> Bool {
        !value.utf8.contains(UInt8(ascii: "\n")) && !value.utf8.contains(0)
    }
}
