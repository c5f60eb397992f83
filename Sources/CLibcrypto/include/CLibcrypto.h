#ifndef LOCKBOX_CLIBCRYPTO_H
#define LOCKBOX_CLIBCRYPTO_H
/* The primitives of the Secret Service's encrypted session, algorithm
   "dh-ietf1024-sha256-aes128-cbc-pkcs7" (Secret Service API, "Transfer of Secrets"), done by
   OpenSSL's libcrypto: Diffie-Hellman in the 1024-bit MODP group of RFC 2409 (Second Oakley
   Group, generator 2) with BN_mod_exp_mont_consttime, HKDF-SHA-256 and
   AES-128-CBC (padding off) from OpenSSL's default provider, called through its dispatch table
   (OSSL_PROVIDER_query_operation; libcrypto.c says why not EVP) (SessionCrypto.swift adds PKCS#7, and
   lockbox_pkcs7_padding_length below checks it in constant time). Numbers are big-endian byte strings, as on the bus.

   libcrypto is NOT linked: libcrypto.c loads libcrypto.so.3 (Debian's libssl3) with dlopen on
   the first call, as CTSS2 loads tpm2-tss, so a command that makes no encrypted session (every
   file-vault command, a Secret Service `delete` or `list`) maps no libcrypto. OpenSSL's own
   headers (libssl-dev) type every function pointer, so a prototype mismatch is a compile error.
   HKDF and AES come from OpenSSL's default provider loaded into a library context of Lockbox's
   own (OSSL_LIB_CTX_new, OSSL_PROVIDER_load): a program that uses OpenSSL itself keeps its own state and configuration,
   and neither changes the session.

   Return values: 0 on success; -1 for an input the function refuses (documented per function);
   -2 when libcrypto cannot be loaded or one of its calls fails (lockbox_libcrypto_load says why).
   Secret intermediates are wiped: BIGNUMs with BN_clear_free (and BN_CTX_free, which clears its
   pool), byte buffers with OPENSSL_cleanse, KDF and cipher contexts by the provider's freectx. */
#include <stddef.h>
#include <stdint.h>

enum {
    LOCKBOX_DH_BYTES = 128,         /* the prime's length */
    LOCKBOX_DH_EXPONENT_BYTES = 32, /* private exponents: 256 bits (see SessionCrypto.swift) */
};

/* Loads libcrypto, looks up every function used and reads the group's prime, once per process
   (later calls return the first result), and starts looking up HKDF and AES-128-CBC on a thread of
   its own. Returns 1 on success; else 0, with what failed in `error`. Thread-safe. Every function
   below calls it (or waits for the look-up) itself; call it first for the reason of a failure. */
int lockbox_libcrypto_load(char *error, size_t error_size);

/* Waits for HKDF and AES-128-CBC to be looked up (on this thread if no other does it).
   Returns 1 when both are there; else 0, with what failed in `error`. */
int lockbox_libcrypto_algorithms(char *error, size_t error_size);

/* Starts all of the above on a thread of its own and returns at once (nothing if already
   started), so that loading overlaps the caller's bus round trips. Thread-safe. */
void lockbox_libcrypto_preload(void);

/* For a program that owns its process and in which nothing else looks up libcrypto's ciphers or
   digests by their legacy names (EVP_get_cipherbyname, EVP_get_digestbyname, OBJ_NAME_get) nor
   depends on libcrypto's calls going through an allocator it interposes. When this process's first
   session loads libcrypto, it is then initialised without filling the legacy name tables
   (OPENSSL_INIT_NO_ADD_ALL_CIPHERS, OPENSSL_INIT_NO_ADD_ALL_DIGESTS), so a library context's first
   use does not copy them (every name the session uses is the provider's own), and loaded with
   RTLD_DEEPBIND (libcrypto.c says why; not under a sanitizer). Process-wide, hence never called
   by the library itself: the lockbox tool calls it at start. No effect once libcrypto is loaded.
   Thread-safe. */
void lockbox_libcrypto_process_is_ours(void);

/* 1 if libcrypto is loaded in this process (for tests and `lockbox doctor`), else 0. */
int lockbox_libcrypto_is_loaded(void);

/* libcrypto's OpenSSL_version(OPENSSL_VERSION) ("OpenSSL 3.0.19 ..."), or NULL when not loaded. */
const char *lockbox_libcrypto_version(void);

/* The group's prime as libcrypto holds it (BN_get_rfc2409_prime_1024), 128 bytes; the known-answer
   tests compare it with RFC 2409's. Returns 0 or -2. */
int lockbox_dh_prime(uint8_t out[LOCKBOX_DH_BYTES]);

/* out = 2^exponent mod p (the public value to send), 128 bytes, leading zeros kept.
   Returns 0; -1 if the exponent's first byte is zero (a zero exponent among them: the exponent is
   always 32 significant bytes, so its length tells nothing); -2. */
int lockbox_dh_public(const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], uint8_t out[LOCKBOX_DH_BYTES]);

/* out = peer^exponent mod p, 128 bytes, leading zeros kept. `peer` is the provider's public value
   (any length, leading zeros allowed). Returns 0; -1 if the exponent's first byte is zero or
   `peer` is not in 2 ... p-2 (0, 1 and p-1 would make the shared value guessable; >= p is not a
   group element); -2. */
int lockbox_dh_shared(const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], const uint8_t *peer, size_t peer_length,
                      uint8_t out[LOCKBOX_DH_BYTES]);

/* HKDF-SHA-256 (RFC 5869): `length` bytes (1 ... 255 * 32) from `key` with `salt` and `info`
   (either may be empty, pointer NULL). Returns 0; -1 for a length out of range; -2. */
int lockbox_hkdf_sha256(const uint8_t *salt, size_t salt_length, const uint8_t *key, size_t key_length,
                        const uint8_t *info, size_t info_length, uint8_t *out, size_t length);

/* AES-128-CBC over `length` bytes (a multiple of 16, at most INT_MAX) from `input` to `output`
   (which must not overlap `input`). No padding here. Return 0; -1 if the length is not a
   multiple of 16; -2. */
int lockbox_aes128_cbc_encrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output);
int lockbox_aes128_cbc_decrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output);

/* The length (1 ... 16) of the PKCS#7 padding ending `data`, or 0 if it is not valid padding
   (the length byte 0 or over 16, or a padding byte that differs from it). `length` is a nonzero
   multiple of 16 (else 0). Lockbox's own code, not libcrypto's (padding.c): it reads the same 16
   bytes and takes the same path whatever they hold, so only "valid, this long" or "invalid"
   comes out, which the caller turns into one protocol error, never a distinguishable one. */
size_t lockbox_pkcs7_padding_length(const uint8_t *data, size_t length);

#endif
