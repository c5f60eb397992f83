import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

private func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    Data(haystack).range(of: Data(needle.utf8)) != nil
}

@Suite("Vault format 2 through the lockbox CLI")
struct Format2CLITests {
    let folder: TemporaryFolder
    let vault: String
    let key: String

    init() throws {
        folder = try TemporaryFolder()
        vault = folder.file("v.lockbox").string
        key = folder.file("v.key").string
    }

    private func lockbox(_ arguments: [String], stdin: Data = Data()) throws -> ProcessResult {
        try runLockbox(arguments + ["--vault", vault, "--key-file", key], stdin: stdin)
    }

    @Test("init --format 2 makes a SQLite database with no names in it; set, get, list, slots, rotate-key and delete work on it")
    func itemCommands() throws {
        var result = try runLockbox(["init", "--format", "2", "--vault", vault, "--generate-key-file", key])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(VaultFileFormat.detect(at: FilePath(vault)) == .format2)
        #expect(try lockbox(["set", "secret.service.example", "secret-account-name"], stdin: Data("value one".utf8)).status == 0)
        #expect(try lockbox(["get", "secret.service.example", "secret-account-name"]).stdoutString == "value one")
        result = try lockbox(["list", "--json"])
        #expect(result.status == 0)
        #expect(result.stdoutString.contains("secret-account-name"))
        let bytes = try Data(contentsOf: URL(fileURLWithPath: vault))
        for text in ["secret.service.example", "secret-account-name", "value one"] {
            #expect(bytes.range(of: Data(text.utf8)) == nil, "\(text) is in the vault file")
        }
        let second = folder.file("second.key").string
        #expect(try lockbox(["slot", "add-key-file", "--generate", second]).status == 0)
        #expect(try lockbox(["rotate-key", "--drop-unmatched-slots"]).status == 0)
        #expect(try lockbox(["slot", "list"]).stdoutString.split(separator: "\n").count == 1)
        #expect(try lockbox(["get", "secret.service.example", "secret-account-name"]).stdoutString == "value one")
        #expect(try lockbox(["delete", "secret.service.example", "secret-account-name"]).status == 0)
        #expect(try lockbox(["get", "secret.service.example", "secret-account-name"]).status == 2)  // not found
        // Nothing but the vault and its key files is left once no process has it open.
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path.string).sorted()
        #expect(names == ["second.key", "v.key", "v.lockbox"])
    }

    @Test("lockbox convert turns a format-1 vault into format 2 with every secret byte-identical; running it again changes nothing")
    func convertCommand() throws {
        #expect(try runLockbox(["init", "--vault", vault, "--generate-key-file", key]).status == 0)
        let binary = Data((0..<2000).map { UInt8(($0 * 7) & 0xFF) })
        #expect(try lockbox(["set", "--raw", "svc", "binary"], stdin: binary).status == 0)
        #expect(try lockbox(["set", "svc", "text", "--kind", "token", "--attribute", "env=prod"], stdin: Data("t".utf8)).status == 0)
        let listed = try lockbox(["list", "--json"]).stdoutString
        var result = try lockbox(["convert"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(VaultFileFormat.detect(at: FilePath(vault)) == .format2)
        #expect(try lockbox(["get", "svc", "binary"]).stdout == binary)
        #expect(try lockbox(["list", "--json"]).stdoutString == listed)
        result = try lockbox(["convert"])
        #expect(result.status == 0)
        #expect(try lockbox(["get", "svc", "text"]).stdoutString == "t")
    }
}

extension Format2CLITests {
    @Test(
        "import --json-lines stores every line in one batch; a bad line stores nothing and names the line; export gives one self-contained file"
    )
    func jsonLinesAndExport() throws {
        #expect(try runLockbox(["init", "--format", "2", "--vault", vault, "--generate-key-file", key]).status == 0)
        var lines = (0..<300).map { index in
            #"{"service": "migrated", "account": "user-\#(index)", "secret_b64": "\#(Data("token-\(index)".utf8).base64EncodedString())", "kind": "token", "label": "from the old keyring"}"#
        }
        lines.append(#"{"service": "migrated", "account": "binary", "secret_b64": "AAEC/w=="}"#)
        var result = try lockbox(["import", "--json-lines", "-"], stdin: Data((lines.joined(separator: "\n") + "\n").utf8))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try lockbox(["get", "migrated", "user-299"]).stdoutString == "token-299")
        #expect(try lockbox(["get", "migrated", "binary"]).stdout == Data([0, 1, 2, 255]))
        let store = try SQLiteVaultStore.open(at: FilePath(vault), credentials: [.keyFile(FilePath(key))])
        #expect(try store.list(service: "migrated").count == 301)
        #expect(try store.metadata(ItemKey(service: "migrated", account: "user-7"))?.label == "from the old keyring")

        let bad = [
            #"{"service": "other", "account": "a", "secret_b64": "YQ=="}"#, #"{"service": "other", "account": "b", "secret_b64": 5}"#,
        ]
        result = try lockbox(["import", "--json-lines", "-"], stdin: Data(bad.joined(separator: "\n").utf8))
        #expect(result.status == 64)
        #expect(result.stderr.contains("error[invalid-argument]") && result.stderr.contains("line 2"))
        #expect(try store.list(service: "other").isEmpty)

        let backup = folder.file("backup.lockbox").string
        let passphrase = folder.file("backup-pass").string
        try Data("backup words\n".utf8).write(to: URL(fileURLWithPath: passphrase))
        result = try runLockbox(
            ["export", "--vault", vault, "--key-file", key, "--to", backup, "--backup-passphrase-fd", "3", "--kdf", "interactive"],
            shellRedirect: "3<'\(passphrase)'")
        #expect(result.status == 0, "\(result.stderr)")
        // One file holds the backup (a format-2 vault, as the vault is); no -wal or -shm beside it.
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path.string).filter { $0.hasPrefix("backup.lockbox") }
        #expect(names == ["backup.lockbox"])
        #expect(VaultFileFormat.detect(at: FilePath(backup)) == .format2)
        #expect(try FilePath(backup).stat().permissions.rawValue & 0o777 == 0o600)
        #expect(
            try SQLiteVaultStore.open(at: FilePath(backup), credentials: [.passphrase(secret("backup words"))]).list(service: "migrated")
                .count == 301)

        // Restored into a new vault with import: every secret as it was.
        let restored = folder.file("restored.lockbox").string
        let restoredKey = folder.file("restored.key").string
        #expect(try runLockbox(["init", "--vault", restored, "--generate-key-file", restoredKey]).status == 0)
        result = try runLockbox(
            ["import", backup, "--vault", restored, "--key-file", restoredKey, "--backup-passphrase-fd", "3"],
            shellRedirect: "3<'\(passphrase)'")
        #expect(result.status == 0, "\(result.stderr)")
        let copy = try SQLiteVaultStore.open(at: FilePath(restored), credentials: [.keyFile(FilePath(restoredKey))])
        #expect(try copy.list(service: "migrated").count == 301)
        #expect(try copy.get(ItemKey(service: "migrated", account: "binary")) == SecretBytes(copying: [0, 1, 2, 255]))
        #expect(try copy.get(ItemKey(service: "migrated", account: "user-42")) == secret("token-42"))
    }
}

extension Format2CLITests {
    @Test("lockbox get on a format-2 vault, -wal or -shm with loose permissions exits 8 (insecure-permissions), as for format 1")
    func loosePermissionsThroughTheCLI() throws {
        #expect(try runLockbox(["init", "--format", "2", "--vault", vault, "--generate-key-file", key]).status == 0)
        #expect(try lockbox(["set", "s", "a"], stdin: Data("v".utf8)).status == 0)
        chmod(vault, 0o644)
        var result = try lockbox(["get", "s", "a"])
        #expect(result.status == 8 && result.errorCode == .insecurePermissions)
        chmod(vault, 0o600)
        for suffix in ["-wal", "-shm"] {
            // Left by a process that was killed, or made by a careless copy.
            let sidecar = vault + suffix
            #expect(FileManager.default.createFile(atPath: sidecar, contents: Data(), attributes: [.posixPermissions: 0o644]))
            result = try lockbox(["get", "s", "a"])
            #expect(result.status == 8 && result.errorCode == .insecurePermissions, "\(suffix): \(result.stderr)")
            #expect(result.stderr.contains(sidecar))
            try FileManager.default.removeItem(atPath: sidecar)
        }
        #expect(try lockbox(["get", "s", "a"]).stdoutString == "v")
    }
}

extension Format2CLITests {
    @Test(
        "import --json-lines reads a named file in blocks: lines across block boundaries, CRLF, blank lines, no final newline; a bad last line rolls every stored line back",
        arguments: ["1", "2"])
    func jsonLinesFromAFile(format: String) throws {
        #expect(try runLockbox(["init", "--format", format, "--vault", vault, "--generate-key-file", key]).status == 0)
        // About 1 KiB per line, so the 300 lines span several 64 KiB reads.
        let label = String(repeating: "l", count: 900)
        var lines = (0..<300).map { index in
            #"{"service": "file", "account": "user-\#(index)", "secret_b64": "\#(Data("token-\(index)".utf8).base64EncodedString())", "label": "\#(label)"}"#
        }
        lines.insert("", at: 100)
        lines.insert("  \t", at: 200)
        let input = folder.file("items.jsonl")
        try Data(lines.joined(separator: "\r\n").utf8).write(to: URL(fileURLWithPath: input.string))
        var result = try lockbox(["import", "--json-lines", input.string])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("Imported 300 item(s)"))
        for index in [0, 63, 64, 65, 150, 299] {
            #expect(try lockbox(["get", "file", "user-\(index)"]).stdoutString == "token-\(index)")
        }

        // The 250th line is bad: the 249 before it were already stored in the open transaction
        // of a format-2 vault; none of them may stay.
        var replacing = (0..<250).map { #"{"service": "again", "account": "a-\#($0)", "secret_b64": "YQ=="}"# }
        replacing[249] = #"{"service": "again", "account": "a-249", "secret_b64": "not base64!"}"#
        try Data(replacing.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: input.string))
        result = try lockbox(["import", "--json-lines", input.string])
        #expect(result.status == 64)
        #expect(result.errorCode == .invalidArgument && result.stderr.contains("line 250"))
        let listed = try JSONSerialization.jsonObject(with: lockbox(["list", "--service", "again", "--json"]).stdout) as? [Any]
        #expect(listed?.isEmpty == true)
        #expect(try lockbox(["get", "file", "user-299"]).stdoutString == "token-299")
    }

    @Test("import --json-lines refuses a FIFO, a directory and a missing file before reading anything, with their exit codes")
    func jsonLinesRefusesWhatIsNotARegularFile() throws {
        #expect(try runLockbox(["init", "--format", "2", "--vault", vault, "--generate-key-file", key]).status == 0)
        let fifo = folder.file("pipe")
        #expect(mkfifo(fifo.string, 0o600) == 0)
        // Nobody writes to the FIFO: reading it would hang; the command must refuse it at once.
        var result = try lockbox(["import", "--json-lines", fifo.string])
        #expect(result.status == 64 && result.errorCode == .invalidArgument)
        result = try lockbox(["import", "--json-lines", folder.path.string])
        #expect(result.status == 64 && result.errorCode == .invalidArgument)
        result = try lockbox(["import", "--json-lines", folder.file("missing.jsonl").string])
        #expect(result.status != 0 && result.errorCode != nil && result.errorCode != .invalidArgument)
    }
}

extension Format2CLITests {
    @Test("list --json-lines prints one JSON object per item (the fields of list --json); --json with it is a usage error")
    func listJSONLines() throws {
        #expect(try runLockbox(["init", "--format", "2", "--vault", vault, "--generate-key-file", key]).status == 0)
        let lines = (0..<50).map { #"{"service": "svc", "account": "user-\#($0)", "secret_b64": "YQ=="}"# }
        #expect(try lockbox(["import", "--json-lines", "-"], stdin: Data(lines.joined(separator: "\n").utf8)).status == 0)
        let result = try lockbox(["list", "--json-lines"])
        #expect(result.status == 0, "\(result.stderr)")
        let objects = try result.stdoutString.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.count == 50)
        #expect(Set(objects.compactMap { $0["account"] as? String }) == Set((0..<50).map { "user-\($0)" }))
        let array = try #require(try JSONSerialization.jsonObject(with: lockbox(["list", "--json"]).stdout) as? [[String: Any]])
        #expect(Set(array.first?.keys ?? [:].keys) == Set(objects.first?.keys ?? [:].keys))
        #expect(try lockbox(["list", "--json-lines", "--service", "other"]).stdoutString.isEmpty)
        #expect(try lockbox(["list", "--json", "--json-lines"]).status == 64)
    }
}
