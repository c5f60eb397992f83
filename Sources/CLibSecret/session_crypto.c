// The Secret Service session's Diffie-Hellman and AES-128-CBC (see include/CSessionCrypto.h).
#define _GNU_SOURCE  // explicit_bzero
#include "CSessionCrypto.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

// ---- 1024-bit arithmetic modulo the RFC 2409 Second Oakley Group prime --------------------
// Numbers are 16 little-endian 64-bit limbs. Multiplication is Montgomery's (CIOS form), with
// R = 2^1024.

enum { LIMBS = 16 };
typedef unsigned __int128 wide;

// Hides a value from the optimiser, so a mask made from a secret stays a mask: without it clang
// turns `mask = 0 - (a == b)` back into a compare and branch (and the masked table read into a
// load of one entry) at -O1 and above, which scripts/check-constant-time.sh catches.
static inline uint64_t opaque(uint64_t value) {
    __asm__("" : "+r"(value));
    return value;
}

// RFC 2409 section 6.2, the prime 2^1024 - 2^960 - 1 + 2^64 * (floor(2^894 pi) + 129093).
static const uint8_t prime_bytes[LOCKBOX_DH_BYTES] = {
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xC9, 0x0F, 0xDA, 0xA2, 0x21, 0x68, 0xC2, 0x34,
    0xC4, 0xC6, 0x62, 0x8B, 0x80, 0xDC, 0x1C, 0xD1, 0x29, 0x02, 0x4E, 0x08, 0x8A, 0x67, 0xCC, 0x74,
    0x02, 0x0B, 0xBE, 0xA6, 0x3B, 0x13, 0x9B, 0x22, 0x51, 0x4A, 0x08, 0x79, 0x8E, 0x34, 0x04, 0xDD,
    0xEF, 0x95, 0x19, 0xB3, 0xCD, 0x3A, 0x43, 0x1B, 0x30, 0x2B, 0x0A, 0x6D, 0xF2, 0x5F, 0x14, 0x37,
    0x4F, 0xE1, 0x35, 0x6D, 0x6D, 0x51, 0xC2, 0x45, 0xE4, 0x85, 0xB5, 0x76, 0x62, 0x5E, 0x7E, 0xC6,
    0xF4, 0x4C, 0x42, 0xE9, 0xA6, 0x37, 0xED, 0x6B, 0x0B, 0xFF, 0x5C, 0xB6, 0xF4, 0x06, 0xB7, 0xED,
    0xEE, 0x38, 0x6B, 0xFB, 0x5A, 0x89, 0x9F, 0xA5, 0xAE, 0x9F, 0x24, 0x11, 0x7C, 0x4B, 0x1F, 0xE6,
    0x49, 0x28, 0x66, 0x51, 0xEC, 0xE6, 0x53, 0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
};

static uint64_t prime[LIMBS];
static uint64_t prime_minus_one[LIMBS];
// R^2 mod p = 2^2048 mod p, to enter Montgomery form (computed with Python's pow(2, 2048, p);
// the DH vectors in SessionCryptoTests fail if it is wrong).
static const uint64_t r_squared[LIMBS] = {
    0x86b8f05560031f42ULL, 0xc52e1890c7b5e3b2ULL, 0x7cae72321893172aULL, 0x55da58a4969989e3ULL,
    0x1f69fbfa267f09b5ULL, 0x64e95d0d01b80803ULL, 0x0d955e8400c51c6dULL, 0xa513aea863e637f2ULL,
    0x0cb0152674ce158cULL, 0xe12791e4eb655e02ULL, 0x0092d1e7310041c7ULL, 0x010d8fecc38880c2ULL,
    0xb990e34ca6b7648dULL, 0x432567cce98616fbULL, 0x034528c75a74698dULL, 0x6415c2823c303eadULL,
};
static uint64_t n0;                // -p^-1 mod 2^64
static pthread_once_t constants_once = PTHREAD_ONCE_INIT;

// Reads a big-endian byte string into limbs; 0 on success, -1 if it does not fit in 1024 bits.
static int from_bytes(uint64_t out[LIMBS], const uint8_t *bytes, size_t length) {
    memset(out, 0, LIMBS * sizeof out[0]);
    while (length > LOCKBOX_DH_BYTES) {
        if (*bytes != 0) return -1;
        bytes++;
        length--;
    }
    for (size_t i = 0; i < length; i++) {
        size_t position = length - 1 - i;  // byte i from the least significant end
        out[position / 8] |= (uint64_t)bytes[i] << (8 * (position % 8));
    }
    return 0;
}

static void to_bytes(uint8_t out[LOCKBOX_DH_BYTES], const uint64_t value[LIMBS]) {
    for (size_t i = 0; i < LOCKBOX_DH_BYTES; i++) {
        size_t position = LOCKBOX_DH_BYTES - 1 - i;
        out[i] = (uint8_t)(value[position / 8] >> (8 * (position % 8)));
    }
}

// -1, 0 or 1 as a < b, a == b, a > b (public values only: it branches).
static int compare(const uint64_t a[LIMBS], const uint64_t b[LIMBS]) {
    for (int i = LIMBS - 1; i >= 0; i--) {
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    }
    return 0;
}

// value = value - p if `extra` (a 17th limb, 0 or 1) is set or value >= p; without branches.
// `difference` is scratch space (LIMBS words), left for the caller to wipe.
static void reduce_once(uint64_t value[LIMBS], uint64_t extra, uint64_t difference[LIMBS]) {
    uint64_t borrow = 0;
    for (int i = 0; i < LIMBS; i++) {
        wide d = (wide)value[i] - prime[i] - borrow;
        difference[i] = (uint64_t)d;
        borrow = (uint64_t)(d >> 64) & 1;
    }
    uint64_t take = (extra | (borrow ^ 1)) & 1;
    uint64_t mask = opaque((uint64_t)0 - take);
    for (int i = 0; i < LIMBS; i++) value[i] = (difference[i] & mask) | (value[i] & ~mask);
}

static void compute_constants(void) {
    from_bytes(prime, prime_bytes, sizeof prime_bytes);
    memcpy(prime_minus_one, prime, sizeof prime);
    prime_minus_one[0] -= 1;  // the low limb is all ones: no borrow
    // Newton's iteration for p^-1 mod 2^64 (p odd: p itself is an inverse mod 8), negated.
    uint64_t inverse = prime[0];
    for (int i = 0; i < 6; i++) inverse *= 2 - prime[0] * inverse;
    n0 = (uint64_t)0 - inverse;
}

enum { SCRATCH = 2 * LIMBS + 2 };

// out = a * b / R mod p for a, b < p; out < p. `out` may be `a` or `b`. `scratch` (SCRATCH
// words) holds the intermediates; the caller wipes it once when done.
static void montgomery_multiply(uint64_t out[LIMBS], const uint64_t a[LIMBS], const uint64_t b[LIMBS], uint64_t scratch[SCRATCH]) {
    uint64_t *t = scratch;
    memset(t, 0, (LIMBS + 2) * sizeof t[0]);
    for (int i = 0; i < LIMBS; i++) {
        uint64_t carry = 0;
#pragma clang loop unroll(full)
        for (int j = 0; j < LIMBS; j++) {
            wide sum = (wide)a[j] * b[i] + t[j] + carry;
            t[j] = (uint64_t)sum;
            carry = (uint64_t)(sum >> 64);
        }
        wide top = (wide)t[LIMBS] + carry;
        t[LIMBS] = (uint64_t)top;
        t[LIMBS + 1] = (uint64_t)(top >> 64);

        uint64_t m = t[0] * n0;
        wide sum = (wide)m * prime[0] + t[0];
        carry = (uint64_t)(sum >> 64);
#pragma clang loop unroll(full)
        for (int j = 1; j < LIMBS; j++) {
            sum = (wide)m * prime[j] + t[j] + carry;
            t[j - 1] = (uint64_t)sum;
            carry = (uint64_t)(sum >> 64);
        }
        top = (wide)t[LIMBS] + carry;
        t[LIMBS - 1] = (uint64_t)top;
        t[LIMBS] = t[LIMBS + 1] + (uint64_t)(top >> 64);
    }
    reduce_once(t, t[LIMBS], scratch + LIMBS + 2);
    memcpy(out, t, LIMBS * sizeof out[0]);
}

// out = base^exponent mod p, base < p; exponent big-endian, LOCKBOX_DH_EXPONENT_BYTES long.
static void power(uint64_t out[LIMBS], const uint64_t base[LIMBS], const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES]) {
    uint64_t table[16][LIMBS];
    uint64_t one[LIMBS] = {1};
    uint64_t accumulator[LIMBS];
    uint64_t chosen[LIMBS];
    uint64_t scratch[SCRATCH];

    montgomery_multiply(table[0], one, r_squared, scratch);  // R mod p: 1 in Montgomery form
    montgomery_multiply(table[1], base, r_squared, scratch);
    for (int i = 2; i < 16; i++) montgomery_multiply(table[i], table[i - 1], table[1], scratch);

    memcpy(accumulator, table[0], sizeof accumulator);
    for (int index = 0; index < 2 * LOCKBOX_DH_EXPONENT_BYTES; index++) {
        uint8_t byte = exponent[index / 2];
        uint64_t window = (index % 2 == 0) ? (byte >> 4) : (byte & 0x0F);
        for (int i = 0; i < 4; i++) montgomery_multiply(accumulator, accumulator, accumulator, scratch);
        // Read table[window] by touching every entry.
        memset(chosen, 0, sizeof chosen);
        for (uint64_t entry = 0; entry < 16; entry++) {
            uint64_t mask = opaque((uint64_t)0 - (((entry ^ window) - 1) >> 63));
            for (int i = 0; i < LIMBS; i++) chosen[i] |= table[entry][i] & mask;
        }
        montgomery_multiply(accumulator, accumulator, chosen, scratch);
    }
    montgomery_multiply(out, accumulator, one, scratch);  // leave Montgomery form

    explicit_bzero(table, sizeof table);
    explicit_bzero(accumulator, sizeof accumulator);
    explicit_bzero(chosen, sizeof chosen);
    explicit_bzero(scratch, sizeof scratch);
}

// Not inlined, so scripts/check-constant-time.sh can tell its one allowed report by name.
__attribute__((noinline)) static int is_zero(const uint8_t *bytes, size_t length) {
    uint8_t any = 0;
    for (size_t i = 0; i < length; i++) any |= bytes[i];
    return any == 0;
}

int lockbox_dh_public(const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], uint8_t out[LOCKBOX_DH_BYTES]) {
    pthread_once(&constants_once, compute_constants);
    if (is_zero(exponent, LOCKBOX_DH_EXPONENT_BYTES)) return -1;
    uint64_t two[LIMBS] = {2};
    uint64_t result[LIMBS];
    power(result, two, exponent);
    to_bytes(out, result);
    explicit_bzero(result, sizeof result);
    return 0;
}

int lockbox_dh_shared(const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], const uint8_t *peer, size_t peer_length,
                      uint8_t out[LOCKBOX_DH_BYTES]) {
    pthread_once(&constants_once, compute_constants);
    if (is_zero(exponent, LOCKBOX_DH_EXPONENT_BYTES) || peer == NULL) return -1;
    uint64_t value[LIMBS];
    uint64_t two[LIMBS] = {2};
    if (from_bytes(value, peer, peer_length) != 0) return -1;
    // 2 <= peer <= p - 2 (public values: comparisons may branch).
    if (compare(value, two) < 0 || compare(value, prime_minus_one) >= 0) return -1;
    uint64_t result[LIMBS];
    power(result, value, exponent);
    to_bytes(out, result);
    explicit_bzero(result, sizeof result);
    return 0;
}

// ---- AES-128 with the AES-NI instructions --------------------------------------------------

#if defined(__x86_64__)

static int aes_available;
static pthread_once_t aes_once = PTHREAD_ONCE_INIT;

// cpuid once per process: in a virtual machine each one traps to the hypervisor.
static void detect_aes(void) {
    unsigned int eax, ebx, ecx, edx;
    aes_available = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_AES) != 0 && (edx & bit_SSE2) != 0;
}

int lockbox_aes128_available(void) {
    pthread_once(&aes_once, detect_aes);
    return aes_available;
}

__attribute__((target("aes,sse2"))) static __m128i expansion_step(__m128i key, __m128i assist) {
    assist = _mm_shuffle_epi32(assist, 0xFF);
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    return _mm_xor_si128(key, assist);
}

// The 11 round keys of FIPS 197's key expansion.
__attribute__((target("aes,sse2"))) static void expand_key(const uint8_t key[16], __m128i rounds[11]) {
    rounds[0] = _mm_loadu_si128((const __m128i *)key);
    rounds[1] = expansion_step(rounds[0], _mm_aeskeygenassist_si128(rounds[0], 0x01));
    rounds[2] = expansion_step(rounds[1], _mm_aeskeygenassist_si128(rounds[1], 0x02));
    rounds[3] = expansion_step(rounds[2], _mm_aeskeygenassist_si128(rounds[2], 0x04));
    rounds[4] = expansion_step(rounds[3], _mm_aeskeygenassist_si128(rounds[3], 0x08));
    rounds[5] = expansion_step(rounds[4], _mm_aeskeygenassist_si128(rounds[4], 0x10));
    rounds[6] = expansion_step(rounds[5], _mm_aeskeygenassist_si128(rounds[5], 0x20));
    rounds[7] = expansion_step(rounds[6], _mm_aeskeygenassist_si128(rounds[6], 0x40));
    rounds[8] = expansion_step(rounds[7], _mm_aeskeygenassist_si128(rounds[7], 0x80));
    rounds[9] = expansion_step(rounds[8], _mm_aeskeygenassist_si128(rounds[8], 0x1B));
    rounds[10] = expansion_step(rounds[9], _mm_aeskeygenassist_si128(rounds[9], 0x36));
}

__attribute__((target("aes,sse2"))) int lockbox_aes128_cbc_encrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input,
                                                                    size_t length, uint8_t *output) {
    if (length % 16 != 0 || !lockbox_aes128_available()) return -1;
    __m128i rounds[11];
    expand_key(key, rounds);
    __m128i chain = _mm_loadu_si128((const __m128i *)iv);
    for (size_t offset = 0; offset < length; offset += 16) {
        __m128i block = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(input + offset)), chain);
        block = _mm_xor_si128(block, rounds[0]);
        for (int round = 1; round < 10; round++) block = _mm_aesenc_si128(block, rounds[round]);
        chain = _mm_aesenclast_si128(block, rounds[10]);
        _mm_storeu_si128((__m128i *)(output + offset), chain);
    }
    explicit_bzero(rounds, sizeof rounds);
    return 0;
}

__attribute__((target("aes,sse2"))) int lockbox_aes128_cbc_decrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input,
                                                                    size_t length, uint8_t *output) {
    if (length % 16 != 0 || !lockbox_aes128_available()) return -1;
    __m128i rounds[11];
    __m128i inverse[11];  // the equivalent inverse cipher's keys (FIPS 197 section 5.3.5)
    expand_key(key, rounds);
    inverse[0] = rounds[10];
    for (int round = 1; round < 10; round++) inverse[round] = _mm_aesimc_si128(rounds[10 - round]);
    inverse[10] = rounds[0];
    __m128i chain = _mm_loadu_si128((const __m128i *)iv);
    for (size_t offset = 0; offset < length; offset += 16) {
        __m128i cipher = _mm_loadu_si128((const __m128i *)(input + offset));
        __m128i block = _mm_xor_si128(cipher, inverse[0]);
        for (int round = 1; round < 10; round++) block = _mm_aesdec_si128(block, inverse[round]);
        block = _mm_aesdeclast_si128(block, inverse[10]);
        _mm_storeu_si128((__m128i *)(output + offset), _mm_xor_si128(block, chain));
        chain = cipher;
    }
    explicit_bzero(rounds, sizeof rounds);
    explicit_bzero(inverse, sizeof inverse);
    return 0;
}

#else

int lockbox_aes128_available(void) { return 0; }

int lockbox_aes128_cbc_encrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output) {
    (void)key, (void)iv, (void)input, (void)length, (void)output;
    return -1;
}

int lockbox_aes128_cbc_decrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output) {
    (void)key, (void)iv, (void)input, (void)length, (void)output;
    return -1;
}

#endif
