/* Reading results, for every file of the PostgreSQL store: columns, rows
 * into arrays, and the rows a command changed. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"

int64_t pg_changes(PGresult *res) {
        const char *n = PQcmdTuples(res);

        return n && n[0] ? strtoll(n, NULL, 10) : 0;
}

const char *pg_val(PGresult *res, int row, int col) {
        return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

char *pg_strdup(PGresult *res, int row, int col, bool *oom) {
        const char *v = pg_val(res, row, col);
        char *d;

        if (!v)
                return NULL;
        if (!(d = strdup(v)))
                *oom = true;
        return d;
}

uint8_t *pg_blobdup(PGresult *res, int row, int col, size_t *ret_len, bool *oom) {
        const char *v = pg_val(res, row, col);
        unsigned char *raw;
        uint8_t *d;
        size_t n = 0;

        *ret_len = 0;
        if (!v)
                return NULL;
        if (!(raw = PQunescapeBytea((const unsigned char *) v, &n)) || !(d = malloc(n ? n : 1))) {
                PQfreemem(raw);
                *oom = true;
                return NULL;
        }
        memcpy(d, raw, n);
        PQfreemem(raw);
        *ret_len = n;
        return d;
}

bool pg_blob_copy(PGresult *res, int row, int col, uint8_t *dst, size_t len) {
        bool oom = false;
        size_t n = 0;
        uint8_t *b = pg_blobdup(res, row, col, &n, &oom);
        bool ok = b && n == len;

        if (ok)
                memcpy(dst, b, len);
        free(b);
        return ok;
}

void pg_copy(PGresult *res, int row, int col, char *dst, size_t size) {
        const char *v = pg_val(res, row, col);

        snprintf(dst, size, "%s", v ? v : "");
}

int64_t pg_i64(PGresult *res, int row, int col) {
        const char *v = pg_val(res, row, col);

        return v ? strtoll(v, NULL, 10) : 0;
}

bool pg_bool(PGresult *res, int row, int col) {
        const char *v = pg_val(res, row, col);

        return v && v[0] == 't';
}

int pg_rows(PGresult *res, size_t size, pg_row_fn from_row, void (*free_all)(void *all, size_t n), void **ret,
            size_t *ret_n) {
        size_t n = (size_t) PQntuples(res), i;
        uint8_t *all = calloc(n + 1, size);
        int r = 0;

        if (!all)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (i = 0; i < n && (r = from_row(res, (int) i, all + i * size)) >= 0; i++)
                ;
        if (r < 0) {
                free_all(all, i);
                return r;
        }
        *ret = all;
        *ret_n = n;
        return 0;
}
