#ifndef LOCKBOX_CKEYUTILS_SHIM_H
#define LOCKBOX_CKEYUTILS_SHIM_H
#include <keyutils.h>
#endif
