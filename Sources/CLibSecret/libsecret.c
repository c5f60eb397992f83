// Loads libsecret with dlopen and fills lockbox_libsecret_table (see include/CLibSecret.h for why).
#define _GNU_SOURCE  // dladdr
#include "CLibSecret.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

LockboxLibsecretTable lockbox_libsecret_table;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];
static char loaded_path[4096];

static void load(void) {
    // The run-time name of libsecret's ABI (the libsecret-1-0 package), not the -dev symlink.
    // RTLD_NODELETE: GLib's type system cannot be unloaded.
    void *handle = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "%s", why ? why : "dlopen failed");
        return;
    }
    LockboxLibsecretTable table;
    memset(&table, 0, sizeof table);
    // dlsym on libsecret's handle also searches the libraries it depends on (GLib, GObject, GIO).
#define LOCKBOX_LIBSECRET_LOOKUP(ret, name, params, args) \
    *(void **)(&table.name) = dlsym(handle, #name); \
    if (table.name == NULL) { \
        snprintf(load_error, sizeof load_error, "libsecret-1.so.0 or its GLib has no %s", #name); \
        return; \
    }
    LOCKBOX_LIBSECRET_FUNCTIONS(LOCKBOX_LIBSECRET_LOOKUP)
#undef LOCKBOX_LIBSECRET_LOOKUP
    Dl_info info;
    if (dladdr(*(void **)(&table.secret_service_get_sync), &info) != 0 && info.dli_fname != NULL) {
        snprintf(loaded_path, sizeof loaded_path, "%s", info.dli_fname);
    }
    table.loaded = 1;
    lockbox_libsecret_table = table;
}

int lockbox_libsecret_load(char *error, size_t error_size) {
    pthread_once(&load_once, load);
    if (lockbox_libsecret_table.loaded) return 1;
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", load_error);
    return 0;
}

const char *lockbox_libsecret_path(void) {
    return lockbox_libsecret_table.loaded && loaded_path[0] != '\0' ? loaded_path : NULL;
}

void lockbox_libsecret_not_loaded(const char *name) {
    fprintf(stderr, "Lockbox: %s called before libsecret was loaded (lockbox_libsecret_load)\n", name);
    abort();
}
