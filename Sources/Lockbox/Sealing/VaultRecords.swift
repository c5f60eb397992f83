import FoundationEssentials

/// The sealed rows of vault format 2 (docs/FORMAT.md, "Format 2"): the keys derived from the
/// data key, item addresses, and the metadata and secret of an item, each sealed on its own.
///
/// - Subkeys: `K_addr = BLAKE2b-256(key: data key, "lockbox.v2.address-key")`,
///   `K_row = BLAKE2b-256(key: data key, "lockbox.v2.row-key")`, and the key check
///   `BLAKE2b-256(key: data key, "lockbox.v2.key-check")` stored in the vault row.
/// - Address: `BLAKE2b-256(key: K_addr, u16 len ‖ NFC(service) ‖ u16 len ‖ NFC(account))`.
/// - Metadata: `nonce ‖ XChaCha20-Poly1305(K_row, nonce, metadata, AD)`, AD =
///   `"lockbox.v2.metadata" ‖ vault ID ‖ u16 2 ‖ address`.
/// - Secret: `nonce ‖ XChaCha20-Poly1305(K_row, nonce, secret, AD)`, AD =
///   `"lockbox.v2.secret" ‖ vault ID ‖ u16 2 ‖ address ‖ metadata nonce`, so a secret only opens
///   beside the metadata it was written with.
package struct VaultRecords {
    package static let formatVersion: UInt16 = 2
    package static let addressBytes = 32
    static let addressContext = Array("lockbox.v2.address-key".utf8)
    static let rowContext = Array("lockbox.v2.row-key".utf8)
    static let keyCheckContext = Array("lockbox.v2.key-check".utf8)
    static let metadataContext = Array("lockbox.v2.metadata".utf8)
    static let secretContext = Array("lockbox.v2.secret".utf8)

    /// The vault's ID, bound into every row.
    package let vaultID: [UInt8]
    /// `K_addr`: the key of the address hash (read by the known-answer self-test only).
    package let addressKey: SecretBytes
    /// `K_row`: the key both columns are sealed under (read by the known-answer self-test only).
    package let rowKey: SecretBytes
    /// What the vault row stores to say which data key the rows are sealed under.
    package let keyCheck: [UInt8]

    package init(vaultID: [UInt8], dataKey: SecretBytes) {
        self.vaultID = vaultID
        addressKey = Sodium.keyedBlake2b(Self.addressContext, key: dataKey)
        rowKey = Sodium.keyedBlake2b(Self.rowContext, key: dataKey)
        keyCheck = Sodium.keyedBlake2b(Self.keyCheckContext, key: dataKey).withUnsafeBytes { Array($0) }
    }

    /// The row address of `key`. Names are compared as Swift compares strings (canonical
    /// equivalence), so they are hashed in Unicode normalization form C.
    package func address(_ key: ItemKey) -> [UInt8] {
        var writer = ByteWriter()
        for name in [key.service, key.account] {
            // ASCII is already NFC; the standard library's normalisation (the one its string
            // comparison uses) costs microseconds per name.
            let bytes = name.utf8.allSatisfy { $0 < 0x80 } ? Array(name.utf8) : name._nfcCodeUnits
            writer.append(UInt16(clamping: bytes.count))
            writer.append(bytes)
        }
        return Sodium.keyedBlake2b(writer.bytes, key: addressKey).withUnsafeBytes { Array($0) }
    }

    /// `AD_m` of the row at `address`.
    package func metadataAdditionalData(address: [UInt8]) -> [UInt8] {
        additionalData(Self.metadataContext, address: address)
    }

    /// `AD_s` of the row at `address` whose metadata column starts with `metadataNonce`.
    package func secretAdditionalData(address: [UInt8], metadataNonce: [UInt8]) -> [UInt8] {
        additionalData(Self.secretContext, address: address, extra: metadataNonce)
    }

    /// `M`: the metadata of `entry` as the metadata column seals it (format 1's item encoding
    /// without the secret).
    package static func metadataPlaintext(_ entry: VaultEntry) -> SecretBytes {
        SecretBytes(count: VaultPayload.metadataSize(entry)) { buffer in
            var writer = FixedBufferWriter(buffer)
            VaultPayload.writeMetadata(entry, to: &writer)
        }
    }

    private func additionalData(_ context: [UInt8], address: [UInt8], extra: [UInt8] = []) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(context)
        writer.append(vaultID)
        writer.append(Self.formatVersion)
        writer.append(address)
        writer.append(extra)
        return writer.bytes
    }

    /// The metadata column for `entry` at `address`: nonce ‖ ciphertext. The nonce is fresh
    /// unless given (the known-answer self-test gives it).
    package func sealMetadata(_ entry: VaultEntry, address: [UInt8], nonce: [UInt8]? = nil) -> [UInt8] {
        seal(Self.metadataPlaintext(entry), additionalData: metadataAdditionalData(address: address), nonce: nonce)
    }

    /// The secret column for `secret` at `address`, bound to the metadata column written with it.
    package func sealSecret(_ secret: SecretBytes, address: [UInt8], metadata: [UInt8], nonce: [UInt8]? = nil) -> [UInt8] {
        seal(
            secret, additionalData: secretAdditionalData(address: address, metadataNonce: Array(metadata.prefix(Sodium.aeadNonceBytes))),
            nonce: nonce)
    }

    /// The metadata in the metadata column of the row at `address`. Throws ``FormatError`` when it
    /// fails authentication (damaged, moved from another address, vault or key) or is malformed.
    package func openMetadata(_ column: [UInt8], address: [UInt8]) throws -> (ItemMetadata, unknownReserved: [String: String]) {
        guard let plaintext = open(column, additionalData: additionalData(Self.metadataContext, address: address)) else {
            throw FormatError("an item's metadata failed authentication")
        }
        let decoded = try plaintext.withUnsafeBytes { bytes throws in
            var reader = ByteReader(bytes)
            let decoded = try VaultPayload.readMetadata(&reader, index: 0)
            guard reader.remaining == 0 else { throw FormatError("\(reader.remaining) unexpected bytes after an item's metadata") }
            return decoded
        }
        guard Sodium.constantTimeEqual(self.address(decoded.0.key), address) else {
            throw FormatError("an item's names do not match its address")
        }
        return decoded
    }

    /// The secret in the secret column of the row at `address` whose metadata column is `metadata`.
    package func openSecret(_ column: [UInt8], address: [UInt8], metadata: [UInt8]) throws -> SecretBytes {
        let extra = Array(metadata.prefix(Sodium.aeadNonceBytes))
        guard let secret = open(column, additionalData: additionalData(Self.secretContext, address: address, extra: extra)) else {
            throw FormatError("an item's secret failed authentication")
        }
        return secret
    }

    /// `plaintext` sealed as a metadata column at `address`, whatever it holds: for the fuzzing
    /// harness, which must reach the decoder behind the AEAD with arbitrary bytes.
    package func sealForFuzzing(_ plaintext: SecretBytes, address: [UInt8]) -> [UInt8] {
        seal(plaintext, additionalData: additionalData(Self.metadataContext, address: address))
    }

    private func seal(_ plaintext: SecretBytes, additionalData: [UInt8], nonce: [UInt8]? = nil) -> [UInt8] {
        let nonce = nonce ?? Sodium.randomBytes(Sodium.aeadNonceBytes)
        return nonce + plaintext.withUnsafeBytes { Sodium.seal($0, additionalData: additionalData, nonce: nonce, key: rowKey) }
    }

    private func open(_ column: [UInt8], additionalData: [UInt8]) -> SecretBytes? {
        guard column.count >= Sodium.aeadNonceBytes + Sodium.aeadTagBytes else { return nil }
        return column.withUnsafeBytes { bytes in
            additionalData.withUnsafeBytes { ad in
                Sodium.open(
                    UnsafeRawBufferPointer(rebasing: bytes[Sodium.aeadNonceBytes...]), additionalData: ad,
                    nonce: UnsafeRawBufferPointer(rebasing: bytes[0..<Sodium.aeadNonceBytes]), key: rowKey)
            }
        }
    }
}
