/* The audit sink: records reach it only once their transaction has
 * committed.  Appending queues a copy on the writing connection; COMMIT
 * hands the queue to the sink, a rollback (of the transaction, or of one
 * job's savepoint in a group commit) drops what it undid. */
#include <string.h>

#include "error.h"
#include "store-sqlite.h"

struct sqlite_audit_copy {
        store_audit a;
        uint8_t prev_hash[STORE_AUDIT_HASH_LEN];
        uint8_t hash[STORE_AUDIT_HASH_LEN];
        char *strings; /* the fields' text, one allocation */
};

static char *put(char **p, const char *s) {
        char *at = *p;
        size_t n;

        if (!s)
                return NULL;
        n = strlen(s) + 1;
        memcpy(at, s, n);
        *p += n;
        return at;
}

static int copy_record(const store_audit *a, sqlite_audit_copy *c) {
        const char *f[] = { a->actor, a->action, a->target, a->outcome, a->reason, a->token_id };
        size_t total = 0;
        char *p;

        for (size_t i = 0; i < ELEMENTSOF(f); i++)
                total += f[i] ? strlen(f[i]) + 1 : 0;
        c->strings = p = malloc(total ? total : 1);
        if (!p)
                return -HWID_E_NOMEM;
        c->a = (store_audit) { .at = a->at, .id = a->id, .actor = put(&p, a->actor), .action = put(&p, a->action),
                               .target = put(&p, a->target), .outcome = put(&p, a->outcome),
                               .reason = put(&p, a->reason), .token_id = put(&p, a->token_id) };
        if (a->prev_hash)
                memcpy(c->prev_hash, a->prev_hash, STORE_AUDIT_HASH_LEN);
        memcpy(c->hash, a->hash, STORE_AUDIT_HASH_LEN);
        c->a.prev_hash = c->prev_hash; /* the first record's is zeros */
        c->a.hash = c->hash;
        return 0;
}

void sqlite_audit_sink_queue(sqlite_store *s, const store_audit *a) {
        sqlite_audit_copy *p;

        if (!s->sink)
                return;
        p = sqlite_array_grow(s->sink_queue, &s->sink_alloc, s->sink_n, sizeof(*p));
        /* Out of memory: the record is in the database all the same; the
         * sink is a copy, and misses this one. */
        if (!p)
                return;
        s->sink_queue = p;
        if (copy_record(a, &p[s->sink_n]) == 0)
                s->sink_n++;
}

void sqlite_audit_sink_drop(sqlite_store *s, size_t keep) {
        while (s->sink_n > keep)
                free(s->sink_queue[--s->sink_n].strings);
}

void sqlite_audit_sink_flush(sqlite_store *s) {
        for (size_t i = 0; i < s->sink_n; i++)
                (void) s->sink(&s->sink_queue[i].a, s->sink_userdata);
        sqlite_audit_sink_drop(s, 0);
}

void sqlite_set_audit_sink(store *base, store_audit_fn fn, void *userdata, void (*free_userdata)(void *)) {
        sqlite_store *s = sqlite_of(base);

        pthread_mutex_lock(&s->lock);
        sqlite_audit_sink_drop(s, 0);
        if (s->sink_free)
                s->sink_free(s->sink_userdata);
        s->sink = fn;
        s->sink_userdata = userdata;
        s->sink_free = free_userdata;
        pthread_mutex_unlock(&s->lock);
}

void sqlite_audit_sink_close(sqlite_store *s) {
        sqlite_audit_sink_drop(s, 0);
        free(s->sink_queue);
        s->sink_queue = NULL;
        s->sink_alloc = 0;
        if (s->sink_free)
                s->sink_free(s->sink_userdata);
        s->sink = NULL;
        s->sink_free = NULL;
}
