// The PKCS#7 check of a decrypted Secret Service secret: the one step of the session that Lockbox
// does itself rather than libcrypto (see include/CLibcrypto.h). No branch and no memory address
// depends on the plaintext; scripts/ci/check-constant-time.sh checks the compiled code.
#include "CLibcrypto.h"

// Hides a value from the optimiser, so a mask made from a secret stays a mask: without it clang
// may turn `mask & (a ^ b)` accumulations back into compares and branches.
static inline uint32_t opaque(uint32_t value) {
    __asm__("" : "+r"(value));
    return value;
}

// 0xFFFFFFFF if a < b, else 0, for a, b < 2^16; no branch.
static inline uint32_t less_mask(uint32_t a, uint32_t b) {
    return opaque((uint32_t)0 - ((a - b) >> 31));
}

size_t lockbox_pkcs7_padding_length(const uint8_t *data, size_t length) {
    if (data == NULL || length < 16 || length % 16 != 0) return 0;  // public: the length
    const uint8_t *block = data + length - 16;
    uint32_t padding = block[15];
    // Bad if padding is 0 or more than 16.
    uint32_t bad = less_mask(padding, 1) | less_mask(16, padding);
    // Every one of the last `padding` bytes must equal `padding`: all 16 read, whichever count.
    for (uint32_t index = 0; index < 16; index++) {
        uint32_t inside = less_mask(index, padding);  // byte 15 - index is padding
        bad |= inside & ((uint32_t)block[15 - index] ^ padding);
    }
    // 0 when bad, else the padding length; one mask, no branch. (x | -x) has its top bit set
    // exactly when x is not zero.
    uint32_t any_bad = opaque((bad | ((uint32_t)0 - bad)) >> 31);
    return (size_t)(padding & (any_bad - 1));
}
