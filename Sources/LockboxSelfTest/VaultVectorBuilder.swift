import FoundationEssentials
import Lockbox

/// Builds vault file bytes (format 1) and vault rows (format 2) from fixed inputs — vault ID, generation, data key, salts, nonces,
/// credentials, items — with the same encoders the store writes with (``KeySlotCrypto``,
/// ``KeySlot``, ``VaultHeader``, ``VaultPayload``, ``Sodium``). Only the random choices of
/// `EncryptedFileStore` (salts, nonces, data key, vault ID) and its generation increment are
/// replaced by inputs, so the result can be compared byte for byte with a known-answer vector.
///
/// Used by the known-answer self-test; nothing in the store calls it.
package enum VaultVectorBuilder {
    package struct SlotInput {
        var source: KEKSource
        var salt: [UInt8]
        var nonce: [UInt8]
        /// Whether a key-file slot records its key file's fingerprint (format 2 only).
        var recordFingerprint = false
    }

    package struct Inputs {
        var vaultID: [UInt8]
        var generation: UInt64
        var dataKey: SecretBytes
        var bodyNonce: [UInt8]
        var slots: [SlotInput]
        var entries: [VaultEntry]
    }

    package struct Output {
        var file: [UInt8]
        var headerLength: Int
        var bodyLength: Int
        var slotKEKs: [SecretBytes]
        var slotAdditionalData: [[UInt8]]
        var headerChecksum: [UInt8]
        var plaintext: SecretBytes
    }

    package static func build(_ inputs: Inputs) throws -> Output {
        let (slots, keks, additionalData) = try wrap(inputs.slots, vaultID: inputs.vaultID, dataKey: inputs.dataKey)
        guard inputs.vaultID.count == VaultHeader.vaultIDBytes, inputs.bodyNonce.count == Sodium.aeadNonceBytes,
            inputs.dataKey.count == Sodium.aeadKeyBytes
        else {
            throw VectorError("the vault ID must be 16 bytes, the body nonce 24 and the data key 32")
        }
        var entries: [ItemKey: VaultEntry] = [:]
        for entry in inputs.entries {
            guard entries.updateValue(entry, forKey: entry.metadata.key) == nil else {
                throw VectorError("two items at \(entry.metadata.key)")
            }
        }
        let plaintext = VaultPayload.encode(entries)
        let header = VaultHeader(
            vaultID: inputs.vaultID, generation: inputs.generation, slots: slots, bodyNonce: inputs.bodyNonce,
            bodyLength: UInt64(plaintext.count + Sodium.aeadTagBytes))
        let headerBytes = header.encoded()
        let body = plaintext.withUnsafeBytes {
            Sodium.seal($0, additionalData: headerBytes, nonce: inputs.bodyNonce, key: inputs.dataKey)
        }
        return Output(
            file: headerBytes + body, headerLength: headerBytes.count, bodyLength: body.count, slotKEKs: keks,
            slotAdditionalData: additionalData,
            headerChecksum: Array(headerBytes[(headerBytes.count - VaultHeader.checksumBytes)...]),
            plaintext: plaintext)
    }

    /// Key slots wrapping `dataKey` for `vaultID` with the salts and nonces given, their KEKs and
    /// the associated data of each wrap (docs/FORMAT.md section 5; the same in both formats).
    private static func wrap(
        _ inputs: [SlotInput], vaultID: [UInt8], dataKey: SecretBytes
    ) throws -> (slots: [KeySlot], keks: [SecretBytes], additionalData: [[UInt8]]) {
        var slots: [KeySlot] = []
        var keks: [SecretBytes] = []
        var additionalData: [[UInt8]] = []
        for input in inputs {
            var slot: KeySlot
            switch input.source {
            case .passphrase(_, let kdf):
                slot = KeySlot(kind: .passphrase, kdf: kdf, salt: input.salt, nonce: input.nonce, wrappedKey: [])
            case .key(let key):
                slot = KeySlot(
                    kind: .keyFile, kdf: nil, salt: input.salt, nonce: input.nonce, wrappedKey: [],
                    keyFileFingerprint: input.recordFingerprint ? KeyFile.fingerprint(of: key) : nil)
            case .sealer:
                throw VectorError("the vectors have no TPM2 slots: their secret cannot be reproduced")
            }
            guard input.salt.count == KeySlot.saltBytes, input.nonce.count == Sodium.aeadNonceBytes else {
                throw VectorError("a slot needs a \(KeySlot.saltBytes)-byte salt and a \(Sodium.aeadNonceBytes)-byte nonce")
            }
            let kek = try KeySlotCrypto.deriveKEK(for: slot, from: input.source)
            let ad = vaultID + slot.parameterBytes
            slot.wrappedKey = dataKey.withUnsafeBytes {
                Sodium.seal($0, additionalData: ad, nonce: slot.nonce, key: kek)
            }
            slots.append(slot)
            keks.append(kek)
            additionalData.append(ad)
        }
        guard (1...VaultHeader.maxSlots).contains(slots.count) else {
            throw VectorError("a vault has 1 to \(VaultHeader.maxSlots) key slots, not \(slots.count)")
        }
        return (slots, keks, additionalData)
    }

    // MARK: Format 2

    /// A format-2 item with the nonces of its two columns.
    package struct RowInput {
        var entry: VaultEntry
        var metadataNonce: [UInt8]
        var secretNonce: [UInt8]
    }

    package struct Format2Inputs {
        var vaultID: [UInt8]
        var dataKey: SecretBytes
        var slots: [SlotInput]
        var items: [RowInput]
    }

    /// One item's row and what went into it (docs/FORMAT.md section 18.3).
    package struct Format2Row {
        var row: SQLiteVaultStore.SealedRow
        var metadataPlaintext: SecretBytes
        var metadataAdditionalData: [UInt8]
        var secretAdditionalData: [UInt8]
    }

    package struct Format2Output {
        var addressKey: SecretBytes
        var rowKey: SecretBytes
        var keyCheck: [UInt8]
        var slots: [KeySlot]
        var slotKEKs: [SecretBytes]
        var rows: [Format2Row]
    }

    /// The keys, slot rows and item rows of a format-2 vault, from fixed inputs, with the same
    /// code ``SQLiteVaultStore`` seals with (``VaultRecords``); only the nonces are inputs.
    package static func buildFormat2(_ inputs: Format2Inputs) throws -> Format2Output {
        guard inputs.vaultID.count == VaultHeader.vaultIDBytes, inputs.dataKey.count == Sodium.aeadKeyBytes else {
            throw VectorError("the vault ID must be 16 bytes and the data key 32")
        }
        let (slots, keks, _) = try wrap(inputs.slots, vaultID: inputs.vaultID, dataKey: inputs.dataKey)
        let records = VaultRecords(vaultID: inputs.vaultID, dataKey: inputs.dataKey)
        var seen: Set<ItemKey> = []
        let rows = try inputs.items.map { item throws -> Format2Row in
            guard item.metadataNonce.count == Sodium.aeadNonceBytes, item.secretNonce.count == Sodium.aeadNonceBytes else {
                throw VectorError("an item's nonces are \(Sodium.aeadNonceBytes) bytes each")
            }
            guard seen.insert(item.entry.metadata.key).inserted else { throw VectorError("two items at \(item.entry.metadata.key)") }
            let address = records.address(item.entry.metadata.key)
            let metadata = records.sealMetadata(item.entry, address: address, nonce: item.metadataNonce)
            let secret = records.sealSecret(item.entry.secret, address: address, metadata: metadata, nonce: item.secretNonce)
            return Format2Row(
                row: SQLiteVaultStore.SealedRow(address: address, metadata: metadata, secret: secret),
                metadataPlaintext: VaultRecords.metadataPlaintext(item.entry),
                metadataAdditionalData: records.metadataAdditionalData(address: address),
                secretAdditionalData: records.secretAdditionalData(address: address, metadataNonce: item.metadataNonce))
        }
        return Format2Output(
            addressKey: records.addressKey, rowKey: records.rowKey, keyCheck: records.keyCheck, slots: slots, slotKEKs: keks, rows: rows)
    }

    /// The unpadded length of a plaintext: the position of the `0x80` that ends it, found as
    /// `sodium_unpad` finds it; `nil` if the padding is bad.
    package static func unpaddedLength(_ plaintext: SecretBytes) -> Int? {
        plaintext.withUnsafeBytes { bytes -> Int? in
            var index = bytes.count - 1
            let lowest = max(0, bytes.count - VaultPayload.blockSize)
            while index >= lowest && bytes[index] == 0 { index -= 1 }
            return index >= lowest && bytes[index] == 0x80 ? index : nil
        }
    }

    /// `file` with the header checksum recomputed over its (possibly changed) header, as a
    /// deliberate tamperer would; unchanged if the header length field is unusable.
    package static func recomputingChecksum(_ file: [UInt8]) -> [UInt8] {
        guard file.count >= VaultHeader.fixedPrefixBytes else { return file }
        let length = Int(file[12]) | Int(file[13]) << 8 | Int(file[14]) << 16 | Int(file[15]) << 24
        guard length >= VaultHeader.fixedPrefixBytes + VaultHeader.checksumBytes, length <= file.count else { return file }
        var result = file
        let checksum = file[0..<(length - VaultHeader.checksumBytes)].withUnsafeBytes {
            Sodium.blake2b($0, length: VaultHeader.checksumBytes)
        }
        result.replaceSubrange((length - VaultHeader.checksumBytes)..<length, with: checksum)
        return result
    }
}
