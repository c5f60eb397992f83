import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

@Suite("Backups: export and import")
struct BackupTests {
    @Test("export then import round-trips every item with its metadata; conflicts follow the chosen policy")
    func roundTrip() throws {
        let source = try KeyFileVault()
        let vault = Vault(store: source.store)
        try vault.set("token-a", service: "api", account: "alice", kind: .token, attributes: ["env": "prod"])
        try vault.set(SecretBytes(copying: [0, 1, 255]), service: "api", account: "binary")
        try vault.set("guarded", service: "kids", account: "parent", access: .freshAuthentication)
        let backupPath = source.folder.file("backup.lockbox")
        let backup = try EncryptedFileStore.create(at: backupPath, credentials: [.passphrase(secret("backup pass"))], kdf: testKDF)
        #expect(try Transfer.run(from: source.store, to: backup).copied.count == 3)
        #expect(try backupPath.stat().permissions.rawValue & 0o777 == 0o600)

        let restored = try KeyFileVault()
        try Vault(store: restored.store).set("local change", service: "api", account: "alice", kind: .token)
        let reopened = try EncryptedFileStore.open(at: backupPath, credential: .passphrase(secret("backup pass")))
        var report = try Transfer.run(from: reopened, to: restored.store)
        #expect(report.copied.count == 2 && report.conflictsSkipped == [ItemKey(service: "api", account: "alice")])
        #expect(try Vault(store: restored.store).string(service: "api", account: "alice") == "local change")
        report = try Transfer.run(from: reopened, to: restored.store, onConflict: .keepBoth)
        #expect(report.keptBoth[ItemKey(service: "api", account: "alice")] == ItemKey(service: "api", account: "alice (imported 1)"))
        #expect(report.alreadyPresent.count == 2)
        report = try Transfer.run(from: reopened, to: restored.store, onConflict: .overwrite)
        #expect(report.overwritten == [ItemKey(service: "api", account: "alice")])
        let alice = try #require(try restored.store.item(ItemKey(service: "api", account: "alice")))
        #expect(alice.secret == secret("token-a") && alice.metadata.attributes == ["env": "prod"] && alice.metadata.kind == .token)
        #expect(try restored.store.metadata(ItemKey(service: "kids", account: "parent"))?.access == .freshAuthentication)
        #expect(try restored.store.item(ItemKey(service: "api", account: "binary"))?.secret == SecretBytes(copying: [0, 1, 255]))
    }

    @Test("CLI: export with its own passphrase, import with a conflict report; a wrong backup passphrase is exit 5")
    func cli() throws {
        let folder = try TemporaryFolder()
        let key = folder.file("k.key").string
        let passFile = folder.file("backup-pass").string
        let wrongFile = folder.file("wrong").string
        try "backup pass\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        try "not it\n".write(toFile: wrongFile, atomically: true, encoding: .utf8)
        let env = [
            "LOCKBOX_VAULT": folder.file("v.lockbox").string, "LOCKBOX_KEY_FILE": key, "XDG_CONFIG_HOME": folder.file("config").string,
        ]
        #expect(try runLockbox(["init", "--generate-key-file", key], environment: env).status == 0)
        #expect(try runLockbox(["set", "api", "alice"], stdin: Data("BACKUP-CANARY".utf8), environment: env).status == 0)
        let backup = folder.file("b.lockbox").string
        var result = try runLockbox(
            ["export", "--to", backup, "--backup-passphrase-fd", "3", "--kdf", "interactive"], environment: env,
            shellRedirect: "3<'\(passFile)'")
        #expect(result.status == 0, "\(result.stderr)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: backup))
        #expect(bytes.range(of: Data("BACKUP-CANARY".utf8)) == nil && bytes.range(of: Data("alice".utf8)) == nil)
        #expect(
            try runLockbox(
                ["export", "--to", backup, "--backup-passphrase-fd", "3"], environment: env,
                shellRedirect: "3<'\(passFile)'"
            ).status == 4, "never overwrites a file")
        #expect(try runLockbox(["set", "api", "alice"], stdin: Data("changed".utf8), environment: env).status == 0)
        result = try runLockbox(["import", backup, "--backup-passphrase-fd", "3"], environment: env, shellRedirect: "3<'\(wrongFile)'")
        #expect(result.status == 5 && result.errorCode == .wrongCredential)
        result = try runLockbox(
            ["import", backup, "--backup-passphrase-fd", "3", "--json"], environment: env, shellRedirect: "3<'\(passFile)'")
        #expect(result.status == 0)
        let skipped = result.jsonObject?["conflictsSkipped"] as? [[String: Any]]
        #expect(skipped?.map { "\($0["service"] ?? "")/\($0["account"] ?? "")" } == ["api/alice"], "\(result.stdoutString)")
        #expect((result.jsonObject?["copied"] as? [Any])?.isEmpty == true)
        #expect(try runLockbox(["get", "api", "alice"], environment: env).stdoutString == "changed", "the conflict kept the vault's item")
        result = try runLockbox(
            ["import", backup, "--backup-passphrase-fd", "3", "--on-conflict", "overwrite", "--yes"], environment: env,
            shellRedirect: "3<'\(passFile)'")
        #expect(result.status == 0)
        #expect(try runLockbox(["get", "api", "alice"], environment: env).stdoutString == "BACKUP-CANARY")
    }

    @Test("corruption sweep: every truncation and bit flip of an exported backup is a typed error, and imports nothing")
    func corruptedBackups() throws {
        let source = try KeyFileVault()
        let vault = Vault(store: source.store)
        try vault.set("refresh-token-value", service: "api", account: "alice", kind: .token, attributes: ["env": "prod"])
        try vault.set(SecretBytes(copying: [0, 1, 255]), service: "api", account: "binary")
        let backupPath = source.folder.file("backup.lockbox")
        let backup = try EncryptedFileStore.create(at: backupPath, credentials: [.passphrase(secret("backup pass"))], kdf: testKDF)
        #expect(try Transfer.run(from: source.store, to: backup).copied.count == 2)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: backupPath.string)))

        /// What `lockbox import` does: open the backup with its passphrase, copy into the store.
        func importBackup(into store: MemoryStore) throws -> TransferReport {
            try Transfer.run(from: try EncryptedFileStore.open(at: backupPath, credential: .passphrase(secret("backup pass"))), to: store)
        }
        let control = MemoryStore()
        #expect(try importBackup(into: control).copied.count == 2, "the undamaged backup imports")

        var checked = 0
        for damage in everyCorruption(of: bytes) {
            try Data(damage.bytes).write(to: URL(fileURLWithPath: backupPath.string))
            let target = MemoryStore()
            do {
                let report = try importBackup(into: target)
                Issue.record("\(damage.what): imported \(report.copied.count) items from a damaged backup")
            } catch let error as LockboxError {
                guard case .corruptVault = error else {
                    Issue.record("\(damage.what): expected corruptVault, got \(error)")
                    continue
                }
            } catch {
                Issue.record("\(damage.what): an untyped error \(error)")
            }
            #expect(try target.list(service: nil).isEmpty, "\(damage.what): nothing is imported")
            checked += 1
        }
        #expect(checked == 2 * bytes.count + 1)
    }
}
