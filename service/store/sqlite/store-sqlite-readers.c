/* Read connections.  In WAL mode readers do not wait for the writer, but
 * one connection serves one thread at a time: with every lookup on the
 * writing connection, a request checking its token waited behind whole
 * batch commits (their fsync included).  Lookups therefore take one of a
 * few read-only connections of their own; each is a store object with its
 * own lock and statement cache, so the read functions run unchanged on
 * it.  A lookup started after a commit returned sees that commit. */
#include <stdatomic.h>

#include "error.h"
#include "store-sqlite.h"

static int reader_open(const sqlite_store *parent, sqlite_store **ret) {
        _cleanup_(sqlite_conn_freep) sqlite_store *r = NULL;
        int e = sqlite_alloc(parent->path, &r);

        if (e < 0)
                return e;
        if (sqlite_connect(r) < 0)
                return -HWID_E_STORE;
        /* A read connection never writes, whatever a caller might try. */
        if (sqlite3_exec(r->db, "PRAGMA query_only=ON", NULL, NULL, NULL) != SQLITE_OK)
                return sqlite_sql_fail(r, "make a read connection read-only");
        *ret = TAKE_PTR(r);
        return 0;
}

int sqlite_readers_open(sqlite_store *s) {
        int r;

        for (size_t i = 0; i < SQLITE_STORE_READERS; i++) {
                if ((r = reader_open(s, &s->readers[i])) < 0)
                        return r;
                s->n_readers = i + 1;
        }
        return 0;
}

void sqlite_readers_close(sqlite_store *s) {
        for (size_t i = 0; i < s->n_readers; i++)
                sqlite_conn_free(s->readers[i]);
        s->n_readers = 0;
}

/* A free connection if there is one, else wait for one; a connection this
 * thread already holds (a lookup inside a callback of another) is skipped. */
static sqlite_store *reader_take(sqlite_store *s) {
        unsigned start = atomic_fetch_add_explicit(&s->next_reader, 1, memory_order_relaxed);
        size_t i;

        for (i = 0; i < s->n_readers; i++) {
                sqlite_store *c = s->readers[(start + i) % s->n_readers];
                if (pthread_mutex_trylock(&c->lock) == 0)
                        return c;
        }
        for (i = 0; i < s->n_readers; i++) {
                sqlite_store *c = s->readers[(start + i) % s->n_readers];
                if (pthread_mutex_lock(&c->lock) == 0)
                        return c;
        }
        return NULL;
}

int sqlite_read_enter(sqlite_store **s, sqlite_store **ret_guard) {
        sqlite_store *c;

        if ((*s)->n_readers == 0)
                return sqlite_enter(*s, false, ret_guard);
        c = reader_take(*s);
        if (!c)
                return hwid_fail(HWID_E_INTERNAL, "cannot lock a read connection of the store");
        *s = c;
        *ret_guard = c;
        return 0;
}
