// Run by scripts/ci/check-constant-time.sh under valgrind's memcheck: the decrypted blocks given to
// the PKCS#7 check are marked undefined, so memcheck reports every branch and every memory address
// that depends on them ("Conditional jump or move depends on uninitialised value(s)", "Use of
// uninitialised value of size N" for an address). The result itself (the padding length, or 0)
// is what the caller may act on, so it is marked defined again before it is used.
#include "CLibcrypto.h"

#include <stdio.h>
#include <string.h>
#include <valgrind/memcheck.h>

int main(void) {
    // Valid padding of every length, and invalid padding of several kinds: one code path for all.
    uint8_t blocks[20][32];
    for (int kind = 0; kind < 20; kind++) {
        memset(blocks[kind], 0x41 + kind, sizeof blocks[kind]);
        int padding = kind < 16 ? kind + 1 : 0;
        for (int i = 0; i < padding; i++) blocks[kind][31 - i] = (uint8_t)padding;
    }
    blocks[16][31] = 0;                        // length byte 0
    blocks[17][31] = 17;                       // more than a block
    blocks[18][31] = 4, blocks[18][29] = 5;    // a padding byte that differs
    blocks[19][31] = 0xFF;                     // far too long
    size_t total = 0;
    for (int kind = 0; kind < 20; kind++) {
        VALGRIND_MAKE_MEM_UNDEFINED(blocks[kind], sizeof blocks[kind]);
        size_t length = lockbox_pkcs7_padding_length(blocks[kind], sizeof blocks[kind]);
        VALGRIND_MAKE_MEM_DEFINED(&length, sizeof length);
        size_t expected = kind < 16 ? (size_t)kind + 1 : 0;
        if (length != expected) {
            fprintf(stderr, "harness: case %d gave %zu, expected %zu\n", kind, length, expected);
            return 2;
        }
        total += length;
    }
    fprintf(stderr, "harness: end (%zu)\n", total);
    return 0;
}
