import ArgumentParser
import FoundationEssentials
import Lockbox
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

struct SetItem: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Store a secret read from standard input.",
        discussion: """
            The secret is read from standard input to its end (one trailing newline is dropped unless \
            --raw), or, on a terminal, asked twice without echo. It is never taken from an argument.
            Example: lockbox set com.example.api alice < token.txt
            """
    ).parsedOnItsOwn()

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service, e.g. com.example.api.") var service: String
    @Argument(help: "The account within the service.") var account: String
    @Option(
        help:
            "What the item holds: generic, password, token, device-id, pin-hash, or your own. Default: the item's kind, or generic for a new item."
    )
    var kind: String?
    @Option(help: "A human-readable label. Default: the item's label, or Password for 'ACCOUNT' on 'SERVICE' for a new item.") var label:
        String?
    @Option(
        name: .customLong("attribute"),
        help: ArgumentHelp(
            "An extra non-secret attribute; repeatable. Given once, it replaces all of the item's attributes.", valueName: "name=value"))
    var attributes: [String] = []
    @Flag(help: "Store standard input byte for byte, trailing newline included.") var raw = false
    @Flag(help: "Store an empty secret when standard input is empty (a prompt on a terminal still refuses one).")
    var allowEmpty = false
    @Flag(
        inversion: .prefixedNo,
        help:
            "Readable only inside a re-authentication window (`lockbox unlock`), like user-presence access control. Default: an item that exists keeps its setting; --no-protected removes it."
    )
    var protected: Bool?
    @Flag(
        help: "Refuse to replace an item that exists (exit 14); the file vault checks and writes in one step no other writer comes between."
    )
    var noClobber = false
    @Option(
        help: ArgumentHelp(
            "Write only if the item's secret is still the one read from this descriptor (compare-and-set; exit 15 if it changed).",
            valueName: "fd"))
    var ifCurrentFd: Int32?
    @Option(
        help: ArgumentHelp(
            "When the secret expires: a duration from now (30s, 15m, 12h, 7d, 2w, 1h30m) or a date (2026-12-31, 2026-12-31T18:00:00Z). `get` then refuses it (exit 16) and `wipe --expired` removes it. Default: never; a value stored without --expires does not expire.",
            valueName: "duration|date"))
    var expires: String?
    @Flag(
        help:
            "Keep the value this replaces, readable with `get --previous` until --grace ends or the next rotation; `restore` puts it back. One previous value at most; a rotation without this flag drops it."
    )
    var keepPrevious = false
    @Option(
        help: ArgumentHelp(
            "How long --keep-previous keeps the replaced value: a duration as for --expires. Default: 24h.", valueName: "duration"))
    var grace: String?

    func validate() throws {
        if vaultOptions.passphraseFd == 0 {
            throw ValidationError(
                "standard input carries the secret for `set`; give the passphrase on another descriptor, e.g. --passphrase-fd 3 3<file")
        }
        for attribute in attributes where !attribute.contains("=") {
            throw ValidationError("--attribute takes name=value, not '\(attribute)'")
        }
        if noClobber && ifCurrentFd != nil { throw ValidationError("--no-clobber and --if-current-fd exclude each other") }
        if ifCurrentFd == 0 || (ifCurrentFd != nil && ifCurrentFd == vaultOptions.passphraseFd) {
            throw ValidationError("--if-current-fd needs a descriptor of its own (standard input carries the new secret)")
        }
        if grace != nil && !keepPrevious {
            throw ValidationError("--grace says how long --keep-previous keeps the replaced value; give --keep-previous too")
        }
        if let expires { _ = try ExpiryArguments.expiry(expires) }
        if let grace { _ = try ExpiryArguments.duration(grace, option: "--grace") }
    }

    func run() throws {
        // Comparing with a protected item's secret needs what reading it needs: the window.
        let vault =
            ifCurrentFd != nil
            ? try vaultOptions.storeOpener().openVault() : Vault(store: try vaultOptions.storeOpener().openStore(movesSecrets: true))
        let secret = try SecretInput.secretFromStandardInput(
            prompt: "Secret for '\(account)' on '\(service)': ", raw: raw,
            allowEmpty: allowEmpty)
        var parsed: [String: String] = [:]
        for attribute in attributes {
            let parts = attribute.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            parsed[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        let condition: WriteCondition
        if let ifCurrentFd {
            condition = .ifCurrent(try SecretInput.secret(fromDescriptor: ifCurrentFd, what: "the current secret", raw: raw))
        } else {
            condition = noClobber ? .ifAbsent : .always
        }
        let changes = ItemChanges(
            kind: kind.map(ItemKind.init(rawValue:)), label: label, attributes: attributes.isEmpty ? nil : parsed,
            access: protected.map { $0 ? .freshAuthentication : .always }, expires: try expires.map { try ExpiryArguments.expiry($0) })
        var gracePeriod: Duration?
        if keepPrevious { gracePeriod = try grace.map { try ExpiryArguments.duration($0, option: "--grace") } ?? Vault.defaultGracePeriod }
        let written = try vault.set(
            secret, service: service, account: account, changes: changes, when: condition, keepingPreviousFor: gracePeriod)
        guard written else {
            if case .ifAbsent = condition { throw CLIError.itemExists(service: service, account: account) }
            throw CLIError.itemChanged(service: service, account: account)
        }
        Trace.log(
            "stored '\(account)' on '\(service)' (kind \(kind ?? "kept"), \(parsed.count) attributes, protection \(protected.map { $0 ? "on" : "off" } ?? "kept"))"
        )
    }
}

struct GetItem: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print a secret, and nothing else, to standard output.",
        discussion: """
            A newline follows the secret only on a terminal. Exit code 2: no such item; 16: it \
            expired (`set --expires`); 17: --previous found none.
            Example: lockbox get com.example.api alice
            """
    ).parsedOnItsOwn()

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Argument(help: "The account.") var account: String
    @Flag(help: "Print the secret even if its expiry has passed.") var allowExpired = false
    @Flag(help: "Print the value `set --keep-previous` replaced.") var previous = false

    func validate() throws {
        if previous && allowExpired {
            throw ValidationError("--previous and --allow-expired: a previous value is readable only during its grace period")
        }
    }

    func run() throws {
        let vault = try vaultOptions.storeOpener().openVault()
        let secret: SecretBytes
        if previous {
            guard let found = try vault.previous(service: service, account: account) else {
                if try vault.metadata(service: service, account: account) == nil {
                    throw LockboxError.itemNotFound(service: service, account: account)
                }
                throw LockboxError.noPreviousVersion(service: service, account: account)
            }
            secret = found
        } else {
            secret = try vault.require(service: service, account: account, allowExpired: allowExpired)
        }
        Trace.log("read '\(account)' on '\(service)'; writing it to standard output")
        _ = try secret.withUnsafeBytes { bytes in try FileDescriptor.standardOutput.writeAll(bytes) }
        if isatty(STDOUT_FILENO) == 1 { _ = try FileDescriptor.standardOutput.writeAll("\n".utf8) }
    }
}

struct DeleteItem: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Remove one item.",
        discussion: "Exit code 2 if there is no such item.\nExample: lockbox delete com.example.api alice"
    ).parsedOnItsOwn()

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Argument(help: "The account.") var account: String

    func run() throws {
        guard try Vault(store: try vaultOptions.storeOpener().openStore()).delete(service: service, account: account) else {
            throw LockboxError.itemNotFound(service: service, account: account)
        }
        Console.status("Deleted '\(account)' on '\(service)'.")
    }
}

struct ListItems: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List items: metadata only, never secrets.",
        discussion: "Example: lockbox list --service com.example.api --json"
    ).parsedOnItsOwn()

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Option(help: "Only this service's items.") var service: String?
    @Flag(help: "Print a JSON array instead of a table.") var json = false
    @Flag(
        help:
            "Print one JSON object per line as each item is read, unsorted: on a format-2 vault, memory does not grow with the item count.")
    var jsonLines = false
    @Flag(help: "Only items whose expiry (`set --expires`) has passed.") var expired = false

    func validate() throws {
        if json && jsonLines { throw ValidationError("--json and --json-lines: choose one") }
    }

    func run() throws {
        if jsonLines { return try streamJSONLines() }
        let now = Date()
        let items = try Vault(store: try vaultOptions.storeOpener().openStore()).list(service: service).filter {
            !expired || $0.isExpired(at: now)
        }
        if json {
            try Console.printJSON(items.map(ListedItem.init))
            return
        }
        if items.isEmpty {
            if expired { return Console.status("No expired items.") }
            Console.status(service.map { "No items for service '\(Console.escapingControlCharacters($0))'." } ?? "The vault is empty.")
            return
        }
        // Names and labels are data anyone who could write the store chose: a newline or an
        // escape sequence in one must not rewrite the user's terminal (JSON output stays exact).
        // EXPIRES: when the secret expires ("expired" once passed); "+previous" in KIND: the
        // item holds the value a `set --keep-previous` replaced, until the time shown.
        let rows =
            [["SERVICE", "ACCOUNT", "KIND", "MODIFIED", "EXPIRES", "LABEL"]]
            + items.map { item in
                var kind = item.kind.rawValue + (item.access == .freshAuthentication ? " (protected)" : "")
                if let until = item.previousUntil { kind += " (+previous until \(until.formatted(.iso8601)))" }
                let expires = item.expires.map { ($0 <= now ? "expired " : "") + $0.formatted(.iso8601) } ?? "never"
                return [item.service, item.account, kind, item.modified.formatted(.iso8601), expires, item.label].map(
                    Console.escapingControlCharacters)
            }
        let widths = (0..<5).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let padded = (0..<5).map { Console.leftAligned(row[$0], width: widths[$0]) }
            print((padded + [row[5]]).joined(separator: "  "))
        }
    }

    /// `--json-lines`: a format-2 vault's rows are printed as they are decrypted, one at a time;
    /// other stores hold every item in memory anyway, so their list is printed line by line.
    private func streamJSONLines() throws {
        if let service { try ItemLimits.validateService(service) }
        let store = try vaultOptions.storeOpener().openStore()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let now = Date()
        func line(_ item: ItemMetadata) throws {
            // Companions (a previous value, a refresh token) are not items of their own.
            guard !item.isCompanion, !expired || item.isExpired(at: now) else { return }
            print(String(decoding: try encoder.encode(ListedItem(item)), as: UTF8.self))
        }
        if let vault = store as? SQLiteVaultStore {
            try vault.list(service: service, each: line)
        } else {
            for item in try Vault(store: store).list(service: service) { try line(item) }
        }
    }

    /// The JSON shape of one listed item. `expires` and `previousUntil` are left out when
    /// there is none (`--json-lines` never gives `previousUntil`: it reads each row on its own).
    struct ListedItem: Encodable {
        var service, account, kind, label, access: String
        var created, modified: Date
        var expires, previousUntil: Date?
        var attributes: [String: String]

        init(_ item: ItemMetadata) {
            service = item.service
            account = item.account
            kind = item.kind.rawValue
            label = item.label
            access = item.access.rawValue
            created = item.created
            modified = item.modified
            expires = item.expires
            previousUntil = item.previousUntil
            attributes = item.attributes
        }
    }
}

struct Wipe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wipe",
        abstract: "Remove every item of one service, or of the whole vault, or the expired ones.",
        discussion: """
            Asks for confirmation on the terminal unless --yes; without a terminal, --yes is required. \
            --expired (alone, or with --service) removes the items whose expiry has passed, and the \
            previous values whose grace period ended; it asks nothing, since those are already refused.
            Example: lockbox wipe --service com.example.api --yes
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Option(help: "Remove this service's items.") var service: String?
    @Flag(help: "Remove every item in the vault.") var all = false
    @Flag(help: "Remove only the items whose expiry (`set --expires`) has passed (with --service: of that service).") var expired = false
    @Flag(help: ArgumentHelp(Confirmation.yesHelp)) var yes = false

    func validate() throws {
        if expired {
            if all {
                throw ValidationError(
                    "--expired and --all: --expired removes only expired items; give --service to limit it to one service")
            }
            return
        }
        if (service == nil) == (!all) {
            throw ValidationError("say what to wipe: --service NAME, --all or --expired (one of them)")
        }
    }

    func run() throws {
        let vault = Vault(store: try vaultOptions.storeOpener().openStore())
        if expired {
            let removed = try vault.wipeExpired(service: service)
            Console.status(
                "Removed \(removed.count) expired item(s)\(service.map { " of service '\(Console.escapingControlCharacters($0))'" } ?? "")."
            )
            return
        }
        let scope = service.map { "service '\($0)'" } ?? "the whole vault"
        try Confirmation.require(
            yes: yes, question: "Remove \(try vault.list(service: service).count) item(s) of \(scope)?",
            what: "wipe \(scope)")
        let removed = try service.map { try vault.wipe(service: $0) } ?? vault.wipeAll()
        Console.status("Removed \(removed) item(s) of \(scope).")
    }
}

/// Human-readable status lines go to standard error, so standard output carries only data.
enum Console {
    static func status(_ line: String) {
        write(line + "\n")
    }

    /// `text` with every control character (C0, DEL, C1: newlines, ESC, CSI, …) written as an
    /// escape (`\n`, `\t`, `\r`, `\u{1B}`), so stored names print on one line and cannot send
    /// terminal sequences.
    static func escapingControlCharacters(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": escaped += "\\n"
            case "\t": escaped += "\\t"
            case "\r": escaped += "\\r"
            case _ where scalar.properties.generalCategory == .control:
                escaped += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// Prints `value` on standard output as every `--json` output of the CLI is (docs/CLI.md,
    /// "JSON output"): camelCase keys, pretty-printed, keys sorted, dates in ISO 8601, `/` not
    /// escaped, an empty array or object as `[]` or `{}`.
    static func printJSON(_ value: some Encodable) throws {
        print(try jsonText(value))
    }

    /// `value` as ``printJSON(_:)`` prints it (without the final newline).
    static func jsonText(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let text = String(decoding: try encoder.encode(value), as: UTF8.self)
        // The encoder writes an empty array as "[\n\n  ]". A string never holds a raw newline
        // (JSON escapes it), so only empty containers match.
        return text.replacing(/\[\n\s*\]/, with: "[]").replacing(/\{\n\s*\}/, with: "{}")
    }

    /// `value` with `places` digits after the point, rounded half away from zero (`%.Nf` for the
    /// figures the CLI prints: finite, below 2^53 after scaling).
    static func decimal(_ value: Double, places: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        var scale: Double = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        guard scaled < 9_007_199_254_740_992 else { return "\(value)" }
        let units = UInt64(scaled)
        let divisor = UInt64(scale)
        let whole = "\(value < 0 && units > 0 ? "-" : "")\(units / divisor)"
        guard places > 0 else { return whole }
        let fraction = String(units % divisor)
        return whole + "." + String(repeating: "0", count: places - fraction.count) + fraction
    }

    /// `text` with spaces after it up to `width` characters (`%-Ns`).
    static func leftAligned(_ text: String, width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }

    /// `text` with spaces before it up to `width` characters (`%Nd`).
    static func rightAligned(_ text: String, width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }

    /// Writes to standard error as is (no newline added).
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = try? FileDescriptor.standardError.writeAll(UnsafeRawBufferPointer(bytes)) }
    }
}

struct RestoreItem: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put back the value the last `set --keep-previous` replaced.",
        discussion: """
            The value restored replaces the current one, which becomes the previous value for --grace, so \
            a restore can itself be undone with another restore. Kind, label, attributes and protection are \
            kept; the restored value does not expire. Exit code 2 if there is no such item, 17 if it holds no \
            previous value (none kept, the grace period ended, or a later rotation dropped it), 15 if the item \
            changed meanwhile.
            Example: lockbox restore com.example.api alice
            """
    ).parsedOnItsOwn()

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The service.") var service: String
    @Argument(help: "The account.") var account: String
    @Option(
        help: ArgumentHelp(
            "How long the value replaced stays the previous one: a duration as for `set --expires`. Default: 24h.", valueName: "duration"))
    var grace: String?

    func validate() throws {
        if let grace { _ = try ExpiryArguments.duration(grace, option: "--grace") }
    }

    func run() throws {
        let gracePeriod = try grace.map { try ExpiryArguments.duration($0, option: "--grace") } ?? Vault.defaultGracePeriod
        guard
            try vaultOptions.storeOpener().openVault().restorePrevious(service: service, account: account, keepingReplacedFor: gracePeriod)
        else {
            throw CLIError.itemChanged(service: service, account: account)
        }
        Console.status(
            "Restored the previous value of '\(Console.escapingControlCharacters(account))' on '\(Console.escapingControlCharacters(service))'."
        )
    }
}
