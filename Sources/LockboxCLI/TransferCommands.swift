import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxSecretService
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

extension ConflictPolicy: ExpressibleByArgument {}

/// Runs `body` with the progress callback of a transfer: a throttled ``ProgressLine`` on a
/// terminal (cleared when `body` ends, for the summary), nothing on a pipe.
func withProgress<T>(label: String, _ body: (((Int, Int) -> Void)?) throws -> T) rethrows -> T {
    guard let line = ProgressLine(label: label) else { return try body(nil) }
    defer { line.finish() }
    return try body { done, total in line.update(done: done, total: total) }
}

private func summary(_ report: TransferReport) -> String {
    var parts = ["\(report.copied.count) copied", "\(report.alreadyPresent.count) already there"]
    if !report.conflictsSkipped.isEmpty { parts.append("\(report.conflictsSkipped.count) conflicts skipped") }
    if !report.overwritten.isEmpty { parts.append("\(report.overwritten.count) overwritten") }
    if !report.keptBoth.isEmpty { parts.append("\(report.keptBoth.count) kept both") }
    if !report.removedFromSource.isEmpty { parts.append("\(report.removedFromSource.count) removed from the source") }
    return parts.joined(separator: ", ")
}

/// `migrate --json` and `import --json`: what happened to each item.
private struct TransferJSON: Encodable {
    struct Address: Encodable { var service, account: String }
    struct Copy: Encodable { var service, account, copyAccount: String }
    var copied, alreadyPresent, conflictsSkipped, overwritten, removedFromSource: [Address]
    var keptBoth: [Copy]

    init(_ report: TransferReport) {
        func addresses(_ keys: [ItemKey]) -> [Address] { keys.map { Address(service: $0.service, account: $0.account) } }
        copied = addresses(report.copied)
        alreadyPresent = addresses(report.alreadyPresent)
        conflictsSkipped = addresses(report.conflictsSkipped)
        overwritten = addresses(report.overwritten)
        removedFromSource = addresses(report.removedFromSource)
        keptBoth = report.keptBoth.sorted { $0.key.description < $1.key.description }
            .map { Copy(service: $0.key.service, account: $0.key.account, copyAccount: $0.value.account) }
    }
}

/// The per-item report on standard output: JSON, or a line per conflict.
private func printReport(_ report: TransferReport, json: Bool) throws {
    if json { try Console.printJSON(TransferJSON(report)) } else { printConflicts(report) }
}

private func printConflicts(_ report: TransferReport) {
    for key in report.conflictsSkipped {
        print("conflict  \(key.service)  \(key.account)  (kept the destination's; --on-conflict overwrite|keep-both to change)")
    }
    for key in report.overwritten { print("replaced  \(key.service)  \(key.account)") }
    for (original, copy) in report.keptBoth.sorted(by: { $0.key.description < $1.key.description }) {
        print("both      \(original.service)  \(original.account)  ->  \(copy.account)")
    }
}

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Copy items between the file vault, the Secret Service and PostgreSQL, verifying each copy.",
        discussion: """
            Copies (in memory, never through a temporary file), reads each copy back, and removes the \
            source only with --move. Safe to re-run after an interruption: items already copied are \
            recognised. The file vault is unlocked as usual (--vault, --key-file, --passphrase-fd, or a window); \
            a vault in PostgreSQL (--postgres-url-file or LOCKBOX_POSTGRES_URL; create it first with \
            `lockbox --store postgres init`) opens with the same key file or passphrase.
            Example: lockbox migrate --from secret-service --to file --all --move
            """)
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Option(help: ArgumentHelp("Where the items are now: file, secret-service or postgres.", valueName: "store")) var from: StoreKind
    @Option(help: ArgumentHelp("Where they go: file, secret-service or postgres.", valueName: "store")) var to: StoreKind
    @Option(help: "Only this service's items.") var service: String?
    @Flag(help: "Every Lockbox item (required when no --service is given).") var all = false
    @Flag(help: "Remove each source item once its copy is verified.") var move = false
    @Option(
        help: ArgumentHelp(
            "When the destination has a different item at the same address: skip, overwrite, or keep-both.", valueName: "policy"))
    var onConflict: ConflictPolicy = .skip
    @Flag(
        help:
            "Print what happened to each item as JSON (copied, alreadyPresent, conflictsSkipped, overwritten, keptBoth, removedFromSource)."
    ) var json = false

    func validate() throws {
        if from == to { throw ValidationError("--from and --to name the same store") }
        if (service == nil) == !all { throw ValidationError("say what to migrate: --service NAME or --all (one of them)") }
    }

    func run() throws {
        // First, before anything reads a descriptor: in `lockbox`, PostgreSQL hands over to `lockbox-postgres`.
        if from == .postgres || to == .postgres { _ = try PostgresCommands.provider() }
        let opener = try vaultOptions.storeOpener()
        let source = try opener.open(from)
        let destination = try opener.open(to)
        let report = try withProgress(label: "migrating") {
            try Transfer.run(from: source, to: destination, service: service, onConflict: onConflict, move: move, progress: $0)
        }
        try printReport(report, json: json)
        Console.status("Migrated \(from) → \(to): \(summary(report)).")
    }
}

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write an encrypted backup: a vault file that also opens with its own passphrase (same format as the vault).",
        discussion: """
            The backup is one self-contained file with mode 0600, never beside a -wal or -shm, and \
            an existing file is never overwritten. Of a format-2 vault: a consistent snapshot of its \
            database (every item copied sealed, times and attributes as they are) that keeps the \
            vault's key slots and gains one for the backup passphrase. Of a format-1 vault or the \
            Secret Service: a format-1 vault whose only slot is the backup passphrase. Restore with \
            `lockbox import BACKUP`, or use the backup as a vault (--vault BACKUP). See docs/FORMAT.md.
            Example: lockbox export --to backup.lockbox --service com.example.api
            """)
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Option(help: ArgumentHelp("The backup file to create (refuses to overwrite).", valueName: "path"), completion: .file()) var to: String
    @Option(help: "Only this service's items.") var service: String?
    @Option(help: ArgumentHelp("Read the backup's passphrase from this descriptor (else asked twice).", valueName: "fd"))
    var backupPassphraseFd: Int32?
    @Option(help: "Argon2id cost for the backup's passphrase.") var kdf: KDFPreset = .moderate
    @Flag(help: ArgumentHelp(PassphrasePolicy.overrideHelp)) var allowWeakPassphrase = false

    func run() throws {
        let store = try vaultOptions.storeOpener().openStore()
        let passphrase =
            try backupPassphraseFd.map { try SecretInput.passphrase(fromDescriptor: $0, what: "backup passphrase") }
            ?? SecretInput.promptTwice("Backup passphrase: ", what: "backup passphrase")
        try PassphrasePolicy.check(passphrase, what: "backup passphrase", allowWeak: allowWeakPassphrase)
        if let vault = store as? SQLiteVaultStore {
            let count = try vault.backup(to: FilePath(to), passphrase: passphrase, kdf: kdf.parameters, service: service)
            Console.status("Exported \(count) item(s) to \(to).")
            return
        }
        let backup = try FileVault.create(at: FilePath(to), credentials: [.passphrase(passphrase)], format: .one, kdf: kdf.parameters)
        let report = try withProgress(label: "exporting") { try Transfer.run(from: store, to: backup, service: service, progress: $0) }
        Console.status("Exported \(report.copied.count) item(s) to \(to).")
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Restore items from a backup made with `lockbox export`, reporting every conflict; or store JSON lines in one batch.",
        discussion: """
            With --json-lines, FILE (or - for standard input) holds one item per line: \
            {"service": S, "account": A, "secret_b64": BASE64, "kind": K, "label": L} (kind and label optional). \
            All items are stored in one batch, overwriting items at the same address: one transaction \
            on a format-2 vault (each line stored as it is read, so memory does not grow with the \
            input), one rewrite of a format-1 vault. A bad line refuses the whole input: nothing is stored.
            Example: lockbox import backup.lockbox --on-conflict keep-both
            """)
    @OptionGroup(title: VaultOptions.title, visibility: VaultOptions.visibility) var vaultOptions: VaultOptions
    @Argument(help: "The backup file (with --json-lines: the JSON-lines file, or - for standard input).", completion: .file()) var file:
        String
    @Flag(help: "Read FILE as JSON lines of items instead of a backup vault.") var jsonLines = false
    @Option(help: ArgumentHelp("Read the backup's passphrase from this descriptor (else asked).", valueName: "fd"))
    var backupPassphraseFd: Int32?
    @Option(
        help: ArgumentHelp(
            "When an item exists with different contents: skip (the default), overwrite, or keep-both. Not with --json-lines, which overwrites.",
            valueName: "policy")) var onConflict: ConflictPolicy?
    @Flag(
        help:
            "Print what happened to each item as JSON (copied, alreadyPresent, conflictsSkipped, overwritten, keptBoth). Not with --json-lines."
    ) var json = false
    @Flag(help: ArgumentHelp("With --on-conflict overwrite: do not ask for confirmation (required without a terminal).")) var yes = false

    func validate() throws {
        guard jsonLines else { return }
        // Options the JSON-lines import would not honour are refused rather than ignored.
        if let onConflict, onConflict != .overwrite {
            throw ValidationError(
                "--json-lines stores every line over any item at the same address; --on-conflict \(onConflict.rawValue) is for backups")
        }
        if json { throw ValidationError("--json-lines prints a summary, not a JSON report; leave out --json") }
        if backupPassphraseFd != nil { throw ValidationError("--json-lines reads no backup, so it takes no --backup-passphrase-fd") }
    }

    func run() throws {
        // In `lockbox`, hand PostgreSQL over to `lockbox-postgres` before the backup passphrase is
        // read from its descriptor: the program taking over reads it again.
        if try vaultOptions.requestedStore() == .postgres { _ = try PostgresCommands.provider() }
        if jsonLines { return try importJSONLines() }
        let passphrase: SecretBytes
        if let fd = backupPassphraseFd {
            passphrase = try SecretInput.passphrase(fromDescriptor: fd, what: "backup passphrase")
        } else if let typed = try Terminal.readHidden(prompt: "Backup passphrase: ") {
            passphrase = typed
        } else {
            throw CLIError.noInput("import needs the backup's passphrase: --backup-passphrase-fd N, or a terminal")
        }
        // `export` writes a backup in the vault's format: a format-1 file or a format-2 database.
        let backupPath = FilePath(file)
        let backup = try FileVault.open(at: backupPath, credential: .passphrase(passphrase), readOnly: true)
        let store = try vaultOptions.storeOpener().openStore()
        if onConflict == .overwrite {
            try Confirmation.require(
                yes: yes, question: "Replace the vault's items that differ from the backup's with the backup's?",
                what: "overwrite items from \(file)")
        }
        let report = try withProgress(label: "importing") {
            try Transfer.run(from: backup, to: store, onConflict: onConflict ?? .skip, progress: $0)
        }
        try printReport(report, json: json)
        Console.status("Imported from \(file): \(summary(report)).")
    }
}

extension Import {
    /// Stores the items of the JSON lines in one batch, refusing the whole input on the first bad
    /// line (with its line number). A format-2 vault stores each line as it is read, inside one
    /// transaction that a bad line rolls back, so memory does not grow with the input; other
    /// stores get one `set(_:)` after every line has been read and checked.
    func importJSONLines() throws {
        let input = try JSONLinesInput(path: file)
        defer { input.close() }
        let count: Int
        let store = try vaultOptions.storeOpener().openStore()
        // On a terminal: items read, the rate and (for a file) the time left from the bytes read.
        let line = ProgressLine(label: "importing")
        defer { line?.finish() }
        let size = input.size
        var items = 0
        let progress: ((Int) -> Void)? = line.map { line in
            { bytes in
                items += 1
                line.update(done: items, fraction: size.map { $0 > 0 ? Double(bytes) / Double($0) : 1 })
            }
        }
        if let vault = store as? SQLiteVaultStore {
            count = try vault.set(streaming: { store in try input.forEachItem(store, progress: progress) })
        } else {
            var writes: [ItemWrite] = []
            try input.forEachItem({ writes.append($0) }, progress: progress)
            try store.set(writes)
            count = writes.count
        }
        line?.finish()
        Console.status("Imported \(count) item(s) from JSON lines in one batch.")
    }
}

/// The input of `import --json-lines`: standard input for `-`, else a regular file (anything else
/// is refused before a byte is read), read in blocks and split into lines.
private struct JSONLinesInput {
    let path: String
    let descriptor: FileDescriptor
    /// The file's size in bytes; `nil` for standard input.
    var size: Int? = nil

    init(path: String) throws {
        self.path = path
        if path == "-" {
            descriptor = .standardInput
            return
        }
        do {
            descriptor = try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec, .nonBlocking])
        } catch let error as Errno {
            throw LockboxError.io(operation: "opening the JSON-lines file", path: path, errno: error)
        }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            try? descriptor.close()
            throw LockboxError.invalidArgument("\(path) is not a regular file; give a file of JSON lines, or - for standard input")
        }
        size = Int(status.st_size)
    }

    func close() {
        if path != "-" { try? descriptor.close() }
    }

    /// Calls `body` with the item of every non-blank line, in order, then `progress` (if given)
    /// with the bytes read so far.
    func forEachItem(_ body: (ItemWrite) throws -> Void, progress: ((Int) -> Void)? = nil) throws {
        var consumed = 0
        var pending: [UInt8] = []
        var number = 0
        var block = [UInt8](repeating: 0, count: 64 * 1024)
        defer {
            pending.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
            block.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        }
        while true {
            let count: Int
            do {
                count = try block.withUnsafeMutableBytes { try descriptor.read(into: $0) }
            } catch let error as Errno {
                throw LockboxError.io(operation: "reading the JSON lines", path: path, errno: error)
            }
            var lineStart = 0
            for index in 0..<count where block[index] == UInt8(ascii: "\n") {
                pending.append(contentsOf: block[lineStart..<index])
                number += 1
                try Self.checkLength(pending.count, number: number)
                if let item = try Self.item(line: pending, number: number) {
                    try body(item)
                    progress?(consumed + index + 1)
                }
                pending.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
                pending.removeAll(keepingCapacity: true)
                lineStart = index + 1
            }
            pending.append(contentsOf: block[lineStart..<count])
            consumed += count
            try Self.checkLength(pending.count, number: number + 1)
            if count == 0 { break }
        }
        if !pending.isEmpty { try Self.item(line: pending, number: number + 1).map(body) }
    }

    /// The longest line an item can need: its largest secret in base64, with room for the
    /// longest names and label, JSON escapes included. A longer line is refused before more of it
    /// is read, so memory stays bounded whatever the input.
    static let maximumLineBytes = (ItemLimits.maxSecretBytes + 2) / 3 * 4 + 64 * ItemLimits.maxNameBytes

    private static func checkLength(_ count: Int, number: Int) throws {
        guard count <= maximumLineBytes else {
            throw LockboxError.invalidArgument(
                "line \(number) of the JSON lines is longer than the \(maximumLineBytes) bytes an item can need")
        }
    }

    /// The fields of one line. One of another type than a string reads as absent; of the optional
    /// ones, `notText` names the first that is there and not a string (`null` included).
    private struct ImportLine: Decodable {
        var service, account, secretBase64, kind, label: String?
        var notText: String?

        private enum Key: String, CodingKey { case service, account, secret_b64, kind, label }

        init(from decoder: any Decoder) throws {
            let object = try decoder.container(keyedBy: Key.self)
            (service, account, secretBase64, kind, label) = (
                object.text(at: .service), object.text(at: .account),
                object.text(at: .secret_b64), object.text(at: .kind), object.text(at: .label)
            )
            notText = [Key.kind, .label].first { object.contains($0) && object.text(at: $0) == nil }?.rawValue
        }
    }

    /// The item of one line; `nil` for a blank line.
    private static func item(line: [UInt8], number: Int) throws -> ItemWrite? {
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) { return nil }
        func bad(_ why: String) -> LockboxError { .invalidArgument("line \(number) of the JSON lines: \(why)") }
        guard let object = try? JSONDecoder().decode(ImportLine.self, from: Data(line)) else { throw bad("not a JSON object") }
        guard let service = object.service, let account = object.account else {
            throw bad("\"service\" and \"account\" must be strings")
        }
        guard let encoded = object.secretBase64, var secret = Data(base64Encoded: encoded) else {
            throw bad("\"secret_b64\" must be a base64 string")
        }
        defer { secret.resetBytes(in: 0..<secret.count) }
        if let field = object.notText { throw bad("\"\(field)\" must be a string") }
        let options = ItemOptions(kind: ItemKind(rawValue: object.kind ?? ItemKind.generic.rawValue), label: object.label)
        let write = ItemWrite(SecretBytes(copying: secret), for: ItemKey(service: service, account: account), options: options)
        do {
            try ItemLimits.validate(write.key, options: write.options, secretCount: write.secret.count)
        } catch let error as LockboxError {
            throw bad("\(error)")
        }
        return write
    }
}
