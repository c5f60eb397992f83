/// Wrapping and unwrapping the data key in key slots.
///
/// - Passphrase slot: KEK = Argon2id13(passphrase, salt, t, m), 32 bytes.
/// - Key-file slot:   KEK = BLAKE2b-256(key: key file, message: "lockbox.v1.keyfile-slot" ‖ salt).
/// - Either way: wrapped = XChaCha20-Poly1305(KEK, nonce, data key, AD: vault ID ‖ slot parameters).
package enum KeySlotCrypto {
    package static let keyFileContext = Array("lockbox.v1.keyfile-slot".utf8)
    package static let tpm2Context = Array("lockbox.v1.tpm2-slot".utf8)

    /// A slot wrapping `dataKey` under a key derived from `source` with fresh salt and nonce; a
    /// key-file slot records its key file's fingerprint (which a format-1 header drops).
    package static func makeSlot(
        wrapping dataKey: SecretBytes, vaultID: [UInt8], using source: KEKSource
    ) throws -> (KeySlot, kek: SecretBytes) {
        let salt = Sodium.randomBytes(KeySlot.saltBytes)
        var slot: KeySlot
        switch source {
        case .passphrase(_, let kdf):
            slot = KeySlot(kind: .passphrase, kdf: kdf, salt: salt, nonce: [], wrappedKey: [])
        case .key(let key):
            slot = KeySlot(
                kind: .keyFile, kdf: nil, salt: salt, nonce: [], wrappedKey: [], keyFileFingerprint: KeyFile.fingerprint(of: key))
        case .sealer:
            slot = KeySlot(kind: .tpm2, kdf: nil, salt: salt, nonce: [], wrappedKey: [])
        }
        let kek: SecretBytes
        if case .sealer(let sealer) = source {
            let secret = SecretBytes.random(count: Sodium.aeadKeyBytes)
            slot.sealed = try sealer.seal(secret)
            guard (1...KeySlot.maximumSealedBytes).contains(slot.sealed.count) else {
                throw LockboxError.keySlot(
                    "the sealer returned \(slot.sealed.count) bytes; a slot holds 1 to \(KeySlot.maximumSealedBytes)")
            }
            kek = Sodium.keyedBlake2b(tpm2Context + slot.salt, key: secret, length: Sodium.aeadKeyBytes)
        } else {
            kek = try deriveKEK(for: slot, from: source)
        }
        slot.nonce = Sodium.randomBytes(Sodium.aeadNonceBytes)
        slot.wrappedKey = dataKey.withUnsafeBytes {
            Sodium.seal($0, additionalData: vaultID + slot.parameterBytes, nonce: slot.nonce, key: kek)
        }
        return (slot, kek)
    }

    /// Rewraps `dataKey` in an existing slot whose KEK is known (same salt and parameters).
    package static func rewrap(_ slot: KeySlot, dataKey: SecretBytes, vaultID: [UInt8], kek: SecretBytes) -> KeySlot {
        var slot = slot
        slot.nonce = Sodium.randomBytes(Sodium.aeadNonceBytes)
        slot.wrappedKey = dataKey.withUnsafeBytes {
            Sodium.seal($0, additionalData: vaultID + slot.parameterBytes, nonce: slot.nonce, key: kek)
        }
        return slot
    }

    /// The data key from `slot`, or `nil` if `kek` does not open it.
    package static func unwrap(_ slot: KeySlot, vaultID: [UInt8], kek: SecretBytes) -> SecretBytes? {
        let additionalData = vaultID + slot.parameterBytes
        return slot.wrappedKey.withUnsafeBytes { wrapped in
            additionalData.withUnsafeBytes { ad in
                slot.nonce.withUnsafeBytes { nonce in
                    Sodium.open(wrapped, additionalData: ad, nonce: nonce, key: kek)
                }
            }
        }
    }

    /// Derives the key-encryption key for `slot` from `source`; `nil`-free: throws if the
    /// kinds do not match or Argon2id cannot run.
    package static func deriveKEK(for slot: KeySlot, from source: KEKSource) throws -> SecretBytes {
        switch (slot.kind, source) {
        case (.passphrase, .passphrase(let passphrase, _)):
            guard let kdf = slot.kdf,
                let kek = Sodium.deriveKey(
                    length: Sodium.aeadKeyBytes, passphrase: passphrase, salt: slot.salt,
                    opsLimit: kdf.opsLimit, memLimit: kdf.memoryLimitBytes)
            else {
                throw LockboxError.keySlot(
                    "Argon2id could not run with \(slot.kdf?.description ?? "missing parameters"): not enough memory? Free memory, or change the passphrase with cheaper parameters on a machine that can."
                )
            }
            return kek
        case (.keyFile, .key(let key)):
            return Sodium.keyedBlake2b(keyFileContext + slot.salt, key: key, length: Sodium.aeadKeyBytes)
        case (.tpm2, .sealer(let sealer)):
            let secret = try sealer.unseal(slot.sealed)
            return Sodium.keyedBlake2b(tpm2Context + slot.salt, key: secret, length: Sodium.aeadKeyBytes)
        default:
            throw LockboxError.keySlot("internal error: credential kind does not match the slot kind")
        }
    }
}

/// Secret material a key-encryption key is derived from, already loaded.
package enum KEKSource {
    case passphrase(SecretBytes, KDFParameters)
    case key(SecretBytes)
    case sealer(any KeySlotSealer)

    package var slotKind: KeySlot.Kind {
        switch self {
        case .passphrase: return .passphrase
        case .key: return .keyFile
        case .sealer: return .tpm2
        }
    }
}
