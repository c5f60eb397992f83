import CTSS2
import Dispatch
import FoundationEssentials
import Lockbox

/// One ESAPI context on one TPM, reached through a TCTI chosen at run time: thin, typed wrappers
/// over the tpm2-tss calls Lockbox makes, each naming the C function it wraps and throwing
/// ``TPMError`` with the `TSS2_RC` it returned.
///
/// Transient objects and sessions it creates are flushed by their owners (``withPrimary(_:)``
/// and friends), and the context is finalised when the connection is released, so nothing is
/// left loaded in a TPM that has no resource manager (swtpm, `/dev/tpm0`). Use from one thread.
///
/// tpm2-tss waits for a TPM without limit (its TCTIs block on the socket or device, and the
/// synchronous ESAPI calls wait for every reply). ``withConnection(tcti:timeout:_:)`` bounds
/// connecting and every command by one deadline; ``TPMSealer`` and ``TPMDictionaryAttack``
/// use it.
public final class TPMConnection {
    /// The kernel's TPM resource manager.
    public static let deviceTCTI = "device:/dev/tpmrm0"

    /// The TCTI an environment names: `LOCKBOX_TPM_TCTI` if set (e.g.
    /// `swtpm:host=127.0.0.1,port=2321`), else ``deviceTCTI``. The library reads no environment
    /// itself: the `lockbox` CLI passes its own here; a service passes
    /// `LockboxConfiguration.tpmTCTI` or its own setting to ``init(tcti:)``.
    public static func defaultTCTI(environment: [String: String]) -> String {
        if let configured = environment["LOCKBOX_TPM_TCTI"], !configured.isEmpty { return configured }
        return deviceTCTI
    }

    /// The most one TPM operation (connecting, then every command it sends) may take by default,
    /// in seconds: as long as the Secret Service store gives each of its calls.
    public static let defaultTimeout: Double = 5

    /// The longest timeout ``timeout(environment:)`` accepts, in seconds.
    public static let maximumTimeout: Double = 3600

    /// The timeout an environment names: `LOCKBOX_TPM_TIMEOUT` (seconds, e.g. `2` or `0.5`) if
    /// set, else ``defaultTimeout``. Throws ``LockboxError/invalidArgument(_:)`` for a value that
    /// is not a number of seconds above 0 and at most ``maximumTimeout``.
    public static func timeout(environment: [String: String]) throws -> Double {
        guard let configured = environment["LOCKBOX_TPM_TIMEOUT"], !configured.isEmpty else { return defaultTimeout }
        guard let seconds = Double(configured), seconds > 0, seconds <= maximumTimeout else {
            throw LockboxError.invalidArgument(
                "LOCKBOX_TPM_TIMEOUT is '\(configured.prefix(32))'; expected a number of seconds above 0 and at most \(Int(maximumTimeout))"
            )
        }
        return seconds
    }

    private var tcti: OpaquePointer?
    private var context: OpaquePointer?
    /// The tpm2-tss function this connection is in, for the message when a deadline passes.
    private let progress: Locked<String>?
    /// The TCTI configuration string this connection uses.
    public let tctiConfiguration: String

    /// Connects to the TPM behind `tcti` (`device:/dev/tpmrm0`, `swtpm:host=…,port=…`, …), with
    /// no time limit: a TPM that accepts the connection and never answers blocks the calling
    /// thread. Use ``withConnection(tcti:timeout:_:)`` for a bounded connection.
    ///
    /// The corresponding C functions are `Tss2_TctiLdr_Initialize` and `Esys_Initialize`.
    public convenience init(tcti configuration: String = TPMConnection.deviceTCTI) throws {
        try self.init(tcti: configuration, progress: nil)
    }

    private init(tcti configuration: String, progress: Locked<String>?) throws {
        tctiConfiguration = configuration
        self.progress = progress
        progress?.withLock { $0 = "Tss2_TctiLdr_Initialize" }
        var tcti: OpaquePointer?
        try LockboxTPM.check("Tss2_TctiLdr_Initialize", Tss2_TctiLdr_Initialize(configuration, &tcti))
        progress?.withLock { $0 = "Esys_Initialize" }
        var context: OpaquePointer?
        let rc = Esys_Initialize(&context, tcti, nil)
        guard rc == TSS2_RC_SUCCESS else {
            Tss2_TctiLdr_Finalize(&tcti)
            throw TPMError(function: "Esys_Initialize", responseCode: rc)
        }
        self.tcti = tcti
        self.context = context
    }

    deinit {
        Esys_Finalize(&context)
        Tss2_TctiLdr_Finalize(&tcti)
    }

    /// Connects to the TPM behind `tcti` and runs `body` with the connection, connecting and
    /// every command under one deadline `timeout` seconds from now. A TPM that does not answer
    /// in time — nothing accepts the connection, or it accepts and never replies — throws a
    /// ``TPMError`` whose ``TPMError/failure`` is ``TPMError/Failure/unavailable`` and whose
    /// ``TPMError/timeout`` is set, naming the call that waited, when the deadline passes.
    ///
    /// The connection lives on a thread of its own, which only it uses, and the caller waits for
    /// that thread until the deadline. A call that times out leaves the thread blocked in
    /// tpm2-tss until the TPM answers or the connection fails; it then releases the connection
    /// and its result (zeroed, if secret) without touching anything of the caller's. While
    /// ``maximumWaitingOperations`` such threads wait for the same `tcti`, a new call starts no
    /// other and throws the same error at once, so a hung TPM cannot pile up threads.
    public static func withConnection<T: Sendable>(
        tcti: String, timeout: Double, _ body: @escaping @Sendable (TPMConnection) throws -> T
    ) throws -> T {
        let seconds = timeout.isFinite && timeout > 0 ? min(timeout, maximumTimeout) : 0
        if let earlier = waiting.withLock({ $0[tcti] }), earlier.count >= maximumWaitingOperations {
            throw TPMError.notAnswering(within: seconds, function: earlier.function)
        }
        let progress = Locked("Tss2_TctiLdr_Initialize")
        let call = Locked<Call<T>>(.running)
        let done = DispatchSemaphore(value: 0)
        let started = startDetachedThread(name: "lockbox-tpm") {
            let result = Result { () throws -> T in
                let connection = try TPMConnection(tcti: tcti, progress: progress)
                return try body(connection)
            }
            // The caller's decision and the count of waiting operations change together.
            waiting.withLock { table in
                call.withLock { state in
                    if case .abandoned = state {
                        let left = (table[tcti]?.count ?? 1) - 1
                        table[tcti] = left > 0 ? (left, table[tcti]?.function ?? "") : nil
                    } else {
                        state = .finished(result)
                    }
                }
            }
            done.signal()
        }
        guard started else {
            throw TPMError(function: "pthread_create", responseCode: TPMError.esysGeneralFailure)
        }
        _ = done.wait(timeout: .now() + seconds)
        let function = progress.withLock { $0 }
        let result = waiting.withLock { table in
            call.withLock { state -> Result<T, any Error>? in
                guard case .finished(let result) = state else {
                    state = .abandoned
                    table[tcti] = ((table[tcti]?.count ?? 0) + 1, function)
                    return nil
                }
                return result
            }
        }
        guard let result else { throw TPMError.notAnswering(within: seconds, function: function) }
        return try result.get()
    }

    /// The most operations on one TCTI that may wait past their deadline before
    /// ``withConnection(tcti:timeout:_:)`` fails at once for it.
    public static let maximumWaitingOperations = 4

    /// Operations past their deadline whose threads still wait, by TCTI, with the call the last
    /// of them waits in.
    private static let waiting = Locked<[String: (count: Int, function: String)]>([:])

    /// One ``withConnection(tcti:timeout:_:)`` operation, as its caller and its thread see it.
    private enum Call<T: Sendable> {
        case running
        case finished(Result<T, any Error>)
        case abandoned
    }

    /// Throws ``TPMError`` unless `rc` is success; records `function` as the call this connection
    /// waits for while `rc` is evaluated.
    private func check(_ function: String, _ rc: @autoclosure () -> TSS2_RC) throws {
        progress?.withLock { $0 = function }
        try LockboxTPM.check(function, rc())
    }

    // MARK: Objects and sessions

    /// The primary storage key of the owner hierarchy, created for `body` and flushed after.
    ///
    /// It is the TCG's standard ECC P-256 storage root key template (TCG TPM v2.0 Provisioning
    /// Guidance, 7.5.1: restricted decryption key, AES-128-CFB, noDA, zero unique field), so the
    /// same TPM gives the same key every time without anything persisted in its NV memory, and
    /// a TPM whose owner seed changed (`tpm2_clear`, another machine) gives another key.
    ///
    /// The corresponding C function is `Esys_CreatePrimary` (then `Esys_FlushContext`).
    public func withPrimary<T>(_ body: (ESYS_TR) throws -> T) throws -> T {
        var template = TPM2B_PUBLIC()
        template.publicArea.type = TPM2_ALG_ECC
        template.publicArea.nameAlg = TPM2_ALG_SHA256
        template.publicArea.objectAttributes =
            TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
            | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA
            | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT
        template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES
        template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128
        template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB
        template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL
        template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256
        template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL
        template.publicArea.unique.ecc.x.size = 32
        template.publicArea.unique.ecc.y.size = 32
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var handle: ESYS_TR = ESYS_TR_NONE
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        var creationData: UnsafeMutablePointer<TPM2B_CREATION_DATA>?
        var creationHash: UnsafeMutablePointer<TPM2B_DIGEST>?
        var creationTicket: UnsafeMutablePointer<TPMT_TK_CREATION>?
        try check(
            "Esys_CreatePrimary",
            Esys_CreatePrimary(
                context, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                &sensitive, &template, &outsideInfo, &creationPCR, &handle,
                &outPublic, &creationData, &creationHash, &creationTicket))
        Esys_Free(outPublic)
        Esys_Free(creationData)
        Esys_Free(creationHash)
        Esys_Free(creationTicket)
        defer { Esys_FlushContext(context, handle) }
        return try body(handle)
    }

    /// The kinds of session ``withSession(_:salt:encrypt:_:)`` starts.
    public enum SessionKind: Sendable {
        /// An HMAC session: authorizes with the object's authValue.
        case hmac
        /// A policy session: authorizes by meeting the object's policy.
        case policy
        /// A trial policy session: computes a policy digest without authorizing anything.
        case trial

        var rawValue: TPM2_SE {
            switch self {
            case .hmac: return TPM2_SE_HMAC
            case .policy: return TPM2_SE_POLICY
            case .trial: return TPM2_SE_TRIAL
            }
        }
    }

    /// Which parameters a session encrypts (AES-128-CFB keyed from the session key).
    public struct ParameterEncryption: OptionSet, Sendable {
        /// The raw `TPMA_SESSION` bits.
        public let rawValue: UInt8
        /// A value from raw `TPMA_SESSION` bits.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The command's first parameter (e.g. the data and authValue given to `TPM2_Create`).
        public static let command = ParameterEncryption(rawValue: UInt8(TPMA_SESSION_DECRYPT))
        /// The response's first parameter (e.g. the data `TPM2_Unseal` returns).
        public static let response = ParameterEncryption(rawValue: UInt8(TPMA_SESSION_ENCRYPT))
    }

    /// A SHA-256 session of `kind`, salted with `salt` (the session key is agreed with ECDH
    /// against that key, so someone reading the bus learns neither it nor what it encrypts),
    /// with `encrypt` parameter encryption; flushed after `body`.
    ///
    /// The corresponding C functions are `Esys_StartAuthSession` and `Esys_TRSess_SetAttributes`
    /// (then `Esys_FlushContext`).
    public func withSession<T>(
        _ kind: SessionKind, salt: ESYS_TR?, encrypt: ParameterEncryption = [], _ body: (ESYS_TR) throws -> T
    ) throws -> T {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2_ALG_AES
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = TPM2_ALG_CFB
        var session: ESYS_TR = ESYS_TR_NONE
        try check(
            "Esys_StartAuthSession",
            Esys_StartAuthSession(
                context, salt ?? ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                nil, kind.rawValue, &symmetric, TPM2_ALG_SHA256, &session))
        defer { Esys_FlushContext(context, session) }
        let attributes = TPMA_SESSION(TPMA_SESSION_CONTINUESESSION) | TPMA_SESSION(encrypt.rawValue)
        try check("Esys_TRSess_SetAttributes", Esys_TRSess_SetAttributes(context, session, attributes, 0xFF))
        return try body(session)
    }

    /// Creates an object under `parent` (authorized by `session`); returns its public and private
    /// parts, the private part encrypted by the parent so only this TPM can load it.
    ///
    /// The corresponding C function is `Esys_Create`.
    public func create(
        parent: ESYS_TR, session: ESYS_TR, sensitive: inout TPM2B_SENSITIVE_CREATE, template: TPM2B_PUBLIC
    ) throws -> (public: TPM2B_PUBLIC, private: TPM2B_PRIVATE) {
        var template = template
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        var creationData: UnsafeMutablePointer<TPM2B_CREATION_DATA>?
        var creationHash: UnsafeMutablePointer<TPM2B_DIGEST>?
        var creationTicket: UnsafeMutablePointer<TPMT_TK_CREATION>?
        try check(
            "Esys_Create",
            Esys_Create(
                context, parent, session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outsideInfo,
                &creationPCR, &outPrivate, &outPublic, &creationData, &creationHash, &creationTicket))
        defer {
            Esys_Free(outPrivate)
            Esys_Free(outPublic)
            Esys_Free(creationData)
            Esys_Free(creationHash)
            Esys_Free(creationTicket)
        }
        guard let outPublic, let outPrivate else {
            throw TPMError(function: "Esys_Create", responseCode: TPMError.esysGeneralFailure)
        }
        return (outPublic.pointee, outPrivate.pointee)
    }

    /// Loads an object made by ``create(parent:session:sensitive:template:)`` under `parent`;
    /// flushed after `body`.
    ///
    /// The corresponding C function is `Esys_Load` (then `Esys_FlushContext`).
    public func withLoadedObject<T>(
        parent: ESYS_TR, public: TPM2B_PUBLIC, private: TPM2B_PRIVATE, _ body: (ESYS_TR) throws -> T
    ) throws -> T {
        var inPublic = `public`
        var inPrivate = `private`
        var handle: ESYS_TR = ESYS_TR_NONE
        try check(
            "Esys_Load",
            Esys_Load(
                context, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &inPrivate, &inPublic, &handle))
        defer { Esys_FlushContext(context, handle) }
        return try body(handle)
    }

    /// Sets the authValue ESAPI uses for `handle` in HMAC and policy-with-authValue sessions (at
    /// most 32 bytes here); kept in the ESAPI context only until it is finalised.
    ///
    /// The corresponding C function is `Esys_TR_SetAuth`.
    public func setAuth(_ handle: ESYS_TR, _ authValue: SecretBytes?) throws {
        var auth = TPM2B_AUTH()
        defer { withUnsafeMutableBytes(of: &auth) { $0.zeroize() } }
        if let authValue {
            guard authValue.count <= MemoryLayout.size(ofValue: auth.buffer) else {
                throw TPMError(function: "Esys_TR_SetAuth", responseCode: TPMError.esysBadValue)
            }
            auth.size = UInt16(authValue.count)
            authValue.withUnsafeBytes { source in
                withUnsafeMutableBytes(of: &auth.buffer) { $0.copyMemory(from: source) }
            }
        }
        try check("Esys_TR_SetAuth", Esys_TR_SetAuth(context, handle, &auth))
    }

    /// The sealed data of `object`, authorized by `session`.
    ///
    /// The corresponding C function is `Esys_Unseal` (the returned buffer is zeroed and freed).
    public func unseal(_ object: ESYS_TR, session: ESYS_TR) throws -> SecretBytes {
        var data: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        try check("Esys_Unseal", Esys_Unseal(context, object, session, ESYS_TR_NONE, ESYS_TR_NONE, &data))
        guard let data else { throw TPMError(function: "Esys_Unseal", responseCode: TPMError.esysGeneralFailure) }
        defer {
            UnsafeMutableRawBufferPointer(start: data, count: MemoryLayout<TPM2B_SENSITIVE_DATA>.size).zeroize()
            Esys_Free(data)
        }
        let size = Int(data.pointee.size)
        return withUnsafeBytes(of: &data.pointee.buffer) { SecretBytes(copying: $0.prefix(size)) }
    }

    // MARK: Policies

    /// Adds "the selected SHA-256 PCRs hold the values they hold now" to the policy `session`.
    ///
    /// The corresponding C function is `Esys_PolicyPCR` (with an empty digest: the TPM uses the
    /// current values).
    public func policyPCR(_ session: ESYS_TR, pcrs: PCRSelection) throws {
        var digest = TPM2B_DIGEST()
        var selection = pcrs.list
        try check(
            "Esys_PolicyPCR",
            Esys_PolicyPCR(
                context, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digest, &selection))
    }

    /// Adds "the caller knows the object's authValue" to the policy `session`.
    ///
    /// The corresponding C function is `Esys_PolicyAuthValue`.
    public func policyAuthValue(_ session: ESYS_TR) throws {
        try check("Esys_PolicyAuthValue", Esys_PolicyAuthValue(context, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE))
    }

    /// The policy digest `session` has reached.
    ///
    /// The corresponding C function is `Esys_PolicyGetDigest`.
    public func policyDigest(_ session: ESYS_TR) throws -> TPM2B_DIGEST {
        var digest: UnsafeMutablePointer<TPM2B_DIGEST>?
        try check(
            "Esys_PolicyGetDigest",
            Esys_PolicyGetDigest(
                context, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digest))
        defer { Esys_Free(digest) }
        guard let digest else {
            throw TPMError(function: "Esys_PolicyGetDigest", responseCode: TPMError.esysGeneralFailure)
        }
        return digest.pointee
    }

    // MARK: Dictionary-attack protection

    /// The TPM's variable properties from `property` on: `TPM2_PT_*` → value.
    ///
    /// The corresponding C function is `Esys_GetCapability` with `TPM2_CAP_TPM_PROPERTIES`.
    public func properties(from property: UInt32, count: UInt32) throws -> [UInt32: UInt32] {
        var more: TPMI_YES_NO = 0
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        try check(
            "Esys_GetCapability",
            Esys_GetCapability(
                context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES, property, count, &more, &data))
        defer { Esys_Free(data) }
        guard let data else { return [:] }
        var result: [UInt32: UInt32] = [:]
        let tagged = data.pointee.data.tpmProperties
        withUnsafeBytes(of: tagged.tpmProperty) { raw in
            let entries = raw.bindMemory(to: TPMS_TAGGED_PROPERTY.self)
            for entry in entries.prefix(Int(tagged.count)) { result[entry.property] = entry.value }
        }
        return result
    }

    /// Sets the dictionary-attack parameters, authorized by the lockout hierarchy's authValue
    /// (`lockoutAuth`; empty on a fresh TPM and on swtpm).
    ///
    /// The corresponding C function is `Esys_DictionaryAttackParameters`.
    public func setDictionaryAttackParameters(
        maxTries: UInt32, recoveryTime: UInt32, lockoutRecovery: UInt32, lockoutAuth: SecretBytes? = nil
    ) throws {
        try setAuth(ESYS_TR_RH_LOCKOUT, lockoutAuth)
        try check(
            "Esys_DictionaryAttackParameters",
            Esys_DictionaryAttackParameters(
                context, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                maxTries, recoveryTime, lockoutRecovery))
    }

    /// Resets the dictionary-attack counter and ends a lockout, authorized by `lockoutAuth` (what
    /// `tpm2_dictionarylockout --clear-lockout` does).
    ///
    /// The corresponding C function is `Esys_DictionaryAttackLockReset`.
    public func resetDictionaryAttackLockout(lockoutAuth: SecretBytes? = nil) throws {
        try setAuth(ESYS_TR_RH_LOCKOUT, lockoutAuth)
        try check(
            "Esys_DictionaryAttackLockReset",
            Esys_DictionaryAttackLockReset(
                context, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE))
    }
}

/// Throws ``TPMError`` unless `rc` is success.
func check(_ function: String, _ rc: TSS2_RC) throws {
    guard rc == TSS2_RC_SUCCESS else { throw TPMError(function: function, responseCode: rc) }
}

/// PCRs of the SHA-256 bank, as a policy binds to them.
public struct PCRSelection: Sendable, Hashable, CustomStringConvertible {
    /// Bit `n` set: PCR `n` (0–23).
    public let mask: UInt32

    /// The PCRs `indices` (each 0–23).
    public init(_ indices: [Int]) throws {
        var mask: UInt32 = 0
        for index in indices {
            guard (0..<24).contains(index) else {
                throw LockboxError.invalidArgument("PCR \(index) does not exist; a TPM 2.0 has PCRs 0 to 23")
            }
            mask |= 1 << UInt32(index)
        }
        self.mask = mask
    }

    /// The PCRs in `mask`, as stored in a sealed blob (bits above 23 refused).
    public init?(mask: UInt32) {
        guard mask & ~0xFF_FFFF == 0 else { return nil }
        self.mask = mask
    }

    /// No PCRs: the policy does not depend on the machine's boot state.
    public static let none = PCRSelection(unchecked: 0)

    private init(unchecked mask: UInt32) { self.mask = mask }

    /// The selected PCR numbers, ascending.
    public var indices: [Int] { (0..<24).filter { mask & (1 << UInt32($0)) != 0 } }

    /// `sha256:7,14`, or `none`.
    public var description: String {
        mask == 0 ? "none" : "sha256:" + indices.map(String.init).joined(separator: ",")
    }

    var list: TPML_PCR_SELECTION {
        var list = TPML_PCR_SELECTION()
        list.count = 1
        list.pcrSelections.0.hash = TPM2_ALG_SHA256
        list.pcrSelections.0.sizeofSelect = 3
        list.pcrSelections.0.pcrSelect.0 = UInt8(mask & 0xFF)
        list.pcrSelections.0.pcrSelect.1 = UInt8(mask >> 8 & 0xFF)
        list.pcrSelections.0.pcrSelect.2 = UInt8(mask >> 16 & 0xFF)
        return list
    }
}
