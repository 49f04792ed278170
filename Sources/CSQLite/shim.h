#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT is `((sqlite3_destructor_type)-1)`: a cast of an integer to a
// function pointer, which Swift cannot import. It tells SQLite to copy the bound
// bytes before the bind call returns, so Swift buffers may be released right after.
static inline sqlite3_destructor_type CSQLite_transient(void) {
    return (sqlite3_destructor_type)-1;
}

// SQLITE_STATIC (`(sqlite3_destructor_type)0`): the bytes outlive the statement.
static inline sqlite3_destructor_type CSQLite_static(void) {
    return (sqlite3_destructor_type)0;
}

#endif
