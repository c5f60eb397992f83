import CSodium

/// Thin, typed wrappers over the libsodium calls Lockbox uses. Each names the C function it
/// wraps; each either succeeds or throws, with nothing half-done.
package enum Sodium {
    private static let initResult: Int32 = sodium_init()

    /// Calls `sodium_init` once per process (Swift runs a static initialiser exactly once).
    package static func ensureInitialized() {
        // sodium_init returns 0 (first call), 1 (already initialised) or -1 (no entropy source).
        precondition(initResult >= 0, "libsodium could not initialise (sodium_init failed): no usable entropy source")
    }

    // MARK: Random

    /// Random bytes from libsodium's CSPRNG (`randombytes_buf`). Not for secrets: use
    /// ``SecretBytes/random(count:)`` for those.
    package static func randomBytes(_ count: Int) -> [UInt8] {
        ensureInitialized()
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, count) }
        }
        return bytes
    }

    // MARK: AEAD: XChaCha20-Poly1305 (IETF)

    package static let aeadKeyBytes = Int(crypto_aead_xchacha20poly1305_ietf_keybytes())
    package static let aeadNonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_npubbytes())
    package static let aeadTagBytes = Int(crypto_aead_xchacha20poly1305_ietf_abytes())

    /// Encrypts `plaintext` and returns ciphertext‖tag.
    ///
    /// The corresponding C function is `crypto_aead_xchacha20poly1305_ietf_encrypt`.
    package static func seal(
        _ plaintext: UnsafeRawBufferPointer, additionalData: [UInt8], nonce: [UInt8], key: SecretBytes
    ) -> [UInt8] {
        ensureInitialized()
        precondition(nonce.count == aeadNonceBytes && key.count == aeadKeyBytes)
        var output = [UInt8](repeating: 0, count: plaintext.count + aeadTagBytes)
        var outputLength: UInt64 = 0
        let result = output.withUnsafeMutableBytes { out in
            key.withUnsafeBytes { k in
                crypto_aead_xchacha20poly1305_ietf_encrypt(
                    out.bytes, &outputLength,
                    plaintext.bytes, UInt64(plaintext.count),
                    additionalData, UInt64(additionalData.count),
                    nil, nonce, k.bytes)
            }
        }
        precondition(result == 0 && Int(outputLength) == output.count, "XChaCha20-Poly1305 encryption failed")
        return output
    }

    /// Verifies and decrypts ciphertext‖tag into secret storage, or returns `nil` if the tag does
    /// not verify (wrong key, or tampered ciphertext, nonce or associated data).
    ///
    /// The corresponding C function is `crypto_aead_xchacha20poly1305_ietf_decrypt`.
    package static func open(
        _ ciphertext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer, key: SecretBytes
    ) -> SecretBytes? {
        ensureInitialized()
        guard ciphertext.count >= aeadTagBytes, nonce.count == aeadNonceBytes, key.count == aeadKeyBytes else {
            return nil
        }
        struct TagMismatch: Error {}
        return try? SecretBytes(count: ciphertext.count - aeadTagBytes) { out in
            var length: UInt64 = 0
            let result = key.withUnsafeBytes { k in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    out.bytes, &length, nil,
                    ciphertext.bytes, UInt64(ciphertext.count),
                    additionalData.bytes, UInt64(additionalData.count),
                    nonce.bytes, k.bytes)
            }
            if result != 0 { throw TagMismatch() }
        }
    }

    // MARK: Password hashing: Argon2id

    package static let pwhashSaltBytes = Int(crypto_pwhash_saltbytes())
    package static let argon2id13 = Int32(crypto_pwhash_alg_argon2id13())

    /// Derives `length` key bytes from `passphrase` with Argon2id v1.3, or returns `nil` when
    /// libsodium refuses (out of memory, or limits outside its range).
    ///
    /// The corresponding C function is `crypto_pwhash`.
    package static func deriveKey(
        length: Int, passphrase: SecretBytes, salt: [UInt8], opsLimit: UInt64, memLimit: UInt64
    ) -> SecretBytes? {
        ensureInitialized()
        guard salt.count == pwhashSaltBytes else { return nil }
        struct Refused: Error {}
        return try? SecretBytes(count: length) { out in
            let result = passphrase.withUnsafeBytes { p in
                crypto_pwhash(
                    out.bytes, UInt64(length),
                    UnsafeRawPointer(p.bytes).assumingMemoryBound(to: CChar.self),
                    UInt64(p.count), salt, opsLimit, Int(memLimit), argon2id13)
            }
            if result != 0 { throw Refused() }
        }
    }

    // MARK: Generic hashing: BLAKE2b

    /// BLAKE2b of `input`, optionally keyed, `length` bytes long.
    ///
    /// The corresponding C function is `crypto_generichash`.
    package static func blake2b(_ input: UnsafeRawBufferPointer, length: Int = 32) -> [UInt8] {
        ensureInitialized()
        var out = [UInt8](repeating: 0, count: length)
        let result = crypto_generichash(
            &out, length, input.bytes, UInt64(input.count), nil, 0)
        precondition(result == 0, "BLAKE2b failed")
        return out
    }

    /// Keyed BLAKE2b into secret storage: used to derive a key-encryption key from a key file.
    ///
    /// The corresponding C function is `crypto_generichash` with a key.
    package static func keyedBlake2b(_ input: [UInt8], key: SecretBytes, length: Int = 32) -> SecretBytes {
        ensureInitialized()
        return SecretBytes(count: length) { out in
            let result = key.withUnsafeBytes { k in
                crypto_generichash(
                    out.bytes, length,
                    input, UInt64(input.count),
                    k.bytes, k.count)
            }
            precondition(result == 0, "keyed BLAKE2b failed")
        }
    }

    /// Constant-time comparison of two equal-length byte arrays (`sodium_memcmp`).
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return sodium_memcmp(a, b, a.count) == 0
    }
}

/// One byte of memory that libsodium's non-null pointer parameters can point at when a buffer is
/// empty (Swift gives empty buffers a `nil` base address). Nothing ever writes to it.
nonisolated(unsafe) private let emptyBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)

extension UnsafeRawBufferPointer {
    /// The bytes as a non-null `const unsigned char *`, as libsodium's parameters want.
    package var bytes: UnsafePointer<UInt8> {
        baseAddress.map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) } ?? UnsafePointer(emptyBuffer)
    }
}

extension UnsafeMutableRawBufferPointer {
    /// The bytes as a non-null `unsigned char *`, as libsodium's parameters want.
    package var bytes: UnsafeMutablePointer<UInt8> {
        baseAddress?.assumingMemoryBound(to: UInt8.self) ?? emptyBuffer
    }
}

// MARK: Password hashing strings (PHC format): PIN hashes

extension Sodium {
    /// An Argon2id PHC string (`$argon2id$v=19$m=…,t=…,p=1$salt$hash`) for `secret`, or `nil` if
    /// libsodium refuses (out of memory).
    ///
    /// The corresponding C function is `crypto_pwhash_argon2id_str`.
    package static func hashString(_ secret: SecretBytes, opsLimit: UInt64, memLimit: UInt64) -> String? {
        ensureInitialized()
        var out = [CChar](repeating: 0, count: Int(crypto_pwhash_argon2id_strbytes()))
        let result = secret.withUnsafeBytes { bytes in
            UnsafeRawPointer(bytes.bytes).withMemoryRebound(to: CChar.self, capacity: max(1, bytes.count)) {
                crypto_pwhash_argon2id_str(&out, $0, UInt64(bytes.count), opsLimit, Int(memLimit))
            }
        }
        guard result == 0 else { return nil }
        let length = out.firstIndex(of: 0) ?? out.count
        return String(decoding: out[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `secret` matches the PHC string, compared in constant time by libsodium; `nil`
    /// when the string is not a valid Argon2id hash Lockbox can check.
    ///
    /// The corresponding C function is `crypto_pwhash_argon2id_str_verify`.
    package static func verifyHashString(_ hash: String, _ secret: SecretBytes) -> Bool {
        ensureInitialized()
        guard hash.utf8.count < Int(crypto_pwhash_argon2id_strbytes()) else { return false }
        let buffer = phcBuffer(hash)
        return secret.withUnsafeBytes { bytes in
            UnsafeRawPointer(bytes.bytes).withMemoryRebound(to: CChar.self, capacity: max(1, bytes.count)) {
                crypto_pwhash_argon2id_str_verify(buffer, $0, UInt64(bytes.count)) == 0
            }
        }
    }

    /// Whether a PHC string was made with other parameters than these (so it should be rehashed).
    ///
    /// The corresponding C function is `crypto_pwhash_argon2id_str_needs_rehash`.
    package static func hashStringNeedsRehash(_ hash: String, opsLimit: UInt64, memLimit: UInt64) -> Bool {
        ensureInitialized()
        let buffer = phcBuffer(hash)
        return crypto_pwhash_argon2id_str_needs_rehash(buffer, opsLimit, Int(memLimit)) != 0
    }
}

/// A PHC string in the fixed-size, NUL-terminated buffer libsodium's `_str` functions read
/// (truncated if too long, which then fails verification rather than overreading).
private func phcBuffer(_ hash: String) -> [CChar] {
    var buffer = [CChar](repeating: 0, count: Int(crypto_pwhash_argon2id_strbytes()))
    for (index, byte) in hash.utf8.prefix(buffer.count - 1).enumerated() { buffer[index] = CChar(bitPattern: byte) }
    return buffer
}

extension UInt8 {
    /// The value of this ASCII hexadecimal digit (either case), or `nil` for any other byte. It
    /// branches on the digit, so it is for public text (the D-Bus address), never for secrets:
    /// key files are decoded by `sodium_hex2bin` (``KeyFile``).
    package var hexDigitValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension Array where Element == UInt8 {
    /// Lowercase hexadecimal, two digits a byte: for IDs and fingerprints, never for secrets.
    package var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
