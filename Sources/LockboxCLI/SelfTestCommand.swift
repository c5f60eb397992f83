import ArgumentParser
import FoundationEssentials
import Lockbox
import LockboxSecretService
import LockboxSelfTest
import SystemPackage

struct SelfTest: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "selftest",
        abstract:
            "Run the known-answer vectors inside this binary: Argon2id, XChaCha20-Poly1305, BLAKE2b, Lockbox vault files, and the Secret Service session's HKDF-SHA-256, AES-128-CBC and 1024-bit MODP Diffie-Hellman.",
        discussion: """
            Checks the libsodium this binary runs against (through Lockbox's own wrappers), the \
            libcrypto its Secret Service session loads (HKDF, AES-CBC with the PKCS#7 check, the \
            RFC 2409 group's exchange, through the session's own code), the vault \
            writer (a vault built from fixed inputs must match the vector byte for byte) and the \
            vault reader (the vector must open with every slot's credential and give exactly its \
            items; damaged copies must be refused). The vectors are compiled in; with --vectors DIR \
            the *.json files in DIR are used instead (the format of Sources/LockboxSelfTest/Vectors in the source tree). \
            Touches nothing but a private temporary folder. Exit codes: 0 every vector passed, \
            1 any vector failed, 64 unusable --vectors folder. See docs/SECURITY-TESTING.md.
            Example: lockbox selftest
            """)

    @Flag(help: "Print the results as JSON.") var json = false
    @Option(
        help: ArgumentHelp("Read the vector files (*.json) from this folder instead of the built-in copy.", valueName: "dir"),
        completion: .directory)
    var vectors: String?

    struct Report: Encodable {
        var passed: Int
        var failed: Int
        var vectorSource: String
        var libsodium: String
        var libcrypto: String
        var seconds: Double
        var results: [KnownAnswerResult]
    }

    func run() throws {
        let files = try vectors.map { try KnownAnswerTests.files(inDirectory: FilePath($0)) } ?? KnownAnswerTests.embeddedFiles
        let source = vectors.map { "folder \($0)" } ?? "built in"
        let clock = ContinuousClock()
        let start = clock.now
        let printLine = !json
        let results = KnownAnswerTests.run(files) { result in
            guard printLine else { return }
            let verdict = result.passed ? "PASS" : "FAIL"
            let time = Console.decimal(result.seconds, places: 2) + " s"
            Self.write("\(verdict)  \(result.file)  \(result.vector)  [\(result.expectation), \(time)]\n")
            if !result.passed { Self.write("      \(result.detail)\n") }
        }
        let failed = results.filter { !$0.passed }.count
        let seconds = (clock.now - start) / .seconds(1)
        if json {
            let report = Report(
                passed: results.count - failed, failed: failed, vectorSource: source,
                libsodium: LibraryVersions.sodium, libcrypto: LibraryVersions.libcrypto, seconds: seconds,
                results: results)
            Self.write(try Console.jsonText(report) + "\n")
        } else {
            Self.write(
                "selftest: \(results.count - failed) passed, \(failed) failed, from \(files.count) files (\(source)); libsodium \(LibraryVersions.sodium); libcrypto \(LibraryVersions.libcrypto); \(Console.decimal(seconds, places: 1)) s\n"
            )
        }
        if failed > 0 || results.isEmpty { throw ExitCode(1) }
    }

    private static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = try? FileDescriptor.standardOutput.writeAll(UnsafeRawBufferPointer(bytes)) }
    }
}
