#ifndef LOCKBOX_CSESSIONCRYPTO_H
#define LOCKBOX_CSESSIONCRYPTO_H
/* The arithmetic of the Secret Service's encrypted session, algorithm
   "dh-ietf1024-sha256-aes128-cbc-pkcs7" (Secret Service API, "Transfer of Secrets"): a
   Diffie-Hellman exchange in the 1024-bit MODP group of RFC 2409 (Second Oakley Group,
   generator 2), and AES-128 in CBC mode for the secrets. HKDF-SHA-256 and the padding are done
   in Swift (SessionCrypto.swift) with libsodium's HMAC.

   Lockbox does this itself rather than through libsecret so that a command that reads or writes
   one secret does not load libsecret and libgcrypt, whose exchange (1023-bit exponents,
   libgcrypt's generic multi-precision code and its random pool) was 23.8 M of the 31.6 M
   instructions of `secret-tool lookup` (issue 18; docs/PERFORMANCE.md). Numbers are
   big-endian byte strings, as on the bus.

   Side channels: no branch and no memory address depends on the private exponent, the key or the
   data (Montgomery multiplication with a masked final subtraction, a fixed 4-bit window read by
   touching every table entry, AES through the processor's AES instructions, no tables); the masks
   go through an optimisation barrier, and scripts/check-constant-time.sh checks the compiled code
   with valgrind at -O1, -O2, -O3 and -Os (the one allowed report: the zero-exponent check, which
   tells only whether the exponent is zero). Wiping: the named intermediate arrays are wiped before
   returning; copies the compiler keeps in registers or spills below the stack pointer are not
   (C offers no way to reach them), and are overwritten by later calls. */
#include <stddef.h>
#include <stdint.h>

enum {
    LOCKBOX_DH_BYTES = 128,         /* the prime's length */
    LOCKBOX_DH_EXPONENT_BYTES = 32, /* private exponents: 256 bits (see SessionCrypto.swift) */
};

/* out = 2^exponent mod p (the public value to send), 128 bytes, leading zeros kept.
   Returns 0; -1 if the exponent is zero. */
int lockbox_dh_public(const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], uint8_t out[LOCKBOX_DH_BYTES]);

/* out = peer^exponent mod p, 128 bytes, leading zeros kept. `peer` is the provider's public value
   (any length, leading zeros allowed). Returns 0; -1 if the exponent is zero or `peer` is not in
   2 ... p-2 (0, 1 and p-1 would make the shared value guessable; >= p is not a group element). */
int lockbox_dh_shared(const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], const uint8_t *peer, size_t peer_length,
                      uint8_t out[LOCKBOX_DH_BYTES]);

/* 1 if this processor has the AES instructions the functions below use (x86-64 AES-NI), else 0;
   without them Lockbox leaves the session to libsecret. */
int lockbox_aes128_available(void);

/* AES-128-CBC over `length` bytes (a multiple of 16) from `input` to `output` (which must not
   overlap `input`). No padding here. Return 0; -1 if the length is not a multiple of 16 or AES
   instructions are unavailable. */
int lockbox_aes128_cbc_encrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output);
int lockbox_aes128_cbc_decrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output);

#endif
