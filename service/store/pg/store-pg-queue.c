/* A transaction's audit records: queued as it runs (pg_audit_insert()),
 * sent to hwid_audit_append() with its COMMIT (store-pg.c's pg_tx()),
 * given their ids and hashes from what that returned, and handed to the
 * sink once committed -- or dropped with a rollback.  Also the records'
 * JSON, which an issuance's hwid_issue() member carries. */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "error.h"
#include "escape.h"
#include "store-pg.h"
#include "store-rows.h"

struct pg_audit_copy {
        char *f[6];
        int64_t id, at;
        uint8_t prev[STORE_AUDIT_HASH_LEN], hash[STORE_AUDIT_HASH_LEN];
};

bool pg_audit_ok(const store_audit *a) {
        return a && store_str_ok(a->actor, 256) && store_str_ok(a->action, 64) && store_str_ok(a->outcome, 64);
}

/* ---- the queue ---- */

static void copy_clear(pg_audit_copy *x) {
        for (size_t i = 0; i < ELEMENTSOF(x->f); i++)
                free(x->f[i]);
}

/* A copy of a (fields escaped already) at the end of the queue. */
static int queue_push(pg_slot *c, const store_audit *a) {
        const char *in[6] = { a->actor, a->action, a->target, a->outcome, a->reason, a->token_id };
        pg_audit_copy *x;
        bool oom = false;

        if (c->n_queue == c->alloc_queue) {
                size_t n = c->alloc_queue ? c->alloc_queue * 2 : 8;
                if (!(x = realloc(c->queue, n * sizeof(*x))))
                        return hwid_fail(HWID_E_NOMEM, NULL);
                c->queue = x;
                c->alloc_queue = n;
        }
        x = &c->queue[c->n_queue];
        *x = (pg_audit_copy) { .id = a->id, .at = a->at };
        for (size_t i = 0; i < 6; i++)
                oom |= in[i] && !(x->f[i] = strdup(in[i]));
        if (oom) {
                copy_clear(x);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        c->n_queue++;
        return 0;
}

void pg_sink_flush(pg_slot *c) {
        pg_store *p = c->p;

        pthread_mutex_lock(&p->sink_lock);
        for (size_t i = 0; p->sink && i < c->n_queue; i++) {
                pg_audit_copy *x = &c->queue[i];
                store_audit a = { .at = x->at, .actor = x->f[0], .action = x->f[1], .target = x->f[2],
                                  .outcome = x->f[3], .reason = x->f[4], .token_id = x->f[5], .id = x->id,
                                  .prev_hash = x->prev, .hash = x->hash };
                (void) p->sink(&a, p->sink_userdata);
        }
        pthread_mutex_unlock(&p->sink_lock);
        pg_sink_drop(c);
}

void pg_sink_drop(pg_slot *c) {
        for (size_t i = 0; i < c->n_queue; i++)
                copy_clear(&c->queue[i]);
        c->n_queue = 0;
}

/* ---- appending ---- */

/* a as stored: its fields escaped (copies in f, freed by the caller),
 * at now if a->at is 0. */
static int audit_escape(const store_audit *a, int64_t now, char *f[6], store_audit *ret) {
        const char *in[6] = { a->actor, a->action, a->target, a->outcome, a->reason, a->token_id };
        int r;

        if (!pg_audit_ok(a))
                return hwid_fail(HWID_E_INVALID, "audit record lacks an actor, action or outcome");
        for (size_t i = 0; i < 6; i++)
                if (in[i] && (r = text_escape(in[i], strlen(in[i]), &f[i])) < 0)
                        return r;
        *ret = (store_audit) { .at = a->at ? a->at : now, .actor = f[0], .action = f[1], .target = f[2],
                               .outcome = f[3], .reason = f[4], .token_id = f[5] };
        return 0;
}

static void fields_free(char *f[6]) {
        for (size_t i = 0; i < 6; i++)
                free(f[i]);
}

int pg_audit_insert(pg_slot *c, const store_audit *a, int64_t now) {
        char *f[6] = { 0 };
        store_audit rec;
        int r = audit_escape(a, now, f, &rec);

        if (r >= 0)
                r = queue_push(c, &rec);
        fields_free(f);
        return r;
}

void pg_json_str(json_object *o, const char *key, const char *v) {
        json_object_object_add(o, key, v ? json_object_new_string(v) : NULL);
}

/* A record as stored, as hwid_audit_rec in JSON (at, the six fields). */
static json_object *record_json(const store_audit *a) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "at", json_object_new_int64(a->at));
        pg_json_str(o, "actor", a->actor);
        pg_json_str(o, "action", a->action);
        pg_json_str(o, "target", a->target);
        pg_json_str(o, "outcome", a->outcome);
        pg_json_str(o, "reason", a->reason);
        pg_json_str(o, "token_id", a->token_id);
        return o;
}

int pg_audit_record(const store_audit *a, int64_t now, json_object **ret) {
        char *f[6] = { 0 };
        store_audit rec;
        int r = audit_escape(a, now, f, &rec);

        if (r >= 0 && !(*ret = record_json(&rec)))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        fields_free(f);
        return r;
}

int pg_audit_json(pg_slot *c, char **ret) {
        json_object *all = json_object_new_array();
        char *s = NULL;

        for (size_t i = 0; all && i < c->n_queue; i++) {
                pg_audit_copy *x = &c->queue[i];
                json_object *o = record_json(&(store_audit) {
                        .at = x->at, .actor = x->f[0], .action = x->f[1], .target = x->f[2], .outcome = x->f[3],
                        .reason = x->f[4], .token_id = x->f[5] });
                if (!o || json_object_array_add(all, o) < 0) {
                        json_object_put(o);
                        json_object_put(all);
                        all = NULL;
                }
        }
        if (all)
                s = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN));
        json_object_put(all);
        if (!s)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = s;
        return 0;
}

int pg_audit_chained(pg_slot *c, PGresult *res) {
        if ((size_t) PQntuples(res) != c->n_queue)
                return hwid_fail(HWID_E_STORE, "PostgreSQL %s chained %d audit records, not %zu", c->p->label,
                                 PQntuples(res), c->n_queue);
        for (size_t i = 0; i < c->n_queue; i++) {
                pg_audit_copy *x = &c->queue[i];
                x->id = pg_i64(res, (int) i, 0);
                if (!pg_blob_copy(res, (int) i, 1, x->prev, STORE_AUDIT_HASH_LEN) ||
                    !pg_blob_copy(res, (int) i, 2, x->hash, STORE_AUDIT_HASH_LEN))
                        return hwid_fail(HWID_E_STORE, "PostgreSQL %s chained an audit record without its hashes",
                                         c->p->label);
        }
        return 0;
}
