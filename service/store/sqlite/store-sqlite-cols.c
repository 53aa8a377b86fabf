/* Column readers and growing arrays, for every file of the SQLite store. */
#include <stdio.h>
#include <string.h>

#include "store-sqlite.h"

char *sqlite_col_strdup(sqlite3_stmt *st, int i, bool *oom) {
        const unsigned char *t;
        char *d;

        if (sqlite3_column_type(st, i) == SQLITE_NULL)
                return NULL;
        /* NULL from a non-NULL column: SQLite ran out of memory converting it. */
        t = sqlite3_column_text(st, i);
        d = t ? strdup((const char *) t) : NULL;
        if (!d)
                *oom = true;
        return d;
}

uint8_t *sqlite_col_blobdup(sqlite3_stmt *st, int i, size_t *ret_len, bool *oom) {
        const void *p = sqlite3_column_blob(st, i);
        size_t n = (size_t) sqlite3_column_bytes(st, i);
        uint8_t *d;

        *ret_len = 0;
        if (!p || n == 0)
                return NULL;
        d = malloc(n);
        if (!d) {
                *oom = true;
                return NULL;
        }
        memcpy(d, p, n);
        *ret_len = n;
        return d;
}

void sqlite_col_copy(sqlite3_stmt *st, int i, char *dst, size_t size) {
        const unsigned char *t = sqlite3_column_text(st, i);

        snprintf(dst, size, "%s", t ? (const char *) t : "");
}

void *sqlite_array_grow(void *arr, size_t *alloc, size_t n, size_t elem) {
        size_t want = *alloc ? *alloc * 2 : 16;
        void *p;

        if (n < *alloc)
                return arr;
        p = reallocarray(arr, want, elem);
        if (!p)
                return NULL;
        memset((char *) p + *alloc * elem, 0, (want - *alloc) * elem);
        *alloc = want;
        return p;
}
