import CTSS2
import Lockbox

/// Seals a small secret in the TPM, so that only this TPM can give it back: optionally only
/// while chosen PCRs hold the values they held at sealing, and optionally only to someone who
/// knows a PIN, every wrong guess of which the TPM counts against its dictionary-attack limit.
///
/// The secret becomes a sealed data object (`TPM_ALG_KEYEDHASH`, `fixedTPM | fixedParent`)
/// under the owner hierarchy's ECC P-256 storage root key (``TPMConnection/withPrimary(_:)``,
/// re-created from the TPM's owner seed each time, nothing persisted in the TPM). What
/// ``seal(_:)`` returns is that object's public part and its private part encrypted by the
/// TPM (plus the PCR selection and the PIN's salt); it is useless without the same TPM with the
/// same owner seed. docs/FORMAT.md, section 5.5, describes its bytes.
///
/// - **PCRs**: a policy `TPM2_PolicyPCR` over the selected SHA-256 PCRs, with the values they
///   have when sealing. After anything that changes those PCRs (a firmware, boot loader or
///   kernel update for 0–9; Secure Boot keys for 7), unsealing fails with
///   ``TPMError/Failure/policyMismatch``: open the vault with a recovery slot and seal again.
/// - **PIN**: the object's authValue is Argon2id(PIN, salt) (``pinKDF``; 32 bytes), with a
///   policy `TPM2_PolicyAuthValue`, and it is *not* `noDA`: each wrong PIN is a
///   `TPM_RC_AUTH_FAIL` that raises the TPM's failure counter, and at `maxTries` the TPM refuses
///   all such objects (``TPMError/Failure/lockedOut``) for `recoveryTime` seconds per failure.
///   The counter lives in the TPM, so restoring files, killing processes, changing the clock or
///   rebooting does not reset it (see ``TPMDictionaryAttack``). Without a PIN the object is
///   `noDA` (there is nothing to guess).
/// - **Sessions**: every command that carries the secret or the authValue runs in a session
///   salted with the storage root key (the session key is agreed by ECDH, so it never crosses
///   the bus) and encrypts that parameter with AES-128-CFB: the secret on `TPM2_Create` and
///   `TPM2_Unseal`, and the PIN only ever appears in session HMACs.
/// - **Time**: each seal, unseal or check connects and sends its commands under one deadline,
///   ``timeout`` seconds (``TPMConnection/withConnection(tcti:timeout:_:)``).
/// - **PIN shape**: ``seal(_:)`` refuses a PIN that breaks the length and character rules of
///   ``pinPolicy``, and ``unseal(_:)`` refuses one before the TPM sees it: a PIN that no seal
///   under that policy could have (3 digits, a letter, a space) costs no try of the TPM's
///   dictionary-attack limit.
public struct TPMSealer: Sendable {
    /// The TCTI to reach the TPM (``TPMConnection/deviceTCTI`` by default).
    public var tcti: String
    /// The PCRs a new seal is bound to (a blob records its own selection for unsealing).
    public var pcrs: PCRSelection
    /// The PIN, if the object needs one (for sealing: whether to require one).
    public var pin: SecretBytes?
    /// Argon2id cost of turning the PIN into the authValue, for new seals (a blob records its
    /// own). The TPM's lockout is what limits guessing; this only makes each offline guess
    /// costly should the sealed object ever leave the TPM's protection.
    public var pinKDF: KDFParameters
    /// The most seconds one seal, unseal or check may take, connecting included.
    public var timeout: Double
    /// The policy PINs are chosen under: its length and character rules (not its common-PIN
    /// rules, which may change) hold for every PIN ``seal(_:)`` accepts, and ``unseal(_:)``
    /// applies them before the TPM sees a PIN. `nil`: any PIN.
    public var pinPolicy: PinPolicy?

    /// The largest secret a sealed data object holds (`MAX_SYM_DATA`).
    public static let maximumSecretBytes = 128

    /// A sealer for the TPM behind `tcti`.
    public init(
        tcti: String = TPMConnection.deviceTCTI, pcrs: PCRSelection = .none, pin: SecretBytes? = nil,
        pinKDF: KDFParameters = .interactive, timeout: Double = TPMConnection.defaultTimeout,
        pinPolicy: PinPolicy? = .default
    ) {
        self.tcti = tcti
        self.pcrs = pcrs
        self.pin = pin
        self.pinKDF = pinKDF
        self.timeout = timeout
        self.pinPolicy = pinPolicy
    }

    /// Seals `secret` (1 to 128 bytes); returns the blob ``unseal(_:)`` takes.
    public func seal(_ secret: SecretBytes) throws -> [UInt8] {
        guard (1...Self.maximumSecretBytes).contains(secret.count) else {
            throw LockboxError.invalidArgument("a TPM can seal 1 to \(Self.maximumSecretBytes) bytes, not \(secret.count)")
        }
        var pinSetting: (KDFParameters, [UInt8])?
        var authValue: SecretBytes?
        if let pin {
            try checkShape(of: pin, unsealing: false)
            let salt = Sodium.randomBytes(Sodium.pwhashSaltBytes)
            pinSetting = (pinKDF, salt)
            authValue = try SealedBlob.authValue(pin: pin, kdf: pinKDF, salt: salt)
        }
        let (pcrs, pin, auth) = (pcrs, pinSetting, authValue)
        return try TPMConnection.withConnection(tcti: tcti, timeout: timeout) { connection in
            var blob = SealedBlob(pcrs: pcrs, pin: pin, public: TPM2B_PUBLIC(), private: TPM2B_PRIVATE())
            (blob.public, blob.private) = try Self.create(blob, secret: secret, authValue: auth, connection: connection)
            return try blob.encoded()
        }
    }

    /// The sealed data object for `blob`'s policy holding `secret`, created in the TPM.
    private static func create(
        _ blob: SealedBlob, secret: SecretBytes, authValue: SecretBytes?, connection: TPMConnection
    ) throws -> (public: TPM2B_PUBLIC, private: TPM2B_PRIVATE) {
        try connection.withPrimary { primary in
            var template = TPM2B_PUBLIC()
            template.publicArea.type = TPM2_ALG_KEYEDHASH
            template.publicArea.nameAlg = TPM2_ALG_SHA256
            template.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
            if blob.usesPolicy {
                template.publicArea.authPolicy = try connection.withSession(.trial, salt: nil) { session in
                    try blob.applyPolicy(connection, session: session)
                    return try connection.policyDigest(session)
                }
            } else {
                template.publicArea.objectAttributes |= TPMA_OBJECT_USERWITHAUTH
            }
            if authValue == nil { template.publicArea.objectAttributes |= TPMA_OBJECT_NODA }
            template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL

            var sensitive = TPM2B_SENSITIVE_CREATE()
            defer { withUnsafeMutableBytes(of: &sensitive) { $0.zeroize() } }
            sensitive.sensitive.data.size = UInt16(secret.count)
            secret.withUnsafeBytes { source in
                withUnsafeMutableBytes(of: &sensitive.sensitive.data.buffer) { $0.copyMemory(from: source) }
            }
            if let authValue {
                sensitive.sensitive.userAuth.size = UInt16(authValue.count)
                authValue.withUnsafeBytes { source in
                    withUnsafeMutableBytes(of: &sensitive.sensitive.userAuth.buffer) { $0.copyMemory(from: source) }
                }
            }
            return try connection.withSession(.hmac, salt: primary, encrypt: .command) { session in
                try connection.create(parent: primary, session: session, sensitive: &sensitive, template: template)
            }
        }
    }

    /// The secret sealed in `blob`, if this TPM made it, its PCRs still match, and ``pin`` is
    /// right. Throws ``TPMError`` (see ``TPMError/failure``) or, for a damaged blob or a missing
    /// PIN, ``LockboxError``.
    public func unseal(_ blob: [UInt8]) throws -> SecretBytes {
        let bytes = blob
        let blob = try SealedBlob(decoding: blob)
        var authValue: SecretBytes?
        if let (kdf, salt) = blob.pin {
            guard let pin else {
                throw LockboxError.invalidArgument("this TPM-sealed secret needs its PIN")
            }
            try checkShape(of: pin, unsealing: true)
            authValue = try SealedBlob.authValue(pin: pin, kdf: kdf, salt: salt)
        }
        let auth = authValue
        return try TPMConnection.withConnection(tcti: tcti, timeout: timeout) { connection in
            try Self.unseal(SealedBlob(decoding: bytes), authValue: auth, connection: connection)
        }
    }

    /// The data `blob`'s object holds, unsealed by the TPM with `authValue`.
    private static func unseal(_ blob: SealedBlob, authValue: SecretBytes?, connection: TPMConnection) throws -> SecretBytes {
        try connection.withPrimary { primary in
            try connection.withLoadedObject(parent: primary, public: blob.public, private: blob.private) { object in
                if blob.usesPolicy {
                    return try connection.withSession(.policy, salt: primary, encrypt: .response) { session in
                        try blob.applyPolicy(connection, session: session)
                        try connection.setAuth(object, authValue)
                        return try connection.unseal(object, session: session)
                    }
                }
                return try connection.withSession(.hmac, salt: primary, encrypt: .response) { session in
                    try connection.unseal(object, session: session)
                }
            }
        }
    }

    /// Throws ``LockboxError/pinRejected(rule:)`` when `pin` breaks a length or character rule
    /// of ``pinPolicy``; when `unsealing`, saying that it cannot be the PIN of a slot sealed
    /// under it.
    func checkShape(of pin: SecretBytes, unsealing: Bool) throws {
        guard var shape = pinPolicy else { return }
        shape.rejectsCommonPins = false
        do {
            try shape.check(pin)
        } catch let LockboxError.pinRejected(rule) where unsealing {
            throw LockboxError.pinRejected(
                rule:
                    "\(rule), so it cannot be this TPM slot's PIN; the TPM was not asked and no try of its dictionary-attack limit was used"
            )
        }
    }

    /// Checks, without authorizing anything (so without using a try of the TPM's
    /// dictionary-attack limit, and without a PIN), whether ``unseal(_:)`` could open `blob` on
    /// this TPM now; returns the TPM's dictionary-attack state. Throws the ``TPMError`` an unseal
    /// would meet: ``TPMError/Failure/foreignObject`` (another TPM, or this one cleared),
    /// ``TPMError/Failure/policyMismatch`` (the PCRs changed) or, for a slot with a PIN,
    /// ``TPMError/Failure/lockedOut``; and ``TPMError/Failure/unavailable`` when no TPM answers.
    /// A wrong PIN is the one thing it cannot tell.
    ///
    /// It loads the object, then computes in a trial session the policy the object would need
    /// now (today's PCR values, the PIN) and compares it with the policy it was sealed with.
    public func checkUnsealable(_ blob: [UInt8]) throws -> TPMDictionaryAttack {
        let bytes = blob
        _ = try SealedBlob(decoding: blob)
        return try TPMConnection.withConnection(tcti: tcti, timeout: timeout) { connection in
            let blob = try SealedBlob(decoding: bytes)
            let state = try TPMDictionaryAttack(reading: connection)
            try connection.withPrimary { primary in
                try connection.withLoadedObject(parent: primary, public: blob.public, private: blob.private) { _ in
                    guard blob.usesPolicy else { return }
                    let now = try connection.withSession(.trial, salt: nil) { session in
                        try blob.applyPolicy(connection, session: session)
                        return try connection.policyDigest(session)
                    }
                    guard now.bytes == blob.public.publicArea.authPolicy.bytes else {
                        // What TPM2_Unseal would return: TPM_RC_POLICY_FAIL for session 1.
                        throw TPMError(
                            function: "Esys_PolicyGetDigest, compared with the slot's policy",
                            responseCode: TPMError.policyFail | 0x900)
                    }
                }
            }
            if blob.pin != nil && state.inLockout {
                throw TPMError(function: "Esys_GetCapability (TPMA_PERMANENT.inLockout)", responseCode: TPMError.lockout)
            }
            return state
        }
    }

    /// Whether `blob` needs a PIN to unseal (`nil` if it is not a sealed blob Lockbox reads).
    public static func requiresPIN(_ blob: [UInt8]) -> Bool? {
        (try? SealedBlob(decoding: blob)).map { $0.pin != nil }
    }

    /// The PCRs `blob` is bound to (`nil` if it is not a sealed blob Lockbox reads).
    public static func boundPCRs(_ blob: [UInt8]) -> PCRSelection? {
        (try? SealedBlob(decoding: blob)).map(\.pcrs)
    }
}

/// The bytes of a sealed secret (docs/FORMAT.md, section 5.5):
///
/// ```
/// u8  version = 1
/// u8  flags: bit 0 = needs a PIN
/// u32 PCR mask of the SHA-256 bank (bit n = PCR n), little-endian
/// if PIN: u64 Argon2id opslimit, u64 memlimit (bytes), 16-byte salt
/// u16 n, n bytes: TPM2B_PUBLIC as TPM 2.0 marshals it (big-endian, size first)
/// u16 m, m bytes: TPM2B_PRIVATE, likewise
/// ```
struct SealedBlob {
    static let version: UInt8 = 1
    static let pinFlag: UInt8 = 1

    var pcrs: PCRSelection
    var pin: (KDFParameters, [UInt8])?
    var `public`: TPM2B_PUBLIC
    var `private`: TPM2B_PRIVATE

    var usesPolicy: Bool { pcrs.mask != 0 || pin != nil }

    init(pcrs: PCRSelection, pin: (KDFParameters, [UInt8])?, public: TPM2B_PUBLIC, private: TPM2B_PRIVATE) {
        self.pcrs = pcrs
        self.pin = pin
        self.public = `public`
        self.private = `private`
    }

    /// The policy the object was sealed with, in the same order: PCRs, then the authValue.
    func applyPolicy(_ connection: TPMConnection, session: ESYS_TR) throws {
        if pcrs.mask != 0 { try connection.policyPCR(session, pcrs: pcrs) }
        if pin != nil { try connection.policyAuthValue(session) }
    }

    /// The object's authValue: Argon2id(PIN, salt), 32 bytes (SHA-256's size, the most a
    /// SHA-256 object's authValue can be).
    static func authValue(pin: SecretBytes, kdf: KDFParameters, salt: [UInt8]) throws -> SecretBytes {
        guard pin.count > 0 else { throw LockboxError.invalidArgument("the PIN must not be empty") }
        guard
            let key = Sodium.deriveKey(
                length: 32, passphrase: pin, salt: salt,
                opsLimit: kdf.opsLimit, memLimit: kdf.memoryLimitBytes)
        else {
            throw LockboxError.keySlot("Argon2id could not run with \(kdf): not enough memory?")
        }
        return key
    }

    func encoded() throws -> [UInt8] {
        var writer = ByteWriter()
        writer.append(Self.version)
        writer.append(pin == nil ? 0 : Self.pinFlag)
        writer.append(pcrs.mask)
        if let (kdf, salt) = pin {
            writer.append(kdf.opsLimit)
            writer.append(kdf.memoryLimitBytes)
            writer.append(salt)
        }
        var publicBytes = [UInt8](repeating: 0, count: MemoryLayout<TPM2B_PUBLIC>.size)
        var privateBytes = [UInt8](repeating: 0, count: MemoryLayout<TPM2B_PRIVATE>.size)
        var publicCount = 0
        var privateCount = 0
        var publicArea = `public`
        var privateArea = `private`
        try check(
            "Tss2_MU_TPM2B_PUBLIC_Marshal",
            Tss2_MU_TPM2B_PUBLIC_Marshal(&publicArea, &publicBytes, publicBytes.count, &publicCount))
        try check(
            "Tss2_MU_TPM2B_PRIVATE_Marshal",
            Tss2_MU_TPM2B_PRIVATE_Marshal(&privateArea, &privateBytes, privateBytes.count, &privateCount))
        writer.append(UInt16(publicCount))
        writer.append(Array(publicBytes.prefix(publicCount)))
        writer.append(UInt16(privateCount))
        writer.append(Array(privateBytes.prefix(privateCount)))
        return writer.bytes
    }

    init(decoding bytes: [UInt8]) throws {
        do {
            self = try bytes.withUnsafeBytes { raw throws -> SealedBlob in
                var reader = ByteReader(raw)
                let version = try reader.read(UInt8.self, "version")
                guard version == Self.version else { throw FormatError("unknown version \(version)") }
                let flags = try reader.read(UInt8.self, "flags")
                guard flags & ~Self.pinFlag == 0 else { throw FormatError("unknown flags \(flags)") }
                guard let pcrs = PCRSelection(mask: try reader.read(UInt32.self, "PCR mask")) else {
                    throw FormatError("PCRs beyond 23")
                }
                var pin: (KDFParameters, [UInt8])?
                if flags & Self.pinFlag != 0 {
                    let ops = try reader.read(UInt64.self, "Argon2id passes")
                    let memory = try reader.read(UInt64.self, "Argon2id memory")
                    guard let kdf = try? KDFParameters(opsLimit: ops, memoryLimitBytes: memory) else {
                        throw FormatError("Argon2id parameters outside the accepted range")
                    }
                    pin = (kdf, try reader.readBytes(Sodium.pwhashSaltBytes, "PIN salt"))
                }
                var publicArea = TPM2B_PUBLIC()
                var privateArea = TPM2B_PRIVATE()
                let publicBytes = try reader.readBytes(Int(try reader.read(UInt16.self, "public length")), "public part")
                let privateBytes = try reader.readBytes(Int(try reader.read(UInt16.self, "private length")), "private part")
                guard reader.remaining == 0 else { throw FormatError("\(reader.remaining) unexpected bytes") }
                var offset = 0
                guard Tss2_MU_TPM2B_PUBLIC_Unmarshal(publicBytes, publicBytes.count, &offset, &publicArea) == TSS2_RC_SUCCESS,
                    offset == publicBytes.count
                else { throw FormatError("unreadable public part") }
                offset = 0
                guard Tss2_MU_TPM2B_PRIVATE_Unmarshal(privateBytes, privateBytes.count, &offset, &privateArea) == TSS2_RC_SUCCESS,
                    offset == privateBytes.count
                else { throw FormatError("unreadable private part") }
                return SealedBlob(pcrs: pcrs, pin: pin, public: publicArea, private: privateArea)
            }
        } catch let error as FormatError {
            throw LockboxError.keySlot("the TPM-sealed data is damaged: \(error.reason)")
        }
    }
}

extension TPM2B_DIGEST {
    /// The digest's bytes (its first `size` bytes).
    var bytes: [UInt8] {
        var digest = self
        let size = min(Int(digest.size), MemoryLayout.size(ofValue: digest.buffer))
        return withUnsafeBytes(of: &digest.buffer) { Array($0.prefix(size)) }
    }
}

/// A ``TPMSealer`` keeps the secret of a vault's TPM2 key slot: give it as
/// `VaultCredential.sealed(TPMSealer(...))`.
extension TPMSealer: KeySlotSealer {}
