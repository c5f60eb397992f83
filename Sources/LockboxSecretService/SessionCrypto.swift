import CLibcrypto
import Lockbox

/// The client side of the Secret Service's encrypted session, algorithm
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7` (Secret Service API, "Transfer of Secrets"), made by
/// Lockbox with OpenSSL's libcrypto (CLibcrypto.h, loaded with dlopen on the first session)
/// rather than through libsecret, which would load GIO, GLib and libgcrypt.
///
/// - The exchange: Diffie-Hellman in RFC 2409's 1024-bit MODP group with generator 2, fixed by the
///   protocol: a group of about 80 bits' strength, whose one prime is the obvious target of a
///   precomputation (the 2015 "Logjam" paper), so the session guards secrets against processes
///   that watch the bus, not against a recording and large resources; nothing in the Secret
///   Service authenticates the provider. libcrypto's `BN_mod_exp_mont_consttime` does the
///   exponentiation. The private exponent is 256 random bits with a nonzero first byte, not
///   libsecret's 1023: the prime is safe (p = 2q + 1, q prime; 2 generates the subgroup of order
///   q), so a short exponent leaves only the attacks on the whole group, and 256 bits is well over
///   twice the group's strength. The provider's public value must lie in 2 ... p-2.
/// - The key: HKDF-SHA-256 (RFC 5869; the "HKDF" of libcrypto's default provider) of the shared value, no salt,
///   no info, 16 bytes. The shared value is the prime's length, big-endian, as libsecret and
///   gnome-keyring (since 2017) use it; some providers strip its leading zero bytes instead
///   (KeePassXC's older libgcrypt session), so a shared value that starts with a zero byte is never
///   used: the client closes that session and opens another (one exchange in 256), and both
///   conventions agree on every key Lockbox uses.
/// - The secret: AES-128-CBC (libcrypto's default provider, padding off) with a random IV per secret, and
///   PKCS#7 padding added here and checked in constant time (`lockbox_pkcs7_padding_length`); a
///   reply whose padding is wrong is a protocol error like any other undecryptable reply.
///
/// The exponent, the shared value, the key and every plaintext buffer are ``SecretBytes``
/// (guarded memory, wiped on release); libcrypto's intermediates are wiped by the C code
/// (`BN_clear_free`, `OPENSSL_cleanse`, and the provider's `freectx` of the KDF and cipher contexts).
package enum SessionCrypto {
    package static let algorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"

    /// Loads libcrypto (once per process). A system without it (Debian's `libssl3`) is reported
    /// as a failure to open the session, with the loader's reason.
    package static func loadLibcrypto() throws {
        if lockbox_libcrypto_is_loaded() != 0 { return }
        var message = [CChar](repeating: 0, count: 512)
        if lockbox_libcrypto_load(&message, message.count) == 0 {
            throw LockboxError.secretServiceFailed(operation: "opening an encrypted session", detail: text(message))
        }
    }

    /// Starts loading libcrypto and looking up its HKDF and AES-128-CBC on a thread of its own, so
    /// that the work overlaps the bus round trips before the key exchange; returns at once. Called
    /// by operations that move a secret; later calls do nothing.
    package static func preload() {
        lockbox_libcrypto_preload()
    }

    /// libcrypto loaded with the settings of a program that owns its process (process-wide; see
    /// ``SecretServiceStore/libcryptoProcessIsOurs()``).
    package static func processIsOurs() {
        lockbox_libcrypto_process_is_ours()
    }

    private static func text(_ message: [CChar]) -> String {
        String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A fresh private exponent and the public value to send (`OpenSession`'s input): big-endian,
    /// without leading zero bytes, as libsecret sends it.
    package struct KeyPair {
        package let exponent: SecretBytes
        package let publicValue: [UInt8]
    }

    /// A new key pair. Throws when libcrypto cannot be loaded or fails.
    package static func makeKeyPair() throws -> KeyPair {
        while true {
            let exponent = SecretBytes.random(count: Int(LOCKBOX_DH_EXPONENT_BYTES))
            // A zero first byte (one chance in 256): draw again, so every exponent used is 32
            // significant bytes.
            guard let publicValue = try publicValue(exponent: exponent) else { continue }
            return KeyPair(exponent: exponent, publicValue: Array(publicValue.drop { $0 == 0 }))
        }
    }

    /// 2^exponent mod p, 128 bytes (leading zeros kept), or `nil` for an exponent whose first
    /// byte is zero (not used: see ``makeKeyPair()``).
    package static func publicValue(exponent: SecretBytes) throws -> [UInt8]? {
        try loadLibcrypto()
        guard exponent.count == Int(LOCKBOX_DH_EXPONENT_BYTES) else { return nil }
        var value = [UInt8](repeating: 0, count: Int(LOCKBOX_DH_BYTES))
        let status = exponent.withUnsafeBytes { bytes in
            lockbox_dh_public(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), &value)
        }
        switch status {
        case 0: return value
        case -1: return nil
        default: throw libcryptoFailed("opening an encrypted session")
        }
    }

    /// The group's prime as libcrypto holds it (`BN_get_rfc2409_prime_1024`), for the
    /// known-answer tests.
    package static func groupPrime() throws -> [UInt8] {
        try loadLibcrypto()
        var prime = [UInt8](repeating: 0, count: Int(LOCKBOX_DH_BYTES))
        guard lockbox_dh_prime(&prime) == 0 else { throw libcryptoFailed("reading the group's prime") }
        return prime
    }

    /// providerValue^exponent mod p, 128 bytes (leading zeros kept). Throws when the provider's
    /// value is not a usable group element (outside 2 ... p-2) or the exponent is not one
    /// ``makeKeyPair()`` makes.
    package static func sharedValue(exponent: SecretBytes, providerValue: [UInt8]) throws -> SecretBytes {
        try loadLibcrypto()
        return try SecretBytes(count: Int(LOCKBOX_DH_BYTES)) { out in
            let status = exponent.withUnsafeBytes { bytes -> Int32 in
                guard bytes.count == Int(LOCKBOX_DH_EXPONENT_BYTES) else { return -1 }
                return lockbox_dh_shared(
                    bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), providerValue, providerValue.count,
                    out.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
            switch status {
            case 0: break
            case -1:
                throw LockboxError.secretServiceFailed(
                    operation: "opening an encrypted session",
                    detail: "the provider's public key is not a valid Diffie-Hellman value")
            default: throw libcryptoFailed("opening an encrypted session")
            }
        }
    }

    /// The session key from the provider's public value, or `nil` when the shared value starts
    /// with a zero byte (see the type's notes: open another session). Throws when the provider's
    /// value is not a usable group element.
    package static func sessionKey(exponent: SecretBytes, providerValue: [UInt8]) throws -> SecretBytes? {
        let shared = try sharedValue(exponent: exponent, providerValue: providerValue)
        let leadingZero = shared.withUnsafeBytes { $0.first == 0 }
        if leadingZero { return nil }
        return try shared.withUnsafeBytes { try hkdfSHA256(inputKey: $0, length: 16) }
    }

    /// HKDF-SHA-256 (RFC 5869), `length` bytes (1 ... 8160); the session uses an empty salt and no
    /// info.
    package static func hkdfSHA256(
        salt: [UInt8] = [], inputKey: UnsafeRawBufferPointer, info: [UInt8] = [],
        length: Int
    ) throws -> SecretBytes {
        try loadLibcrypto()
        return try SecretBytes(count: length) { out in
            let status = lockbox_hkdf_sha256(
                salt, salt.count, inputKey.baseAddress?.assumingMemoryBound(to: UInt8.self), inputKey.count,
                info, info.count, out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count)
            if status != 0 { throw libcryptoFailed("deriving the session key") }
        }
    }

    /// `secret` encrypted for the session: a random IV and the AES-128-CBC ciphertext of the
    /// PKCS#7-padded secret.
    package static func encrypt(_ secret: SecretBytes, key: SecretBytes) throws -> (iv: [UInt8], ciphertext: [UInt8]) {
        let iv = Sodium.randomBytes(16)
        return (iv, try encrypt(secret, key: key, iv: iv))
    }

    /// The AES-128-CBC ciphertext of the PKCS#7-padded `secret` with this IV (16 bytes).
    package static func encrypt(_ secret: SecretBytes, key: SecretBytes, iv: [UInt8]) throws -> [UInt8] {
        try loadLibcrypto()
        let padding = 16 - secret.count % 16
        let padded = SecretBytes(count: secret.count + padding) { out in
            secret.withUnsafeBytes { bytes in
                if let source = bytes.baseAddress, let target = out.baseAddress, bytes.count > 0 {
                    target.copyMemory(from: source, byteCount: bytes.count)
                }
            }
            for index in secret.count..<out.count { out[index] = UInt8(padding) }
        }
        var ciphertext = [UInt8](repeating: 0, count: padded.count)
        let status = key.withUnsafeBytes { keyBytes in
            padded.withUnsafeBytes { plain -> Int32 in
                guard keyBytes.count == 16, iv.count == 16 else { return -1 }
                return lockbox_aes128_cbc_encrypt(
                    keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), iv,
                    plain.baseAddress?.assumingMemoryBound(to: UInt8.self), plain.count, &ciphertext)
            }
        }
        guard status == 0 else { throw libcryptoFailed("encrypting a secret") }
        return ciphertext
    }

    /// The secret in a session reply (`parameters` = the IV): AES-128-CBC decryption and a strict,
    /// constant-time PKCS#7 check. A reply that fails either is refused with one error, never
    /// returned as data.
    package static func decrypt(iv: [UInt8], ciphertext: [UInt8], key: SecretBytes) throws -> SecretBytes {
        let invalid = LockboxError.secretServiceFailed(
            operation: "reading a secret",
            detail: "the provider's encrypted secret could not be decrypted (a session mismatch or a damaged reply)")
        guard iv.count == 16, !ciphertext.isEmpty, ciphertext.count % 16 == 0, key.count == 16 else { throw invalid }
        try loadLibcrypto()
        let padded = try SecretBytes(count: ciphertext.count) { out in
            let status = key.withUnsafeBytes { keyBytes -> Int32 in
                lockbox_aes128_cbc_decrypt(
                    keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), iv, ciphertext, ciphertext.count,
                    out.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
            if status == -2 { throw libcryptoFailed("reading a secret") }
            if status != 0 { throw invalid }
        }
        let padding = padded.withUnsafeBytes { bytes in
            lockbox_pkcs7_padding_length(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        guard padding != 0 else { throw invalid }
        return padded.withUnsafeBytes { SecretBytes(copying: $0.prefix($0.count - padding)) }
    }

    /// A libcrypto call that failed after loading: a missing algorithm (with the loader's reason)
    /// or an allocation.
    private static func libcryptoFailed(_ operation: String) -> LockboxError {
        var message = [CChar](repeating: 0, count: 512)
        if lockbox_libcrypto_algorithms(&message, message.count) == 0 {
            return .secretServiceFailed(operation: operation, detail: text(message))
        }
        return .secretServiceFailed(operation: operation, detail: "libcrypto failed")
    }
}
