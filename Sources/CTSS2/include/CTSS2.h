#ifndef LOCKBOX_CTSS2_H
#define LOCKBOX_CTSS2_H
/* tpm2-tss for LockboxTPM: the Enhanced System API, the TCTI loader (picks device:, swtpm:, ... at
   run time), response-code decoding and the marshalling of TPM structures.

   The types and prototypes are tpm2-tss's own headers (libtss2-dev), so Swift calls the real API
   and the compiler checks every forwarder in tss2.c against it. The libraries are NOT linked:
   tss2.c defines the functions LockboxTPM calls as forwarders that load libtss2-esys,
   libtss2-tctildr, libtss2-rc and libtss2-mu with dlopen on first use. A program linking
   LockboxTPM (the lockbox CLI) therefore loads no tpm2-tss, and through it no libcrypto, until a
   TPM is actually used: start-up of every other command skips mapping and relocating them
   (docs/PERFORMANCE.md). If the libraries cannot be loaded, Tss2_TctiLdr_Initialize fails with a
   TCTI-layer code (reported as "no TPM could be reached") and Tss2_RC_Decode returns dlerror's
   text; no call aborts. */
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_mu.h>
#include <stddef.h>

/* Loads the four tpm2-tss libraries and looks up every forwarded function, once per process (later
   calls return the first result). Returns 1 on success; else 0, with what failed in `error`.
   Thread-safe. The forwarders call it themselves; call it first for a better error. */
int lockbox_tss2_load(char *error, size_t error_size);

/* 1 if the libraries are loaded in this process (for tests and `lockbox doctor`), else 0. */
int lockbox_tss2_is_loaded(void);
#endif
