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

static int reader_open(const store *parent, store **ret) {
        _cleanup_(store_sqlite_freep) store *r = NULL;
        int e = store_alloc(parent->path, &r);

        if (e < 0)
                return e;
        if (store_connect(r) < 0)
                return -HWID_E_STORE;
        /* A read connection never writes, whatever a caller might try. */
        if (sqlite3_exec(r->db, "PRAGMA query_only=ON", NULL, NULL, NULL) != SQLITE_OK)
                return store_sql_fail(r, "make a read connection read-only");
        *ret = TAKE_PTR(r);
        return 0;
}

int store_readers_open(store *s) {
        int r;

        for (size_t i = 0; i < STORE_READERS; i++) {
                if ((r = reader_open(s, &s->readers[i])) < 0)
                        return r;
                s->n_readers = i + 1;
        }
        return 0;
}

void store_readers_close(store *s) {
        for (size_t i = 0; i < s->n_readers; i++)
                store_sqlite_free(s->readers[i]);
        s->n_readers = 0;
}

/* A free connection if there is one, else wait for one; a connection this
 * thread already holds (a lookup inside a callback of another) is skipped. */
static store *reader_take(store *s) {
        unsigned start = atomic_fetch_add_explicit(&s->next_reader, 1, memory_order_relaxed);
        size_t i;

        for (i = 0; i < s->n_readers; i++) {
                store *c = s->readers[(start + i) % s->n_readers];
                if (pthread_mutex_trylock(&c->lock) == 0)
                        return c;
        }
        for (i = 0; i < s->n_readers; i++) {
                store *c = s->readers[(start + i) % s->n_readers];
                if (pthread_mutex_lock(&c->lock) == 0)
                        return c;
        }
        return NULL;
}

int store_read_enter(store **s, store **ret_guard) {
        store *c;

        if ((*s)->n_readers == 0)
                return store_enter(*s, false, ret_guard);
        c = reader_take(*s);
        if (!c)
                return hwid_fail(HWID_E_INTERNAL, "cannot lock a read connection of the store");
        *s = c;
        *ret_guard = c;
        return 0;
}
