// swift-tools-version:5.4
// Tools version 5.4 on purpose: from 5.5 on, SwiftPM links executables with
// `--defsym main=<module>_main`, a symbol a -parse-as-library harness never defines
// (swiftlang/swift-package-manager#8731); libFuzzer must supply main.
// libFuzzer harnesses for Lockbox's parsers. Not part of the main package: every target here is
// built with -sanitize=fuzzer (libFuzzer supplies main), which the main build must not see.
// Build and run them with scripts/fuzz.sh; docs/SECURITY-TESTING.md says what each one covers.
import Foundation
import PackageDescription

// The repository root is this folder's parent; SwiftPM names a local package after its folder.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let rootIdentity = root.lastPathComponent.lowercased()

let harnesses = ["vault-file", "vault-payload", "settings", "pin-record", "session-window", "key-file", "token-response", "token-record"]

let package = Package(
    name: "LockboxFuzz",
    dependencies: [.package(path: root.path)],
    targets: harnesses.map { name in
        .executableTarget(
            name: "fuzz-\(name)",
            dependencies: [.product(name: "Lockbox", package: rootIdentity)],
            path: "Sources/\(name)"
        )
    },
    swiftLanguageVersions: [.v5]
)
