import CSodium
import FoundationEssentials

// The on-disk layout of a vault, version 1. docs/FORMAT.md is the normative description; keep
// the two in step. All integers are little-endian.

/// One key slot: the data key wrapped (XChaCha20-Poly1305) under a key-encryption key derived
/// from a passphrase (Argon2id) or from a key file (keyed BLAKE2b).
package struct KeySlot: Equatable {
    package enum Kind: UInt8 {
        case passphrase = 1
        case keyFile = 2
        /// The KEK comes from a secret a ``KeySlotSealer`` (a TPM) keeps; ``sealed`` holds its bytes.
        case tpm2 = 3
    }

    package var kind: Kind
    /// Argon2id cost; `nil` for key-file slots.
    package var kdf: KDFParameters?
    package var salt: [UInt8]
    package var nonce: [UInt8]
    package var wrappedKey: [UInt8]
    /// What the sealer returned, stored as it is; empty for other kinds.
    package var sealed: [UInt8] = []
    /// A key-file slot's record of which key file opens it (``KeyFile/fingerprint(of:)``,
    /// ``fingerprintBytes`` bytes; docs/FORMAT.md section 18.1.1), or `nil`: none recorded (always so
    /// in format 1, whose header has no place for it). Not authenticated by the wrap: read from the
    /// file, it is a label to show, never a reason to trust or choose the slot.
    package var keyFileFingerprint: [UInt8]?

    /// Memberwise, for the package's other targets (the vault-vector builder, the fuzzing harness).
    package init(
        kind: Kind, kdf: KDFParameters?, salt: [UInt8], nonce: [UInt8], wrappedKey: [UInt8], sealed: [UInt8] = [],
        keyFileFingerprint: [UInt8]? = nil
    ) {
        self.kind = kind
        self.kdf = kdf
        self.salt = salt
        self.nonce = nonce
        self.wrappedKey = wrappedKey
        self.sealed = sealed
        self.keyFileFingerprint = keyFileFingerprint
    }

    /// The size of a recorded key-file fingerprint.
    package static let fingerprintBytes = 16

    /// This slot without a recorded key-file fingerprint: what a format-1 header holds.
    package var withoutFingerprint: KeySlot {
        var slot = self
        slot.keyFileFingerprint = nil
        return slot
    }

    package static let saltBytes = 16
    /// The most a TPM2 slot's sealed bytes may take (Lockbox's TPMSealer writes 218 to 282).
    package static let maximumSealedBytes = 4096
    package static let wrappedKeyBytes = 32 + 16

    /// The slot fields the wrapping authenticates besides the vault ID: kind, KDF cost, salt.
    package var parameterBytes: [UInt8] {
        var writer = ByteWriter()
        writer.append(kind.rawValue)
        if let kdf {
            writer.append(kdf.opsLimit)
            writer.append(kdf.memoryLimitBytes)
        }
        writer.append(salt)
        if kind == .tpm2 {
            writer.append(UInt16(sealed.count))
            writer.append(sealed)
        }
        return writer.bytes
    }

    package func encoded() -> [UInt8] {
        var body = ByteWriter()
        if let kdf {
            body.append(kdf.opsLimit)
            body.append(kdf.memoryLimitBytes)
        }
        body.append(salt)
        if kind == .tpm2 {
            body.append(UInt16(sealed.count))
            body.append(sealed)
        }
        body.append(nonce)
        body.append(wrappedKey)
        if kind == .keyFile, let keyFileFingerprint, keyFileFingerprint.count == Self.fingerprintBytes { body.append(keyFileFingerprint) }
        var writer = ByteWriter()
        writer.append(kind.rawValue)
        writer.append(UInt16(body.bytes.count))
        writer.append(body.bytes)
        return writer.bytes
    }

    /// Parses one slot. `fingerprints`: whether a key-file slot may end with its key file's
    /// fingerprint (format 2's slot rows, docs/FORMAT.md section 18.1.1); a format-1 header's may not.
    package static func parse(_ reader: inout ByteReader, index: Int, fingerprints: Bool = false) throws -> KeySlot {
        let rawKind = try reader.read(UInt8.self, "key slot \(index) type")
        let length = Int(try reader.read(UInt16.self, "key slot \(index) length"))
        var body = ByteReader(try reader.readSlice(length, "key slot \(index)"))
        guard let kind = Kind(rawValue: rawKind) else {
            throw FormatError("key slot \(index) has unknown type \(rawKind)")
        }
        var kdf: KDFParameters?
        if kind == .passphrase {
            let ops = try body.read(UInt64.self, "key slot \(index) Argon2id passes")
            let memory = try body.read(UInt64.self, "key slot \(index) Argon2id memory")
            guard let parameters = try? KDFParameters(opsLimit: ops, memoryLimitBytes: memory) else {
                throw FormatError("key slot \(index) asks for Argon2id parameters outside the accepted range")
            }
            kdf = parameters
        }
        let salt = try body.readBytes(saltBytes, "key slot \(index) salt")
        var sealed: [UInt8] = []
        if kind == .tpm2 {
            let count = Int(try body.read(UInt16.self, "key slot \(index) sealed length"))
            guard (1...maximumSealedBytes).contains(count) else {
                throw FormatError("key slot \(index) has an implausible sealed length \(count)")
            }
            sealed = try body.readBytes(count, "key slot \(index) sealed data")
        }
        var slot = KeySlot(
            kind: kind, kdf: kdf, salt: salt,
            nonce: try body.readBytes(Sodium.aeadNonceBytes, "key slot \(index) nonce"),
            wrappedKey: try body.readBytes(wrappedKeyBytes, "key slot \(index) wrapped key"),
            sealed: sealed)
        if fingerprints && kind == .keyFile && body.remaining > 0 {
            // Exactly the fingerprint's 16 bytes or nothing: any other length is a damaged slot.
            guard body.remaining == fingerprintBytes else {
                throw FormatError("key slot \(index) has a key-file fingerprint of \(body.remaining) bytes, not \(fingerprintBytes)")
            }
            slot.keyFileFingerprint = try body.readBytes(fingerprintBytes, "key slot \(index) key-file fingerprint")
        }
        guard body.remaining == 0 else { throw FormatError("key slot \(index) has \(body.remaining) unexpected bytes") }
        return slot
    }
}

/// The vault header. It is authenticated twice: a BLAKE2b-256 checksum (catches accidental
/// damage and lets Lockbox report it as such) and as the associated data of the body's AEAD
/// (catches deliberate tampering).
package struct VaultHeader: Equatable {
    package static let magic: [UInt8] = Array("LOCKBOX".utf8) + [0]
    package static let currentVersion: UInt16 = 1
    package static let vaultIDBytes = 16
    package static let checksumBytes = 32
    package static let maxSlots = 16
    /// magic, version, flags, header length: the part every format version keeps.
    package static let fixedPrefixBytes = 16

    package var vaultID: [UInt8]
    package var generation: UInt64
    /// The key slots. Format 1 has no place for a key file's fingerprint (docs/FORMAT.md section
    /// 18.1.1): a slot put here loses it, so what a handle lists is what the file holds.
    package var slots: [KeySlot] {
        didSet { if slots.contains(where: { $0.keyFileFingerprint != nil }) { slots = slots.map(\.withoutFingerprint) } }
    }
    package var bodyNonce: [UInt8]
    package var bodyLength: UInt64

    /// Memberwise, for the package's other targets (the vault-vector builder, the fuzzing harness).
    package init(vaultID: [UInt8], generation: UInt64, slots: [KeySlot], bodyNonce: [UInt8], bodyLength: UInt64) {
        self.vaultID = vaultID
        self.generation = generation
        self.slots = slots.map(\.withoutFingerprint)
        self.bodyNonce = bodyNonce
        self.bodyLength = bodyLength
    }

    /// The header bytes, checksum included.
    package func encoded() -> [UInt8] {
        var fields = ByteWriter()
        fields.append(vaultID)
        fields.append(generation)
        fields.append(UInt8(slots.count))
        for slot in slots { fields.append(slot.encoded()) }
        fields.append(bodyNonce)
        fields.append(bodyLength)

        let headerLength = Self.fixedPrefixBytes + fields.bytes.count + Self.checksumBytes
        var writer = ByteWriter()
        writer.append(Self.magic)
        writer.append(Self.currentVersion)
        writer.append(UInt16(0))  // flags: none defined
        writer.append(UInt32(headerLength))
        writer.append(fields.bytes)
        let checksum = writer.bytes.withUnsafeBytes { Sodium.blake2b($0, length: Self.checksumBytes) }
        writer.append(checksum)
        return writer.bytes
    }

    /// Parses and checks the header at the start of `file`; returns it with its length.
    ///
    /// Checks run in an order that gives the most useful error: not a vault at all, then
    /// truncated, then damaged (checksum), then a format version this code does not read.
    package static func parse(_ file: UnsafeRawBufferPointer) throws -> (VaultHeader, Int) {
        var reader = ByteReader(file)
        guard file.count >= magic.count,
            Array(UnsafeRawBufferPointer(rebasing: file[0..<magic.count])) == magic
        else {
            throw LockboxErrorReason.corrupt(file.isEmpty ? "the file is empty" : "not a Lockbox vault (wrong magic bytes)")
        }
        do {
            _ = try reader.readSlice(magic.count, "magic")
            let version = try reader.read(UInt16.self, "format version")
            let flags = try reader.read(UInt16.self, "flags")
            let headerLength = Int(try reader.read(UInt32.self, "header length"))
            guard headerLength >= fixedPrefixBytes + checksumBytes, headerLength <= 64 * 1024 else {
                throw FormatError("implausible header length \(headerLength)")
            }
            guard file.count >= headerLength else {
                throw FormatError("truncated: the header needs \(headerLength) bytes, the file has \(file.count)")
            }
            let checked = UnsafeRawBufferPointer(rebasing: file[0..<headerLength - checksumBytes])
            let stored = Array(UnsafeRawBufferPointer(rebasing: file[headerLength - checksumBytes..<headerLength]))
            guard Sodium.constantTimeEqual(Sodium.blake2b(checked, length: checksumBytes), stored) else {
                throw FormatError("the header checksum does not match")
            }
            guard version != 0 else { throw FormatError("format version 0, which no Lockbox ever wrote") }
            guard version == currentVersion else {
                throw LockboxErrorReason.unsupportedVersion(Int(version))
            }
            guard flags == 0 else { throw FormatError("unknown header flags \(flags)") }

            var fields = ByteReader(
                UnsafeRawBufferPointer(rebasing: file[0..<headerLength - checksumBytes]),
                offset: fixedPrefixBytes)
            let vaultID = try fields.readBytes(vaultIDBytes, "vault ID")
            let generation = try fields.read(UInt64.self, "generation")
            let slotCount = Int(try fields.read(UInt8.self, "slot count"))
            guard (1...maxSlots).contains(slotCount) else { throw FormatError("implausible slot count \(slotCount)") }
            var slots: [KeySlot] = []
            for index in 0..<slotCount { slots.append(try KeySlot.parse(&fields, index: index)) }
            let nonce = try fields.readBytes(Sodium.aeadNonceBytes, "body nonce")
            let bodyLength = try fields.read(UInt64.self, "body length")
            guard fields.remaining == 0 else { throw FormatError("\(fields.remaining) unexpected bytes in the header") }
            guard bodyLength >= UInt64(Sodium.aeadTagBytes) else { throw FormatError("implausible body length \(bodyLength)") }
            // §8 check 12, computed without overflow (H + B can exceed 2^64 - 1).
            let expected = UInt128(headerLength) + UInt128(bodyLength)
            if UInt128(file.count) < expected {
                throw FormatError("truncated: expected \(expected) bytes, the file has \(file.count)")
            }
            if UInt128(file.count) > expected {
                throw FormatError("\(UInt128(file.count) - expected) unexpected bytes after the encrypted body")
            }
            let header = VaultHeader(
                vaultID: vaultID, generation: generation, slots: slots,
                bodyNonce: nonce, bodyLength: bodyLength)
            return (header, headerLength)
        } catch let error as FormatError {
            throw LockboxErrorReason.corrupt(error.reason)
        } catch let error as LockboxErrorReason {
            throw error
        } catch {
            throw LockboxErrorReason.corrupt("unreadable header")
        }
    }
}

/// Why a vault file could not be read, before the path is attached to make a ``LockboxError``.
package enum LockboxErrorReason: Error, Equatable {
    case corrupt(String)
    case unsupportedVersion(Int)

    package func error(path: String) -> LockboxError {
        switch self {
        case .corrupt(let reason): return .corruptVault(path: path, reason: reason)
        case .unsupportedVersion(let found):
            return .unsupportedFormatVersion(path: path, found: found, supported: Int(VaultHeader.currentVersion))
        }
    }
}

/// One decrypted item.
package struct VaultEntry {
    package var metadata: ItemMetadata
    package var secret: SecretBytes
    /// `lockbox.*` attributes this version does not know (FORMAT.md §7.1): never shown to
    /// callers, written back unchanged while the item is kept.
    package var unknownReservedAttributes: [String: String] = [:]

    /// Memberwise, for the package's other targets (the vault-vector builder, the fuzzing harness).
    package init(metadata: ItemMetadata, secret: SecretBytes, unknownReservedAttributes: [String: String] = [:]) {
        self.metadata = metadata
        self.secret = secret
        self.unknownReservedAttributes = unknownReservedAttributes
    }
}

/// The encrypted body's plaintext: an item count, the items, then ISO/IEC 7816-4 padding to a
/// multiple of ``blockSize`` so the file size reveals only a rough item volume.
package enum VaultPayload {
    package static let blockSize = 256

    package static func encode(_ entries: [ItemKey: VaultEntry]) -> SecretBytes {
        // Sorted, so the same items always give the same plaintext (reproducible test vectors).
        // Sorting the keys alone is much cheaper than sorting whole entries.
        let keys = entries.keys.sorted { ($0.service, $0.account) < ($1.service, $1.account) }
        let ordered = keys.compactMap { entries[$0] }
        var size = 4
        for entry in ordered { size += encodedSize(entry) }
        let padded = (size / blockSize + 1) * blockSize  // sodium_pad always adds at least one byte
        return SecretBytes(count: padded) { buffer in
            var writer = FixedBufferWriter(buffer)
            writer.append(UInt32(ordered.count))
            for entry in ordered { write(entry, to: &writer) }
            var paddedLength = 0
            let result = sodium_pad(
                &paddedLength, buffer.bytes,
                writer.offset, blockSize, buffer.count)
            precondition(result == 0 && paddedLength == padded, "payload padding failed")
        }
    }

    /// The reserved attribute that records an item's access policy (absent for `.always`).
    package static let accessAttribute = ItemLimits.reservedAttributePrefix + "access"

    /// The attributes as stored: the caller's plus Lockbox's reserved ones.
    private static func storedAttributes(_ entry: VaultEntry) -> [String: String] {
        var attributes = entry.metadata.attributes.merging(entry.unknownReservedAttributes) { caller, _ in caller }
        if entry.metadata.access != .always { attributes[accessAttribute] = entry.metadata.access.rawValue }
        for (name, value) in ReservedAttributes.encode(expires: entry.metadata.expires, reserved: entry.metadata.reserved) {
            attributes[ItemLimits.reservedAttributePrefix + name] = value
        }
        return attributes
    }

    private static func encodedSize(_ entry: VaultEntry) -> Int {
        metadataSize(entry) + 4 + entry.secret.count
    }

    /// The bytes ``writeMetadata(_:to:)`` writes.
    package static func metadataSize(_ entry: VaultEntry) -> Int {
        let m = entry.metadata
        var size = 2 + m.key.service.utf8.count + 2 + m.key.account.utf8.count
        size += 2 + m.kind.rawValue.utf8.count + 2 + m.label.utf8.count + 8 + 8 + 2
        for (name, value) in storedAttributes(entry) { size += 2 + name.utf8.count + 2 + value.utf8.count }
        return size
    }

    private static func write(_ entry: VaultEntry, to writer: inout FixedBufferWriter) {
        writeMetadata(entry, to: &writer)
        writer.append(UInt32(entry.secret.count))
        entry.secret.withUnsafeBytes { writer.append($0) }
    }

    /// An item's metadata as both formats store it (docs/FORMAT.md section 7): service, account,
    /// kind, label, times and attributes, everything of the item but its secret.
    package static func writeMetadata(_ entry: VaultEntry, to writer: inout FixedBufferWriter) {
        let m = entry.metadata
        writer.appendShortString(m.key.service)
        writer.appendShortString(m.key.account)
        writer.appendShortString(m.kind.rawValue)
        writer.appendShortString(m.label)
        writer.append(milliseconds(m.created))
        writer.append(milliseconds(m.modified))
        let attributes = storedAttributes(entry)
        writer.append(UInt16(attributes.count))
        for name in attributes.keys.sorted() {
            writer.appendShortString(name)
            writer.appendShortString(attributes[name] ?? "")
        }
    }

    package static func decode(_ plaintext: SecretBytes) throws -> [ItemKey: VaultEntry] {
        try plaintext.withUnsafeBytes { (padded: UnsafeRawBufferPointer) throws -> [ItemKey: VaultEntry] in
            var unpaddedLength = 0
            guard padded.count > 0,
                sodium_unpad(
                    &unpaddedLength, padded.bytes,
                    padded.count, blockSize) == 0
            else { throw FormatError("bad padding in the decrypted body") }
            var reader = ByteReader(UnsafeRawBufferPointer(rebasing: padded[0..<unpaddedLength]))
            let count = Int(try reader.read(UInt32.self, "item count"))
            var entries: [ItemKey: VaultEntry] = [:]
            entries.reserveCapacity(min(count, 1 << 20))
            for index in 0..<count {
                let entry = try readEntry(&reader, index: index)
                guard entries.updateValue(entry, forKey: entry.metadata.key) == nil else {
                    throw FormatError("item \(index) duplicates an earlier item's address")
                }
            }
            guard reader.remaining == 0 else { throw FormatError("\(reader.remaining) unexpected bytes after the items") }
            return entries
        }
    }

    private static func readEntry(_ reader: inout ByteReader, index: Int) throws -> VaultEntry {
        let (metadata, reserved) = try readMetadata(&reader, index: index)
        let secretLength = Int(try reader.read(UInt32.self, "item \(index) secret length"))
        let secret = SecretBytes(copying: try reader.readSlice(secretLength, "item \(index) secret"))
        return VaultEntry(metadata: metadata, secret: secret, unknownReservedAttributes: reserved)
    }

    /// What ``writeMetadata(_:to:)`` wrote: the metadata and the unknown reserved attributes.
    package static func readMetadata(
        _ reader: inout ByteReader, index: Int
    ) throws -> (ItemMetadata, unknownReserved: [String: String]) {
        let service = try reader.readShortString("item \(index) service")
        let account = try reader.readShortString("item \(index) account")
        let kind = try reader.readShortString("item \(index) kind")
        let label = try reader.readShortString("item \(index) label")
        let created = try reader.read(Int64.self, "item \(index) creation time")
        let modified = try reader.read(Int64.self, "item \(index) modification time")
        let attributeCount = Int(try reader.read(UInt16.self, "item \(index) attribute count"))
        var attributes: [String: String] = [:]
        for _ in 0..<attributeCount {
            let name = try reader.readShortString("item \(index) attribute name")
            attributes[name] = try reader.readShortString("item \(index) attribute value")
        }
        // §7.1: `lockbox.access` is absent (readable whenever open) or `fresh-authentication`;
        // any other value, `always` included, is corrupt. Other `lockbox.*` names are kept aside.
        var access = ItemAccess.always
        if let stored = attributes.removeValue(forKey: accessAttribute) {
            guard stored == ItemAccess.freshAuthentication.rawValue else {
                throw FormatError("item \(index) has an unknown access policy")
            }
            access = .freshAuthentication
        }
        // §7.1: `lockbox.expires`, `lockbox.previous`, `lockbox.companion`, `lockbox.companion-id`;
        // a value this version cannot read is corrupt, never ignored.
        let known = ReservedAttributes.names.map { ItemLimits.reservedAttributePrefix + $0 }
        let decoded = ReservedAttributes.decode { attributes[ItemLimits.reservedAttributePrefix + $0] }
        guard case .success((let expires, let bookkeeping)) = decoded else {
            if case .failure(let malformed) = decoded {
                throw FormatError("item \(index) has a malformed \(ItemLimits.reservedAttributePrefix)\(malformed.name)")
            }
            throw FormatError("item \(index) has a malformed reserved attribute")
        }
        for name in known { attributes.removeValue(forKey: name) }
        let reserved = attributes.filter { $0.key.hasPrefix(ItemLimits.reservedAttributePrefix) }
        for name in reserved.keys { attributes.removeValue(forKey: name) }
        var metadata = ItemMetadata(
            key: ItemKey(service: service, account: account), kind: ItemKind(rawValue: kind), label: label,
            created: date(milliseconds: created), modified: date(milliseconds: modified), attributes: attributes,
            access: access, expires: expires)
        metadata.reserved = bookkeeping
        return (metadata, reserved)
    }

    /// Timestamps are kept within ±2^48 ms (±8,900 years). A `Date` is a `Double` of seconds
    /// since 2001, which cannot hold every millisecond beyond about ±2^51 ms (fuzzing found the
    /// old ±2^53 limit drifting by a millisecond per rewrite); within ±2^48 decoding and
    /// re-encoding always give back the same value, with room to spare.
    package static let timestampLimit: Int64 = 1 << 48

    /// Milliseconds since 1970, rounded to the nearest (not down: `Date` is a binary fraction,
    /// and a value decoded from milliseconds may sit a hair below the exact millisecond).
    package static func milliseconds(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        guard value.isFinite else { return 0 }
        return Int64(max(-Double(timestampLimit), min(Double(timestampLimit), value)))
    }

    package static func date(milliseconds: Int64) -> Date {
        let clamped = max(-timestampLimit, min(timestampLimit, milliseconds))
        return Date(timeIntervalSince1970: Double(clamped) / 1000)
    }
}
