import FoundationEssentials
import SystemPackage

/// The format-1 body: every item, encoded (``VaultPayload``) and sealed with XChaCha20-Poly1305
/// under the data key, the whole header as associated data (docs/FORMAT.md sections 6 and 7).
package enum VaultBodyCodec {
    /// The body of the vault file `bytes` decrypted under `dataKey`, or `nil` if it fails
    /// authentication. Also the fuzzing harness's path.
    package static func decrypt(_ bytes: [UInt8], header: VaultHeader, headerLength: Int, dataKey: SecretBytes) -> SecretBytes? {
        bytes.withUnsafeBytes { file in
            header.bodyNonce.withUnsafeBytes { nonce in
                Sodium.open(
                    UnsafeRawBufferPointer(rebasing: file[headerLength...]),
                    additionalData: UnsafeRawBufferPointer(rebasing: file[0..<headerLength]),
                    nonce: nonce, key: dataKey)
            }
        }
    }

    /// The items of the file `bytes`, or ``LockboxError/corruptVault(path:reason:)``.
    static func entries(
        _ bytes: [UInt8], header: VaultHeader, headerLength: Int, dataKey: SecretBytes, path: FilePath
    ) throws -> [ItemKey: VaultEntry] {
        guard let plaintext = decrypt(bytes, header: header, headerLength: headerLength, dataKey: dataKey) else {
            throw LockboxError.corruptVault(path: path.string, reason: "the encrypted contents failed authentication")
        }
        return try decode(plaintext, path: path)
    }

    /// The items of a decrypted body.
    static func decode(_ plaintext: SecretBytes, path: FilePath) throws -> [ItemKey: VaultEntry] {
        do {
            return try VaultPayload.decode(plaintext)
        } catch let error as FormatError {
            throw LockboxError.corruptVault(path: path.string, reason: error.reason)
        }
    }

    /// `entries` sealed under `dataKey` with a fresh nonce and the next generation number: the
    /// new header and the file's bytes (header, then ciphertext).
    static func seal(
        _ entries: [ItemKey: VaultEntry], header: VaultHeader, dataKey: SecretBytes
    ) throws -> (VaultHeader, [[UInt8]]) {
        var header = header
        header.generation &+= 1
        let payload = VaultPayload.encode(entries)
        header.bodyNonce = Sodium.randomBytes(Sodium.aeadNonceBytes)
        header.bodyLength = UInt64(payload.count + Sodium.aeadTagBytes)
        let headerBytes = header.encoded()
        guard headerBytes.count + payload.count + Sodium.aeadTagBytes <= VaultFile.maximumBytes else {
            throw LockboxError.invalidArgument(
                "refusing the change: the vault would grow past \(VaultFile.maximumBytes >> 20) MiB, the most Lockbox reads back. Remove items or keep large data elsewhere."
            )
        }
        let ciphertext = payload.withUnsafeBytes {
            Sodium.seal($0, additionalData: headerBytes, nonce: header.bodyNonce, key: dataKey)
        }
        return (header, [headerBytes, ciphertext])
    }
}
