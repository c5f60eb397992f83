import Foundation
import Lockbox
import Testing

@testable import LockboxCLI
@testable import LockboxTestSupport

/// One version: `LockboxRelease.version` is what `lockbox --version` prints, CHANGELOG.md's
/// newest section is headed with it, and the README's manifest line asks for it.
@Suite struct VersionTests {
    @Test func theCLIPrintsTheLibrarysVersion() {
        #expect(LockboxCommand.version == LockboxRelease.version)
        #expect(LockboxCommand.configuration.version == LockboxRelease.version)
    }

    @Test func theChangelogAndTheReadmeNameIt() throws {
        let changelog = try String(contentsOf: repositoryRoot.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let newest = changelog.split(separator: "\n").first { $0.hasPrefix("## ") }
        #expect(newest?.hasPrefix("## \(LockboxRelease.version) ") == true, "CHANGELOG.md's newest section: \(newest ?? "none")")
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("from: \"\(LockboxRelease.version)\")"), "README.md's manifest line asks for another version")
    }
}
