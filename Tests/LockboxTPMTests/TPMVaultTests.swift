import Foundation
import Lockbox
import LockboxTPM
import SystemPackage
import Testing

@testable import LockboxTestSupport

/// Vaults with a TPM2 key slot, against a private swtpm per test.
@Suite(.enabled(if: SoftwareTPM.available, SoftwareTPM.unavailableReason))
struct TPMVaultTests {
    let item = ItemKey(service: "svc", account: "acct")

    @Test func vaultWithATPMSlotOpensWithNoOtherCredentialAndPassphraseStaysARecovery() throws {
        let tpm = try SoftwareTPM()
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let created = try EncryptedFileStore.create(
            at: path, credentials: [.sealed(TPMSealer(tcti: tpm.tcti)), .passphrase(secret("recovery words"))], kdf: testKDF)
        try created.set(secret("s3cret"), for: item, options: ItemOptions())
        #expect(try FileVault.keySlotKinds(at: path) == [.tpm2, .passphrase])

        let byTPM = try EncryptedFileStore.open(at: path, credential: .sealed(TPMSealer(tcti: tpm.tcti)))
        #expect(try byTPM.get(item) == secret("s3cret"))
        #expect(try byTPM.keySlots().map(\.openedThisHandle) == [true, false])
        // The file holds no usable key without the TPM: the sealed bytes are all it has.
        let byPassphrase = try EncryptedFileStore.open(at: path, credential: .passphrase(secret("recovery words")))
        #expect(try byPassphrase.get(item) == secret("s3cret"))
        // A wrong passphrase with a working TPM still opens (by the TPM); alone, it does not.
        expectError(.wrongCredential(path: path.string)) {
            try EncryptedFileStore.open(at: path, credential: .passphrase(secret("wrong")))
        }
    }

    @Test func copiedVaultWithTheTPMStateReplacedRefusesWithAClearError() throws {
        let tpm = try SoftwareTPM()
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let store = try EncryptedFileStore.create(
            at: path, credentials: [.sealed(TPMSealer(tcti: tpm.tcti)), .passphrase(secret("recovery"))], kdf: testKDF)
        try store.set(secret("s3cret"), for: item, options: ItemOptions())
        // Same TPM endpoint, new state: as a copy on another machine, or after `tpm2_clear`.
        tpm.stop()
        try FileManager.default.removeItem(atPath: tpm.state.path.string)
        try FileManager.default.createDirectory(atPath: tpm.state.path.string, withIntermediateDirectories: false)
        try tpm.start()
        #expect(tpmFailure { try EncryptedFileStore.open(at: path, credential: .sealed(TPMSealer(tcti: tpm.tcti))) } == .foreignObject)
        // No TPM at all says so.
        tpm.stop()
        #expect(tpmFailure { try EncryptedFileStore.open(at: path, credential: .sealed(TPMSealer(tcti: tpm.tcti))) } == .unavailable)
        // The passphrase slot still opens it.
        #expect(try EncryptedFileStore.open(at: path, credential: .passphrase(secret("recovery"))).get(item) == secret("s3cret"))
    }

    @Test func slotBoundToPCRsRefusesAfterThePCRChanges() throws {
        let tpm = try SoftwareTPM()
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let sealer = TPMSealer(tcti: tpm.tcti, pcrs: try PCRSelection([16, 23]))
        _ = try EncryptedFileStore.create(at: path, credentials: [.sealed(sealer), .passphrase(secret("recovery"))], kdf: testKDF)
        _ = try EncryptedFileStore.open(at: path, credential: .sealed(sealer))
        try tpm.tools("tpm2_pcrextend", ["23:sha256=" + String(repeating: "01", count: 32)])
        #expect(tpmFailure { try EncryptedFileStore.open(at: path, credential: .sealed(sealer)) } == .policyMismatch)
    }

    /// The "must show": N wrong PINs, then restoring the vault file from before them,
    /// then the right PIN: still locked out; the TPM remembers.
    @Test func restoringTheVaultFileAfterWrongPINsDoesNotUndoTheLockout() throws {
        let tpm = try SoftwareTPM()
        try tpm.setDictionaryAttack(maxTries: 3, recoveryTime: 1000)
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let pin = secret("4711")
        _ = try EncryptedFileStore.create(
            at: path, credentials: [.sealed(TPMSealer(tcti: tpm.tcti, pin: pin, pinKDF: testKDF)), .passphrase(secret("recovery"))],
            kdf: testKDF)
        let before = try Data(contentsOf: URL(fileURLWithPath: path.string))
        #expect(try FileVault.sealedKeySlots(at: path).values.map { TPMSealer.requiresPIN($0) } == [true])
        for guess in ["0000", "1234", "9999"] {
            #expect(
                tpmFailure {
                    try EncryptedFileStore.open(at: path, credential: .sealed(TPMSealer(tcti: tpm.tcti, pin: secret(guess))))
                } == .authorizationFailed)
        }
        try before.write(to: URL(fileURLWithPath: path.string))
        chmod(path.string, 0o600)
        #expect(
            tpmFailure {
                try EncryptedFileStore.open(at: path, credential: .sealed(TPMSealer(tcti: tpm.tcti, pin: pin)))
            } == .lockedOut)
        // The recovery passphrase is not the TPM's business.
        _ = try EncryptedFileStore.open(at: path, credential: .passphrase(secret("recovery")))
        try tpm.tools("tpm2_dictionarylockout", ["--clear-lockout"])
        _ = try EncryptedFileStore.open(at: path, credential: .sealed(TPMSealer(tcti: tpm.tcti, pin: pin)))
    }

    /// docs/FORMAT.md, 5.5: a reader that cannot use a TPM parses a TPM2 slot (its sealed bytes
    /// are in the wrap's associated data) and opens the vault with another slot.
    @Test func independentDecryptorSkipsTheTPM2SlotAndOpensTheKeyFileSlot() throws {
        let tpm = try SoftwareTPM()
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let key = folder.file("vault.key")
        try KeyFile.generate(at: key)
        let store = try EncryptedFileStore.create(at: path, credentials: [.sealed(TPMSealer(tcti: tpm.tcti)), .keyFile(key)])
        try store.set(secret("s3cret"), for: item, options: ItemOptions())
        // The python3 scripts/ci/check-format.sh uses (with PyNaCl), from PATH.
        let (status, data) = try runTool(
            "/usr/bin/env",
            [
                "python3", repositoryRoot.appendingPathComponent("scripts/format/vault-decrypt.py").path, path.string, "--key-file",
                key.string,
            ])
        #expect(status == 0, "vault-decrypt.py needs PyNaCl (scripts/ci/check-format.sh installs it)")
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        #expect(json?["opened_slot"] as? Int == 1)
        #expect((json?["items"] as? [Any])?.count == 1)
    }

    @Test func tpmSlotsCanBeAddedRemovedAndSurviveKeyRotation() throws {
        let tpm = try SoftwareTPM()
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let store = try EncryptedFileStore.create(at: path, credentials: [.passphrase(secret("pass"))], kdf: testKDF)
        try store.set(secret("v"), for: item, options: ItemOptions())
        let index = try store.addKeySlot(.sealed(TPMSealer(tcti: tpm.tcti)))
        #expect(try store.keySlots()[index].kind == .tpm2)
        try store.rotateDataKey(credentials: [.sealed(TPMSealer(tcti: tpm.tcti))])
        #expect(try EncryptedFileStore.open(at: path, credential: .sealed(TPMSealer(tcti: tpm.tcti))).get(item) == secret("v"))
        try store.removeKeySlot(at: index)
        expectError(.wrongCredential(path: path.string)) {
            try EncryptedFileStore.open(at: path, credential: .sealed(TPMSealer(tcti: tpm.tcti)))
        }
    }
}
