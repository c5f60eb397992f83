import Foundation
import SystemPackage
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// The TPM2 slot's bytes (docs/FORMAT.md 5.1–5.3) with a stand-in sealer, so they are checked
/// on every machine, TPM or not.
@Suite struct SealedSlotFormatTests {
    /// Keeps the secret in memory and hands out fixed "sealed" bytes; counts unseals.
    final class MemorySealer: KeySlotSealer, @unchecked Sendable {
        let sealedBytes: [UInt8]
        private let secret = Locked<SecretBytes?>(nil)
        init(sealedBytes: [UInt8]) { self.sealedBytes = sealedBytes }
        func seal(_ secret: SecretBytes) throws -> [UInt8] {
            self.secret.withLock { $0 = secret }
            return sealedBytes
        }
        func unseal(_ sealed: [UInt8]) throws -> SecretBytes {
            guard sealed == sealedBytes, let secret = secret.withLock({ $0 }) else { throw LockboxError.keySlot("not mine") }
            return secret
        }
    }

    @Test func tpm2SlotIsLaidOutAsDocumented() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let sealed = Array("opaque sealed bytes".utf8)
        let sealer = MemorySealer(sealedBytes: sealed)
        _ = try EncryptedFileStore.create(at: path, credentials: [.sealed(sealer), .key(SecretBytes.random(count: 32))])
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path.string)))
        let headerLength = Int(bytes[12]) | Int(bytes[13]) << 8 | Int(bytes[14]) << 16 | Int(bytes[15]) << 24
        // 16 prefix + 16 ID + 8 generation + 1 count + (3 + 90 + s) + 91 + 24 + 8 + 32.
        #expect(headerLength == 16 + 16 + 8 + 1 + (3 + 90 + sealed.count) + 91 + 24 + 8 + 32)
        #expect(bytes[41] == 3)  // kind
        #expect(Int(bytes[42]) | Int(bytes[43]) << 8 == 90 + sealed.count)  // L
        #expect(Int(bytes[60]) | Int(bytes[61]) << 8 == sealed.count)  // s, after the 16-byte salt
        #expect(Array(bytes[62..<62 + sealed.count]) == sealed)
        #expect(try FileVault.keySlotKinds(at: path) == [.tpm2, .keyFile])
        #expect(try FileVault.sealedKeySlots(at: path) == [0: sealed])
        _ = try EncryptedFileStore.open(at: path, credential: .sealed(sealer))
    }

    /// The sealed bytes are in the wrap's associated data: another sealer's bytes (or changed
    /// ones) cannot be swapped in, even when they unseal to the same secret.
    @Test func sealedBytesAreAuthenticated() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("vault.lockbox")
        let sealer = MemorySealer(sealedBytes: [1, 2, 3, 4])
        _ = try EncryptedFileStore.create(at: path, credentials: [.sealed(sealer), .key(SecretBytes.random(count: 32))])
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path.string)))
        bytes[62] ^= 0xFF  // first sealed byte
        let headerLength = Int(bytes[12]) | Int(bytes[13]) << 8
        let checksum = bytes.withUnsafeBytes { Sodium.blake2b(UnsafeRawBufferPointer(rebasing: $0[0..<headerLength - 32])) }
        bytes.replaceSubrange(headerLength - 32..<headerLength, with: checksum)
        try Data(bytes).write(to: URL(fileURLWithPath: path.string))
        chmod(path.string, 0o600)
        // A sealer that accepts the changed bytes and returns the right secret still cannot open it.
        let secret = try sealer.unseal([1, 2, 3, 4])
        let forger = MemorySealer(sealedBytes: [1 ^ 0xFF, 2, 3, 4])
        _ = try forger.seal(secret)
        expectError(.wrongCredential(path: path.string)) { try EncryptedFileStore.open(at: path, credential: .sealed(forger)) }
    }
}
