import CLibcrypto
import Lockbox
import LockboxSecretService

/// The Secret Service session's vectors (HKDF-SHA-256, AES-128-CBC with PKCS#7, the RFC 2409
/// MODP group), run through ``SessionCrypto`` and the libcrypto functions it calls: the code the
/// client uses for every secret that crosses the bus.
extension KnownAnswerTests {
    // MARK: HKDF-SHA-256

    static func hkdf(_ fields: inout VectorFields, id: String, into sink: inout ResultSink) {
        sink.check(id, expectation: "match") {
            let salt = try fields.hex("salt_hex")
            let key = try fields.hex("ikm_hex")
            let info = try fields.hex("info_hex")
            let expected = try fields.hex("okm_hex")
            try fields.finish()
            guard !expected.isEmpty else { throw VectorError("okm_hex must not be empty") }
            let okm = try key.withUnsafeBytes {
                try SessionCrypto.hkdfSHA256(salt: salt, inputKey: $0, info: info, length: expected.count)
            }.withUnsafeBytes { Array($0) }
            guard okm == expected else { throw VectorError("HKDF gave \(okm.vectorHex), expected \(expected.vectorHex)") }
            return "libcrypto's HKDF gave the \(expected.count)-byte okm"
        }
    }

    // MARK: AES-128-CBC

    static func aesCBC(_ fields: inout VectorFields, id: String, into sink: inout ResultSink) {
        sink.check(id, expectation: (try? fields.string("expect")) == "reject" ? "reject" : "match") {
            let expectation = try fields.string("expect")
            let padding = try fields.string("padding")
            let key = try fields.hex("key_hex")
            let iv = try fields.hex("iv_hex")
            let ciphertext = try fields.hex("ciphertext_hex")
            guard key.count == 16, iv.count == 16 else { throw VectorError("the key and the IV must be 16 bytes") }
            switch (expectation, padding) {
            case ("valid", "none"):
                let direction = try fields.string("direction")
                let plaintext = try fields.hex("plaintext_hex")
                try fields.finish()
                guard plaintext.count == ciphertext.count, plaintext.count % 16 == 0, !plaintext.isEmpty else {
                    throw VectorError("without padding, plaintext and ciphertext are the same whole number of blocks")
                }
                var out = [UInt8](repeating: 0, count: plaintext.count)
                switch direction {
                case "encrypt":
                    guard lockbox_aes128_cbc_encrypt(key, iv, plaintext, plaintext.count, &out) == 0 else {
                        throw VectorError("encryption failed")
                    }
                    guard out == ciphertext else {
                        throw VectorError("libcrypto's AES-128-CBC gave \(out.vectorHex), expected \(ciphertext.vectorHex)")
                    }
                    return "libcrypto's AES-128-CBC encryption gave the \(ciphertext.count)-byte ciphertext"
                case "decrypt":
                    guard lockbox_aes128_cbc_decrypt(key, iv, ciphertext, ciphertext.count, &out) == 0 else {
                        throw VectorError("decryption failed")
                    }
                    guard out == plaintext else {
                        throw VectorError("libcrypto's AES-128-CBC gave \(out.vectorHex), expected \(plaintext.vectorHex)")
                    }
                    return "libcrypto's AES-128-CBC decryption gave the \(plaintext.count)-byte plaintext"
                default: throw VectorError("direction must be encrypt or decrypt, not \(direction)")
                }
            case ("valid", "pkcs7"):
                guard try fields.string("direction") == "both" else { throw VectorError("a pkcs7 vector is checked both ways") }
                let plaintext = try fields.hex("plaintext_hex")
                try fields.finish()
                let sealed = try SessionCrypto.encrypt(SecretBytes(copying: plaintext), key: SecretBytes(copying: key), iv: iv)
                guard sealed == ciphertext else {
                    throw VectorError("SessionCrypto.encrypt gave \(sealed.vectorHex), expected \(ciphertext.vectorHex)")
                }
                let opened = try SessionCrypto.decrypt(iv: iv, ciphertext: ciphertext, key: SecretBytes(copying: key))
                guard opened.withUnsafeBytes({ Array($0) }) == plaintext else {
                    throw VectorError("SessionCrypto.decrypt did not give the plaintext back")
                }
                return
                    "SessionCrypto.encrypt gave the ciphertext (PKCS#7, \(plaintext.count) bytes padded to \(ciphertext.count)); decrypt gave the plaintext back"
            case ("reject", "pkcs7"):
                try fields.finish()
                do {
                    _ = try SessionCrypto.decrypt(iv: iv, ciphertext: ciphertext, key: SecretBytes(copying: key))
                } catch LockboxError.secretServiceFailed(operation: "reading a secret", _) {
                    return "SessionCrypto.decrypt refused it as an undecryptable reply"
                }
                throw VectorError("SessionCrypto.decrypt accepted bad padding")
            default:
                throw VectorError("expect/padding must be valid/none, valid/pkcs7 or reject/pkcs7, not \(expectation)/\(padding)")
            }
        }
    }

    // MARK: Diffie-Hellman in RFC 2409's 1024-bit MODP group

    static func modp(_ fields: inout VectorFields, id: String, into sink: inout ResultSink) {
        sink.check(id, expectation: (try? fields.string("expect")) == "reject" ? "reject" : "match") {
            switch try fields.string("expect") {
            case "prime":
                let prime = try fields.hex("prime_hex")
                guard try fields.integer("generator") == 2 else { throw VectorError("the session's generator is 2") }
                try fields.finish()
                let held = try SessionCrypto.groupPrime()
                guard held == prime else { throw VectorError("libcrypto's BN_get_rfc2409_prime_1024 is \(held.vectorHex)") }
                return "libcrypto's BN_get_rfc2409_prime_1024 is the RFC's prime"
            case "valid":
                let exponent = SecretBytes(copying: try fields.hex("exponent_hex"))
                let publicValue = try fields.hex("public_hex")
                let peer = try fields.hex("peer_public_hex")
                let shared = try fields.hex("shared_hex")
                let sessionKey = try fields.hex("session_key_hex")
                try fields.finish()
                let computed = try SessionCrypto.publicValue(exponent: exponent)
                guard computed == publicValue else { throw VectorError("2^exponent gave \(computed?.vectorHex ?? "nothing")") }
                let sharedValue = try SessionCrypto.sharedValue(exponent: exponent, providerValue: peer).withUnsafeBytes { Array($0) }
                guard sharedValue == shared else { throw VectorError("peer^exponent gave \(sharedValue.vectorHex)") }
                let key = try SessionCrypto.sessionKey(exponent: exponent, providerValue: peer)?.withUnsafeBytes { Array($0) }
                guard key == sessionKey else { throw VectorError("the session key is \(key?.vectorHex ?? "none")") }
                return "BN_mod_exp_mont_consttime gave the public and shared values; HKDF the session key"
            case "reject":
                let exponent = SecretBytes(copying: try fields.hex("exponent_hex"))
                let peer = try fields.hex("peer_public_hex")
                try fields.finish()
                do {
                    _ = try SessionCrypto.sharedValue(exponent: exponent, providerValue: peer)
                } catch LockboxError.secretServiceFailed(operation: "opening an encrypted session", let detail)
                    where detail.contains("not a valid")
                {
                    return "SessionCrypto refused the peer value"
                }
                throw VectorError("SessionCrypto accepted a peer value outside 2 ... p-2")
            case let other:
                throw VectorError("expect must be prime, valid or reject, not \(other)")
            }
        }
    }
}
