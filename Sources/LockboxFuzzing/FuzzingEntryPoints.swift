import Foundation
import Lockbox
import LockboxSelfTest
import LockboxSessionWindows
import SystemPackage

/// What the libFuzzer harnesses in `Fuzz/` call: each entry point feeds arbitrary bytes to one of
/// Lockbox's parsers through the same functions the store and the CLI use, and checks properties
/// that must hold for every input (a parsed header re-encodes to the same bytes; a decoded payload
/// re-encodes and decodes to the same items). A violated property stops the process with
/// `fatalError`, which libFuzzer reports as a crash, like a memory error or a trap.
///
/// Not for applications: the SPI exists only so `Fuzz/` can reach internal parsers without
/// `@testable` (which release and sanitizer builds do not allow). See docs/SECURITY-TESTING.md.
package enum FuzzingEntryPoints {
    // MARK: Vault files

    /// Key-file keys the harness tries on key-file slots: those of the vectors in
    /// Sources/LockboxSelfTest/Vectors/lockbox-vault-v1.json, whose files seed the corpus.
    static let keyFileKeys: [SecretBytes] = [
        SecretBytes(copying: (0..<32).map { UInt8($0) }),
        SecretBytes(copying: (0..<32).map { UInt8(0xA0 + $0) }),
    ]
    /// The data key used when no slot opens (docs/FORMAT.md section 16's).
    static let fixedDataKey = SecretBytes(
        copying: [
            0xb2, 0xa4, 0x72, 0x80, 0x1d, 0xc7, 0xa4, 0x3a, 0xa3, 0xad, 0xe4, 0xb0, 0x5d, 0xab, 0xed, 0x59,
            0x24, 0x35, 0x83, 0x86, 0xb4, 0x8e, 0xeb, 0x10, 0x40, 0xe3, 0x40, 0x48, 0xb2, 0xeb, 0xfe, 0x70,
        ] as [UInt8])

    /// A vault file: the first input byte selects a mode, the rest is the file.
    ///
    /// - mode bit 1 set ("reseal"): the rest is a header followed by a *plaintext*; the harness
    ///   sets the body length field, recomputes the checksum and encrypts the plaintext under the
    ///   data key the slots yield (or a fixed one), so mutations reach the slot unwrap, the body
    ///   decryption and the payload decoder behind the AEAD;
    /// - else mode bit 0 set: the header checksum is recomputed first, as a deliberate tamperer
    ///   would, so mutations get past the checksum into the field parser;
    /// - else the bytes are read as they are, as a damaged file would be.
    ///
    /// Then, as `EncryptedFileStore.open` with a key-file credential does: `VaultHeader.parse`,
    /// key-file slots derived and unwrapped with the known keys (passphrase slots are skipped:
    /// Argon2id per input would stall the fuzzer), the body decrypted, `VaultPayload.decode`.
    package static func vaultFile(_ input: UnsafeRawBufferPointer) {
        guard let mode = input.first else { return }
        var file = Array(input.dropFirst())
        if mode & 2 != 0 {
            file = resealed(file)
        } else if mode & 1 != 0 {
            file = VaultVectorBuilder.recomputingChecksum(file)
        }
        guard let (header, headerLength) = try? file.withUnsafeBytes({ try VaultHeader.parse($0) }) else { return }
        let stored = Array(file[0..<headerLength])
        if header.encoded() != stored {
            fatalError("VaultHeader.encoded() differs from the \(headerLength) header bytes it was parsed from")
        }
        let dataKey = unwrappedDataKey(header) ?? fixedDataKey
        guard let plaintext = VaultBodyCodec.decrypt(file, header: header, headerLength: headerLength, dataKey: dataKey)
        else { return }
        checkPayloadRoundTrip(plaintext)
    }

    private static func unwrappedDataKey(_ header: VaultHeader) -> SecretBytes? {
        for slot in header.slots where slot.kind == .keyFile {
            for key in keyFileKeys {
                guard let kek = try? KeySlotCrypto.deriveKEK(for: slot, from: .key(key)) else { continue }
                if let dataKey = KeySlotCrypto.unwrap(slot, vaultID: header.vaultID, kek: kek) { return dataKey }
            }
        }
        return nil
    }

    /// Header then plaintext → a file whose body is that plaintext, sealed (see ``vaultFile(_:)``).
    private static func resealed(_ input: [UInt8]) -> [UInt8] {
        guard input.count >= VaultHeader.fixedPrefixBytes else { return input }
        let headerLength = Int(input[12]) | Int(input[13]) << 8 | Int(input[14]) << 16 | Int(input[15]) << 24
        // Room for the body nonce, body length and checksum at the end of the header.
        guard headerLength >= 64 + VaultHeader.fixedPrefixBytes, headerLength <= min(input.count, 64 * 1024) else {
            return input
        }
        var header = Array(input[0..<headerLength])
        let plaintext = SecretBytes(copying: input[headerLength...])
        let bodyLength = UInt64(plaintext.count + Sodium.aeadTagBytes)
        withUnsafeBytes(of: bodyLength.littleEndian) { header.replaceSubrange((headerLength - 40)..<(headerLength - 32), with: $0) }
        header = VaultVectorBuilder.recomputingChecksum(header)
        let nonce = Array(header[(headerLength - 64)..<(headerLength - 40)])
        var key = fixedDataKey
        if let (parsed, _) = try? (header + [UInt8](repeating: 0, count: Int(bodyLength))).withUnsafeBytes({ try VaultHeader.parse($0) }),
            let unwrapped = unwrappedDataKey(parsed)
        {
            key = unwrapped
        }
        let body = plaintext.withUnsafeBytes { Sodium.seal($0, additionalData: header, nonce: nonce, key: key) }
        return header + body
    }

    // MARK: Payloads

    /// A decrypted vault body (padded payload): `VaultPayload.decode`, then the round-trip check.
    package static func vaultPayload(_ input: UnsafeRawBufferPointer) {
        checkPayloadRoundTrip(SecretBytes(copying: input))
    }

    /// Whatever decodes must encode and decode again to the same items; the encoder's own
    /// preconditions (sizes, padding) must hold for every decodable payload.
    private static func checkPayloadRoundTrip(_ plaintext: SecretBytes) {
        guard let entries = try? VaultPayload.decode(plaintext) else { return }
        let encoded = VaultPayload.encode(entries)
        let again: [ItemKey: VaultEntry]
        do {
            again = try VaultPayload.decode(encoded)
        } catch {
            fatalError("a payload that decoded does not decode after re-encoding: \(error)")
        }
        guard again.count == entries.count else {
            fatalError("re-encoding changed the item count from \(entries.count) to \(again.count)")
        }
        for (key, entry) in entries {
            guard let other = again[key] else { fatalError("re-encoding lost an item") }
            if other.metadata != entry.metadata {
                let before = (VaultPayload.milliseconds(entry.metadata.created), VaultPayload.milliseconds(entry.metadata.modified))
                let after = (VaultPayload.milliseconds(other.metadata.created), VaultPayload.milliseconds(other.metadata.modified))
                fatalError("re-encoding changed an item's metadata (timestamps ms \(before) -> \(after))")
            }
            if other.secret != entry.secret { fatalError("re-encoding changed an item's secret") }
        }
    }

    // MARK: Format 2

    /// The vault ID and data key of the `vault-row` target (and of the `vault-database` seeds).
    static let formatTwoVaultID = (0..<16).map { UInt8(0xF0 &+ $0) }
    static let formatTwoRecords = VaultRecords(vaultID: formatTwoVaultID, dataKey: fixedDataKey)

    /// A format-2 item row: the input is the metadata *plaintext* (docs/FORMAT.md section 18.3),
    /// sealed at the address of the names it starts with (or a fixed one), then opened as a
    /// reader does (`VaultRecords.openMetadata`: AEAD, `VaultPayload.readMetadata`, the address
    /// check). Properties: whatever opens re-seals and opens to the same metadata; a secret sealed
    /// beside it opens only with that metadata column; the raw input, read as a sealed column,
    /// never opens.
    package static func vaultRow(_ input: UnsafeRawBufferPointer) {
        let records = formatTwoRecords
        let plaintext = SecretBytes(copying: input)
        var reader = ByteReader(input)
        let names = try? VaultPayload.readMetadata(&reader, index: 0)
        let address = names.map { records.address($0.0.key) } ?? [UInt8](repeating: 0xAB, count: VaultRecords.addressBytes)
        let column = records.sealForFuzzing(plaintext, address: address)
        guard let (metadata, reserved) = try? records.openMetadata(column, address: address) else {
            if names != nil && reader.remaining == 0 { fatalError("well-formed metadata at its own address did not open") }
            _ = try? records.openMetadata(Array(input), address: address)
            return
        }
        let entry = VaultEntry(metadata: metadata, secret: SecretBytes(copying: [1, 2, 3] as [UInt8]), unknownReservedAttributes: reserved)
        let resealed = records.sealMetadata(entry, address: address)
        guard let (again, reservedAgain) = try? records.openMetadata(resealed, address: address),
            again == metadata, reservedAgain == reserved
        else { fatalError("metadata that opened does not open the same after re-sealing") }
        let secret = records.sealSecret(entry.secret, address: address, metadata: resealed)
        guard (try? records.openSecret(secret, address: address, metadata: resealed)) == entry.secret else {
            fatalError("a secret did not open beside its own metadata")
        }
        if (try? records.openSecret(secret, address: address, metadata: column)) != nil {
            fatalError("a secret opened beside another write's metadata")
        }
        if (try? records.openMetadata(Array(input), address: address)) != nil { fatalError("raw input opened as a sealed column") }
    }

    /// A format-2 database file: the input is written as the vault file and opened with the key
    /// file whose key is `keyFileKeys[0]` (the seeds are vaults made with it), then every item is
    /// listed and read. Any outcome but a crash, a hang or a non-`LockboxError` is fine.
    package static func vaultDatabase(_ input: UnsafeRawBufferPointer) {
        let path = scratchFile("vault.db")
        let keyPath = scratchFile("vault.key")
        for suffix in ["-wal", "-shm", "-journal"] { _ = unlink(path.string + suffix) }
        guard (try? writeFile(input, to: path)) != nil else { return }
        if !FileManager.default.fileExists(atPath: keyPath.string) {
            _ = try? keyFileKeys[0].withUnsafeBytes { try writeFile($0, to: keyPath) }
        }
        do {
            let store = try SQLiteVaultStore.open(at: path, credentials: [.keyFile(keyPath)], busyTimeout: .milliseconds(10))
            for item in try store.list(service: nil) { _ = try store.item(item.key) }
        } catch is LockboxError {
            return
        } catch {
            fatalError("a format-2 vault gave an error that is not a LockboxError: \(error)")
        }
    }

    // MARK: Settings

    /// The settings file (`StoreSettings.load`), written to a private temporary file first.
    /// Settings that load must survive `StoreSettings.record` adding a profile (it loads,
    /// adds and rewrites the whole file): every other profile reads back the same, to the
    /// millisecond the file keeps.
    package static func settings(_ input: UnsafeRawBufferPointer) {
        let path = scratchFile("settings.json")
        guard (try? writeFile(input, to: path)) != nil else { return }
        guard let settings = try? StoreSettings.load(from: path) else { return }
        let probe = "lockbox-fuzz-probe"
        guard settings.profiles[probe] == nil else { return }
        do {
            try StoreSettings.record(.file, for: probe, reason: "fuzzing", at: path)
        } catch {
            fatalError("settings that load cannot be recorded into: \(error)")
        }
        var reloaded: StoreSettings
        do {
            reloaded = try StoreSettings.load(from: path)
        } catch {
            fatalError("settings StoreSettings.record wrote do not load again: \(error)")
        }
        guard reloaded.profiles.removeValue(forKey: probe) != nil else { fatalError("the recorded profile is missing") }
        if reloaded != settings && !sameRecordedTimes(reloaded, settings, within: 0.001) {
            fatalError("recording a profile changed the others")
        }
    }

    /// The file keeps milliseconds, its documented precision, so a finer fraction in a
    /// hand-written time may round once (`tolerance` 1 ms). Findings 4 and 5 (both fixed) were
    /// whole seconds dropped, then a millisecond lost, on every rewrite.
    private static func sameRecordedTimes(_ a: StoreSettings, _ b: StoreSettings, within tolerance: Double) -> Bool {
        guard a.profiles.keys.sorted() == b.profiles.keys.sorted() else { return false }
        return a.profiles.allSatisfy { name, profile in
            guard let other = b.profiles[name] else { return false }
            return profile.storeKind == other.storeKind && profile.reason == other.reason
                && abs(profile.recorded.timeIntervalSince(other.recorded)) < tolerance
        }
    }

    // MARK: PIN records

    /// A PIN record as stored in the item `pin:NAME` (JSON), read through `PinGuard` over a
    /// `MemoryStore`: `status`, `fingerprint`, and `verify` when the stored hash is not an
    /// Argon2id string (so no Argon2id runs: its cost comes from the input).
    package static func pinRecord(_ input: UnsafeRawBufferPointer) {
        let store = MemoryStore(now: { Date(timeIntervalSince1970: 1_800_000_000) })
        let profile = PinProfile(service: "fuzz", name: "max")
        guard (try? store.set(SecretBytes(copying: input), for: profile.itemKey, options: ItemOptions(kind: .pinHash))) != nil
        else { return }
        let pins = PinGuard(
            store: store, clock: FixedPinClock(), lockDirectory: scratchFolder.appending("pin-locks"),
            lockTimeout: .seconds(5))
        _ = try? pins.status(profile)
        _ = try? pins.fingerprint(profile)
        guard let record = try? JSONDecoder().decode(PinRecord.self, from: Data(input)),
            !record.hash.contains("$argon2")
        else { return }
        _ = try? pins.verify(profile, pin: SecretBytes(utf8: "4739"))
    }

    struct FixedPinClock: PinClock {
        func now() -> PinInstant {
            PinInstant(wall: Date(timeIntervalSince1970: 1_800_000_000), bootID: "fuzz-boot", sinceBoot: 1000)
        }
    }

    // MARK: Session windows

    /// A session-window payload, stored as a key in the session keyring and read back through
    /// `SessionWindow.read` and `status` (its decoder is private to SessionWindow.swift, so the
    /// harness goes the way `lockbox` does). Needs a session keyring: run under `keyctl session -`.
    package static func sessionWindow(_ input: UnsafeRawBufferPointer) {
        // The kernel keeps user-key payloads of 1 to 32767 bytes.
        guard (1...32767).contains(input.count) else { return }
        let scope = "fuzz"
        guard
            (try? KernelKeyring.add(
                description: SessionWindow.descriptionPrefix + scope,
                payload: SecretBytes(copying: input), timeoutSeconds: 600)) != nil
        else { return }
        _ = SessionWindow.read(scope: scope)
        _ = SessionWindow.status(scope: scope)
    }

    // MARK: Key files

    /// A key file's contents (`KeyFile.decode`): 32 raw bytes or 64 hex digits; anything it
    /// accepts must be a 32-byte key.
    package static func keyFile(_ input: UnsafeRawBufferPointer) {
        if let key = KeyFile.decode(SecretBytes(copying: input)), key.count != KeyFile.keyBytes {
            fatalError("KeyFile.decode returned \(key.count) bytes")
        }
    }

    // MARK: Token sets

    /// The fixed "now" and previous session the token harnesses parse against.
    static let tokenNow = Date(timeIntervalSince1970: 1_800_000_000)
    static let previousTokens = TokenSet(
        accessToken: SecretBytes(utf8: "previous-access-token"),
        refreshToken: SecretBytes(utf8: "previous-refresh-token"),
        scope: "read", subject: "alice")

    /// An OAuth 2.0 token response as a server sends it (`TokenSet(oauthResponse:)`, what
    /// `TokenRefresher` parses after every sign-in and refresh). Whatever parses must store and load
    /// back as the same session (see `checkStoredRoundTrip`); whatever is refused must not
    /// repeat the response's tokens in the error.
    package static func tokenResponse(_ input: UnsafeRawBufferPointer) {
        let data = Data(input)
        do {
            let tokens = try TokenSet(oauthResponse: data, now: tokenNow, previous: previousTokens)
            if tokens.accessToken.count == 0 { fatalError("an empty access token was accepted") }
            checkStoredRoundTrip(tokens)
        } catch {
            // A token that shows in the message only because it was the token (not because the
            // message's own words happen to include it: finding an access token "token_type" in
            // "has no token_type" is not a leak) is a leak.
            let message = String(describing: error)
            let tokens = tokenStrings(in: data).filter { $0.utf8.count >= 8 && message.contains($0) }
            guard !tokens.isEmpty, let substituted = replacingTokens(in: data) else { return }
            let control: String
            do {
                _ = try TokenSet(oauthResponse: substituted, now: tokenNow, previous: previousTokens)
                control = ""
            } catch {
                control = String(describing: error)
            }
            for token in tokens where !control.contains(token) {
                fatalError("the error for a refused token response repeats one of its tokens")
            }
        }
    }

    /// `data` with its `access_token` and `refresh_token` strings replaced by others of the same
    /// length (empty stays empty), or `nil` if it is not a JSON object that re-serialises.
    private static func replacingTokens(in data: Data) -> Data? {
        guard var object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        for field in ["access_token", "refresh_token"] {
            if let value = object[field] as? String {
                object[field] = String(repeating: value.hasPrefix("q") ? "z" : "q", count: value.count)
            }
        }
        guard JSONSerialization.isValidJSONObject(object) else { return nil }
        return try? JSONSerialization.data(withJSONObject: object)
    }

    /// A stored token record (the JSON `TokenRefresher` keeps inside the store's encryption):
    /// whatever loads must store and load back the same.
    package static func tokenRecord(_ input: UnsafeRawBufferPointer) {
        let key = ItemKey(service: "fuzz", account: "session")
        guard let tokens = try? TokenSet.decode(SecretBytes(copying: input), key: key) else { return }
        checkStoredRoundTrip(tokens)
    }

    /// Stored and loaded, a token set is the same session: equal tokens, type, scope and
    /// subject, and the expiry to the millisecond the record keeps (or the record's limit, for an
    /// expiry further away than that); a second round trip changes nothing. `description` shows
    /// no token: it does not change when the tokens do.
    private static func checkStoredRoundTrip(_ tokens: TokenSet) {
        let key = ItemKey(service: "fuzz", account: "session")
        let loaded: TokenSet
        let again: TokenSet
        do {
            loaded = try TokenSet.decode(try tokens.encoded(), key: key)
            again = try TokenSet.decode(try loaded.encoded(), key: key)
        } catch {
            fatalError("a token set that parsed does not store and load back: \(error)")
        }
        guard loaded.accessToken == tokens.accessToken, loaded.refreshToken == tokens.refreshToken,
            loaded.tokenType == tokens.tokenType, loaded.scope == tokens.scope, loaded.subject == tokens.subject
        else { fatalError("storing a token set changed its tokens, type, scope or subject") }
        switch (tokens.expiresAt, loaded.expiresAt) {
        case (nil, nil):
            break
        case (let before?, let after?):
            let expected = VaultPayload.date(milliseconds: VaultPayload.milliseconds(before))
            if abs(after.timeIntervalSince(expected)) > 0.0005 { fatalError("storing a token set moved its expiry") }
        default:
            fatalError("storing a token set added or lost its expiry")
        }
        if again != loaded { fatalError("a second store and load changed the token set") }
        var masked = tokens
        masked.accessToken = SecretBytes(utf8: "x")
        masked.refreshToken = tokens.refreshToken.map { _ in SecretBytes(utf8: "x") }
        if masked.description != tokens.description { fatalError("TokenSet.description depends on the tokens") }
    }

    /// The `access_token` and `refresh_token` strings of a JSON object, if it is one.
    private static func tokenStrings(in data: Data) -> [String] {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return [] }
        return ["access_token", "refresh_token"].compactMap { object[$0] as? String }
    }

    // MARK: Scratch files

    /// A private folder for this process (mode 0700), made once.
    static let scratchFolder: FilePath = {
        var template = Array((NSTemporaryDirectory() + "/lockbox-fuzz-XXXXXX").utf8CString)
        guard let created = mkdtemp(&template) else { fatalError("cannot create a temporary folder for the harness") }
        return FilePath(String(cString: created))
    }()

    static func scratchFile(_ name: String) -> FilePath { scratchFolder.appending(name) }

    private static func writeFile(_ bytes: UnsafeRawBufferPointer, to path: FilePath) throws {
        let fd = try FileDescriptor.open(
            path, .writeOnly, options: [.create, .truncate, .closeOnExec],
            permissions: .ownerReadWrite)
        try fd.closeAfter { _ = try fd.writeAll(bytes) }
    }
}
