import CLibcrypto
import Foundation
import LockboxSecretService
import Testing

@testable import Lockbox
@testable import LockboxTestSupport

/// Lockbox's own Secret Service session (`dh-ietf1024-sha256-aes128-cbc-pkcs7`,
/// SessionCrypto.swift over libcrypto, CLibcrypto.h) against published and independently
/// computed values; the keyring tests below show gnome-keyring and libsecret agree with it.
@Suite("Secret Service session crypto")
struct SessionCryptoTests {
    static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return result
    }

    static func hex(_ secret: SecretBytes) -> String {
        secret.withUnsafeBytes { Array($0).hexString }
    }

    // Computed with Python's pow() over RFC 2409's second Oakley group (generator 2), and its
    // hmac module for the key: exponent 0x0102…20; the provider's value 2^(SHA-256("provider")
    // repeated four times, mod p).
    static let exponent = bytes("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20")
    static let publicValue = bytes(
        "457120764f3a1e6fd58103e41a4093a6c8bc1d97cb8759de41c21afdd2d3048a5ef3d88ce24aa6ba4fe30bcfb0b0f75abf1a8aeaff3723f1bf53740c902005e1"
            + "199fabad7c538e94a7034fd585339a02f3634893f748929d2a7257643e398130541ae64124c17d4507a97f1cbebeb7b933642b8df479eb59e36cfeffbf1671dd"
    )
    static let providerValue = bytes(
        "55dcbb034ec0b2b68a2b4932c7730633cb6d951e545d3680ec452724d71cfc22c0f98485398108ed9c3b37ae8c9473b3a8c4583faf7f50520a8a2ffbc8445276"
            + "b434ac8bebcbb0f0fc894a7c9229804c60186fec72f5d7664a1b26bbc970aaa5d40b5f012be8efd2244fa69018da4c20d4c1f05a711c178fb38249375a3adfdc"
    )
    static let sharedValue = bytes(
        "aceddabd3d00f44a019a9d603282196a8ecee7c53df857bf144ec592b651519561f18535b4a678a2a11f8681e47bff231d93c05c99c99b4ffa1a0425c60e691e"
            + "c2853adf5bf027e1f8bacd5fac443f70633ae09266dc88b219e2109cd16f538a04e70a3c16e3277cf9a05f106c70df46f5f58a817f267b8695a0da496bac40e0"
    )
    static let sessionKey = "3ab5b9d58587f55227f010718ffa4278"
    /// A provider value whose shared value with `exponent` starts with a zero byte.
    static let zeroLeadingProviderValue = bytes(
        "ae83e86409beaae3fcd3b4a047e891c407b6ff9922b98f9749818a7be158bd6b1c4b31b6ca27a94f8b41b6e09a208b0bf01d1bef96428d3795184d2cbdab4fec"
            + "f7dcc144522c5fe5b5f9c301cf818a74d28524155faf1074a3e802d168d474925bb051230b864d61cdeb46e5690ae4bae04fb1da3a0c63c98aaaf9086bb29823"
    )
    static let prime = bytes(
        "ffffffffffffffffc90fdaa22168c234c4c6628b80dc1cd129024e088a67cc74020bbea63b139b22514a08798e3404ddef9519b3cd3a431b302b0a6df25f1437"
            + "4fe1356d6d51c245e485b576625e7ec6f44c42e9a637ed6b0bff5cb6f406b7edee386bfb5a899fa5ae9f24117c4b1fe649286651ece65381ffffffffffffffff"
    )

    @Test("the public value and the shared value match independently computed ones")
    func diffieHellmanValues() {
        var out = [UInt8](repeating: 0, count: 128)
        #expect(lockbox_dh_public(Self.exponent, &out) == 0)
        #expect(out == Self.publicValue)
        #expect(lockbox_dh_shared(Self.exponent, Self.providerValue, Self.providerValue.count, &out) == 0)
        #expect(out == Self.sharedValue)
        // Leading zero bytes on the provider's value change nothing.
        let padded = [0, 0, 0] + Self.providerValue
        #expect(lockbox_dh_shared(Self.exponent, padded, padded.count, &out) == 0)
        #expect(out == Self.sharedValue)
    }

    @Test("values that are not usable group elements are refused, as is a zero exponent")
    func refusedValues() {
        var out = [UInt8](repeating: 0, count: 128)
        var primeMinusOne = Self.prime
        primeMinusOne[127] -= 1
        for refused in [[0], [1], primeMinusOne, Self.prime, [UInt8](repeating: 0xFF, count: 128), [1] + [UInt8](repeating: 0, count: 128)]
        {
            #expect(lockbox_dh_shared(Self.exponent, refused, refused.count, &out) == -1)
        }
        let two: [UInt8] = [2]
        #expect(lockbox_dh_shared(Self.exponent, two, 1, &out) == 0, "2 is the smallest value allowed")
        let zero = [UInt8](repeating: 0, count: 32)
        #expect(lockbox_dh_public(zero, &out) == -1)
        #expect(lockbox_dh_shared(zero, Self.providerValue, Self.providerValue.count, &out) == -1)
        #expect(throws: LockboxError.self) {
            _ = try SessionCrypto.sessionKey(exponent: SecretBytes(copying: Self.exponent), providerValue: [1])
        }
    }

    @Test("the session key is HKDF-SHA-256 of the shared value; a zero-led shared value yields none")
    func sessionKeyDerivation() throws {
        let key = try #require(
            try SessionCrypto.sessionKey(exponent: SecretBytes(copying: Self.exponent), providerValue: Self.providerValue))
        #expect(Self.hex(key) == Self.sessionKey)
        #expect(
            try SessionCrypto.sessionKey(exponent: SecretBytes(copying: Self.exponent), providerValue: Self.zeroLeadingProviderValue) == nil
        )
        // RFC 5869 test case 3 (SHA-256, no salt, no info), the first 32 bytes.
        let okm = try [UInt8](repeating: 0x0B, count: 22).withUnsafeBytes { try SessionCrypto.hkdfSHA256(inputKey: $0, length: 32) }
        #expect(Self.hex(okm) == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d")
    }

    @Test("a key pair's public value is 2^exponent, sent without leading zeros")
    func keyPair() throws {
        let pair = try SessionCrypto.makeKeyPair()
        #expect(pair.exponent.count == 32)
        #expect(pair.publicValue.first != 0 && pair.publicValue.count <= 128)
        var expected = [UInt8](repeating: 0, count: 128)
        _ = pair.exponent.withUnsafeBytes { lockbox_dh_public($0.baseAddress?.assumingMemoryBound(to: UInt8.self), &expected) }
        #expect(Array(expected.drop { $0 == 0 }) == pair.publicValue)
        #expect(try SessionCrypto.makeKeyPair().publicValue != pair.publicValue, "a fresh exponent each time")
    }

    @Test("AES-128 matches FIPS 197 and SP 800-38A's CBC vectors")
    func aesVectors() {
        // FIPS 197 appendix C.1: one block, which is CBC with a zero IV.
        var out = [UInt8](repeating: 0, count: 64)
        #expect(
            lockbox_aes128_cbc_encrypt(
                Self.bytes("000102030405060708090a0b0c0d0e0f"), [UInt8](repeating: 0, count: 16),
                Self.bytes("00112233445566778899aabbccddeeff"), 16, &out) == 0)
        #expect(Array(out.prefix(16)) == Self.bytes("69c4e0d86a7b0430d8cdb78070b4c55a"))
        // SP 800-38A F.2.1 / F.2.2, CBC-AES128.
        let key = Self.bytes("2b7e151628aed2a6abf7158809cf4f3c")
        let iv = Self.bytes("000102030405060708090a0b0c0d0e0f")
        let plain = Self.bytes(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52ef"
                + "f69f2445df4f9b17ad2b417be66c3710")
        let cipher = Self.bytes(
            "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b273bed6b8e3c1743b7116e69e22229516"
                + "3ff1caa1681fac09120eca307586e1a7")
        #expect(lockbox_aes128_cbc_encrypt(key, iv, plain, 64, &out) == 0)
        #expect(out == cipher)
        #expect(lockbox_aes128_cbc_decrypt(key, iv, cipher, 64, &out) == 0)
        #expect(out == plain)
        #expect(lockbox_aes128_cbc_encrypt(key, iv, plain, 15, &out) == -1, "not a whole number of blocks")
    }

    @Test("the session runs on libcrypto 3, loaded on first use; the group is libcrypto's RFC 2409 prime")
    func libcryptoDoesTheSession() throws {
        _ = try SessionCrypto.makeKeyPair()
        #expect(lockbox_libcrypto_is_loaded() == 1)
        #expect(LibraryVersions.libcrypto.hasPrefix("OpenSSL 3."), "\(LibraryVersions.libcrypto)")
        #expect(try SessionCrypto.groupPrime() == Self.prime)
        // HKDF lengths libcrypto refuses (0, more than 255 blocks) are refused here too.
        var out = [UInt8](repeating: 0, count: 8161)
        #expect(lockbox_hkdf_sha256(nil, 0, Self.exponent, Self.exponent.count, nil, 0, &out, 0) == -1)
        #expect(lockbox_hkdf_sha256(nil, 0, Self.exponent, Self.exponent.count, nil, 0, &out, 8161) == -1)
        #expect(lockbox_hkdf_sha256(nil, 0, Self.exponent, Self.exponent.count, nil, 0, &out, 8160) == 0)
    }

    @Test("openssl.cnf does not reach the session: with a configuration that asks for FIPS-only algorithms, the session vectors still pass")
    func opensslConfigurationDoesNotReachTheSession() throws {
        // Applied to OpenSSL's default library context, this makes every fetch there fail (no
        // FIPS provider is installed); the session fetches from a library context of its own.
        let folder = try TemporaryFolder()
        let configuration = folder.file("openssl.cnf").string
        try Data(
            """
            openssl_conf = openssl_init
            [openssl_init]
            alg_section = algorithm_sect
            [algorithm_sect]
            default_properties = fips=yes

            """.utf8
        ).write(to: URL(fileURLWithPath: configuration))
        let result = try runLockbox(["selftest", "--json"], environment: ["OPENSSL_CONF": configuration])
        #expect(result.status == 0, "\(result.stdoutString)\(result.stderr)")
        let results = result.jsonObject?["results"] as? [[String: Any]] ?? []
        let session = results.filter { ["hkdf-sha256", "aes-128-cbc", "dh-modp1024"].contains($0["algorithm"] as? String ?? "") }
        #expect(session.count == 31 && session.allSatisfy { $0["passed"] as? Bool == true })
    }

    @Test("the PKCS#7 check: every valid length, and every kind of bad padding, in one or two blocks")
    func paddingCheck() {
        for blocks in [1, 2] {
            for padding in 0...18 {
                var data = [UInt8](repeating: 0xA5, count: 16 * blocks)
                for index in 0..<min(padding, 16) { data[data.count - 1 - index] = UInt8(padding) }
                data[data.count - 1] = UInt8(padding)
                let valid = (1...16).contains(padding)
                #expect(lockbox_pkcs7_padding_length(data, data.count) == (valid ? padding : 0), "\(blocks) blocks, padding \(padding)")
                if padding >= 2 && padding <= 16 {
                    data[data.count - padding] ^= 0x01  // the first padding byte differs
                    #expect(lockbox_pkcs7_padding_length(data, data.count) == 0, "\(blocks) blocks, padding \(padding), one byte off")
                }
            }
        }
        #expect(lockbox_pkcs7_padding_length([UInt8](repeating: 1, count: 15), 15) == 0, "not whole blocks")
        #expect(lockbox_pkcs7_padding_length([], 0) == 0)
    }

    @Test("secrets of every length round-trip with PKCS#7; damaged replies are refused")
    func paddingRoundTrip() throws {
        let key = SecretBytes(copying: Self.bytes(Self.sessionKey))
        for length in [0, 1, 15, 16, 17, 31, 32, 33, 1000] {
            let secret = SecretBytes(copying: (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) })
            let (iv, ciphertext) = try SessionCrypto.encrypt(secret, key: key)
            #expect(ciphertext.count == (length / 16 + 1) * 16, "always padded, a whole block when the length is a multiple of 16")
            #expect(try SessionCrypto.decrypt(iv: iv, ciphertext: ciphertext, key: key) == secret)
        }
        let (iv, ciphertext) = try SessionCrypto.encrypt(SecretBytes(utf8: "hunter2"), key: key)
        // The last byte of the last plaintext block flips with the IV's last byte (one block).
        var badPadding = iv
        badPadding[15] ^= 0x10
        for (badIV, badCipher) in [
            (badPadding, ciphertext), (Array(iv.prefix(8)), ciphertext), (iv, Array(ciphertext.prefix(15))),
            (iv, []),
        ] {
            #expect(throws: LockboxError.self) { try SessionCrypto.decrypt(iv: badIV, ciphertext: badCipher, key: key) }
        }
        // Padding bytes that disagree with the length byte: "hunter2" + 9 × 0x09 with its last byte
        // turned into 0x02, after a 0x09.
        var mixed = iv
        mixed[15] ^= 0x09 ^ 0x02
        #expect(throws: LockboxError.self) { try SessionCrypto.decrypt(iv: mixed, ciphertext: ciphertext, key: key) }
    }
}

extension SecretServiceTests {
    @Test("Lockbox's sessions and libsecret's read each other's items, through gnome-keyring")
    func sessionsInteroperate() throws {
        let own = try SecretServiceStore(timeout: 5, sessions: .libcrypto)
        let libsecret = try SecretServiceStore(timeout: 5, sessions: .libsecretFallback)
        let key = ItemKey(service: "interop", account: "sessions")
        for length in [1, 15, 16, 17, 200] {
            let secret = SecretBytes(copying: (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) })
            try own.set(secret, for: key, options: ItemOptions())
            #expect(try libsecret.get(key) == secret, "libsecret reads what Lockbox's session wrote (\(length) bytes)")
            try libsecret.set(secret, for: key, options: ItemOptions())
            #expect(try own.get(key) == secret, "Lockbox's session reads what libsecret's wrote (\(length) bytes)")
        }
        // Many reads on one connection: one session, every key the same.
        for _ in 0..<20 { #expect(try own.get(key) != nil) }
        #expect(own.connectionCount == 1)
        try own.delete(key)
    }
}
