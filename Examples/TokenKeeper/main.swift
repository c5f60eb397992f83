// TokenKeeper: how a Swift service keeps its tokens with Lockbox.
//
// Run: swift run TokenKeeper
// It creates a vault in a temporary folder, unlocked by a key file (what a service would get
// from systemd's LoadCredential= or a secrets mount), stores and reads tokens, and cleans up.
// It exits non-zero if any step does not behave as described.

import Foundation
import Lockbox
import SystemPackage

func step(_ message: String) { print("• \(message)") }

func check(_ condition: Bool, _ message: String) {
    if !condition {
        FileHandle.standardError.write(Data("TokenKeeper: step failed: \(message)\n".utf8))
        exit(1)
    }
}

ProcessHardening.apply()
let folder = FilePath(NSTemporaryDirectory()).appending("tokenkeeper-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(atPath: folder.string) }

do {
    let keyPath = folder.appending("vault.key")
    let vaultPath = folder.appending("vault.lockbox")

    step("Generating a key file and creating an encrypted vault")
    try KeyFile.generate(at: keyPath)
    _ = try FileVault.create(at: vaultPath, credentials: [.keyFile(keyPath)])

    step("Opening the vault the way a service would on each start")
    let vault = Vault(store: try FileVault.open(at: vaultPath, credential: .keyFile(keyPath)))

    step("Storing an access token and a refresh token for alice")
    try vault.set("access-token-value", service: "com.example.api", account: "alice/access", kind: .token)
    try vault.set(
        "refresh-token-value", service: "com.example.api", account: "alice/refresh", kind: .token,
        attributes: ["scope": "profile email"])

    step("Reading the refresh token back")
    let refresh = try vault.require(service: "com.example.api", account: "alice/refresh")
    check(refresh == SecretBytes(utf8: "refresh-token-value"), "the refresh token round-trips")
    print("  read \(refresh.count) bytes; printing the value gives: \(refresh)")

    step("Listing what is stored (metadata only)")
    for item in try vault.list(service: "com.example.api") {
        print("  \(item.account)  kind=\(item.kind)  modified=\(item.modified.formatted(.iso8601))")
    }

    step("A second process's view: reopening sees the same items")
    let again = Vault(store: try FileVault.open(at: vaultPath, credential: .keyFile(keyPath)))
    check(try again.list(service: "com.example.api").count == 2, "two items after reopening")

    step("Signing alice out: wiping the service")
    let removed = try vault.wipe(service: "com.example.api")
    check(removed == 2, "two items removed")
    check(try again.get(service: "com.example.api", account: "alice/access") == nil, "the other handle sees the wipe")
    print("Done: every step behaved as described.")
} catch {
    check(false, "\(error)")
}
