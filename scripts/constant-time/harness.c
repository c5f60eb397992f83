// Run by scripts/check-constant-time.sh under valgrind's memcheck: the private exponent, the AES
// key and the plaintext are marked undefined, so memcheck reports every branch and every memory
// address that depends on them ("Conditional jump or move depends on uninitialised value(s)",
// "Use of uninitialised value of size N" for an address).
#include "CSessionCrypto.h"

#include <stdio.h>
#include <string.h>
#include <valgrind/memcheck.h>

int main(void) {
    uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], out[LOCKBOX_DH_BYTES], peer[LOCKBOX_DH_BYTES];
    for (int i = 0; i < LOCKBOX_DH_EXPONENT_BYTES; i++) exponent[i] = (uint8_t)(i * 37 + 11);
    memset(peer, 0x5A, sizeof peer);
    peer[0] = 0x12;
    // Public first, so one-time set-up (pthread_once, cpuid) is out of the checked part.
    if (lockbox_dh_public(exponent, out) != 0 || !lockbox_aes128_available()) {
        fprintf(stderr, "harness: set-up failed (no AES instructions?)\n");
        return 2;
    }
    VALGRIND_MAKE_MEM_UNDEFINED(exponent, sizeof exponent);
    fprintf(stderr, "harness: dh public\n");
    (void)lockbox_dh_public(exponent, out);
    fprintf(stderr, "harness: dh shared\n");
    (void)lockbox_dh_shared(exponent, peer, sizeof peer, out);

    uint8_t key[16] = {1, 2, 3}, iv[16] = {0}, plain[48] = {0}, cipher[48];
    VALGRIND_MAKE_MEM_UNDEFINED(key, sizeof key);
    VALGRIND_MAKE_MEM_UNDEFINED(plain, sizeof plain);
    fprintf(stderr, "harness: aes\n");
    (void)lockbox_aes128_cbc_encrypt(key, iv, plain, sizeof plain, cipher);
    (void)lockbox_aes128_cbc_decrypt(key, iv, cipher, sizeof cipher, plain);
    fprintf(stderr, "harness: end\n");
    return 0;
}
