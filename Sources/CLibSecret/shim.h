#ifndef LOCKBOX_CLIBSECRET_SHIM_H
#define LOCKBOX_CLIBSECRET_SHIM_H
#include <libsecret/secret.h>
#include <gio/gio.h>
#endif
