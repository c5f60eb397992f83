// Loads OpenSSL's libcrypto with dlopen on first use and does the Secret Service session's
// Diffie-Hellman, HKDF and AES-128-CBC with it (see include/CLibcrypto.h for why). Every table
// entry has the type of libcrypto's own prototype (OpenSSL's headers), so a mismatch is a
// compile error; nothing here is exported under a libcrypto name.
#define _GNU_SOURCE  // RTLD_DEEPBIND
#include "CLibcrypto.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/bn.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/provider.h>

/* X(name): every libcrypto function used. */
#define LOCKBOX_LIBCRYPTO_FUNCTIONS(X) \
    X(BN_CTX_new) X(BN_CTX_free) X(BN_new) X(BN_free) X(BN_clear_free) X(BN_set_flags) X(BN_bin2bn) X(BN_bn2binpad) \
    X(BN_set_word) X(BN_sub_word) X(BN_cmp) X(BN_dup) X(BN_get_rfc2409_prime_1024) X(BN_mod_exp_mont_consttime) \
    X(OSSL_PARAM_construct_utf8_string) X(OSSL_PARAM_construct_octet_string) X(OSSL_PARAM_construct_uint) \
    X(OSSL_PARAM_construct_end) X(OSSL_PROVIDER_load) X(OSSL_PROVIDER_query_operation) X(OSSL_PROVIDER_get0_provider_ctx) \
    X(OSSL_LIB_CTX_new) X(OPENSSL_cleanse) X(OpenSSL_version) X(OPENSSL_init_crypto)

static struct {
#define LOCKBOX_LIBCRYPTO_FIELD(name) __typeof__(name) *name;
    LOCKBOX_LIBCRYPTO_FUNCTIONS(LOCKBOX_LIBCRYPTO_FIELD)
#undef LOCKBOX_LIBCRYPTO_FIELD
} table;

// The run-time name of OpenSSL 3's ABI (Debian's libssl3), not the -dev symlink.
static const char library_name[] = "libcrypto.so.3";

// RTLD_DEEPBIND, in a program that owns its process (lockbox_libcrypto_process_is_ours): libcrypto
// is linked to bind every symbol at load (-z now), and most of its 4,000-odd symbol references are
// to its own functions; with this flag the loader looks them up in libcrypto (and libc) first
// instead of through every object of the program before it. A library does not choose it for its
// host: it would also bind libcrypto's malloc and free past an allocator the host interposes. Not
// under a sanitizer, whose run-time refuses the flag.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LOCKBOX_DEEPBIND 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define LOCKBOX_DEEPBIND 0
#endif
#endif
#ifndef LOCKBOX_DEEPBIND
#define LOCKBOX_DEEPBIND RTLD_DEEPBIND
#endif

// Two stages, each run once per process: the library and the group (what the key exchange needs
// first), then the HKDF and AES-128-CBC implementations (needed only once the provider has
// answered OpenSession). The second stage runs on a thread of its own, started by the first,
// while the caller waits for the provider; whoever needs an algorithm first waits for that stage
// (pthread_once).
//
// HKDF and AES-128-CBC are taken from the dispatch tables of OpenSSL's default provider
// (OSSL_PROVIDER_query_operation; provider-kdf(7) and provider-cipher(7) document the functions),
// not fetched as EVP_KDF and EVP_CIPHER objects: the implementations are the same, but an EVP
// fetch first builds a method for every algorithm of the operation (some 150 ciphers) and copies
// every name of libcrypto's legacy tables into the library context, which was most of the cost
// of using libcrypto at all (docs/PERFORMANCE.md). EVP's own calls to these functions add no
// check that is not repeated here: the key and IV lengths are checked by the provider's init.
static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static pthread_once_t algorithms_once = PTHREAD_ONCE_INIT;
static int library_loaded;
static int algorithms_loaded;
static int background_started;
static int process_is_ours;
static char load_error[512] = "libcrypto was not loaded";
static char algorithms_error[512] = "libcrypto's algorithms were not loaded";
// Made once: the group's prime and p - 1 (public); Lockbox's own library context, the default
// provider loaded into it, and the functions of its HKDF and AES-128-CBC.
static OSSL_LIB_CTX *library_context;
static BIGNUM *prime;
static BIGNUM *prime_minus_one;
static void *provider_context;
static struct {
    OSSL_FUNC_kdf_newctx_fn *newctx;
    OSSL_FUNC_kdf_freectx_fn *freectx;
    OSSL_FUNC_kdf_derive_fn *derive;
} hkdf;
static struct {
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_encrypt_init_fn *encrypt_init;
    OSSL_FUNC_cipher_decrypt_init_fn *decrypt_init;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
} aes128_cbc;

static void load_library(void) {
    // RTLD_NODELETE: libcrypto keeps its providers and thread keys for the process's life.
    int ours = __atomic_load_n(&process_is_ours, __ATOMIC_ACQUIRE);
    void *handle = dlopen(library_name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE | (ours ? LOCKBOX_DEEPBIND : 0));
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
    // No atexit handler: OPENSSL_cleanup at exit would free what a thread still looking up the
    // algorithms uses (a process may exit while it runs). The process's end frees everything.
    uint64_t options = OPENSSL_INIT_NO_ATEXIT;
    // In a program that owns its process (lockbox_libcrypto_process_is_ours), libcrypto's legacy
    // name tables stay empty: the first use of a library context would otherwise copy every name
    // in them into it, the largest single cost of the session's first derivation.
    if (ours) options |= OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS;
    if (!table.OPENSSL_init_crypto(options, NULL)) {
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

// 1 if `names` (a provider's "NAME1:NAME2:..." list) holds `wanted`, in any case.
static int names_contain(const char *names, const char *wanted) {
    size_t length = strlen(wanted);
    for (const char *name = names; name != NULL && *name != '\0';) {
        const char *end = strchr(name, ':');
        size_t size = end ? (size_t)(end - name) : strlen(name);
        if (size == length && strncasecmp(name, wanted, length) == 0) return 1;
        name = end ? end + 1 : NULL;
    }
    return 0;
}

// The dispatch table of the provider's first implementation of `name` for `operation`, or NULL.
static const OSSL_DISPATCH *implementation(OSSL_PROVIDER *provider, int operation, const char *name) {
    int no_cache = 0;
    const OSSL_ALGORITHM *algorithms = table.OSSL_PROVIDER_query_operation(provider, operation, &no_cache);
    for (const OSSL_ALGORITHM *algorithm = algorithms; algorithm != NULL && algorithm->algorithm_names != NULL; algorithm++) {
        if (names_contain(algorithm->algorithm_names, name)) return algorithm->implementation;
    }
    return NULL;
}

static int hkdf_derive(const uint8_t *salt, size_t salt_length, const uint8_t *key, size_t key_length, const uint8_t *info,
                       size_t info_length, uint8_t *out, size_t length);

static void load_algorithms(void) {
    pthread_once(&library_once, load_library);
    if (!__atomic_load_n(&library_loaded, __ATOMIC_ACQUIRE)) {
        snprintf(algorithms_error, sizeof algorithms_error, "%s", load_error);
        return;
    }
    // A library context of Lockbox's own, with OpenSSL's default provider loaded into it: the
    // program's default context, its configuration (openssl.cnf, OPENSSL_CONF) and any provider
    // it loaded neither change what the session runs nor are changed by it (SessionCryptoTests
    // runs the vectors under a configuration that breaks the default context).
    library_context = table.OSSL_LIB_CTX_new();
    OSSL_PROVIDER *provider = library_context ? table.OSSL_PROVIDER_load(library_context, "default") : NULL;
    if (provider == NULL) {
        snprintf(algorithms_error, sizeof algorithms_error, "libcrypto could not be loaded: its default provider could not be loaded");
        return;
    }
    provider_context = table.OSSL_PROVIDER_get0_provider_ctx(provider);
    for (const OSSL_DISPATCH *entry = implementation(provider, OSSL_OP_KDF, "HKDF"); entry != NULL && entry->function_id != 0; entry++) {
        switch (entry->function_id) {
        case OSSL_FUNC_KDF_NEWCTX: hkdf.newctx = OSSL_FUNC_kdf_newctx(entry); break;
        case OSSL_FUNC_KDF_FREECTX: hkdf.freectx = OSSL_FUNC_kdf_freectx(entry); break;
        case OSSL_FUNC_KDF_DERIVE: hkdf.derive = OSSL_FUNC_kdf_derive(entry); break;
        default: break;
        }
    }
    for (const OSSL_DISPATCH *entry = implementation(provider, OSSL_OP_CIPHER, "AES-128-CBC"); entry != NULL && entry->function_id != 0;
         entry++) {
        switch (entry->function_id) {
        case OSSL_FUNC_CIPHER_NEWCTX: aes128_cbc.newctx = OSSL_FUNC_cipher_newctx(entry); break;
        case OSSL_FUNC_CIPHER_FREECTX: aes128_cbc.freectx = OSSL_FUNC_cipher_freectx(entry); break;
        case OSSL_FUNC_CIPHER_ENCRYPT_INIT: aes128_cbc.encrypt_init = OSSL_FUNC_cipher_encrypt_init(entry); break;
        case OSSL_FUNC_CIPHER_DECRYPT_INIT: aes128_cbc.decrypt_init = OSSL_FUNC_cipher_decrypt_init(entry); break;
        case OSSL_FUNC_CIPHER_UPDATE: aes128_cbc.update = OSSL_FUNC_cipher_update(entry); break;
        case OSSL_FUNC_CIPHER_FINAL: aes128_cbc.final = OSSL_FUNC_cipher_final(entry); break;
        default: break;
        }
    }
    int have_hkdf = hkdf.newctx && hkdf.freectx && hkdf.derive;
    int have_aes = aes128_cbc.newctx && aes128_cbc.freectx && aes128_cbc.encrypt_init && aes128_cbc.decrypt_init && aes128_cbc.update
                   && aes128_cbc.final;
    if (!have_hkdf || !have_aes) {
        snprintf(algorithms_error, sizeof algorithms_error, "libcrypto could not be loaded: its default provider has no %s",
                 !have_hkdf ? "HKDF" : "AES-128-CBC");
        return;
    }
    // One derivation from a public input, thrown away: on its first use the provider's HKDF
    // fetches SHA-256 and HMAC from the library context (and libcrypto finishes its own set-up,
    // reading its legacy name tables), work that would otherwise fall on the session's first
    // derivation, after OpenSession, rather than on this thread while the caller waits for the bus.
    static const uint8_t public_input[1];
    uint8_t discarded[16];
    if (hkdf_derive(NULL, 0, public_input, sizeof public_input, NULL, 0, discarded, sizeof discarded) != 0) {
        snprintf(algorithms_error, sizeof algorithms_error, "libcrypto could not be loaded: its HKDF-SHA-256 failed");
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

void lockbox_libcrypto_process_is_ours(void) {
    __atomic_store_n(&process_is_ours, 1, __ATOMIC_RELEASE);
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

// HKDF-SHA-256 with the provider's HKDF, once it is there.
static int hkdf_derive(const uint8_t *salt, size_t salt_length, const uint8_t *key, size_t key_length, const uint8_t *info,
                       size_t info_length, uint8_t *out, size_t length) {
    void *context = hkdf.newctx(provider_context);
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
    int status = hkdf.derive(context, out, length, parameters) == 1 ? 0 : -2;
    hkdf.freectx(context);  // clears the key and PRK it copied
    if (status != 0) table.OPENSSL_cleanse(out, length);
    return status;
}

int lockbox_hkdf_sha256(const uint8_t *salt, size_t salt_length, const uint8_t *key, size_t key_length,
                        const uint8_t *info, size_t info_length, uint8_t *out, size_t length) {
    if (out == NULL || length == 0 || length > 255 * 32) return -1;
    if (!algorithms_ready()) return -2;
    return hkdf_derive(salt, salt_length, key, key_length, info, info_length, out, length);
}

// ---- AES-128-CBC ---------------------------------------------------------------------------

static int cbc(int encrypt, const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output) {
    if (length % 16 != 0 || length > INT_MAX - 16) return -1;
    if (!algorithms_ready()) return -2;
    void *context = aes128_cbc.newctx(provider_context);
    if (context == NULL) return -2;
    // Padding off, in the init's parameters (the provider's default is on).
    unsigned int padding = 0;
    OSSL_PARAM parameters[2] = {table.OSSL_PARAM_construct_uint(OSSL_CIPHER_PARAM_PADDING, &padding), table.OSSL_PARAM_construct_end()};
    int status = -2;
    size_t written = 0, last = 0;
    int initialised = encrypt ? aes128_cbc.encrypt_init(context, key, 16, iv, 16, parameters)
                              : aes128_cbc.decrypt_init(context, key, 16, iv, 16, parameters);
    if (initialised == 1 && aes128_cbc.update(context, output, &written, length, input, length) == 1 && written <= length
        && aes128_cbc.final(context, output + written, &last, length - written) == 1 && written + last == length) {
        status = 0;
    }
    aes128_cbc.freectx(context);  // clears the key schedule
    if (status != 0) table.OPENSSL_cleanse(output, length);
    return status;
}

int lockbox_aes128_cbc_encrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output) {
    return cbc(1, key, iv, input, length, output);
}

int lockbox_aes128_cbc_decrypt(const uint8_t key[16], const uint8_t iv[16], const uint8_t *input, size_t length, uint8_t *output) {
    return cbc(0, key, iv, input, length, output);
}
