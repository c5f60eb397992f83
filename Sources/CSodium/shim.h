#ifndef LOCKBOX_CSODIUM_SHIM_H
#define LOCKBOX_CSODIUM_SHIM_H
#include <sodium.h>
#endif
