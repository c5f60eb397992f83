// Loads GIO and libsecret with dlopen, for libsecret's fallback session only, and fills
// lockbox_libsecret_table (see include/CLibsecretFallback.h for why).
#define _GNU_SOURCE  // dlinfo
#include "CLibsecretFallback.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

LockboxLibsecretTable lockbox_libsecret_table;

static pthread_once_t glib_once = PTHREAD_ONCE_INIT;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char glib_error[512];
static char load_error[512];
static char loaded_path[4096];

// The file a handle was loaded from, for `lockbox doctor`: the loader's own record (dlinfo), not
// dladdr, which scans the library's symbol table (0.2 M instructions for GIO, on every command).
static void record_path(void *handle, char *path, size_t size) {
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL) snprintf(path, size, "%s", map->l_name);
}

// Opens `library` (RTLD_NODELETE: GLib's type system cannot be unloaded); NULL with dlerror's
// message in `error` on failure.
static void *open_library(const char *library, char *error, size_t error_size) {
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(error, error_size, "%s", why ? why : "dlopen failed");
    }
    return handle;
}

// Looks `name` up in `handle` (and the libraries it depends on) into `*slot`; 0 with a message
// naming `library` and the function in `error` if it is missing.
static int look_up(void *handle, const char *name, void **slot, const char *library, char *error, size_t error_size) {
    *slot = dlsym(handle, name);
    if (*slot == NULL) snprintf(error, error_size, "%s or its GLib has no %s", library, name);
    return *slot != NULL;
}

// For the X lists of CLibsecretFallback.h, inside a loader with `handle`, `library`, `error` and
// `error_size` in scope. The pointers are written before the loader's flag, and pthread_once
// orders both before any reader.
#define LOCKBOX_LOOK_UP(ret, name, params, args) \
    if (!look_up(handle, #name, (void **)&lockbox_libsecret_table.name, library, error, error_size)) return;

static void load_glib(void) {
    // The run-time name of GIO's ABI (libglib2.0-0), not the -dev symlink.
    const char *library = "libgio-2.0.so.0";
    char *error = glib_error;
    size_t error_size = sizeof glib_error;
    void *handle = open_library(library, error, error_size);
    if (handle == NULL) return;
    LOCKBOX_GLIB_FUNCTIONS(LOCKBOX_LOOK_UP)
    __atomic_store_n(&lockbox_libsecret_table.glib_loaded, 1, __ATOMIC_RELEASE);
}

int lockbox_glib_load(char *error, size_t error_size) {
    pthread_once(&glib_once, load_glib);
    if (lockbox_libsecret_table.glib_loaded) return 1;
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", glib_error);
    return 0;
}

static void load(void) {
    if (!lockbox_glib_load(load_error, sizeof load_error)) return;
    const char *library = "libsecret-1.so.0";
    char *error = load_error;
    size_t error_size = sizeof load_error;
    void *handle = open_library(library, error, error_size);
    if (handle == NULL) return;
    LOCKBOX_LIBSECRET_FUNCTIONS(LOCKBOX_LOOK_UP)
    LOCKBOX_LIBSECRET_PRIVATE_FUNCTIONS(LOCKBOX_LOOK_UP)
    record_path(handle, loaded_path, sizeof loaded_path);
    __atomic_store_n(&lockbox_libsecret_table.loaded, 1, __ATOMIC_RELEASE);
}
#undef LOCKBOX_LOOK_UP

int lockbox_libsecret_load(char *error, size_t error_size) {
    pthread_once(&load_once, load);
    if (lockbox_libsecret_table.loaded) return 1;
    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", load_error);
    return 0;
}

// The flag is read with acquire ordering (its store releases): this may be called from any
// thread, with or without a load in progress elsewhere.
const char *lockbox_libsecret_path(void) {
    return __atomic_load_n(&lockbox_libsecret_table.loaded, __ATOMIC_ACQUIRE) && loaded_path[0] != '\0' ? loaded_path : NULL;
}

// The start of GObjectClass (gobject/gobject.h; unchanged since GLib 2.0): the class
// structure's first field is GTypeClass (one GType), then the construct properties, then the
// constructor.
typedef struct {
    GType g_type;
    void *construct_properties;
    GObject *(*constructor)(GType type, guint n_construct_properties, void *construct_properties);
} LockboxObjectClassStart;

enum {
    G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES = 1 << 0,
    G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS = 1 << 1,
    G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START = 1 << 2,
};

static GObject *(*secret_service_constructor)(GType, guint, void *);
static pthread_once_t lean_type_once = PTHREAD_ONCE_INIT;
static GType lean_type;

// libsecret's constructor sets the proxy's name, path, interface and flags (to none) after
// GObject's; this one then sets the flags Lockbox wants, still during construction (the
// property is construct-only, as libsecret's own setting of it relies on).
static GObject *lean_constructor(GType type, guint n_construct_properties, void *construct_properties) {
    GObject *object = secret_service_constructor(type, n_construct_properties, construct_properties);
    lockbox_libsecret_table.g_object_set(object, "g-flags",
                                         (int)(G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES | G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS
                                               | G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START),
                                         NULL);
    return object;
}

static void lean_class_init(gpointer g_class, gpointer class_data) {
    (void)class_data;
    LockboxObjectClassStart *object_class = g_class;
    secret_service_constructor = object_class->constructor;  // inherited: libsecret's
    object_class->constructor = lean_constructor;
}

static void register_lean_type(void) {
    GType parent = lockbox_libsecret_table.secret_service_get_type();
    GTypeQuery query;
    memset(&query, 0, sizeof query);
    lockbox_libsecret_table.g_type_query(parent, &query);
    if (query.type == 0) return;
    lean_type = lockbox_libsecret_table.g_type_register_static_simple(parent, "LockboxSecretService", query.class_size, lean_class_init,
                                                                      query.instance_size, NULL, 0);
}

SecretService *lockbox_secret_service_open(GCancellable *cancellable, GError **error) {
    if (!lockbox_libsecret_table.loaded) lockbox_libsecret_not_loaded("lockbox_secret_service_open");
    pthread_once(&lean_type_once, register_lean_type);
    if (lean_type == 0) {
        // Not expected with any libsecret; fall back to the default proxy rather than fail.
        return lockbox_libsecret_table.secret_service_get_sync(SECRET_SERVICE_NONE, cancellable, error);
    }
    SecretService *service = lockbox_libsecret_table.g_initable_new(lean_type, cancellable, error, NULL);
    if (service == NULL) return NULL;
    // Without auto-start, a proxy whose name has no owner would fail each call with a local
    // "proxy ... without an owner" error; report it as the bus would have instead.
    gchar *owner = lockbox_libsecret_table.g_dbus_proxy_get_name_owner((GDBusProxy *)service);
    if (owner == NULL) {
        lockbox_libsecret_table.g_object_unref(service);
        if (error != NULL) {
            *error = lockbox_libsecret_table.g_dbus_error_new_for_dbus_error(
                "org.freedesktop.DBus.Error.NameHasNoOwner", "the Secret Service provider (org.freedesktop.secrets) is no longer running");
        }
        return NULL;
    }
    lockbox_libsecret_table.g_free(owner);
    return service;
}

void lockbox_libsecret_not_loaded(const char *name) {
    fprintf(stderr, "Lockbox: %s called before its library was loaded (lockbox_glib_load, lockbox_libsecret_load)\n", name);
    abort();
}
