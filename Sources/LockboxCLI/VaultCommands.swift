import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxTPM
import SystemPackage

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a new, empty vault.",
        discussion: """
            Give a key file (--key-file to use one, --generate-key-file to make one), a passphrase \
            (--passphrase-fd, or a prompt asked twice), or both: each becomes a key slot that opens the vault.
            Example for a service: lockbox init --vault /var/lib/app/vault.lockbox --generate-key-file /etc/app/vault.key
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Option(
        help: ArgumentHelp("Create a new key file here (32 random bytes, mode 0600) and add a slot for it.", valueName: "path"),
        completion: .file())
    var generateKeyFile: String?
    @Flag(help: "Also add a passphrase slot, asked on the terminal, when a key file is given.") var withPassphrase = false
    @Option(help: "Argon2id cost for the passphrase slot.") var kdf: KDFPreset = .moderate
    @Option(
        help: ArgumentHelp(
            "Vault format: 1 (one encrypted file) or 2 (sealed rows in SQLite; docs/FORMAT.md section 18).", valueName: "version"))
    var format: Int = 2
    @Flag(
        help:
            "Also add a TPM2 slot, so the vault opens on this machine without a passphrase (a passphrase or key-file slot is still made, as recovery)."
    )
    var tpm = false
    @OptionGroup var tpmSlot: TPMSlotOptions
    @Flag(help: ArgumentHelp(PassphrasePolicy.overrideHelp)) var allowWeakPassphrase = false

    func validate() throws {
        _ = try Self.vaultFormat(format)
        if !tpm && (tpmSlot.pcrs != nil || tpmSlot.pin || tpmSlot.newPinFd != nil) {
            throw ValidationError("--tpm-pcrs, --tpm-pin and --tpm-new-pin-fd describe the TPM slot; add --tpm")
        }
        if generateKeyFile != nil && vaultOptions.keyFile != nil {
            throw ValidationError("give either --key-file (an existing key) or --generate-key-file (a new one), not both")
        }
    }

    func run() throws {
        let postgres = try vaultOptions.requestedStore() == .postgres
        if postgres && tpm {
            throw LockboxError.invalidArgument(
                "a vault in PostgreSQL is shared by many hosts; a TPM slot would open it on one: leave out --tpm")
        }
        // In `lockbox`, this hands over to `lockbox-postgres` before a key file is made.
        if postgres { _ = try PostgresCommands.provider() }
        let path = vaultOptions.vaultPath
        // Before a key file is generated: say what is at the path, not only that something is.
        if !postgres { try FileVault.checkCanCreate(at: path) }
        // The TPM slot first: no TPM fails before a key file is made or a passphrase asked.
        var credentials: [VaultCredential] = tpm ? [.sealed(try tpmSlot.sealer())] : []
        // The passphrase (when there is to be one) before a key file is made: one the policy
        // refuses leaves nothing behind.
        var passphrase: SecretBytes?
        if let fd = vaultOptions.passphraseFd {
            passphrase = try SecretInput.passphrase(fromDescriptor: fd, what: "passphrase")
        } else if (generateKeyFile == nil && vaultOptions.givenKeyFilePath == nil) || withPassphrase {
            passphrase = try SecretInput.promptTwice("New vault passphrase: ", what: "passphrase")
        }
        if let passphrase { try PassphrasePolicy.check(passphrase, what: "vault passphrase", allowWeak: allowWeakPassphrase) }
        if let generateKeyFile {
            let keyPath = FilePath(generateKeyFile)
            try KeyFile.generate(at: keyPath)
            Console.status("Generated key file \(keyPath.string). Keep it safe: it opens the vault.")
            credentials.append(.keyFile(keyPath))
        } else if let keyFile = vaultOptions.givenKeyFilePath {
            credentials.append(.keyFile(keyFile))
        }
        if let passphrase { credentials.append(.passphrase(passphrase)) }
        let keyFile = generateKeyFile.map { FilePath($0) } ?? vaultOptions.givenKeyFilePath
        if postgres {
            let server = try vaultOptions.storeOpener().createPostgresVault(credentials: credentials, kdf: kdf.parameters)
            let slots = credentials.map { if case .passphrase = $0 { "passphrase" } else { "key-file" } }.joined(separator: ", ")
            Console.status("Created a vault in PostgreSQL at \(server) with key slot(s): \(slots).")
            if let keyFile { try Self.printFingerprint(keyFile, recorded: true) }
            return
        }
        let vaultFormat = try Self.vaultFormat(format)
        let slotKinds = try FileVault.create(at: path, credentials: credentials, format: vaultFormat, kdf: kdf.parameters).keySlots()
        try StoreSettings.record(
            .file, for: vaultOptions.profileName, reason: "a file vault was created with `lockbox init`",
            at: vaultOptions.settingsPath)
        // Later commands on this vault find its key file without --key-file or LOCKBOX_KEY_FILE;
        // not for a vault with a TPM slot, which opens through the TPM (the key file is its recovery).
        if !tpm, let keyFile {
            try StoreSettings.rememberKeyFile(keyFile, vault: path, for: vaultOptions.profileName, at: vaultOptions.settingsPath)
        }
        let slots = slotKinds.map(\.kind.rawValue).joined(separator: ", ")
        Console.status("Created vault \(path.string) with key slot(s): \(slots).")
        if let keyFile { try Self.printFingerprint(keyFile, recorded: vaultFormat == .two) }
    }

    /// The vault format `--format` names; the library's creator makes it.
    static func vaultFormat(_ version: Int) throws -> FileVault.Format {
        guard let format = FileVault.Format(rawValue: version) else { throw ValidationError("--format takes 1 or 2") }
        return format
    }

    /// Prints the key file's fingerprint, which `slot list` shows for its slot where the vault
    /// records it (format 2 and PostgreSQL; not format 1).
    static func printFingerprint(_ keyFile: FilePath, recorded: Bool) throws {
        let fingerprint = try KeyFile.fingerprint(at: keyFile)
        Console.status(
            "Key file fingerprint: \(fingerprint)"
                + (recorded ? " (`lockbox slot list` shows it for its slot)" : " (a format-1 vault does not record it)"))
    }
}

struct Passwd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd",
        abstract: "Change the vault's passphrase.",
        discussion: """
            Unlock with the current passphrase or a key file; the new passphrase comes from \
            --new-passphrase-fd or is asked twice on the terminal. The data key stays the same. \
            The file vault only: with --store postgres it exits 64.
            Example: lockbox passwd --passphrase-fd 3 --new-passphrase-fd 4 3<old.txt 4<new.txt
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Option(help: ArgumentHelp("Read the new passphrase from this file descriptor.", valueName: "fd"))
    var newPassphraseFd: Int32?
    @Option(help: ArgumentHelp("Which passphrase slot to change, when there are several (see `lockbox slot list`).", valueName: "index"))
    var slot: Int?
    @Option(help: "Argon2id cost for the new passphrase.") var kdf: KDFPreset = .moderate
    @Flag(help: ArgumentHelp(PassphrasePolicy.overrideHelp)) var allowWeakPassphrase = false

    func run() throws {
        let store = try vaultOptions.storeOpener().openFileStoreForKeySlots("passwd")
        let newPassphrase =
            try newPassphraseFd.map { try SecretInput.passphrase(fromDescriptor: $0, what: "new passphrase") }
            ?? SecretInput.promptTwice("New passphrase: ", what: "new passphrase")
        try PassphrasePolicy.check(newPassphrase, what: "passphrase", allowWeak: allowWeakPassphrase)
        try store.changePassphrase(to: newPassphrase, kdf: kdf.parameters, slot: slot)
        Console.status("Passphrase changed.")
    }
}

struct RotateKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-key",
        abstract: "Replace the vault's data key and re-encrypt everything under the new one.",
        discussion: """
            Every key slot is rewrapped, so each needs its credential: give both --key-file and \
            --passphrase-fd when the vault has both kinds, or --drop-unmatched-slots to remove the \
            slots you cannot open.
            TPM2 slots are kept: this machine's TPM unseals each one's secret (with the PIN from \
            --tpm-pin-fd or the terminal, for a slot with a PIN) and the new data key is wrapped under it, \
            so the slot stays sealed to the same TPM, PCRs and PIN. A TPM2 slot that cannot unseal here \
            (no TPM, changed PCRs, another or a cleared TPM, a lockout; checked first, without using a \
            try of the TPM's limit) stops the rotation with that reason and its exit code, unless \
            --drop-unmatched-slots removes it: add it again afterwards with `lockbox slot add-tpm`.
            Each key-file slot records the fingerprint of the key file given for it. On a terminal, a \
            progress line counts the items re-encrypted (format 2). The file vault only: with \
            --store postgres it exits 64.
            Example: lockbox rotate-key --key-file vault.key --passphrase-fd 3 3<passphrase.txt
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Flag(help: "Remove key slots that none of the given credentials opens, and TPM2 slots that cannot unseal here.")
    var dropUnmatchedSlots = false

    func run() throws {
        let opener = try vaultOptions.storeOpener()
        try opener.refuseKeySlotsInPostgres("rotate-key")
        let path = opener.configuration.vaultPath
        var credentials = try opener.credentials()
        if !credentials.contains(where: { if case .sealed = $0 { true } else { false } }),
            let tpm = try keptTPMCredential(path)
        {
            credentials.append(tpm)
        }
        let store = try FileVault.open(at: path, credentials: credentials)
        // A format-2 vault reports each item re-encrypted (a line on a terminal); format 1
        // encrypts its items together, so it has no count to report.
        var items: Int?
        try withProgress(label: "rotating") { line in
            try store.rotateDataKey(credentials: credentials, dropUnmatchedSlots: dropUnmatchedSlots) { done, total in
                items = total
                line?(done, total)
            }
        }
        let rewrapped = "\(try store.keySlots().count) key slot(s) rewrapped"
        Console.status("Data key rotated; " + (items.map { "\($0) item(s) re-encrypted, " } ?? "") + rewrapped + ".")
    }

    /// The TPM as a credential that keeps the vault's TPM2 slots, when it has any and each would
    /// unseal here; `nil` when it has none, or when --drop-unmatched-slots drops them all.
    /// Throws ``TPMSlotNotKept`` for a slot that cannot be kept.
    private func keptTPMCredential(_ path: FilePath) throws -> VaultCredential? {
        guard FileManager.default.fileExists(atPath: path.string) else { return nil }
        let sealed = try FileVault.sealedKeySlots(at: path)
        guard !sealed.isEmpty else { return nil }
        let sealer = try TPMSupport.sealer()
        var failures: [(index: Int, error: any LockboxCodedError)] = []
        for (index, blob) in sealed.sorted(by: { $0.key < $1.key }) {
            do {
                _ = try sealer.checkUnsealable(blob)
            } catch let error as any LockboxCodedError {
                failures.append((index, error))
            }
        }
        if let first = failures.first, !dropUnmatchedSlots || failures.count < sealed.count {
            throw TPMSlotNotKept(index: first.index, cause: first.error, othersKept: failures.count < sealed.count)
        }
        guard failures.isEmpty else {
            Console.status("Dropping TPM2 slot(s) \(failures.map { String($0.index) }.joined(separator: ", ")): \(failures[0].error)")
            return nil
        }
        return try vaultOptions.tpmCredential()
    }
}

/// A TPM2 slot `rotate-key` cannot keep, because the TPM cannot unseal it here: the TPM's reason,
/// with its code (and so its exit status) and what to do instead.
struct TPMSlotNotKept: AdvisingError {
    var index: Int
    var cause: any LockboxCodedError
    /// Whether other TPM2 slots would be kept (then --drop-unmatched-slots cannot choose).
    var othersKept: Bool

    var description: String {
        let what =
            othersKept
            ? "remove it with `lockbox slot remove \(index)` first, then rotate"
            : "rotate with --drop-unmatched-slots to remove it, then `lockbox slot add-tpm` seals a new one"
        return
            "rotate-key keeps TPM2 slot \(index) by unsealing its secret with this TPM, and it cannot: \(cause) To rotate anyway, \(what)."
    }

    var code: LockboxError.Code { cause.code }
    var category: LockboxError.Category { cause.category }
}

struct Slot: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "slot",
        abstract: "List, add and remove key slots; print a key file's fingerprint.",
        discussion: """
            The file vault's key slots; with --store postgres, list, add and remove exit 64 (a vault in \
            PostgreSQL keeps the slots `init` gave it).
            Example: lockbox slot list
            """,
        subcommands: [ListSlots.self, AddPassphrase.self, AddKeyFile.self, AddTPM.self, RemoveSlot.self, Fingerprint.self])

    /// Without a subcommand: a usage error (exit 64), not help with exit 0.
    func run() throws { throw ValidationError("name a subcommand; `lockbox slot --help` lists them") }

    struct ListSlots: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Show the vault's key slots.",
            discussion: """
                A key-file slot shows the fingerprint of its key file as the vault records it (compare \
                `lockbox slot fingerprint PATH`), or "(not recorded)": a format-1 vault, or a slot that \
                no key file has opened since it was made by an older Lockbox. A recorded value that is \
                not the opening key file's is flagged, with a warning on standard error.
                Example: lockbox slot list --json
                """)
        @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
        @Flag(
            help: """
                Print a JSON array (index, kind, kdf: {algorithm, opsLimit, memoryLimitBytes} or null, openedThisHandle, \
                keyFileFingerprint: 32 hex digits or null, keyFileFingerprintMatches: true, false or null) instead of lines.
                """
        ) var json = false

        /// One slot in `slot list --json`; a value that does not apply is `null`.
        struct Listed: Encodable {
            /// A passphrase slot's Argon2id cost, as numbers.
            struct KDF: Encodable {
                var algorithm = "argon2id"
                var opsLimit, memoryLimitBytes: UInt64
            }
            var index: Int
            var kind: String
            var kdf: KDF?
            var openedThisHandle: Bool
            var keyFileFingerprint: String?
            var keyFileFingerprintMatches: Bool?

            enum CodingKeys: String, CodingKey {
                case index, kind, kdf, openedThisHandle, keyFileFingerprint, keyFileFingerprintMatches
            }

            /// Every key, `null` included (the synthesized encoding would leave `nil`s out).
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(index, forKey: .index)
                try container.encode(kind, forKey: .kind)
                try container.encode(kdf, forKey: .kdf)
                try container.encode(openedThisHandle, forKey: .openedThisHandle)
                try container.encode(keyFileFingerprint, forKey: .keyFileFingerprint)
                try container.encode(keyFileFingerprintMatches, forKey: .keyFileFingerprintMatches)
            }
        }

        func run() throws {
            let slots = try vaultOptions.storeOpener().openFileStoreForKeySlots("slot list").keySlots()
            if json {
                try Console.printJSON(
                    slots.map {
                        Listed(
                            index: $0.index, kind: $0.kind.rawValue,
                            kdf: $0.kdf.map { Listed.KDF(opsLimit: $0.opsLimit, memoryLimitBytes: $0.memoryLimitBytes) },
                            openedThisHandle: $0.openedThisHandle, keyFileFingerprint: $0.keyFileFingerprint,
                            keyFileFingerprintMatches: $0.keyFileFingerprintMatches)
                    })
            } else {
                for slot in slots { print(slot.description) }
            }
            // A recorded fingerprint that is not the opening key file's: the file was changed
            // outside Lockbox. Said on standard error either way; rotate-key records it again.
            for slot in slots where slot.keyFileFingerprintMatches == false {
                Console.status(
                    "lockbox: warning: slot \(slot.index) records a fingerprint that is not its key file's: the vault file was changed outside Lockbox. `lockbox rotate-key` records the right one."
                )
            }
        }
    }

    struct AddPassphrase: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-passphrase", abstract: "Add a passphrase slot (unlock with an existing credential first).",
            discussion: "Example: lockbox slot add-passphrase --kdf sensitive")
        @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
        @Option(help: ArgumentHelp("Read the new passphrase from this file descriptor.", valueName: "fd"))
        var newPassphraseFd: Int32?
        @Option(help: "Argon2id cost for the new slot.") var kdf: KDFPreset = .moderate
        @Flag(help: ArgumentHelp(PassphrasePolicy.overrideHelp)) var allowWeakPassphrase = false

        func run() throws {
            let store = try vaultOptions.storeOpener().openFileStoreForKeySlots("slot add-passphrase")
            let passphrase =
                try newPassphraseFd.map { try SecretInput.passphrase(fromDescriptor: $0, what: "new passphrase") }
                ?? SecretInput.promptTwice("New passphrase: ", what: "new passphrase")
            try PassphrasePolicy.check(passphrase, what: "passphrase", allowWeak: allowWeakPassphrase)
            let index = try store.addKeySlot(.passphrase(passphrase), kdf: kdf.parameters)
            Console.status("Added passphrase slot \(index).")
        }
    }

    struct AddKeyFile: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-key-file", abstract: "Add a key-file slot (unlock with an existing credential first).",
            discussion: "Example: lockbox slot add-key-file --generate /etc/app/second.key")
        @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
        @Argument(help: "The key file for the new slot.", completion: .file()) var path: String
        @Flag(help: "Create the key file (32 random bytes, mode 0600) instead of using an existing one.") var generate = false

        func run() throws {
            let store = try vaultOptions.storeOpener().openFileStoreForKeySlots("slot add-key-file")
            let keyPath = FilePath(path)
            if generate { try KeyFile.generate(at: keyPath) }
            let index = try store.addKeySlot(.keyFile(keyPath))
            let recorded = try store.keySlots().first { $0.index == index }?.keyFileFingerprint
            let fingerprint = try recorded ?? KeyFile.fingerprint(at: keyPath)
            Console.status(
                "Added key-file slot \(index) for \(keyPath.string), fingerprint \(fingerprint)"
                    + (recorded == nil ? " (a format-1 vault does not record it)." : "."))
        }
    }

    struct Fingerprint: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fingerprint", abstract: "Print a key file's fingerprint, to find its slot in `lockbox slot list`.",
            discussion: """
                The fingerprint is 32 hexadecimal digits derived from the key (docs/FORMAT.md section 18.1.1); \
                it tells key files apart and reveals nothing that helps find the key. `slot list` shows the one \
                each key-file slot records. Needs no vault.
                Example: lockbox slot fingerprint /etc/app/vault.key
                """)
        @Argument(help: "The key file.", completion: .file()) var path: String
        @Flag(help: "Print a JSON object (path, fingerprint) instead of the fingerprint alone.") var json = false

        /// `slot fingerprint --json`.
        struct Printed: Encodable {
            var path: String
            var fingerprint: String
        }

        func run() throws {
            let fingerprint = try KeyFile.fingerprint(at: FilePath(path))
            if json { try Console.printJSON(Printed(path: path, fingerprint: fingerprint)) } else { print(fingerprint) }
        }
    }

    struct RemoveSlot: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract:
                "Remove a key slot (asked to confirm on a terminal; --yes without one); the last one cannot be removed, nor the last recovery slot of a vault with a TPM2 slot without --force.",
            discussion: """
                A TPM2 slot opens the vault only on this machine, and only while its TPM keeps its owner \
                seed, the PCRs it is bound to keep their values and the TPM is not locked out; a passphrase \
                or key-file slot is the recovery for when it cannot. Removing the last of those from a vault \
                with a TPM2 slot is refused (exit 12) unless --force is given.
                Example: lockbox slot remove 1
                """)
        @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
        @Argument(help: "The slot's index, from `lockbox slot list`.") var index: Int
        @Flag(help: "Remove the vault's last passphrase or key-file slot even though it has a TPM2 slot, so that only the TPM opens it.")
        var force = false
        @Flag(help: ArgumentHelp(Confirmation.yesHelp)) var yes = false

        func run() throws {
            let store = try vaultOptions.storeOpener().openFileStoreForKeySlots("slot remove")
            let slots = try store.keySlots()
            let recovery = slots.filter { $0.kind != .tpm2 }
            let lastRecovery = recovery.count == 1 && recovery[0].index == index && slots.contains(where: { $0.kind == .tpm2 })
            if lastRecovery {
                guard force else {
                    throw LockboxError.keySlot(
                        "slot \(index) is the vault's last passphrase or key-file slot, what opens it when the TPM2 slot cannot (another machine, a cleared or replaced TPM, changed PCRs, a lockout); refusing to remove it. Add another with `lockbox slot add-passphrase` first, or give --force to rely on the TPM alone."
                    )
                }
            }
            // A slot that is not there, or the only one, is refused by the store with its own error, unasked.
            if let slot = slots.first(where: { $0.index == index }), slots.count > 1 {
                let kind = "\(slot.kind.rawValue) slot \(index)"
                try Confirmation.require(
                    yes: yes,
                    question: lastRecovery
                        ? "Slot \(index) is the vault's last recovery slot; after removing it only this machine's TPM opens the vault. Remove it?"
                        : "Remove \(kind)? Whatever opened the vault through it no longer will.",
                    what: "remove \(kind)")
            }
            try store.removeKeySlot(at: index)
            Console.status("Removed key slot \(index).")
        }
    }
}

struct Convert: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "convert",
        abstract: "Convert a format-1 vault to format 2 (sealed rows in SQLite), in place.",
        discussion: """
            Opens the vault with the credentials given, builds the format-2 database beside it, \
            checks every item against the old vault, then replaces the old file atomically. The vault ID, \
            the data key and every key slot are kept, so each passphrase, key file and TPM slot still opens it. \
            Run it again safely: a vault already in format 2 is left as it is. On a terminal, a progress \
            line shows each pass (writing, then checking).
            Example: lockbox convert --vault old.lockbox --key-file vault.key
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions

    func run() throws {
        let path = vaultOptions.vaultPath
        if !FileManager.default.fileExists(atPath: path.string) { throw LockboxError.vaultNotFound(path: path.string) }
        let credentials = try vaultOptions.unlockCredentials()
        // A line per pass on a terminal: "converting" (writing the new database), then "checking".
        let progress = SteppedProgress<SQLiteVaultStore.ConversionStep> { $0 == .writing ? "converting" : "checking" }
        defer { progress?.finish() }
        let conversion = try SQLiteVaultStore.convert(
            formatOneAt: path, credentials: credentials, lockTimeout: .seconds(10),
            progress: progress.map { progress in { step, done, total in progress.update(step, done: done, total: total) } })
        progress?.finish()
        switch conversion {
        case .converted(let items):
            Console.status("Converted \(path.string) to format 2: \(items) item(s), each checked against the format-1 vault.")
        case .alreadyFormat2:
            Console.status("\(path.string) is already in format 2; nothing to do.")
        }
    }
}

struct MigrateSchema: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate-schema",
        abstract: "Bring the PostgreSQL store's schema to the version this lockbox needs (as the schema's owner role).",
        discussion: """
            Only for --store postgres. Run it once per database, and again after each upgrade of \
            lockbox, with a URL (--postgres-url-file, LOCKBOX_POSTGRES_URL_FILE or LOCKBOX_POSTGRES_URL) \
            whose role owns the schema `lockbox` (or may create it). The other commands run as the \
            application role, which needs only SELECT, INSERT, UPDATE, DELETE and EXECUTE: they check the \
            schema version, run no DDL, and exit 28 while the schema is missing or older. Safe to run \
            again, and from several hosts at once: each migration applies exactly once.
            Example: LOCKBOX_POSTGRES_URL_FILE=/etc/app/owner.url lockbox --store postgres migrate-schema
            """)

    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions

    func run() throws {
        guard try vaultOptions.requestedStore() == .postgres else {
            throw LockboxError.invalidArgument("migrate-schema works on the PostgreSQL store's schema: add --store postgres")
        }
        // In `lockbox`, this hands over to `lockbox-postgres`.
        let support = try PostgresCommands.provider()
        let (before, after) = try support.migrateSchema(vaultOptions.postgresConnection())
        if before == after {
            Console.status("The Lockbox schema is at version \(after) already; nothing was changed.")
        } else {
            Console.status("Migrated the Lockbox schema from version \(before) to \(after).")
        }
    }
}
