import FoundationEssentials

/// The slot that opened a vault handle and its key-encryption key, remembered so a change by
/// another process that keeps the slot (an added item, an added slot, a rotated data key) does
/// not need the credential again.
package struct SlotUnlocker {
    package var kind: KeySlot.Kind
    package var salt: [UInt8]
    package var kek: SecretBytes
    /// The fingerprint of the key file that opened the slot (``KeyFile/fingerprint(of:)``), when a
    /// key file did: what the slot's recorded fingerprint is checked against, and recorded from.
    package var keyFileFingerprint: [UInt8]? = nil

    /// Whether `slot` is the slot this unlocker opened (kind and salt identify a slot).
    package func opened(_ slot: KeySlot) -> Bool { slot.kind == kind && slot.salt == salt }
}

/// What the key-slot operations do with a vault's slots, whatever the format that stores them
/// (docs/FORMAT.md section 5): turning credentials into key-encryption keys, the one loop that
/// tries credentials against slots, and adding, removing, re-keying and rewrapping slots.
///
/// Every function works on the slots and the vault ID only; the caller stores the result (a
/// format-1 header, rewritten with the body).
package enum KeySlots {
    /// One key slot stored on its own (a format-2 slot row, in SQLite or PostgreSQL): exactly one
    /// slot's bytes (a key-file slot's may end with its key file's fingerprint), nothing after
    /// them; anything else is a corrupt vault at `vault`.
    package static func parseRow(_ bytes: [UInt8], index: Int, vault: String) throws -> KeySlot {
        try bytes.withUnsafeBytes { buffer throws in
            do {
                var reader = ByteReader(buffer)
                let slot = try KeySlot.parse(&reader, index: index, fingerprints: true)
                guard reader.remaining == 0 else { throw FormatError("key slot \(index) has unexpected bytes after it") }
                return slot
            } catch let error as FormatError {
                throw LockboxError.corruptVault(path: vault, reason: error.reason)
            }
        }
    }

    /// A slot a credential opened: its index, key-encryption key and the data key it wraps.
    package struct Opened {
        package var index: Int
        package var kek: SecretBytes
        package var dataKey: SecretBytes
        /// The fingerprint of the key that opened it, when it is a key-file slot.
        package var keyFileFingerprint: [UInt8]?
    }

    /// The secret material `credential` stands for, loaded (a key file is read here).
    package static func source(for credential: VaultCredential, kdf: KDFParameters) throws -> KEKSource {
        switch credential {
        case .passphrase(let passphrase):
            guard passphrase.count > 0 else { throw LockboxError.invalidArgument("the passphrase must not be empty") }
            return .passphrase(passphrase, kdf)
        case .keyFile(let path):
            return .key(try KeyFile.read(at: path))
        case .key(let key):
            guard key.count == KeyFile.keyBytes else {
                throw LockboxError.invalidArgument("a vault key must be exactly \(KeyFile.keyBytes) bytes, not \(key.count)")
            }
            return .key(key)
        case .sealed(let sealer):
            return .sealer(sealer)
        }
    }

    /// New slots for a new vault, one per credential, wrapping `dataKey`, with the unlocker of
    /// the first. Argon2id runs here, so callers do this before taking any lock.
    package static func make(
        for credentials: [VaultCredential], dataKey: SecretBytes, vaultID: [UInt8], kdf: KDFParameters
    ) throws -> ([KeySlot], SlotUnlocker) {
        var slots: [KeySlot] = []
        var unlocker: SlotUnlocker?
        for credential in credentials {
            let (slot, kek) = try KeySlotCrypto.makeSlot(wrapping: dataKey, vaultID: vaultID, using: source(for: credential, kdf: kdf))
            slots.append(slot)
            if unlocker == nil {
                unlocker = SlotUnlocker(kind: slot.kind, salt: slot.salt, kek: kek, keyFileFingerprint: slot.keyFileFingerprint)
            }
        }
        guard let unlocker else {
            throw LockboxError.invalidArgument("a new vault needs at least one credential: a passphrase or a key file")
        }
        return (slots, unlocker)
    }

    /// The one slot-trial loop: loads each source, in order and only when reached (a credential
    /// after the one that opens is never read), and tries it against each slot of its kind among
    /// `candidates` (indices into `slots`; all by default); returns the first slot that opens.
    ///
    /// A TPM2 slot whose sealer cannot unseal (no TPM, a lockout, a wrong PIN) does not stop the
    /// search; if nothing opens, that reason is thrown, since it says more than "wrong
    /// credential". Returns `nil` when nothing opens and no sealer failed.
    package static func firstOpened(
        _ slots: [KeySlot], vaultID: [UInt8], sources: [() throws -> KEKSource], candidates: [Int]? = nil
    ) throws -> Opened? {
        let candidates = candidates ?? Array(slots.indices)
        var sealerError: (any Error)?
        for load in sources {
            let source = try load()
            for index in candidates where slots[index].kind == source.slotKind {
                let slot = slots[index]
                let kek: SecretBytes
                do {
                    kek = try KeySlotCrypto.deriveKEK(for: slot, from: source)
                } catch  where slot.kind == .tpm2 {
                    sealerError = sealerError ?? error
                    continue
                }
                if let dataKey = KeySlotCrypto.unwrap(slot, vaultID: vaultID, kek: kek) {
                    var fingerprint: [UInt8]?
                    if case .key(let key) = source { fingerprint = KeyFile.fingerprint(of: key) }
                    return Opened(index: index, kek: kek, dataKey: dataKey, keyFileFingerprint: fingerprint)
                }
            }
        }
        if let sealerError { throw sealerError }
        return nil
    }

    /// Opens the vault's data key with the first credential that opens a slot: key files and
    /// keys first (cheap), then sealers, then passphrases (Argon2id per slot). Throws
    /// ``LockboxError/wrongCredential(path:)`` when none does.
    package static func open(
        _ slots: [KeySlot], vaultID: [UInt8], credentials: [VaultCredential], path: FilePath
    ) throws -> (dataKey: SecretBytes, unlocker: SlotUnlocker) {
        let ordered =
            credentials.filter { if case .passphrase = $0 { false } else { true } }
            + credentials.filter { if case .passphrase = $0 { true } else { false } }
        let sources = ordered.map { credential in { try source(for: credential, kdf: .default) } }
        guard let opened = try firstOpened(slots, vaultID: vaultID, sources: sources) else {
            throw LockboxError.wrongCredential(path: path.string)
        }
        let slot = slots[opened.index]
        return (
            opened.dataKey,
            SlotUnlocker(kind: slot.kind, salt: slot.salt, kek: opened.kek, keyFileFingerprint: opened.keyFileFingerprint)
        )
    }

    /// Throws ``LockboxError/wrongCredential(path:)`` unless `source` opens a slot of its kind.
    package static func verify(_ source: KEKSource, _ slots: [KeySlot], vaultID: [UInt8], path: FilePath) throws {
        guard try firstOpened(slots, vaultID: vaultID, sources: [{ source }]) != nil else {
            throw LockboxError.wrongCredential(path: path.string)
        }
    }

    /// Appends a slot that `source` opens, wrapping `dataKey`; returns its index.
    package static func add(
        _ source: KEKSource, to slots: inout [KeySlot], dataKey: SecretBytes, vaultID: [UInt8]
    ) throws -> Int {
        guard slots.count < VaultHeader.maxSlots else {
            throw LockboxError.keySlot("the vault already has \(VaultHeader.maxSlots) key slots, the most it can hold; remove one first")
        }
        let (slot, _) = try KeySlotCrypto.makeSlot(wrapping: dataKey, vaultID: vaultID, using: source)
        slots.append(slot)
        return slots.count - 1
    }

    /// Removes the slot at `index`, never the last one; forgets `unlocker` if it opened that slot.
    package static func remove(at index: Int, from slots: inout [KeySlot], unlocker: inout SlotUnlocker?) throws {
        guard slots.indices.contains(index) else { throw LockboxError.keySlot("there is no key slot \(index)") }
        guard slots.count > 1 else {
            throw LockboxError.keySlot(
                "refusing to remove the last key slot: nothing could open the vault after that. Add another slot first.")
        }
        let removed = slots.remove(at: index)
        if unlocker?.opened(removed) == true { unlocker = nil }
    }

    /// Replaces one passphrase slot with a slot for `source`'s passphrase wrapping the same data
    /// key: slot `target` if given, else the one `unlocker` opened, else the only one.
    package static func changePassphrase(
        in slots: inout [KeySlot], to source: KEKSource, target: Int?, unlocker: inout SlotUnlocker?,
        dataKey: SecretBytes, vaultID: [UInt8]
    ) throws {
        let passphraseSlots = slots.indices.filter { slots[$0].kind == .passphrase }
        let chosen: Int
        if let target {
            guard passphraseSlots.contains(target) else { throw LockboxError.keySlot("key slot \(target) is not a passphrase slot") }
            chosen = target
        } else if let unlocker, unlocker.kind == .passphrase,
            let opened = passphraseSlots.first(where: { unlocker.opened(slots[$0]) })
        {
            chosen = opened
        } else if passphraseSlots.count == 1 {
            chosen = passphraseSlots[0]
        } else if passphraseSlots.isEmpty {
            throw LockboxError.keySlot("the vault has no passphrase slot to change")
        } else {
            throw LockboxError.keySlot("the vault has \(passphraseSlots.count) passphrase slots; say which one to change")
        }
        let (newSlot, kek) = try KeySlotCrypto.makeSlot(wrapping: dataKey, vaultID: vaultID, using: source)
        let old = slots[chosen]
        slots[chosen] = newSlot
        if unlocker?.opened(old) == true { unlocker = SlotUnlocker(kind: .passphrase, salt: newSlot.salt, kek: kek) }
    }

    /// Every slot rewrapped around a fresh data key, with the new key. Each slot needs its KEK:
    /// `unlocker`'s slot is known; the others must open with one of `sources`. Slots nothing
    /// opens make this throw, unless `dropUnmatched`, in which case they are left out. A key-file
    /// slot whose key is known (given, or the one that opened `unlocker`) records that key's
    /// fingerprint, whatever it recorded before.
    package static func rotated(
        _ slots: [KeySlot], vaultID: [UInt8], unlocker: SlotUnlocker?, sources: [KEKSource], dropUnmatched: Bool
    ) throws -> (slots: [KeySlot], dataKey: SecretBytes) {
        var keys: [(KeySlot, SecretBytes)] = []
        var unmatched: [Int] = []
        for (index, slot) in slots.enumerated() {
            var slot = slot
            if let unlocker, unlocker.opened(slot) {
                if slot.kind == .keyFile, let fingerprint = unlocker.keyFileFingerprint { slot.keyFileFingerprint = fingerprint }
                keys.append((slot, unlocker.kek))
            } else if let opened = try firstOpened(
                slots, vaultID: vaultID, sources: sources.map { source in { source } },
                candidates: [index])
            {
                if slot.kind == .keyFile, let fingerprint = opened.keyFileFingerprint { slot.keyFileFingerprint = fingerprint }
                keys.append((slot, opened.kek))
            } else {
                unmatched.append(index)
            }
        }
        if !unmatched.isEmpty && !dropUnmatched {
            let list = unmatched.map(String.init).joined(separator: ", ")
            throw LockboxError.keySlot(
                "key slot(s) \(list) could not be opened with the credentials given. Give their passphrase or key file too, or drop the unmatched slots."
            )
        }
        guard !keys.isEmpty else { throw LockboxError.keySlot("no key slot would remain after rotation") }
        let newKey = SecretBytes.random(count: Sodium.aeadKeyBytes)
        return (keys.map { slot, kek in KeySlotCrypto.rewrap(slot, dataKey: newKey, vaultID: vaultID, kek: kek) }, newKey)
    }

    /// The data key from the slot `unlocker` opened, if it is still there and still opens.
    package static func reopen(_ slots: [KeySlot], vaultID: [UInt8], with unlocker: SlotUnlocker?) -> SecretBytes? {
        guard let unlocker, let slot = slots.first(where: { unlocker.opened($0) }) else { return nil }
        return KeySlotCrypto.unwrap(slot, vaultID: vaultID, kek: unlocker.kek)
    }

    /// A fingerprint of the key slots: it changes with any passphrase change, slot change or
    /// data-key rotation, which closes re-authentication windows opened before.
    package static func fingerprint(_ slots: [KeySlot], vaultID: [UInt8]) -> String {
        var bytes = vaultID
        for slot in slots { bytes += slot.parameterBytes + slot.wrappedKey }
        return bytes.withUnsafeBytes { Sodium.blake2b($0).hexString }
    }
}
