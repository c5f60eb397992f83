// Loads tpm2-tss with dlopen on first use and forwards LockboxTPM's calls to it (see
// include/CTSS2.h for why). Every forwarder is defined against tpm2-tss's own prototype, so a
// mismatch is a compile error. Hidden visibility: the forwarders are not exported from the
// program, so a loaded tpm2-tss library never binds its own calls to them.
#pragma GCC visibility push(hidden)
#include "CTSS2.h"
#pragma GCC visibility pop

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* X(library, return type, name, (parameters), (arguments), value when tpm2-tss cannot be loaded) */
#define LOCKBOX_TSS2_FUNCTIONS(X) \
    X(ESYS, TSS2_RC, Esys_Initialize, (ESYS_CONTEXT **esys_context, TSS2_TCTI_CONTEXT *tcti, TSS2_ABI_VERSION *abiVersion), (esys_context, tcti, abiVersion), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_Create, (ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic, const TPM2B_DATA *outsideInfo, const TPML_PCR_SELECTION *creationPCR, TPM2B_PRIVATE **outPrivate, TPM2B_PUBLIC **outPublic, TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash, TPMT_TK_CREATION **creationTicket), (esysContext, parentHandle, shandle1, shandle2, shandle3, inSensitive, inPublic, outsideInfo, creationPCR, outPrivate, outPublic, creationData, creationHash, creationTicket), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_CreatePrimary, (ESYS_CONTEXT *esysContext, ESYS_TR primaryHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic, const TPM2B_DATA *outsideInfo, const TPML_PCR_SELECTION *creationPCR, ESYS_TR *objectHandle, TPM2B_PUBLIC **outPublic, TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash, TPMT_TK_CREATION **creationTicket), (esysContext, primaryHandle, shandle1, shandle2, shandle3, inSensitive, inPublic, outsideInfo, creationPCR, objectHandle, outPublic, creationData, creationHash, creationTicket), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_DictionaryAttackLockReset, (ESYS_CONTEXT *esysContext, ESYS_TR lockHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3), (esysContext, lockHandle, shandle1, shandle2, shandle3), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_DictionaryAttackParameters, (ESYS_CONTEXT *esysContext, ESYS_TR lockHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, UINT32 newMaxTries, UINT32 newRecoveryTime, UINT32 lockoutRecovery), (esysContext, lockHandle, shandle1, shandle2, shandle3, newMaxTries, newRecoveryTime, lockoutRecovery), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_FlushContext, (ESYS_CONTEXT *esysContext, ESYS_TR flushHandle), (esysContext, flushHandle), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_GetCapability, (ESYS_CONTEXT *esysContext, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, TPM2_CAP capability, UINT32 property, UINT32 propertyCount, TPMI_YES_NO *moreData, TPMS_CAPABILITY_DATA **capabilityData), (esysContext, shandle1, shandle2, shandle3, capability, property, propertyCount, moreData, capabilityData), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_Load, (ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_PRIVATE *inPrivate, const TPM2B_PUBLIC *inPublic, ESYS_TR *objectHandle), (esysContext, parentHandle, shandle1, shandle2, shandle3, inPrivate, inPublic, objectHandle), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_PolicyAuthValue, (ESYS_CONTEXT *esysContext, ESYS_TR policySession, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3), (esysContext, policySession, shandle1, shandle2, shandle3), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_PolicyGetDigest, (ESYS_CONTEXT *esysContext, ESYS_TR policySession, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, TPM2B_DIGEST **policyDigest), (esysContext, policySession, shandle1, shandle2, shandle3, policyDigest), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_PolicyPCR, (ESYS_CONTEXT *esysContext, ESYS_TR policySession, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_DIGEST *pcrDigest, const TPML_PCR_SELECTION *pcrs), (esysContext, policySession, shandle1, shandle2, shandle3, pcrDigest, pcrs), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_StartAuthSession, (ESYS_CONTEXT *esysContext, ESYS_TR tpmKey, ESYS_TR bind, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_NONCE *nonceCaller, TPM2_SE sessionType, const TPMT_SYM_DEF *symmetric, TPMI_ALG_HASH authHash, ESYS_TR *sessionHandle), (esysContext, tpmKey, bind, shandle1, shandle2, shandle3, nonceCaller, sessionType, symmetric, authHash, sessionHandle), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_TRSess_SetAttributes, (ESYS_CONTEXT *esysContext, ESYS_TR session, TPMA_SESSION flags, TPMA_SESSION mask), (esysContext, session, flags, mask), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_TR_SetAuth, (ESYS_CONTEXT *esysContext, ESYS_TR handle, TPM2B_AUTH const *authValue), (esysContext, handle, authValue), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(ESYS, TSS2_RC, Esys_Unseal, (ESYS_CONTEXT *esysContext, ESYS_TR itemHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, TPM2B_SENSITIVE_DATA **outData), (esysContext, itemHandle, shandle1, shandle2, shandle3, outData), TSS2_ESYS_RC_GENERAL_FAILURE) \
    X(TCTILDR, TSS2_RC, Tss2_TctiLdr_Initialize, (const char *nameConf, TSS2_TCTI_CONTEXT **context), (nameConf, context), TSS2_TCTI_RC_IO_ERROR) \
    X(MU, TSS2_RC, Tss2_MU_TPM2B_PUBLIC_Marshal, (TPM2B_PUBLIC const *src, uint8_t buffer[], size_t buffer_size, size_t *offset), (src, buffer, buffer_size, offset), TSS2_MU_RC_GENERAL_FAILURE) \
    X(MU, TSS2_RC, Tss2_MU_TPM2B_PUBLIC_Unmarshal, (uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PUBLIC *dest), (buffer, buffer_size, offset, dest), TSS2_MU_RC_GENERAL_FAILURE) \
    X(MU, TSS2_RC, Tss2_MU_TPM2B_PRIVATE_Marshal, (TPM2B_PRIVATE const *src, uint8_t buffer[], size_t buffer_size, size_t *offset), (src, buffer, buffer_size, offset), TSS2_MU_RC_GENERAL_FAILURE) \
    X(MU, TSS2_RC, Tss2_MU_TPM2B_PRIVATE_Unmarshal, (uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PRIVATE *dest), (buffer, buffer_size, offset, dest), TSS2_MU_RC_GENERAL_FAILURE) \
    X(RC, const char *, Tss2_RC_Decode, (TSS2_RC rc), (rc), load_error)

/* Functions without a result: nothing to do when tpm2-tss is not loaded (nothing of it exists). */
#define LOCKBOX_TSS2_VOID_FUNCTIONS(X) \
    X(ESYS, Esys_Finalize, (ESYS_CONTEXT **context), (context)) \
    X(ESYS, Esys_Free, (void *__ptr), (__ptr)) \
    X(TCTILDR, Tss2_TctiLdr_Finalize, (TSS2_TCTI_CONTEXT **context), (context))

enum { ESYS, TCTILDR, RC, MU, LIBRARY_COUNT };
// The run-time names of the ABIs (the libtss2-* packages), not the -dev symlinks.
static const char *const library_names[LIBRARY_COUNT] = {
    "libtss2-esys.so.0", "libtss2-tctildr.so.0", "libtss2-rc.so.0", "libtss2-mu.so.0",
};

static struct {
#define LOCKBOX_TSS2_FIELD(library, ret, name, params, args, failure) ret (*name) params;
#define LOCKBOX_TSS2_VOID_FIELD(library, name, params, args) void (*name) params;
    LOCKBOX_TSS2_FUNCTIONS(LOCKBOX_TSS2_FIELD)
    LOCKBOX_TSS2_VOID_FUNCTIONS(LOCKBOX_TSS2_VOID_FIELD)
#undef LOCKBOX_TSS2_FIELD
#undef LOCKBOX_TSS2_VOID_FIELD
} table;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_error[512] = "tpm2-tss was not loaded";

static void load(void) {
    void *handles[LIBRARY_COUNT];
    for (int index = 0; index < LIBRARY_COUNT; index++) {
        // RTLD_NODELETE: the TCTI loader dlopens TCTI modules of its own; keep everything mapped.
        handles[index] = dlopen(library_names[index], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (handles[index] == NULL) {
            const char *why = dlerror();
            snprintf(load_error, sizeof load_error, "tpm2-tss could not be loaded: %s", why ? why : library_names[index]);
            return;
        }
    }
#define LOCKBOX_TSS2_LOOKUP_NAMED(library, name) \
    *(void **)(&table.name) = dlsym(handles[library], #name); \
    if (table.name == NULL) { \
        snprintf(load_error, sizeof load_error, "tpm2-tss could not be loaded: %s has no %s", library_names[library], #name); \
        return; \
    }
#define LOCKBOX_TSS2_LOOKUP(library, ret, name, params, args, failure) LOCKBOX_TSS2_LOOKUP_NAMED(library, name)
#define LOCKBOX_TSS2_VOID_LOOKUP(library, name, params, args) LOCKBOX_TSS2_LOOKUP_NAMED(library, name)
    LOCKBOX_TSS2_FUNCTIONS(LOCKBOX_TSS2_LOOKUP)
    LOCKBOX_TSS2_VOID_FUNCTIONS(LOCKBOX_TSS2_VOID_LOOKUP)
#undef LOCKBOX_TSS2_LOOKUP
#undef LOCKBOX_TSS2_VOID_LOOKUP
#undef LOCKBOX_TSS2_LOOKUP_NAMED
    __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
}

int lockbox_tss2_load(char *error, size_t error_size) {
    pthread_once(&load_once, load);
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) return 1;
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", load_error);
    return 0;
}

int lockbox_tss2_is_loaded(void) {
    return __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
}

#define LOCKBOX_TSS2_FORWARD(library, ret, name, params, args, failure) \
    ret name params { \
        if (!lockbox_tss2_load(NULL, 0)) return failure; \
        return table.name args; \
    }
#define LOCKBOX_TSS2_VOID_FORWARD(library, name, params, args) \
    void name params { \
        if (!lockbox_tss2_load(NULL, 0)) return; \
        table.name args; \
    }
LOCKBOX_TSS2_FUNCTIONS(LOCKBOX_TSS2_FORWARD)
LOCKBOX_TSS2_VOID_FUNCTIONS(LOCKBOX_TSS2_VOID_FORWARD)
