import Foundation
import LockboxSelfTest
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// The known-answer vectors (Sources/LockboxSelfTest/Vectors): each passes in the library and in the `lockbox`
/// binary, the must-fail cases are refused, the copy compiled into the binary is the files, and
/// a changed byte in a vector file makes `lockbox selftest --vectors` fail.
@Suite("Known-answer vectors")
struct VectorTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let vectorFolder = repository.appendingPathComponent("Sources/LockboxSelfTest/Vectors")

    static func filesOnDisk() throws -> [KnownAnswerVectorFile] {
        try KnownAnswerTests.files(inDirectory: FilePath(vectorFolder.path))
    }

    @Test(
        "the vectors compiled into LockboxSelfTest are exactly its Vectors/*.json (else list the file in KnownAnswerTests.embeddedFiles and Package.swift)"
    )
    func embeddedCopyMatchesFiles() throws {
        let onDisk = try Self.filesOnDisk()
        let embedded = KnownAnswerTests.embeddedFiles
        #expect(embedded.map(\.name) == onDisk.map(\.name))
        for file in onDisk {
            let copy = embedded.first { $0.name == file.name }
            #expect(copy?.contents == file.contents, "\(file.name): the embedded copy differs")
        }
    }

    @Test("every vector passes, with its sources named and must-fail cases among them")
    func everyVectorPasses() throws {
        let results = KnownAnswerTests.run(KnownAnswerTests.embeddedFiles)
        for result in results where !result.passed {
            Issue.record("\(result.file) \(result.vector): \(result.detail)")
        }
        let files = Set(results.map(\.file))
        #expect(files == Set(try Self.filesOnDisk().map(\.name)), "every file contributes results")
        #expect(
            Set(results.map(\.algorithm)) == [
                "argon2id-encoded", "xchacha20poly1305-ietf", "blake2b", "lockbox-vault-v1", "lockbox-vault-v2",
                "hkdf-sha256", "aes-128-cbc", "dh-modp1024",
            ])
        #expect(results.allSatisfy { !$0.source.isEmpty && $0.source != "?" }, "every result names its source")
        // The Secret Service session's vectors: RFC 5869's three HKDF cases, SP 800-38A's CBC
        // example both ways, Wycheproof's HKDF and AES-CBC-PKCS5 selections (bad padding refused),
        // the RFC 2409 prime and exchanges, refused peer values.
        for vector in [
            "RFC 5869 A.1", "RFC 5869 A.2", "RFC 5869 A.3", "SP 800-38A F.2.1", "SP 800-38A F.2.2",
            "hkdf_sha256_test.json tcId", "aes_cbc_pkcs5_test.json tcId 1 ", "RFC 2409 section 6.2", "exchange 1",
        ] {
            #expect(results.contains { $0.vector.contains(vector) && $0.passed }, "\(vector)")
        }
        #expect(results.filter { $0.algorithm == "aes-128-cbc" && $0.expectation == "reject" && $0.passed }.count == 6)
        #expect(results.filter { $0.algorithm == "dh-modp1024" && $0.expectation == "reject" && $0.passed }.count == 5)
        let rejected = results.filter { $0.expectation == "reject" }
        #expect(rejected.count >= 20, "must-fail cases: \(rejected.count)")
        #expect(rejected.allSatisfy { $0.passed })
        // The libsodium must-fail cases: a wrong password, and p=2 in place of p=1.
        #expect(rejected.contains { $0.vector.contains("wrong password") })
        #expect(rejected.contains { $0.vector.contains("p=2") })
        // The Lockbox vault vectors were checked in both directions.
        #expect(results.contains { $0.vector == "format-md-section-16 (write)" && $0.passed })
        #expect(results.contains { $0.vector == "format-md-section-16 (read)" && $0.passed })
        // The format-2 vectors: rows sealed by the writer, a database of them read back, and the
        // damaged copies (a row moved, secrets swapped, key check, vault ID, versions) refused.
        let format2 = results.filter { $0.algorithm == "lockbox-vault-v2" }
        for vector in ["one-item", "edge-cases"] {
            #expect(format2.contains { $0.vector == "\(vector) (write)" && $0.passed })
            #expect(format2.contains { $0.vector == "\(vector) (read)" && $0.passed })
        }
        #expect(format2.filter { $0.expectation == "reject" && $0.passed }.count >= 18)
        #expect(format2.contains { $0.vector == "edge-cases must fail: rows-swapped" && $0.passed })
    }

    @Test("must-fail cases really fail: the runner reports one whose input is valid after all")
    func mustFailCasesAreLive() throws {
        // Turn libsodium's "wrong password" case into the right password: still marked reject,
        // so the runner must now report a failure.
        let original = try #require(KnownAnswerTests.embeddedFiles.first { $0.name == "argon2id-libsodium.json" })
        let text = String(decoding: original.contents, as: UTF8.self)
        let changed = text.replacingOccurrences(of: "\"password_utf8\": \"passwore\"", with: "\"password_utf8\": \"password\"")
        #expect(changed != text)
        let results = KnownAnswerTests.run([KnownAnswerVectorFile(name: original.name, contents: Array(changed.utf8))])
        let failures = results.filter { !$0.passed }
        #expect(failures.count == 1)
        #expect(failures.first?.vector.contains("wrong password") == true)
        #expect(failures.first?.detail.contains("accepted") == true)
    }

    @Test("the vault vectors need their exact bytes: the Lockbox writer and the FORMAT.md vector agree")
    func formatDocumentVectorIsCurrent() throws {
        // docs/FORMAT.md section 16 holds the same 575 bytes as vector 1 (scripts/format/make-vault-vectors.py
        // checks this too, from the document's side).
        let format = try String(contentsOf: Self.repository.appendingPathComponent("docs/FORMAT.md"), encoding: .utf8)
        let marker = try #require(format.range(of: "<!-- test-vector: vault -->\n```hex\n"))
        let end = try #require(format.range(of: "```", range: marker.upperBound..<format.endIndex))
        let documented = format[marker.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
        let vectors = try #require(KnownAnswerTests.embeddedFiles.first { $0.name == "lockbox-vault-v1.json" })
        let text = String(decoding: vectors.contents, as: UTF8.self)
        #expect(text.contains("\"file_hex\": \"\(documented)\""))
    }

    // MARK: The real binary

    /// Where to change one character inside a value the checks use, per file: a hex digit or a
    /// base64 character near the end of the first occurrence of the field.
    static let flipTargets: [String: String] = [
        "argon2id-libsodium.json": "encoded",
        "argon2id-phc-winner-argon2.json": "tag_hex",
        "blake2b-rfc7693-and-kat.json": "digest_hex",
        "aes128cbc-sp800-38a-and-wycheproof.json": "ciphertext_hex",
        "hkdf-sha256-rfc5869-and-wycheproof.json": "okm_hex",
        "modp1024-rfc2409.json": "prime_hex",
        "lockbox-vault-v1.json": "file_hex",
        "lockbox-vault-v2.json": "secret_hex",
        "xchacha20poly1305-draft-irtf-cfrg-xchacha-03.json": "ciphertext_hex",
    ]

    static func flippingOneByte(in contents: [UInt8], field: String) throws -> [UInt8] {
        let text = String(decoding: contents, as: UTF8.self)
        let start = try #require(text.range(of: "\"\(field)\": \""))
        let close = try #require(text.range(of: "\"", range: start.upperBound..<text.endIndex))
        var bytes = contents
        let index = text.utf8.distance(from: text.utf8.startIndex, to: close.lowerBound) - 3
        let old = bytes[index]
        let isHex = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(old) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(old)
        bytes[index] =
            isHex
            ? (old == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0"))
            : (old == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A"))
        return bytes
    }

    @Test("lockbox selftest runs the built-in vectors and exits 0")
    func binaryPasses() throws {
        let result = try runLockbox(["selftest"])
        #expect(result.status == 0, "\(result.stdoutString)\(result.stderr)")
        #expect(result.stdoutString.contains(" 0 failed"))
        #expect(!result.stdoutString.contains("FAIL "))
        let json = try runLockbox(["selftest", "--json"])
        #expect(json.status == 0)
        let report = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        #expect(report["failed"] as? Int == 0)
        #expect((report["passed"] as? Int ?? 0) >= 40)
    }

    @Test("selftest --vectors: the files as they are pass; one changed byte in any file fails", arguments: flipTargets.keys.sorted())
    func flippedByteFails(file name: String) throws {
        let field = try #require(Self.flipTargets[name])
        let original = try #require(try Self.filesOnDisk().first { $0.name == name })
        let folder = try TemporaryFolder()
        let path = folder.file(name).string

        try Data(original.contents).write(to: URL(fileURLWithPath: path))
        let unchanged = try runLockbox(["selftest", "--vectors", folder.path.string])
        #expect(unchanged.status == 0, "\(name) unchanged: \(unchanged.stdoutString)")

        let flipped = try Self.flippingOneByte(in: original.contents, field: field)
        #expect(zip(flipped, original.contents).filter { $0 != $1 }.count == 1)
        try Data(flipped).write(to: URL(fileURLWithPath: path))
        let result = try runLockbox(["selftest", "--vectors", folder.path.string, "--json"])
        #expect(result.status == 1, "\(name) with one byte of \(field) changed: exit \(result.status)")
        let failed = (result.jsonObject?["results"] as? [[String: Any]] ?? []).filter { $0["passed"] as? Bool == false }
        #expect(!failed.isEmpty && failed.allSatisfy { $0["file"] as? String == name }, "\(result.stdoutString)")
    }

    @Test("selftest --vectors on a missing folder or a regular file is a usage error (64) that says why")
    func unreadableFolderIsRefused() throws {
        let folder = try TemporaryFolder()
        let file = folder.file("not-a-folder.json")
        try Data("{}".utf8).write(to: URL(fileURLWithPath: file.string))
        for (path, reason) in [(folder.file("missing").string, "No such file or directory"), (file.string, "Not a directory")] {
            let result = try runLockbox(["selftest", "--vectors", path])
            #expect(result.status == 64 && result.errorCode == .invalidArgument, "\(result.stderr)")
            #expect(result.stderr.contains("cannot read the vector folder \(path): \(reason)"), "\(result.stderr)")
        }
    }

    @Test("selftest --vectors with no vector files is a usage error (64)")
    func emptyFolderIsRefused() throws {
        let folder = try TemporaryFolder()
        let result = try runLockbox(["selftest", "--vectors", folder.path.string])
        #expect(result.status == 64 && result.errorCode == .invalidArgument, "\(result.stderr)")
    }
}
