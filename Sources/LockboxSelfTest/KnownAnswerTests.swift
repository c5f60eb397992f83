import FoundationEssentials
import Lockbox
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// One known-answer vector file: its name and its JSON bytes.
public struct KnownAnswerVectorFile: Sendable, Hashable {
    /// The file name, e.g. `argon2id-libsodium.json`.
    public var name: String
    /// The file's bytes.
    public var contents: [UInt8]

    /// A vector file.
    public init(name: String, contents: [UInt8]) {
        self.name = name
        self.contents = contents
    }
}

/// The outcome of one vector (or of one must-fail case).
public struct KnownAnswerResult: Sendable, Codable, Equatable {
    /// The vector file it came from.
    public var file: String
    /// What it checks: `argon2id-encoded`, `xchacha20poly1305-ietf`, `blake2b`, `lockbox-vault-v1`,
    /// `lockbox-vault-v2`, `hkdf-sha256`, `aes-128-cbc`, `dh-modp1024`.
    public var algorithm: String
    /// Where its vector file's values come from (the file's `source.name`: a published document,
    /// test-vector set or generator), or `?` when the file could not be read that far.
    public var source: String
    /// The vector's ID in its file.
    public var vector: String
    /// What must happen: `match` (a computed value equals the expected one), `verify`, or
    /// `reject` (a must-fail case that must be refused).
    public var expectation: String
    /// Whether it did.
    public var passed: Bool
    /// What was checked, or what differed.
    public var detail: String
    /// How long it took, in seconds.
    public var seconds: Double
}

/// Runs known-answer vectors (Sources/LockboxSelfTest/Vectors/*.json, embedded in this module) against the
/// code a build of Lockbox actually runs: libsodium through Lockbox's own wrappers, the vault
/// writer and reader, and the Secret Service session's HKDF, AES-CBC and Diffie-Hellman through
/// libcrypto (loaded for them). `lockbox selftest` and the test suite use it.
public enum KnownAnswerTests {
    /// The first field of every vector file.
    public static let formatTag = "lockbox-known-answer-vectors/1"

    /// The vector files compiled into this build (the target's `Vectors/*.json`, embedded by
    /// SwiftPM as resources), sorted by name.
    public static var embeddedFiles: [KnownAnswerVectorFile] {
        [
            KnownAnswerVectorFile(
                name: "aes128cbc-sp800-38a-and-wycheproof.json", contents: PackageResources.aes128cbc_sp800_38a_and_wycheproof_json),
            KnownAnswerVectorFile(name: "argon2id-libsodium.json", contents: PackageResources.argon2id_libsodium_json),
            KnownAnswerVectorFile(name: "argon2id-phc-winner-argon2.json", contents: PackageResources.argon2id_phc_winner_argon2_json),
            KnownAnswerVectorFile(name: "blake2b-rfc7693-and-kat.json", contents: PackageResources.blake2b_rfc7693_and_kat_json),
            KnownAnswerVectorFile(
                name: "hkdf-sha256-rfc5869-and-wycheproof.json", contents: PackageResources.hkdf_sha256_rfc5869_and_wycheproof_json),
            KnownAnswerVectorFile(name: "lockbox-vault-v1.json", contents: PackageResources.lockbox_vault_v1_json),
            KnownAnswerVectorFile(name: "lockbox-vault-v2.json", contents: PackageResources.lockbox_vault_v2_json),
            KnownAnswerVectorFile(name: "modp1024-rfc2409.json", contents: PackageResources.modp1024_rfc2409_json),
            KnownAnswerVectorFile(
                name: "xchacha20poly1305-draft-irtf-cfrg-xchacha-03.json",
                contents: PackageResources.xchacha20poly1305_draft_irtf_cfrg_xchacha_03_json),
        ]
    }

    /// The `*.json` files in `directory`, sorted by name. Throws
    /// ``LockboxError/invalidArgument(_:)`` if there are none or the folder cannot be read.
    public static func files(inDirectory directory: FilePath) throws -> [KnownAnswerVectorFile] {
        let names: [String]
        do {
            // Opened first for the system's own reason (no such folder, not a folder, no
            // permission) in the message.
            try FileDescriptor.open(directory, .readOnly, options: [.directory, .closeOnExec]).close()
            names = try FileManager.default.contentsOfDirectory(atPath: directory.string)
                .filter { $0.hasSuffix(".json") }.sorted()
        } catch let error as Errno {
            throw LockboxError.invalidArgument("cannot read the vector folder \(directory.string): \(error)")
        } catch {
            throw LockboxError.invalidArgument("cannot read the vector folder \(directory.string)")
        }
        guard !names.isEmpty else {
            throw LockboxError.invalidArgument("no *.json vector files in \(directory.string)")
        }
        return try names.map { name in
            let path = directory.appending(name)
            guard let data = FileManager.default.contents(atPath: path.string) else {
                throw LockboxError.invalidArgument("cannot read the vector file \(path.string)")
            }
            return KnownAnswerVectorFile(name: name, contents: Array(data))
        }
    }

    /// Runs every vector of every file; `onResult` sees each result as soon as it is known.
    public static func run(
        _ files: [KnownAnswerVectorFile], onResult: (KnownAnswerResult) -> Void = { _ in }
    ) -> [KnownAnswerResult] {
        withoutActuallyEscaping(onResult) { onResult in
            var results: [KnownAnswerResult] = []
            for file in files {
                var sink = ResultSink(file: file.name, onResult: onResult)
                do {
                    try runFile(file, into: &sink)
                } catch {
                    sink.record(vector: "(file)", expectation: "match", passed: false, detail: "\(error)", seconds: 0)
                }
                results += sink.results
            }
            return results
        }
    }

    // MARK: Files

    struct ResultSink {
        let file: String
        var algorithm = "?"
        var source = "?"
        let onResult: (KnownAnswerResult) -> Void
        var results: [KnownAnswerResult] = []

        init(file: String, onResult: @escaping (KnownAnswerResult) -> Void) {
            self.file = file
            self.onResult = onResult
        }

        mutating func record(vector: String, expectation: String, passed: Bool, detail: String, seconds: Double) {
            let result = KnownAnswerResult(
                file: file, algorithm: algorithm, source: source, vector: vector, expectation: expectation,
                passed: passed, detail: detail, seconds: seconds)
            results.append(result)
            onResult(result)
        }

        /// Runs `check`, timing it; a thrown error is a failure with its description.
        mutating func check(_ vector: String, expectation: String, _ check: () throws -> String) {
            let clock = ContinuousClock()
            let start = clock.now
            var passed = true
            var detail: String
            do {
                detail = try check()
            } catch {
                passed = false
                detail = "\(error)"
            }
            record(
                vector: vector, expectation: expectation, passed: passed, detail: detail,
                seconds: (clock.now - start).seconds)
        }
    }

    private static func runFile(_ file: KnownAnswerVectorFile, into sink: inout ResultSink) throws {
        var top = try VectorFields(try VectorJSON.parse(Data(file.contents)), context: file.name)
        let format = try top.string("format")
        guard format == formatTag else { throw VectorError("\(file.name): format is \(format), expected \(formatTag)") }
        let algorithm = try top.string("algorithm")
        sink.algorithm = algorithm
        var source = try top.object("source")
        let sourceName = try source.string("name")
        guard !sourceName.isEmpty else { throw VectorError("\(file.name): the source must be named") }
        sink.source = sourceName
        source.ignore(contentsOf: source.keys)
        top.ignore("title", "checks")
        _ = try top.string("checks")
        let vectors = try top.array("vectors")
        try top.finish()
        guard !vectors.isEmpty else { throw VectorError("\(file.name): no vectors") }
        var aeadBases: [String: AEADVector] = [:]
        for (index, vector) in vectors.enumerated() {
            var fields = try VectorFields(vector, context: "\(file.name) vector \(index)")
            let id = (try? fields.string("id")) ?? "#\(index)"
            switch algorithm {
            case "argon2id-encoded": argon2id(&fields, id: id, into: &sink)
            case "xchacha20poly1305-ietf": xchacha(&fields, id: id, bases: &aeadBases, into: &sink)
            case "blake2b": blake2b(&fields, id: id, into: &sink)
            case "lockbox-vault-v1": vault(&fields, id: id, into: &sink)
            case "lockbox-vault-v2": vaultFormat2(&fields, id: id, into: &sink)
            case "hkdf-sha256": hkdf(&fields, id: id, into: &sink)
            case "aes-128-cbc": aesCBC(&fields, id: id, into: &sink)
            case "dh-modp1024": modp(&fields, id: id, into: &sink)
            default: throw VectorError("\(file.name): unknown algorithm \(algorithm)")
            }
        }
    }

    // MARK: Argon2id (encoded strings)

    private static func argon2id(_ fields: inout VectorFields, id: String, into sink: inout ResultSink) {
        var expectation = "verify"
        sink.check(id, expectation: (try? fields.string("expect")) ?? "?") {
            let password = try fields.string("password_utf8")
            let encoded = try fields.string("encoded")
            expectation = try fields.string("expect")
            guard expectation == "verify" || expectation == "reject" else {
                throw VectorError("expect must be verify or reject, not \(expectation)")
            }
            var notes: [String] = []
            if fields.has("tag_hex") {
                let parsed = try PHCString(encoded)
                let expected = (
                    t: try fields.integer("t"), m: try fields.integer("m_kib"), p: try fields.integer("p"),
                    salt: Array(try fields.string("salt_utf8").utf8), tag: try fields.hex("tag_hex")
                )
                guard parsed.t == expected.t, parsed.m == expected.m, parsed.p == expected.p else {
                    throw VectorError(
                        "the encoded string says t=\(parsed.t) m=\(parsed.m) p=\(parsed.p), the vector t=\(expected.t) m=\(expected.m) p=\(expected.p)"
                    )
                }
                guard parsed.salt == expected.salt else { throw VectorError("the encoded string's salt differs from salt_utf8") }
                guard parsed.tag == expected.tag else {
                    throw VectorError("the encoded string's tag is \(parsed.tag.vectorHex), the vector's \(expected.tag.vectorHex)")
                }
                notes.append("t=\(parsed.t), m=\(parsed.m) KiB, p=\(parsed.p), tag as listed")
            }
            try fields.finish()
            let verified = Sodium.verifyHashString(encoded, SecretBytes(utf8: password))
            let wanted = expectation == "verify"
            guard verified == wanted else {
                throw VectorError(
                    "crypto_pwhash_argon2id_str_verify \(verified ? "accepted" : "refused") it; it must \(wanted ? "accept" : "refuse") it")
            }
            notes.insert("crypto_pwhash_argon2id_str_verify \(verified ? "accepted" : "refused") it", at: 0)
            return notes.joined(separator: "; ")
        }
    }

    /// `$argon2id$v=19$m=M,t=T,p=P$SALT$TAG`, salt and tag in unpadded standard base64.
    struct PHCString {
        var t: Int64, m: Int64, p: Int64
        var salt: [UInt8], tag: [UInt8]

        init(_ string: String) throws {
            let parts = string.split(separator: "$", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 6, parts[0].isEmpty, parts[1] == "argon2id", parts[2] == "v=19" else {
                throw VectorError("not an Argon2id v=19 encoded string")
            }
            var values: [String: Int64] = [:]
            for pair in parts[3].split(separator: ",") {
                let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard kv.count == 2, let number = Int64(kv[1]) else { throw VectorError("bad parameter \(pair)") }
                values[kv[0]] = number
            }
            guard let t = values["t"], let m = values["m"], let p = values["p"], values.count == 3 else {
                throw VectorError("the parameters must be m, t and p")
            }
            guard let salt = Self.base64(parts[4]), let tag = Self.base64(parts[5]) else {
                throw VectorError("the salt or tag is not base64")
            }
            (self.t, self.m, self.p, self.salt, self.tag) = (t, m, p, salt, tag)
        }

        private static func base64(_ text: String) -> [UInt8]? {
            let padded = text + String(repeating: "=", count: (4 - text.count % 4) % 4)
            return Data(base64Encoded: padded).map(Array.init)
        }
    }

    // MARK: XChaCha20-Poly1305

    /// The valid XChaCha20-Poly1305 vectors of the file being run, by ID, for the derived
    /// must-fail cases that name one as their base.
    private struct AEADVector {
        var key: [UInt8], nonce: [UInt8], aad: [UInt8], plaintext: [UInt8], sealed: [UInt8]
    }

    private static func xchacha(
        _ fields: inout VectorFields, id: String, bases: inout [String: AEADVector],
        into sink: inout ResultSink
    ) {
        sink.check(id, expectation: (try? fields.string("expect")) ?? "?") {
            let expectation = try fields.string("expect")
            switch expectation {
            case "valid":
                let vector = AEADVector(
                    key: try fields.hex("key_hex"), nonce: try fields.hex("nonce_hex"), aad: try fields.hex("aad_hex"),
                    plaintext: try fields.hex("plaintext_hex"),
                    sealed: try fields.hex("ciphertext_hex") + fields.hex("tag_hex"))
                try fields.finish()
                let key = try aeadKey(vector)
                let sealed = vector.plaintext.withUnsafeBytes {
                    Sodium.seal($0, additionalData: vector.aad, nonce: vector.nonce, key: key)
                }
                guard sealed == vector.sealed else {
                    throw VectorError(
                        "crypto_aead_xchacha20poly1305_ietf_encrypt gave \(sealed.vectorHex), expected \(vector.sealed.vectorHex)")
                }
                let opened = open(vector.sealed, aad: vector.aad, nonce: vector.nonce, key: key)
                guard let opened, opened.withUnsafeBytes({ Array($0) }) == vector.plaintext else {
                    throw VectorError("crypto_aead_xchacha20poly1305_ietf_decrypt did not give the plaintext back")
                }
                bases[id] = vector
                return "encrypt gave ciphertext and tag exactly (\(vector.sealed.count) bytes); decrypt gave the plaintext back"
            case "reject":
                let baseID = try fields.string("base")
                var change = try fields.object("change")
                let field = try change.string("field")
                let offset = try change.integer("offset")
                let mask = try change.integer("mask")
                try change.finish()
                try fields.finish()
                guard var vector = bases[baseID] else { throw VectorError("no valid vector \(baseID) before this one") }
                guard (1...255).contains(mask) else { throw VectorError("mask must be 1...255") }
                let tagStart = vector.sealed.count - Sodium.aeadTagBytes
                func flip(_ bytes: inout [UInt8], at index: Int64, within range: Range<Int>) throws {
                    guard index >= 0, index < Int64(range.count) else { throw VectorError("offset \(index) is outside the \(field)") }
                    bytes[range.lowerBound + Int(index)] ^= UInt8(mask)
                }
                switch field {
                case "key": try flip(&vector.key, at: offset, within: 0..<vector.key.count)
                case "nonce": try flip(&vector.nonce, at: offset, within: 0..<vector.nonce.count)
                case "aad": try flip(&vector.aad, at: offset, within: 0..<vector.aad.count)
                case "ciphertext": try flip(&vector.sealed, at: offset, within: 0..<tagStart)
                case "tag": try flip(&vector.sealed, at: offset, within: tagStart..<vector.sealed.count)
                default: throw VectorError("change.field must be key, nonce, aad, ciphertext or tag")
                }
                guard open(vector.sealed, aad: vector.aad, nonce: vector.nonce, key: try aeadKey(vector)) == nil else {
                    throw VectorError("crypto_aead_xchacha20poly1305_ietf_decrypt accepted a changed message")
                }
                return "crypto_aead_xchacha20poly1305_ietf_decrypt refused \(baseID) with its \(field) changed (and accepted it unchanged)"
            default:
                throw VectorError("expect must be valid or reject, not \(expectation)")
            }
        }
    }

    private static func aeadKey(_ vector: AEADVector) throws -> SecretBytes {
        guard vector.key.count == Sodium.aeadKeyBytes, vector.nonce.count == Sodium.aeadNonceBytes else {
            throw VectorError("the key must be \(Sodium.aeadKeyBytes) bytes and the nonce \(Sodium.aeadNonceBytes)")
        }
        return SecretBytes(copying: vector.key)
    }

    private static func open(_ sealed: [UInt8], aad: [UInt8], nonce: [UInt8], key: SecretBytes) -> SecretBytes? {
        sealed.withUnsafeBytes { c in
            aad.withUnsafeBytes { a in
                nonce.withUnsafeBytes { n in Sodium.open(c, additionalData: a, nonce: n, key: key) }
            }
        }
    }

    // MARK: BLAKE2b

    private static func blake2b(_ fields: inout VectorFields, id: String, into sink: inout ResultSink) {
        sink.check(id, expectation: "match") {
            let input = try fields.hex("input_hex")
            let key = try fields.optionalHex("key_hex")
            let expected = try fields.hex("digest_hex")
            try fields.finish()
            guard (16...64).contains(expected.count) else { throw VectorError("a BLAKE2b digest is 16 to 64 bytes") }
            let digest: [UInt8]
            if let key {
                guard (1...64).contains(key.count) else { throw VectorError("a BLAKE2b key is 1 to 64 bytes") }
                digest = Sodium.keyedBlake2b(input, key: SecretBytes(copying: key), length: expected.count)
                    .withUnsafeBytes { Array($0) }
            } else {
                digest = input.withUnsafeBytes { Sodium.blake2b($0, length: expected.count) }
            }
            guard digest == expected else {
                throw VectorError("crypto_generichash gave \(digest.vectorHex), expected \(expected.vectorHex)")
            }
            return "crypto_generichash\(key == nil ? "" : " (keyed)") gave the \(expected.count)-byte digest"
        }
    }

    // MARK: Lockbox vault files

    private struct VaultVector {
        var inputs: VaultVectorBuilder.Inputs
        var credentials: [VaultCredential]
        var expectedEntries: [VaultEntry]
    }

    private static func vault(_ fields: inout VectorFields, id: String, into sink: inout ResultSink) {
        var vector: VaultVector?
        var file: [UInt8] = []
        var mustFail: [VectorJSON] = []
        sink.check("\(id) (write)", expectation: "match") {
            fields.ignore("description")
            var inputFields = try fields.object("inputs")
            let parsed = try vaultInputs(&inputFields)
            vector = parsed
            var expected = try fields.object("expected")
            mustFail = try fields.array("must_fail")
            try fields.finish()
            file = try expected.hex("file_hex")
            return try checkWriter(parsed.inputs, expected: &expected)
        }
        guard let vector else { return }
        sink.check("\(id) (read)", expectation: "match") {
            try checkReader(file: file, vector: vector)
        }
        runMustFail(mustFail, id: id, into: &sink) { fields in
            try checkDamaged(file: file, vector: vector, fields: &fields)
        }
    }

    /// Runs each must-fail case of vector `id` through `check`, one result per case.
    private static func runMustFail(
        _ cases: [VectorJSON], id: String, into sink: inout ResultSink, _ check: (inout VectorFields) throws -> String
    ) {
        for (index, json) in cases.enumerated() {
            var fields: VectorFields
            do {
                fields = try VectorFields(json, context: "\(id) must_fail \(index)")
            } catch {
                sink.record(vector: "\(id) must fail #\(index)", expectation: "reject", passed: false, detail: "\(error)", seconds: 0)
                continue
            }
            let caseID = (try? fields.string("id")) ?? "#\(index)"
            sink.check("\(id) must fail: \(caseID)", expectation: "reject") { try check(&fields) }
        }
    }

    private static func vaultInputs(_ fields: inout VectorFields) throws -> VaultVector {
        let vaultID = try fields.hex("vault_id_hex")
        let generation = try fields.integer("generation")
        guard generation >= 0 else { throw VectorError("generation must not be negative") }
        let dataKey = try fields.hex("data_key_hex")
        let bodyNonce = try fields.hex("body_nonce_hex")
        let (slots, credentials) = try slotInputs(&fields)
        let entries = try itemInputs(&fields, nonces: false).map(\.entry)
        try fields.finish()
        let inputs = VaultVectorBuilder.Inputs(
            vaultID: vaultID, generation: UInt64(generation), dataKey: SecretBytes(copying: dataKey),
            bodyNonce: bodyNonce, slots: slots, entries: entries)
        return VaultVector(inputs: inputs, credentials: credentials, expectedEntries: entries)
    }

    /// The `slots` of a vault vector's inputs, and the credential of each.
    private static func slotInputs(_ fields: inout VectorFields) throws -> ([VaultVectorBuilder.SlotInput], [VaultCredential]) {
        var slots: [VaultVectorBuilder.SlotInput] = []
        var credentials: [VaultCredential] = []
        for (index, json) in try fields.array("slots").enumerated() {
            var slot = try VectorFields(json, context: "slot \(index)")
            let kind = try slot.string("kind")
            let source: KEKSource
            switch kind {
            case "key-file":
                let key = try slot.hex("key_file_key_hex")
                guard key.count == KeyFile.keyBytes else { throw VectorError("slot \(index): a key is \(KeyFile.keyBytes) bytes") }
                source = .key(SecretBytes(copying: key))
                credentials.append(.key(SecretBytes(copying: key)))
            case "passphrase":
                let passphrase = try slot.string("passphrase_utf8")
                let ops = try slot.integer("opslimit")
                let memory = try slot.integer("memlimit")
                guard ops > 0, memory > 0,
                    let kdf = try? KDFParameters(opsLimit: UInt64(ops), memoryLimitBytes: UInt64(memory))
                else { throw VectorError("slot \(index): Argon2id parameters out of range") }
                source = .passphrase(SecretBytes(utf8: passphrase), kdf)
                credentials.append(.passphrase(SecretBytes(utf8: passphrase)))
            default:
                throw VectorError("slot \(index): unknown kind \(kind)")
            }
            let record = slot.has("record_fingerprint") ? try slot.bool("record_fingerprint") : false
            if record && kind != "key-file" { throw VectorError("slot \(index): only a key-file slot records a fingerprint") }
            slots.append(
                .init(source: source, salt: try slot.hex("salt_hex"), nonce: try slot.hex("nonce_hex"), recordFingerprint: record))
            try slot.finish()
        }
        return (slots, credentials)
    }

    /// The `items` of a vault vector's inputs; with `nonces` (format 2), each with the nonces of
    /// its two columns.
    private static func itemInputs(_ fields: inout VectorFields, nonces: Bool) throws -> [VaultVectorBuilder.RowInput] {
        var entries: [VaultVectorBuilder.RowInput] = []
        for (index, json) in try fields.array("items").enumerated() {
            var item = try VectorFields(json, context: "item \(index)")
            let accessName = try item.string("access")
            let created = try item.integer("created_ms")
            let modified = try item.integer("modified_ms")
            guard abs(created) <= VaultPayload.timestampLimit, abs(modified) <= VaultPayload.timestampLimit else {
                throw VectorError("item \(index): timestamps must be within +-2^53 ms, where Lockbox keeps them exactly")
            }
            guard let access = ItemAccess(rawValue: accessName) else { throw VectorError("item \(index): unknown access \(accessName)") }
            var metadata = ItemMetadata(
                key: ItemKey(service: try item.string("service"), account: try item.string("account")),
                kind: ItemKind(rawValue: try item.string("kind")), label: try item.string("label"),
                created: VaultPayload.date(milliseconds: created),
                modified: VaultPayload.date(milliseconds: modified),
                attributes: try item.stringMap("attributes"), access: access,
                expires: try item.optionalInteger("expires_ms").map { VaultPayload.date(milliseconds: $0) })
            metadata.reserved = ItemReserved(
                previousID: try item.optionalString("previous_id"), companion: try item.optionalString("companion"),
                companionID: try item.optionalString("companion_id"))
            let entry = VaultEntry(metadata: metadata, secret: SecretBytes(copying: try item.hex("secret_hex")))
            entries.append(
                VaultVectorBuilder.RowInput(
                    entry: entry, metadataNonce: nonces ? try item.hex("metadata_nonce_hex") : [],
                    secretNonce: nonces ? try item.hex("secret_nonce_hex") : []))
            try item.finish()
        }
        return entries
    }

    private static func checkWriter(_ inputs: VaultVectorBuilder.Inputs, expected: inout VectorFields) throws -> String {
        let built = try VaultVectorBuilder.build(inputs)
        func same(_ name: String, _ actual: [UInt8], _ wanted: [UInt8]) throws {
            guard actual == wanted else {
                let at = zip(actual, wanted).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(actual.count, wanted.count)
                throw VectorError("\(name) differs at byte \(at) (\(actual.count) bytes built, \(wanted.count) expected)")
            }
        }
        func sameNumber(_ name: String, _ actual: Int) throws {
            let wanted = try expected.integer(name)
            guard Int64(actual) == wanted else { throw VectorError("\(name) is \(actual), expected \(wanted)") }
        }
        try sameNumber("header_length", built.headerLength)
        try sameNumber("body_length", built.bodyLength)
        try sameNumber("payload_length", VaultVectorBuilder.unpaddedLength(built.plaintext) ?? -1)
        let keks = try expected.array("slot_keks_hex")
        let ads = try expected.array("slot_additional_data_hex")
        guard keks.count == built.slotKEKs.count, ads.count == built.slotAdditionalData.count else {
            throw VectorError("the vector lists \(keks.count) KEKs and \(ads.count) associated data for \(built.slotKEKs.count) slots")
        }
        for (index, kek) in built.slotKEKs.enumerated() {
            guard case .string(let text) = keks[index], let wanted = VectorFields.decodeHex(text) else {
                throw VectorError("slot_keks_hex[\(index)] is not hex")
            }
            try same("the KEK of slot \(index)", kek.withUnsafeBytes { Array($0) }, wanted)
        }
        for (index, ad) in built.slotAdditionalData.enumerated() {
            guard case .string(let text) = ads[index], let wanted = VectorFields.decodeHex(text) else {
                throw VectorError("slot_additional_data_hex[\(index)] is not hex")
            }
            try same("the wrap associated data of slot \(index)", ad, wanted)
        }
        try same("the header checksum", built.headerChecksum, try expected.hex("header_checksum_hex"))
        try same("the padded plaintext", built.plaintext.withUnsafeBytes { Array($0) }, try expected.hex("plaintext_hex"))
        try same("the file", built.file, try expected.hex("file_hex"))
        try expected.finish()
        return
            "built from the inputs: \(built.file.count) bytes identical (header \(built.headerLength), \(built.slotKEKs.count) slot KEKs, checksum, plaintext)"
    }

    private static func checkReader(file: [UInt8], vector: VaultVector) throws -> String {
        // The header as parsed from the expected bytes.
        let (header, _) = try file.withUnsafeBytes { try VaultHeader.parse($0) }
        let inputs = vector.inputs
        guard header.vaultID == inputs.vaultID, header.generation == inputs.generation,
            header.bodyNonce == inputs.bodyNonce, header.slots.count == inputs.slots.count
        else { throw VectorError("the parsed header differs from the inputs") }

        // The real store opens a real file with each slot's credential and must find exactly the items.
        let folder = try ScratchFolder()
        let path = folder.path.appending("vector.lockbox")
        try folder.write(file, to: path)
        for (index, credential) in vector.credentials.enumerated() {
            let store: EncryptedFileStore
            do {
                store = try EncryptedFileStore.open(at: path, credential: credential)
            } catch {
                throw VectorError("slot \(index)'s \(credential) did not open it: \(error)")
            }
            guard try store.keySlots().first(where: \.openedThisHandle)?.index == index else {
                throw VectorError("slot \(index)'s \(credential) opened another slot")
            }
            let listed = try store.list(service: nil)
            guard listed.count == vector.expectedEntries.count else {
                throw VectorError("\(listed.count) items read, \(vector.expectedEntries.count) expected")
            }
            for entry in vector.expectedEntries {
                let key = entry.metadata.key
                guard let metadata = try store.metadata(key) else { throw VectorError("item \(key) is missing") }
                try compare(metadata, entry.metadata)
                guard let secret = try store.get(key), secret == entry.secret else {
                    throw VectorError("item \(key) has another secret")
                }
            }
        }
        return
            "opened with each of \(vector.credentials.count) slot credentials by EncryptedFileStore; \(vector.expectedEntries.count) items, metadata and secrets as listed"
    }

    private static func compare(_ actual: ItemMetadata, _ expected: ItemMetadata) throws {
        let key = expected.key
        guard actual.kind == expected.kind, actual.label == expected.label, actual.access == expected.access,
            actual.attributes == expected.attributes
        else { throw VectorError("item \(key): kind, label, access or attributes differ") }
        guard actual.expires.map(VaultPayload.milliseconds) == expected.expires.map(VaultPayload.milliseconds),
            actual.reserved == expected.reserved
        else { throw VectorError("item \(key): expiry or previous-version bookkeeping differs") }
        guard VaultPayload.milliseconds(actual.created) == VaultPayload.milliseconds(expected.created),
            VaultPayload.milliseconds(actual.modified) == VaultPayload.milliseconds(expected.modified)
        else { throw VectorError("item \(key): timestamps differ") }
    }

    private static func checkDamaged(file: [UInt8], vector: VaultVector, fields: inout VectorFields) throws -> String {
        fields.ignore("description")
        var mutation = try fields.object("mutation")
        var expect = try fields.object("expect")
        try fields.finish()
        guard !file.isEmpty else { throw VectorError("no file to damage") }
        var damaged = file
        if mutation.has("xor") {
            for (index, json) in try mutation.array("xor").enumerated() {
                var change = try VectorFields(json, context: "xor \(index)")
                let offset = try change.integer("offset")
                let mask = try change.integer("mask")
                try change.finish()
                guard offset >= 0, offset < damaged.count, (1...255).contains(mask) else {
                    throw VectorError("xor \(index): offset or mask out of range")
                }
                damaged[Int(offset)] ^= UInt8(mask)
            }
        }
        if let length = try mutation.optionalInteger("truncate_to") {
            guard length >= 0, length < damaged.count else { throw VectorError("truncate_to out of range") }
            damaged.removeLast(damaged.count - Int(length))
        }
        if mutation.has("append_hex") { damaged += try mutation.hex("append_hex") }
        if mutation.has("recompute_checksum"), try mutation.bool("recompute_checksum") {
            damaged = VaultVectorBuilder.recomputingChecksum(damaged)
        }
        try mutation.finish()
        guard damaged != file else { throw VectorError("the mutation changes nothing") }

        let wanted = try expect.string("error")
        let reason = try expect.optionalString("reason")
        let found = try expect.optionalInteger("found")
        try expect.finish()

        let folder = try ScratchFolder()
        let path = folder.path.appending("damaged.lockbox")
        try folder.write(damaged, to: path)
        // Key files first: cheap, and what a damaged header must not get past either.
        let credentials = vector.credentials.filter { if case .key = $0 { true } else { false } }
        do {
            _ = try EncryptedFileStore.open(at: path, credentials: credentials.isEmpty ? vector.credentials : credentials)
        } catch let error as LockboxError {
            return try refusal(error, wanted: wanted, reason: reason, found: found)
        }
        throw VectorError("the damaged vault opened; it must be refused as \(wanted)")
    }

    /// What a must-fail case's refusal says, if `error` is the one it names (`wanted`: corrupt,
    /// wrong-credential or unsupported-version, with the reason or version found if given).
    private static func refusal(_ error: LockboxError, wanted: String, reason: String?, found: Int64?) throws -> String {
        switch (wanted, error) {
        case ("corrupt", .corruptVault(_, let actualReason)):
            guard reason == nil || reason == actualReason else {
                throw VectorError("refused as corrupt, but for \"\(actualReason)\", not \"\(reason ?? "")\"")
            }
            return "refused as corrupt: \(actualReason)"
        case ("wrong-credential", .wrongCredential):
            return "refused: no slot opens (wrong credential)"
        case ("unsupported-version", .unsupportedFormatVersion(_, let actualFound, _)):
            guard found == nil || Int64(actualFound) == found else {
                throw VectorError("refused as version \(actualFound), not \(found ?? 0)")
            }
            return "refused as unsupported format version \(actualFound)"
        default:
            throw VectorError("refused with \"\(error)\", expected \(wanted)")
        }
    }

    // MARK: Lockbox format-2 vaults

    private struct Format2Vector {
        var inputs: VaultVectorBuilder.Format2Inputs
        var credentials: [VaultCredential]
    }

    /// The database a format-2 vector lists: its vault row, slot rows and item rows.
    private struct Format2Database {
        var vaultID: [UInt8]
        var keyCheck: [UInt8]
        var slots: [KeySlot]
        var rows: [SQLiteVaultStore.SealedRow]

        /// The database in a new vault file at `path`, written as the store writes one.
        func write(to path: FilePath) throws {
            try SQLiteVaultStore.build(
                at: path, replacing: false, vaultID: vaultID, keyCheck: keyCheck, slots: slots,
                rows: rows, busyTimeout: .seconds(1))
        }
    }

    private static func vaultFormat2(_ fields: inout VectorFields, id: String, into sink: inout ResultSink) {
        var vector: Format2Vector?
        var database: Format2Database?
        var mustFail: [VectorJSON] = []
        sink.check("\(id) (write)", expectation: "match") {
            fields.ignore("description")
            var inputFields = try fields.object("inputs")
            let vaultID = try inputFields.hex("vault_id_hex")
            let dataKey = SecretBytes(copying: try inputFields.hex("data_key_hex"))
            let (slots, credentials) = try slotInputs(&inputFields)
            let items = try itemInputs(&inputFields, nonces: true)
            try inputFields.finish()
            let parsed = Format2Vector(
                inputs: .init(vaultID: vaultID, dataKey: dataKey, slots: slots, items: items), credentials: credentials)
            var expected = try fields.object("expected")
            mustFail = try fields.array("must_fail")
            try fields.finish()
            let (detail, listed) = try checkFormat2Writer(parsed.inputs, expected: &expected)
            vector = parsed
            database = listed
            return detail
        }
        guard let vector, let database else { return }
        sink.check("\(id) (read)", expectation: "match") {
            try checkFormat2Reader(database, vector: vector)
        }
        runMustFail(mustFail, id: id, into: &sink) { fields in
            try checkFormat2Damaged(database, vector: vector, fields: &fields)
        }
    }

    /// Compares what ``VaultVectorBuilder/buildFormat2(_:)`` makes of the inputs with every
    /// expected value; returns the detail and the database the vector lists (its bytes, not ours).
    private static func checkFormat2Writer(
        _ inputs: VaultVectorBuilder.Format2Inputs, expected: inout VectorFields
    ) throws -> (String, Format2Database) {
        let built = try VaultVectorBuilder.buildFormat2(inputs)
        func same(_ name: String, _ actual: [UInt8], _ wanted: [UInt8]) throws {
            guard actual == wanted else { throw VectorError("\(name) is \(actual.vectorHex), expected \(wanted.vectorHex)") }
        }
        func hexList(_ fields: inout VectorFields, _ name: String, count: Int) throws -> [[UInt8]] {
            let values = try fields.array(name)
            guard values.count == count else { throw VectorError("\(name) has \(values.count) entries, expected \(count)") }
            return try values.enumerated().map { index, value in
                guard case .string(let text) = value, let bytes = VectorFields.decodeHex(text) else {
                    throw VectorError("\(name)[\(index)] is not hex")
                }
                return bytes
            }
        }
        try same("K_addr", built.addressKey.withUnsafeBytes { Array($0) }, try expected.hex("address_key_hex"))
        try same("K_row", built.rowKey.withUnsafeBytes { Array($0) }, try expected.hex("row_key_hex"))
        let keyCheck = try expected.hex("key_check_hex")
        try same("key_check", built.keyCheck, keyCheck)
        for (index, kek) in try hexList(&expected, "slot_keks_hex", count: built.slotKEKs.count).enumerated() {
            try same("the KEK of slot \(index)", built.slotKEKs[index].withUnsafeBytes { Array($0) }, kek)
        }
        let fingerprints = try expected.array("key_file_fingerprints_hex")
        guard fingerprints.count == inputs.slots.count else {
            throw VectorError("key_file_fingerprints_hex has \(fingerprints.count) entries for \(inputs.slots.count) slots")
        }
        for (index, (input, listed)) in zip(inputs.slots, fingerprints).enumerated() {
            switch (input.source, listed) {
            case (.key(let key), .string(let text)):
                guard let wanted = VectorFields.decodeHex(text) else { throw VectorError("key_file_fingerprints_hex[\(index)] is not hex") }
                try same("the key-file fingerprint of slot \(index)", KeyFile.fingerprint(of: key), wanted)
            case (.key, _): throw VectorError("key_file_fingerprints_hex[\(index)] must be the key file's fingerprint")
            case (_, .null): break
            default: throw VectorError("key_file_fingerprints_hex[\(index)] must be null: slot \(index) is not a key-file slot")
            }
        }
        var slots: [KeySlot] = []
        for (index, row) in try hexList(&expected, "slot_rows_hex", count: built.slots.count).enumerated() {
            try same("slot row \(index)", built.slots[index].encoded(), row)
            slots.append(
                try row.withUnsafeBytes { buffer throws in
                    var reader = ByteReader(buffer)
                    return try KeySlot.parse(&reader, index: index, fingerprints: true)
                })
        }
        let items = try expected.array("items")
        guard items.count == built.rows.count else { throw VectorError("\(items.count) expected rows for \(built.rows.count) items") }
        var rows: [SQLiteVaultStore.SealedRow] = []
        for (index, json) in items.enumerated() {
            var item = try VectorFields(json, context: "expected item \(index)")
            let row = built.rows[index]
            let listed = SQLiteVaultStore.SealedRow(
                address: try item.hex("address_hex"), metadata: try item.hex("metadata_hex"), secret: try item.hex("secret_hex"))
            try same("item \(index)'s address", row.row.address, listed.address)
            try same(
                "item \(index)'s metadata plaintext", row.metadataPlaintext.withUnsafeBytes { Array($0) },
                try item.hex("metadata_plaintext_hex"))
            try same("item \(index)'s AD_m", row.metadataAdditionalData, try item.hex("metadata_additional_data_hex"))
            try same("item \(index)'s metadata column", row.row.metadata, listed.metadata)
            try same("item \(index)'s AD_s", row.secretAdditionalData, try item.hex("secret_additional_data_hex"))
            try same("item \(index)'s secret column", row.row.secret, listed.secret)
            try item.finish()
            rows.append(listed)
        }
        try expected.finish()
        let database = Format2Database(vaultID: inputs.vaultID, keyCheck: keyCheck, slots: slots, rows: rows)
        return (
            "sealed from the inputs: K_addr, K_row, key_check, \(slots.count) slot KEKs and rows, \(rows.count) addresses, metadata plaintexts, ADs and columns identical",
            database
        )
    }

    private static func checkFormat2Reader(_ database: Format2Database, vector: Format2Vector) throws -> String {
        let folder = try ScratchFolder()
        let path = folder.path.appending("vector.lockbox")
        try database.write(to: path)
        let expected = vector.inputs.items.map(\.entry)
        for (index, credential) in vector.credentials.enumerated() {
            let store: SQLiteVaultStore
            do {
                store = try SQLiteVaultStore.open(at: path, credentials: [credential], busyTimeout: .seconds(1))
            } catch {
                throw VectorError("slot \(index)'s \(credential) did not open it: \(error)")
            }
            guard try store.keySlots().first(where: \.openedThisHandle)?.index == index else {
                throw VectorError("slot \(index)'s \(credential) opened another slot")
            }
            let listed = try store.list(service: nil)
            guard listed.count == expected.count else { throw VectorError("\(listed.count) items listed, \(expected.count) expected") }
            for entry in expected {
                let key = entry.metadata.key
                guard let metadata = try store.metadata(key) else { throw VectorError("item \(key) is missing") }
                try compare(metadata, entry.metadata)
                guard let secret = try store.get(key), secret == entry.secret else { throw VectorError("item \(key) has another secret") }
            }
        }
        return
            "a database of the listed rows opened with each of \(vector.credentials.count) slot credentials by SQLiteVaultStore; \(expected.count) items, metadata and secrets as listed"
    }

    private static func checkFormat2Damaged(_ database: Format2Database, vector: Format2Vector, fields: inout VectorFields) throws -> String
    {
        fields.ignore("description")
        var mutation = try fields.object("mutation")
        var operation = try fields.object("operation")
        var expect = try fields.object("expect")
        try fields.finish()
        var damaged = database
        var pragma: (name: String, value: Int64)?
        func xor(_ bytes: inout [UInt8], _ change: inout VectorFields) throws {
            let offset = try change.integer("offset")
            let mask = try change.integer("mask")
            let index = offset < 0 ? Int64(bytes.count) + offset : offset
            guard index >= 0, index < Int64(bytes.count), (1...255).contains(mask) else { throw VectorError("offset or mask out of range") }
            bytes[Int(index)] ^= UInt8(mask)
        }
        func itemIndex(_ value: Int64) throws -> Int {
            guard value >= 0, value < Int64(damaged.rows.count) else { throw VectorError("no item \(value)") }
            return Int(value)
        }
        if mutation.has("xor_column") {
            var change = try mutation.object("xor_column")
            let item = try itemIndex(try change.integer("item"))
            switch try change.string("column") {
            case "address": try xor(&damaged.rows[item].address, &change)
            case "metadata": try xor(&damaged.rows[item].metadata, &change)
            case "secret": try xor(&damaged.rows[item].secret, &change)
            case let other: throw VectorError("no column \(other)")
            }
            try change.finish()
        }
        if mutation.has("swap_columns") {
            var swap = try mutation.object("swap_columns")
            let items = try swap.array("items").map { json throws -> Int in
                guard case .integer(let value) = json else { throw VectorError("swap_columns items are integers") }
                return try itemIndex(value)
            }
            guard items.count == 2, items[0] != items[1] else { throw VectorError("swap_columns names two items") }
            for json in try swap.array("columns") {
                let (a, b) = (items[0], items[1])
                switch json {
                case .string("metadata"):
                    (damaged.rows[a].metadata, damaged.rows[b].metadata) = (damaged.rows[b].metadata, damaged.rows[a].metadata)
                case .string("secret"): (damaged.rows[a].secret, damaged.rows[b].secret) = (damaged.rows[b].secret, damaged.rows[a].secret)
                default: throw VectorError("swap_columns: unknown column")
                }
            }
            try swap.finish()
        }
        if mutation.has("xor_vault") {
            var change = try mutation.object("xor_vault")
            switch try change.string("column") {
            case "vault_id": try xor(&damaged.vaultID, &change)
            case "key_check": try xor(&damaged.keyCheck, &change)
            case let other: throw VectorError("no vault column \(other)")
            }
            try change.finish()
        }
        var resize: (slot: Int, by: Int)?
        if mutation.has("resize_slot") {
            var change = try mutation.object("resize_slot")
            let slot = try change.integer("slot")
            let by = try change.integer("by")
            guard slot >= 0, slot < Int64(damaged.slots.count), (-16...16).contains(by), by != 0 else {
                throw VectorError("resize_slot: slot or size out of range")
            }
            resize = (Int(slot), Int(by))
            try change.finish()
        }
        if mutation.has("pragma") {
            var change = try mutation.object("pragma")
            let name = try change.string("name")
            guard ["user_version", "application_id"].contains(name) else { throw VectorError("pragma \(name) is not one a vector changes") }
            pragma = (name, try change.integer("value"))
            try change.finish()
        }
        try mutation.finish()

        let wanted = try expect.string("error")
        let reason = try expect.optionalString("reason")
        let found = try expect.optionalInteger("found")
        try expect.finish()

        let folder = try ScratchFolder()
        let path = folder.path.appending("damaged.lockbox")
        try damaged.write(to: path)
        if let pragma {
            try SQLiteConnection(path: path, create: false, busyTimeout: .seconds(1)).execute("PRAGMA \(pragma.name)=\(pragma.value)")
        }
        if let resize {
            // The slot row's body shortened (or lengthened with zero bytes), its length field changed to match.
            let row = damaged.slots[resize.slot].encoded()
            let body = resize.by < 0 ? Array(row[3..<(row.count + resize.by)]) : Array(row[3...]) + [UInt8](repeating: 0, count: resize.by)
            let resized = [row[0], UInt8(body.count & 0xFF), UInt8(body.count >> 8)] + body
            let connection = try SQLiteConnection(path: path, create: false, busyTimeout: .seconds(1))
            try connection.withStatement("UPDATE key_slots SET slot = ? WHERE slot_id = ?") { update in
                try update.bind(1, resized)
                try update.bind(2, Int64(resize.slot))
                _ = try update.step()
            }
        }
        let keyFiles = vector.credentials.filter { if case .key = $0 { true } else { false } }
        let verb: String
        do {
            let store = try SQLiteVaultStore.open(
                at: path, credentials: keyFiles.isEmpty ? vector.credentials : keyFiles, busyTimeout: .seconds(1))
            if operation.has("list") {
                verb = "listed"
                _ = try operation.object("list")
                try operation.finish()
                _ = try store.list(service: nil)
            } else if operation.has("get") {
                verb = "read"
                var get = try operation.object("get")
                let item = try itemIndex(try get.integer("item"))
                try get.finish()
                try operation.finish()
                _ = try store.get(vector.inputs.items[item].entry.metadata.key)
            } else {
                verb = "opened"
                _ = try operation.object("open")
                try operation.finish()
            }
        } catch let error as LockboxError {
            return try refusal(error, wanted: wanted, reason: reason, found: found)
        }
        throw VectorError("the damaged vault \(verb); it must be refused as \(wanted)")
    }
}

/// A private temporary folder (mode 0700) for vector files, removed when released.
private final class ScratchFolder {
    let path: FilePath

    init() throws {
        let temporary = FileManager.default.temporaryDirectory.path
        var template = Array((temporary + "/lockbox-selftest-XXXXXX").utf8CString)
        guard let created = mkdtemp(&template) else {
            throw LockboxError.io(operation: "creating a temporary folder", path: temporary, errno: Errno(rawValue: errno))
        }
        path = FilePath(String(cString: created))
    }

    func write(_ bytes: [UInt8], to file: FilePath) throws {
        do {
            let fd = try FileDescriptor.open(
                file, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                permissions: .ownerReadWrite)
            try fd.closeAfter { _ = try fd.writeAll(bytes) }
        } catch {
            throw LockboxError.io(operation: "writing a vector file", path: file.string, errno: error.asErrno)
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: path.string) }
}
