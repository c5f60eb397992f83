// Loads OpenSSL's libcrypto with dlopen on first use and does the Secret Service session's
// Diffie-Hellman, HKDF and AES-128-CBC with it (see include/CLibcrypto.h for why). Every table
// entry has the type of libcrypto's own prototype (OpenSSL's headers), so a mismatch is a
// compile error; nothing here is exported under a libcrypto name.
#include "CLibcrypto.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

/* X(name): every libcrypto function used. */
#define LOCKBOX_LIBCRYPTO_FUNCTIONS(X) \
    X(BN_CTX_new) X(BN_CTX_free) X(BN_new) X(BN_free) X(BN_clear_free) X(BN_set_flags) X(BN_bin2bn) X(BN_bn2binpad) \
    X(BN_set_word) X(BN_sub_word) X(BN_cmp) X(BN_dup) X(BN_get_rfc2409_prime_1024) X(BN_mod_exp_mont_consttime) \
    X(EVP_KDF_fetch) X(EVP_KDF_free) X(EVP_KDF_CTX_new) X(EVP_KDF_CTX_free) X(EVP_KDF_derive) \
    X(OSSL_PARAM_construct_utf8_string) X(OSSL_PARAM_construct_octet_string) X(OSSL_PARAM_construct_end) \
    X(EVP_CIPHER_fetch) X(EVP_CIPHER_free) X(EVP_CIPHER_CTX_new) X(EVP_CIPHER_CTX_free) X(EVP_CipherInit_ex2) \
    X(EVP_CIPHER_CTX_set_padding) X(EVP_CipherUpdate) X(EVP_CipherFinal_ex) \
    X(OSSL_LIB_CTX_new) X(OPENSSL_cleanse) X(OpenSSL_version) X(OPENSSL_init_crypto)

static struct {
#define LOCKBOX_LIBCRYPTO_FIELD(name) __typeof__(name) *name;
    LOCKBOX_LIBCRYPTO_FUNCTIONS(LOCKBOX_LIBCRYPTO_FIELD)
#undef LOCKBOX_LIBCRYPTO_FIELD
} table;

// The run-time name of OpenSSL 3's ABI (Debian's libssl3), not the -dev symlink.
static const char library_name[] = "libcrypto.so.3";

// Two stages, each run once per process: the library and the group (what the key exchange needs
// first), then the HKDF and AES-128-CBC implementations (needed only once the provider has
// answered OpenSession). Fetching those from OpenSSL's default provider is most of the cost of
// using libcrypto at all (about two thirds of its instructions, docs/PERFORMANCE.md), so the
// second stage runs on a thread of its own, started by the first, while the caller waits for the
// provider; whoever needs an algorithm first waits for that stage (pthread_once).
static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static pthread_once_t algorithms_once = PTHREAD_ONCE_INIT;
static int library_loaded;
static int algorithms_loaded;
static int background_started;
static char load_error[512] = "libcrypto was not loaded";
static char algorithms_error[512] = "libcrypto's algorithms were not loaded";
// Made once: the group's prime and p - 1 (public); Lockbox's own library context and the HKDF
// and AES-128-CBC implementations fetched from it.
static OSSL_LIB_CTX *library_context;
static BIGNUM *prime;
static BIGNUM *prime_minus_one;
static EVP_KDF *hkdf;
static EVP_CIPHER *aes128_cbc;

static void load_library(void) {
    // RTLD_NODELETE: libcrypto keeps its providers and thread keys for the process's life.
    void *handle = dlopen(library_name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "libcrypto could not be loaded: %s", why ? why : library_name);
        return;
    }
#define LOCKBOX_LIBCRYPTO_LOOKUP(name) \
    *(void **)(&table.name) = dlsym(handle, #name); \
    if (table.name == NULL) { \
        snprintf(load_error, sizeof load_error, "libcrypto could not be loaded: %s has no %s", library_name, #name); \
        return; \
    }
    LOCKBOX_LIBCRYPTO_FUNCTIONS(LOCKBOX_LIBCRYPTO_LOOKUP)
#undef LOCKBOX_LIBCRYPTO_LOOKUP
    // No atexit handler: OPENSSL_cleanup at exit would free what a thread still fetching the
    // algorithms uses (a process may exit while it runs). The process's end frees everything.
    if (!table.OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL)) {
        snprintf(load_error, sizeof load_error, "libcrypto could not be loaded: OPENSSL_init_crypto failed");
        return;
    }
    prime = table.BN_get_rfc2409_prime_1024(NULL);
    prime_minus_one = prime ? table.BN_dup(prime) : NULL;
    if (prime == NULL || prime_minus_one == NULL || !table.BN_sub_word(prime_minus_one, 1)) {
        snprintf(load_error, sizeof load_error, "libcrypto could not be loaded: it has no RFC 2409 prime");
        return;
    }
    __atomic_store_n(&library_loaded, 1, __ATOMIC_RELEASE);
}

static void load_algorithms(void) {
    pthread_once(&library_once, load_library);
    if (!__atomic_load_n(&library_loaded, __ATOMIC_ACQUIRE)) {
        snprintf(algorithms_error, sizeof algorithms_error, "%s", load_error);
        return;
    }
    // A library context of Lockbox's own, with OpenSSL's default provider (loaded for it on the
    // first fetch): the program's default context, its configuration (openssl.cnf, OPENSSL_CONF)
    // and any provider it loaded neither change what the session runs nor are changed by it
    // (SessionCryptoTests runs the vectors under a configuration that breaks the default context).
    library_context = table.OSSL_LIB_CTX_new();
    if (library_context == NULL) {
        snprintf(algorithms_error, sizeof algorithms_error, "libcrypto could not be loaded: OSSL_LIB_CTX_new failed");
        return;
    }
    hkdf = table.EVP_KDF_fetch(library_context, "HKDF", NULL);
    aes128_cbc = table.EVP_CIPHER_fetch(library_context, "AES-128-CBC", NULL);
    if (hkdf == NULL || aes128_cbc == NULL) {
        snprintf(algorithms_error, sizeof algorithms_error, "libcrypto could not be loaded: it has no %s",
                 hkdf == NULL ? "HKDF" : "AES-128-CBC");
        return;
    }
    __atomic_store_n(&algorithms_loaded, 1, __ATOMIC_RELEASE);
}

static void *load_in_background(void *unused) {
    (void)unused;
    pthread_once(&algorithms_once, load_algorithms);
    return NULL;
}

// Starts the loading thread once; if no thread can be made, the first caller that needs an
// algorithm loads it itself.
static void start_background_load(void) {
    if (__atomic_exchange_n(&background_started, 1, __ATOMIC_ACQ_REL)) return;
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0) return;
    pthread_t thread;
    if (pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED) == 0) {
        (void)pthread_create(&thread, &attributes, load_in_background, NULL);
    }
    pthread_attr_destroy(&attributes);
}

void lockbox_libcrypto_preload(void) {
    start_background_load();
}

int lockbox_libcrypto_load(char *error, size_t error_size) {
    pthread_once(&library_once, load_library);
    if (__atomic_load_n(&library_loaded, __ATOMIC_ACQUIRE)) {
        start_background_load();
        return 1;
    }
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", load_error);
    return 0;
}

// The second stage, waiting for the thread that runs it. 1 when HKDF and AES-128-CBC are there.
static int algorithms_ready(void) {
    pthread_once(&algorithms_once, load_algorithms);
    return __atomic_load_n(&algorithms_loaded, __ATOMIC_ACQUIRE);
}

int lockbox_libcrypto_algorithms(char *error, size_t error_size) {
    if (algorithms_ready()) return 1;
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", algorithms_error);
    return 0;
}

int lockbox_libcrypto_is_loaded(void) {
    return __atomic_load_n(&library_loaded, __ATOMIC_ACQUIRE);
}

const char *lockbox_libcrypto_version(void) {
    return lockbox_libcrypto_is_loaded() ? table.OpenSSL_version(OPENSSL_VERSION) : NULL;
}

int lockbox_dh_prime(uint8_t out[LOCKBOX_DH_BYTES]) {
    if (!lockbox_libcrypto_load(NULL, 0)) return -2;
    return table.BN_bn2binpad(prime, out, LOCKBOX_DH_BYTES) == LOCKBOX_DH_BYTES ? 0 : -2;
}

// ---- Diffie-Hellman ------------------------------------------------------------------------

// out = base^exponent mod p with BN_mod_exp_mont_consttime; `base` is public and in 2 ... p-2.
// The exponent's first byte is nonzero (checked by the callers), so BN_bin2bn, which skips
// leading zero bytes, always reads 32 and takes the same time for every exponent.
static int power(const BIGNUM *base, const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], uint8_t out[LOCKBOX_DH_BYTES]) {
    int status = -2;
    BN_CTX *context = table.BN_CTX_new();
    BIGNUM *secret = table.BN_new();
    BIGNUM *result = table.BN_new();
    if (context == NULL || secret == NULL || result == NULL) goto done;
    table.BN_set_flags(secret, BN_FLG_CONSTTIME);
    table.BN_set_flags(result, BN_FLG_CONSTTIME);
    if (table.BN_bin2bn(exponent, LOCKBOX_DH_EXPONENT_BYTES, secret) == NULL) goto done;
    if (!table.BN_mod_exp_mont_consttime(result, base, secret, prime, context, NULL)) goto done;
    if (table.BN_bn2binpad(result, out, LOCKBOX_DH_BYTES) != LOCKBOX_DH_BYTES) goto done;
    status = 0;
done:
    table.BN_clear_free(secret);
    table.BN_clear_free(result);
    table.BN_CTX_free(context);  // clears the BIGNUMs of its pool
    return status;
}

int lockbox_dh_public(const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], uint8_t out[LOCKBOX_DH_BYTES]) {
    if (exponent == NULL || exponent[0] == 0) return -1;
    if (!lockbox_libcrypto_load(NULL, 0)) return -2;
    BIGNUM *two = table.BN_new();
    int status = (two != NULL && table.BN_set_word(two, 2)) ? power(two, exponent, out) : -2;
    table.BN_free(two);
    return status;
}

int lockbox_dh_shared(const uint8_t exponent[LOCKBOX_DH_EXPONENT_BYTES], const uint8_t *peer, size_t peer_length,
                      uint8_t out[LOCKBOX_DH_BYTES]) {
    if (exponent == NULL || exponent[0] == 0 || peer == NULL || peer_length > INT_MAX) return -1;
    if (!lockbox_libcrypto_load(NULL, 0)) return -2;
    BIGNUM *value = table.BN_bin2bn(peer, (int)peer_length, NULL);
    BIGNUM *two = table.BN_new();
    int status = -2;
    if (value != NULL && two != NULL && table.BN_set_word(two, 2)) {
        // 2 <= peer <= p - 2 (public values: comparisons may branch).
        if (table.BN_cmp(value, two) < 0 || table.BN_cmp(value, prime_minus_one) >= 0) {
            status = -1;
        } else {
            status = power(value, exponent, out);
        }
    }
    table.BN_free(value);
    table.BN_free(two);
    return status;
}

// ---- HKDF-SHA-256 --------------------------------------------------------------------------

int lockbox_hkdf_sha256(const uint8_t *salt, size_t salt_length, const uint8_t *key, size_t key_length,
                        const uint8_t *info, size_t info_length, uint8_t *out, size_t length) {
    if (out == NULL || length == 0 || length > 255 * 32) return -1;
    if (!algorithms_ready()) return -2;
    EVP_KDF_CTX *context = table.EVP_KDF_CTX_new(hkdf);
    if (context == NULL) return -2;
    // An empty salt or info is left out: RFC 5869's default (HashLen zero bytes) and empty info.
    static uint8_t empty;
    OSSL_PARAM parameters[5];
    size_t count = 0;
    parameters[count++] = table.OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
    parameters[count++] = table.OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key_length > 0 ? (void *)key : &empty, key_length);
    if (salt != NULL && salt_length > 0) parameters[count++] = table.OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_length);
    if (info != NULL && info_length > 0) parameters[count++] = table.OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_length);
    parameters[count] = table.OSSL_PARAM_construct_end();
    int status = table.EVP_KDF_derive(context, out, length, parameters) == 1 ? 0 : -2;
    table.EVP_KDF_CTX_free(context);  // clears the key and PRK it copied
    if (status != 0) table.OPENSSL_cleanse(out, length);
    return status;
}

// ---- AES-128-CBC ---------------------------------------------------------------------------

static int cbc(int encrypt, const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output) {
    if (length % 16 != 0 || length > INT_MAX - 16) return -1;
    if (!algorithms_ready()) return -2;
    EVP_CIPHER_CTX *context = table.EVP_CIPHER_CTX_new();
    if (context == NULL) return -2;
    int status = -2, written = 0, last = 0;
    if (table.EVP_CipherInit_ex2(context, aes128_cbc, key, iv, encrypt, NULL) == 1 && table.EVP_CIPHER_CTX_set_padding(context, 0) == 1
        && table.EVP_CipherUpdate(context, output, &written, input, (int)length) == 1
        && table.EVP_CipherFinal_ex(context, output + written, &last) == 1 && (size_t)(written + last) == length) {
        status = 0;
    }
    table.EVP_CIPHER_CTX_free(context);  // clears the key schedule
    if (status != 0) table.OPENSSL_cleanse(output, length);
    return status;
}

int lockbox_aes128_cbc_encrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output) {
    return cbc(1, key, iv, input, length, output);
}

int lockbox_aes128_cbc_decrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output) {
    return cbc(0, key, iv, input, length, output);
}
