#ifndef LOCKBOX_CTSS2_SHIM_H
#define LOCKBOX_CTSS2_SHIM_H
// tpm2-tss: the Enhanced System API, the TCTI loader (picks device:, swtpm:, ... at run time),
// response-code decoding and the marshalling of TPM structures.
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_mu.h>
#endif
