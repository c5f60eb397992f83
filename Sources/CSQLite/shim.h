#ifndef LOCKBOX_CSQLITE_SHIM_H
#define LOCKBOX_CSQLITE_SHIM_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import.
static inline void (*lockbox_sqlite_transient(void))(void *) { return SQLITE_TRANSIENT; }

// Settings for a connection to a file nobody vouches for (sqlite3_db_config is variadic, which
// Swift cannot call): defensive mode (no writable schema, no corrupting pragmas), triggers and
// views never run, the schema trusted with no function that has side effects, no extension
// loading, and no string, BLOB or row longer than `max_length` bytes is ever loaded
// (SQLITE_TOOBIG instead). Returns the first failing SQLite result, or SQLITE_OK.
static inline int lockbox_sqlite_distrust_file(sqlite3 *db, int max_length) {
    static const int off[] = {
        SQLITE_DBCONFIG_ENABLE_TRIGGER, SQLITE_DBCONFIG_ENABLE_VIEW, SQLITE_DBCONFIG_TRUSTED_SCHEMA,
        SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION,
    };
    int status = sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
    for (unsigned i = 0; status == SQLITE_OK && i < sizeof off / sizeof off[0]; i++) {
        int now = -1;
        status = sqlite3_db_config(db, off[i], 0, &now);
        if (status == SQLITE_OK && now != 0) status = SQLITE_ERROR;
    }
    if (status != SQLITE_OK) return status;
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, max_length);
    if (sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1) != max_length) return SQLITE_ERROR;
    // A vault's statements and tables are small: a schema of long statements or wide tables is
    // refused while SQLite reads it, before it costs time or memory.
    sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 64 * 1024);
    sqlite3_limit(db, SQLITE_LIMIT_COLUMN, 16);
    return SQLITE_OK;
}
#endif
