#ifndef LOCKBOX_CLIBSECRETFALLBACK_H
#define LOCKBOX_CLIBSECRETFALLBACK_H
/* The part of libsecret, GLib and GIO that LockboxSecretService calls, declared here and loaded
   at run time with dlopen (libsecret.c) instead of linked:
   - a build needs no libsecret/GLib headers and no pkg-config, whose GLib flags carry -pthread,
     which SwiftPM refuses ("prohibited flag(s): -pthread") with a warning on every build;
   - a program linking Lockbox's Secret Service store loads none of them unless it needs
     libsecret's session, the fallback: Lockbox speaks D-Bus itself (DBusConnection.swift) and
     makes the encrypted session itself with libcrypto (CLibcrypto.h, SessionCrypto.swift). Only
     when a provider answers NotSupported to that session are libsecret, GIO, GObject, GLib and
     libgcrypt loaded.
   Each prototype is copied from the library's header (libsecret >= 0.18, GLib >= 2.26: the
   D-Bus-path functions of secret-paths.h, labelled "subject to change", are unchanged since
   2014); the one struct layout is the public GError, and every other type is
   opaque. The inline functions keep the C names, so Swift calls them as it would the real API.
   Call lockbox_glib_load() before a GLib function and lockbox_libsecret_load() before a libsecret
   one; an unloaded call aborts with a message. */
#include <stddef.h>
#include <stdint.h>

typedef char gchar;
typedef int gint;
typedef unsigned int guint;
typedef gint gboolean;
typedef uint32_t GQuark;
typedef void *gpointer;
typedef const void *gconstpointer;
typedef size_t gsize;
typedef ptrdiff_t gssize;
typedef uint64_t guint64;

typedef struct _GError {
    GQuark domain;
    gint code;
    gchar *message;
} GError;

typedef struct _GHashTable GHashTable;
typedef struct _GVariant GVariant;
typedef struct _GVariantType GVariantType;
typedef struct _GCancellable GCancellable;
typedef struct _GDBusProxy GDBusProxy;
typedef struct _GDBusConnection GDBusConnection;
typedef struct _SecretService SecretService;
typedef struct _SecretValue SecretValue;
typedef struct _SecretSchema SecretSchema;

typedef guint (*GHashFunc)(gconstpointer key);
typedef gboolean (*GEqualFunc)(gconstpointer a, gconstpointer b);
typedef void (*GDestroyNotify)(gpointer data);

typedef enum { SECRET_SERVICE_NONE = 0, SECRET_SERVICE_OPEN_SESSION = 1 << 1, SECRET_SERVICE_LOAD_COLLECTIONS = 1 << 2 } SecretServiceFlags;
typedef enum { SECRET_ERROR_PROTOCOL = 1, SECRET_ERROR_IS_LOCKED = 2, SECRET_ERROR_NO_SUCH_OBJECT = 3, SECRET_ERROR_ALREADY_EXISTS = 4 } SecretError;
typedef enum { G_BUS_TYPE_SESSION = 2 } GBusType;
typedef enum { SECRET_ITEM_CREATE_NONE = 0, SECRET_ITEM_CREATE_REPLACE = 1 << 1 } SecretItemCreateFlags;
typedef enum { G_IO_ERROR_CANCELLED = 19 } GIOErrorEnum;

/* X(return type, name, (parameters), (arguments)): the lists the table, the loaders and the
   inline functions are made from. GLib and GIO (libgio-2.0.so.0 and what it links), loaded with
   libsecret (and by the tests' KeyringProbe): */
#define LOCKBOX_GLIB_FUNCTIONS(X) \
    X(GCancellable *, g_cancellable_new, (void), ()) \
    X(void, g_cancellable_cancel, (GCancellable *cancellable), (cancellable)) \
    X(GDBusConnection *, g_bus_get_sync, (GBusType bus_type, GCancellable *cancellable, GError **error), (bus_type, cancellable, error)) \
    X(gchar *, g_dbus_error_get_remote_error, (const GError *error), (error)) \
    X(gboolean, g_dbus_error_is_remote_error, (const GError *error), (error)) \
    X(gboolean, g_dbus_error_strip_remote_error, (GError *error), (error)) \
    X(void, g_error_free, (GError *error), (error)) \
    X(void, g_free, (gpointer mem), (mem)) \
    X(gchar *, g_strdup, (const gchar *str), (str)) \
    X(const gchar *, g_quark_to_string, (GQuark quark), (quark)) \
    X(guint, g_str_hash, (gconstpointer v), (v)) \
    X(gboolean, g_str_equal, (gconstpointer v1, gconstpointer v2), (v1, v2)) \
    X(GHashTable *, g_hash_table_new_full, (GHashFunc hash_func, GEqualFunc key_equal_func, GDestroyNotify key_destroy_func, GDestroyNotify value_destroy_func), (hash_func, key_equal_func, key_destroy_func, value_destroy_func)) \
    X(gboolean, g_hash_table_insert, (GHashTable *hash_table, gpointer key, gpointer value), (hash_table, key, value)) \
    X(void, g_hash_table_unref, (GHashTable *hash_table), (hash_table)) \
    X(void, g_object_unref, (gpointer object), (object)) \
    X(GVariant *, g_variant_new_string, (const gchar *string), (string)) \
    X(GVariant *, g_variant_new_array, (const GVariantType *child_type, GVariant *const *children, gsize n_children), (child_type, children, n_children)) \
    X(GVariant *, g_variant_new_dict_entry, (GVariant *key, GVariant *value), (key, value)) \
    X(GVariant *, g_variant_ref_sink, (GVariant *value), (value)) \
    X(void, g_variant_unref, (GVariant *value), (value)) \
    X(GVariantType *, g_variant_type_new, (const gchar *type_string), (type_string)) \
    X(void, g_variant_type_free, (GVariantType *type), (type))

/* libsecret itself, loaded only when it carries a secret: the provider refused Lockbox's own
   session (NotSupported). */
#define LOCKBOX_LIBSECRET_FUNCTIONS(X) \
    X(SecretService *, secret_service_get_sync, (SecretServiceFlags flags, GCancellable *cancellable, GError **error), (flags, cancellable, error)) \
    X(SecretValue *, secret_service_lookup_sync, (SecretService *service, const SecretSchema *schema, GHashTable *attributes, GCancellable *cancellable, GError **error), (service, schema, attributes, cancellable, error)) \
    X(SecretValue *, secret_service_get_secret_for_dbus_path_sync, (SecretService *self, const gchar *item_path, GCancellable *cancellable, GError **error), (self, item_path, cancellable, error)) \
    X(gchar *, secret_service_create_item_dbus_path_sync, (SecretService *self, const gchar *collection_path, GHashTable *properties, SecretValue *value, SecretItemCreateFlags flags, GCancellable *cancellable, GError **error), (self, collection_path, properties, value, flags, cancellable, error)) \
    X(const gchar *, secret_value_get, (SecretValue *value, gsize *length), (value, length)) \
    X(SecretValue *, secret_value_new, (const gchar *secret, gssize length, const gchar *content_type), (secret, length, content_type)) \
    X(void, secret_value_unref, (gpointer value), (value))

/* Loaded for lockbox_secret_service_open (libsecret.c), not called from Swift. */
typedef size_t GType;
typedef struct _GObject GObject;
typedef struct _GTypeQuery {
    GType type;
    const gchar *type_name;
    guint class_size;
    guint instance_size;
} GTypeQuery;
typedef void (*GClassInitFunc)(gpointer g_class, gpointer class_data);
typedef void (*GInstanceInitFunc)(void *instance, gpointer g_class);
#define LOCKBOX_LIBSECRET_PRIVATE_FUNCTIONS(X) \
    X(GType, secret_service_get_type, (void), ()) \
    X(void, g_type_query, (GType type, GTypeQuery *query), (type, query)) \
    X(GType, g_type_register_static_simple, (GType parent_type, const gchar *type_name, guint class_size, GClassInitFunc class_init, guint instance_size, GInstanceInitFunc instance_init, int flags), (parent_type, type_name, class_size, class_init, instance_size, instance_init, flags)) \
    X(void, g_object_set, (gpointer object, const gchar *first_property_name, ...), ()) \
    X(gpointer, g_initable_new, (GType object_type, GCancellable *cancellable, GError **error, const gchar *first_property_name, ...), ()) \
    X(gchar *, g_dbus_proxy_get_name_owner, (GDBusProxy *proxy), (proxy)) \
    X(GError *, g_dbus_error_new_for_dbus_error, (const gchar *dbus_error_name, const gchar *dbus_error_message), (dbus_error_name, dbus_error_message))

/* The loaded functions (filled by lockbox_glib_load and lockbox_libsecret_load). */
#define LOCKBOX_LIBSECRET_FIELD(ret, name, params, args) ret (*name) params;
typedef struct {
    int glib_loaded;
    int loaded;
    LOCKBOX_GLIB_FUNCTIONS(LOCKBOX_LIBSECRET_FIELD)
    LOCKBOX_LIBSECRET_FUNCTIONS(LOCKBOX_LIBSECRET_FIELD)
    LOCKBOX_LIBSECRET_PRIVATE_FUNCTIONS(LOCKBOX_LIBSECRET_FIELD)
} LockboxLibsecretTable;
#undef LOCKBOX_LIBSECRET_FIELD
extern LockboxLibsecretTable lockbox_libsecret_table;

/* Loads GIO (libgio-2.0.so.0, and through it GObject and GLib) and looks up the GLib functions,
   once per process (later calls return the first result). Returns 1 on success; else 0, with
   what failed (dlerror's message) in `error`. Thread-safe. */
int lockbox_glib_load(char *error, size_t error_size);

/* Loads GIO as lockbox_glib_load does, then libsecret-1.so.0, and looks up libsecret's functions;
   once per process, same results and errors. */
int lockbox_libsecret_load(char *error, size_t error_size);

/* The file the loaded libsecret came from (e.g. /usr/lib/x86_64-linux-gnu/libsecret-1.so.0), or
   NULL before a successful load. */
const char *lockbox_libsecret_path(void);

/* A new libsecret SecretService proxy for the Secret Service's well-known name, built without
   what the default one (secret_service_get_sync) sets up and Lockbox never uses: no
   Properties.GetAll of the service (G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES), no match rules
   for the service's signals (DO_NOT_CONNECT_SIGNALS), no StartServiceByName (DO_NOT_AUTO_START:
   it is made after a plain call to the well-known name reached the provider, which activated it
   if need be). Its set-up is one AddMatch (the owner's changes) and one GetNameOwner instead of
   seven calls; the session (OpenSession) is opened by libsecret on the first secret, as with the
   default proxy. A name with no owner (the provider went away since) fails here as
   org.freedesktop.DBus.Error.NameHasNoOwner, the error a call to the name would have given.
   It is a subclass of SecretService, as secret_service_open_sync allows, because libsecret's own
   constructor forces the proxy flags to none. Returns NULL with `error` set on failure; the
   caller owns the reference (it is not libsecret's cached default proxy). */
SecretService *lockbox_secret_service_open(GCancellable *cancellable, GError **error);

/* Aborts with a message naming `name`: a function was called before its library was loaded. */
void lockbox_libsecret_not_loaded(const char *name) __attribute__((noreturn));

#define LOCKBOX_GLIB_INLINE(ret, name, params, args) \
    static inline ret name params { \
        if (!lockbox_libsecret_table.glib_loaded) lockbox_libsecret_not_loaded(#name); \
        return lockbox_libsecret_table.name args; \
    }
#define LOCKBOX_LIBSECRET_INLINE(ret, name, params, args) \
    static inline ret name params { \
        if (!lockbox_libsecret_table.loaded) lockbox_libsecret_not_loaded(#name); \
        return lockbox_libsecret_table.name args; \
    }
LOCKBOX_GLIB_FUNCTIONS(LOCKBOX_GLIB_INLINE)
LOCKBOX_LIBSECRET_FUNCTIONS(LOCKBOX_LIBSECRET_INLINE)
#undef LOCKBOX_GLIB_INLINE
#undef LOCKBOX_LIBSECRET_INLINE


#endif
