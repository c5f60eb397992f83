#ifndef LOCKBOX_CLIBSECRET_SHIM_H
#define LOCKBOX_CLIBSECRET_SHIM_H
/* The D-Bus-path functions (secret-paths.h: search for item paths, fetch secrets by path without
   building an item proxy each) are "subject to change" by libsecret's label, unchanged since
   0.18 (2014); SecretServiceStore's reads use them. */
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
#include <gio/gio.h>
#endif
