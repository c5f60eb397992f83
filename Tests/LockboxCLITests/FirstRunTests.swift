import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

@Suite("The first run: init remembers how the vault opens")
struct FirstRunTests {
    @Test("init --generate-key-file, then set, get and list with no key-file option or variable")
    func newcomerPath() throws {
        let cli = try CLIFixture()
        let key = cli.folder.file("keys/vault.key").string
        var result = try cli.run(["init", "--generate-key-file", key])
        #expect(result.status == 0, "\(result.stderr)")
        result = try cli.run(["set", "com.example.api", "alice"], stdin: "first run")
        #expect(result.status == 0, "\(result.stderr)")
        result = try cli.run(["get", "com.example.api", "alice"])
        #expect(result.status == 0 && result.stdoutString == "first run", "\(result.stderr)")
        result = try cli.run(["list"])
        #expect(result.status == 0 && result.stdoutString.contains("alice"), "\(result.stderr)")
        // Another vault of the same profile does not borrow the key file: it stays locked.
        result = try cli.run(
            ["init", "--vault", cli.vault, "--passphrase-fd", "3"], redirect: "3<'\(try cli.lineFile("pass", "a long passphrase here"))'")
        #expect(result.status == 0, "\(result.stderr)")
        result = try cli.run(["get", "com.example.api", "alice", "--vault", cli.vault])
        #expect(result.status == 40 || result.status == 2 || result.status == 5, "\(result.status) \(result.stderr)")
        #expect(result.status != 0)
    }

    @Test("VaultFileFormat tells format 1, format 2, another SQLite database and anything else apart from the first bytes")
    func detectsEachFormat() throws {
        let sqlite = Array("SQLite format 3".utf8) + [0]
        func database(applicationID: UInt32) -> [UInt8] {
            var header = sqlite + [UInt8](repeating: 0, count: 72 - sqlite.count)
            header[68...71] = [
                UInt8(applicationID >> 24), UInt8(applicationID >> 16 & 0xFF), UInt8(applicationID >> 8 & 0xFF),
                UInt8(applicationID & 0xFF),
            ]
            return header
        }
        let cases: [([UInt8], VaultFileFormat)] = [
            (Array("LOCKBOX".utf8) + [0, 1, 0], .format1),
            (database(applicationID: UInt32(SQLiteVaultStore.applicationID)), .format2),
            (database(applicationID: 0x1234_5678), .foreignDatabase),
            (sqlite + [0, 0], .foreignDatabase),
            (Array("LOCKBOX".utf8), .unknown),
            (Array("plain text, not a vault".utf8), .unknown),
            ([], .unknown),
        ]
        let folder = try TemporaryFolder()
        for (index, (bytes, expected)) in cases.enumerated() {
            #expect(VaultFileFormat.detect(header: bytes[...]) == expected, "case \(index)")
            let file = folder.file("case-\(index)")
            try Data(bytes).write(to: URL(fileURLWithPath: file.string))
            #expect(VaultFileFormat.detect(at: file) == expected, "case \(index) from a file")
        }
        #expect(VaultFileFormat.detect(at: folder.file("missing")) == .unknown)
        #expect(mkfifo(folder.file("fifo").string, 0o600) == 0)
        #expect(VaultFileFormat.detect(at: folder.file("fifo")) == .unknown, "a FIFO is not waited on")
    }
}
