import CLibSecret
import CSodium
import Lockbox

/// The client side of the Secret Service's encrypted session, algorithm
/// `dh-ietf1024-sha256-aes128-cbc-pkcs7` (Secret Service API, "Transfer of Secrets"), made by
/// Lockbox rather than libsecret (issue 18: libsecret's exchange, through libgcrypt, was three
/// quarters of the instructions of a lookup).
///
/// - The exchange: Diffie-Hellman in RFC 2409's 1024-bit MODP group with generator 2, fixed by the
///   protocol: a group of about 80 bits' strength, whose one prime is the obvious target of a
///   precomputation (the 2015 "Logjam" paper), so the session guards secrets against processes
///   that watch the bus, not against a recording and large resources; nothing in the Secret
///   Service authenticates the provider. The private exponent is 256 random bits, not libsecret's
///   1023: the prime is safe (p = 2q + 1, q prime; 2 generates the subgroup of order q), so a short
///   exponent leaves only the attacks on the whole group, and 256 bits is well over twice the
///   group's strength. The provider's public value must lie in 2 ... p-2.
/// - The key: HKDF-SHA-256 (RFC 5869) of the shared value, no salt, no info, 16 bytes. The shared
///   value is the prime's length, big-endian, as libsecret and gnome-keyring (since 2017) use it;
///   some providers strip its leading zero bytes instead (KeePassXC's older libgcrypt session), so
///   a shared value that starts with a zero byte is never used: the client closes that session
///   and opens another (one exchange in 256), and both conventions agree on every key Lockbox uses.
/// - The secret: AES-128-CBC with a random IV per secret and PKCS#7 padding.
///
/// The exponent, the shared value, the key and every plaintext buffer are ``SecretBytes``
/// (guarded memory, wiped on release); the C code wipes its own intermediates.
package enum SessionCrypto {
    package static let algorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"

    /// Whether this process can make the session itself (the processor's AES instructions);
    /// otherwise the client lets libsecret make it.
    package static var isAvailable: Bool { lockbox_aes128_available() != 0 }

    /// A fresh private exponent and the public value to send (`OpenSession`'s input): big-endian,
    /// without leading zero bytes, as libsecret sends it.
    package struct KeyPair {
        package let exponent: SecretBytes
        package let publicValue: [UInt8]
    }

    package static func makeKeyPair() -> KeyPair {
        while true {
            let exponent = SecretBytes.random(count: LOCKBOX_DH_EXPONENT_BYTES)
            var publicValue = [UInt8](repeating: 0, count: LOCKBOX_DH_BYTES)
            let status = exponent.withUnsafeBytes { bytes in
                lockbox_dh_public(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), &publicValue)
            }
            if status == 0 { return KeyPair(exponent: exponent, publicValue: Array(publicValue.drop { $0 == 0 })) }
            // An all-zero exponent (one chance in 2^256): draw again.
        }
    }

    /// The session key from the provider's public value, or `nil` when the shared value starts
    /// with a zero byte (see the type's notes: open another session). Throws when the provider's
    /// value is not a usable group element.
    package static func sessionKey(exponent: SecretBytes, providerValue: [UInt8]) throws -> SecretBytes? {
        let shared = try SecretBytes(count: LOCKBOX_DH_BYTES) { out in
            let status = exponent.withUnsafeBytes { bytes in
                lockbox_dh_shared(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), providerValue, providerValue.count,
                                  out.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
            if status != 0 {
                throw LockboxError.secretServiceFailed(operation: "opening an encrypted session",
                                                       detail: "the provider's public key is not a valid Diffie-Hellman value")
            }
        }
        let leadingZero = shared.withUnsafeBytes { $0.first == 0 }
        if leadingZero { return nil }
        return shared.withUnsafeBytes { hkdfSHA256(inputKey: $0, length: 16) }
    }

    /// HKDF-SHA-256 (RFC 5869) with an empty salt and no info: `length` ≤ 32 bytes.
    package static func hkdfSHA256(inputKey: UnsafeRawBufferPointer, length: Int) -> SecretBytes {
        precondition(length <= Int(crypto_auth_hmacsha256_BYTES), "one HKDF block")
        Sodium.ensureInitialized()
        let pseudorandomKey = SecretBytes(count: Int(crypto_auth_hmacsha256_BYTES)) { out in
            var state = crypto_auth_hmacsha256_state()
            defer { sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size) }
            // An empty salt is HashLen zero bytes (RFC 5869 section 2.2); HMAC pads its key with
            // zeros, so the empty key is the same.
            var emptySalt: UInt8 = 0
            crypto_auth_hmacsha256_init(&state, &emptySalt, 0)
            crypto_auth_hmacsha256_update(&state, inputKey.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(inputKey.count))
            guard let target = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
            crypto_auth_hmacsha256_final(&state, target)
        }
        let block = SecretBytes(count: Int(crypto_auth_hmacsha256_BYTES)) { out in
            var state = crypto_auth_hmacsha256_state()
            defer { sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size) }
            pseudorandomKey.withUnsafeBytes { key in
                guard let start = key.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
                crypto_auth_hmacsha256_init(&state, start, key.count)
            }
            var counter: UInt8 = 1  // T(1) = HMAC(PRK, info || 0x01), info empty
            crypto_auth_hmacsha256_update(&state, &counter, 1)
            guard let target = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
            crypto_auth_hmacsha256_final(&state, target)
        }
        return block.withUnsafeBytes { SecretBytes(copying: $0.prefix(length)) }
    }

    /// `secret` encrypted for the session: a random IV and the AES-128-CBC ciphertext of the
    /// PKCS#7-padded secret.
    package static func encrypt(_ secret: SecretBytes, key: SecretBytes) throws -> (iv: [UInt8], ciphertext: [UInt8]) {
        let iv = Sodium.randomBytes(16)
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
                lockbox_aes128_cbc_encrypt(keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), iv,
                                           plain.baseAddress?.assumingMemoryBound(to: UInt8.self), plain.count, &ciphertext)
            }
        }
        guard status == 0 else {
            throw LockboxError.secretServiceFailed(operation: "encrypting a secret", detail: "AES is not available on this processor")
        }
        return (iv, ciphertext)
    }

    /// The secret in a session reply (`parameters` = the IV): AES-128-CBC decryption and a strict
    /// PKCS#7 check. A reply that fails either is refused, never returned as data.
    package static func decrypt(iv: [UInt8], ciphertext: [UInt8], key: SecretBytes) throws -> SecretBytes {
        let invalid = LockboxError.secretServiceFailed(
            operation: "reading a secret", detail: "the provider's encrypted secret could not be decrypted (a session mismatch or a damaged reply)")
        guard iv.count == 16, !ciphertext.isEmpty, ciphertext.count % 16 == 0 else { throw invalid }
        let padded = try SecretBytes(count: ciphertext.count) { out in
            let status = key.withUnsafeBytes { keyBytes -> Int32 in
                lockbox_aes128_cbc_decrypt(keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), iv, ciphertext, ciphertext.count,
                                           out.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
            if status != 0 { throw invalid }
        }
        let length: Int? = padded.withUnsafeBytes { bytes in
            guard let last = bytes.last, last >= 1, last <= 16 else { return nil }
            let padding = Int(last)
            // Every padding byte must equal the padding length.
            var difference: UInt8 = 0
            for index in (bytes.count - padding)..<bytes.count { difference |= bytes[index] ^ last }
            return difference == 0 ? bytes.count - padding : nil
        }
        guard let length else { throw invalid }
        return padded.withUnsafeBytes { SecretBytes(copying: $0.prefix(length)) }
    }
}
