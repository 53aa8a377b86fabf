/* The audit trail in PostgreSQL: the same hash chain as every store
 * (store.h).  Appends from all replicas are put in one order by a
 * transaction-scoped advisory lock taken before the chain's head is read:
 * an append waits for the one before it to commit, so ids grow in chain
 * order and no two records share a prev_hash.  Records reach the sink
 * only after their transaction committed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "escape.h"
#include "store-pg.h"
#include "store-rows.h"

/* The audit chain's order is the write lock's (store-pg.h). */
#define PG_AUDIT_LOCK PG_WRITE_LOCK
#define PRUNE_BATCH_MAX 10000
#define AUDIT_COLS "id, at, actor, action, target, outcome, reason, token_id, prev_hash, hash"

struct store_pg_audit_copy {
        char *f[6];
        int64_t id, at;
        uint8_t prev[STORE_AUDIT_HASH_LEN], hash[STORE_AUDIT_HASH_LEN];
        bool has_prev;
};

static bool audit_ok(const store_audit *a) {
        return a && store_str_ok(a->actor, 256) && store_str_ok(a->action, 64) && store_str_ok(a->outcome, 64);
}

static int link_read(pg_slot *c, const char *role, store_audit_link *ret) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "read the audit chain", "SELECT id, at, hash FROM audit_chain WHERE role = $1", "t",
                        role);

        *ret = (store_audit_link) { 0 };
        if (r < 0 || PQntuples(res) == 0)
                return r;
        if (!pg_blob_copy(res, 0, 2, ret->hash, STORE_AUDIT_HASH_LEN))
                return hwid_fail(HWID_E_STORE, "the audit chain's %s in %s has no valid hash", role, c->p->label);
        ret->set = true;
        ret->id = pg_i64(res, 0, 0);
        ret->at = pg_i64(res, 0, 1);
        return 0;
}

static int link_write(pg_slot *c, const char *role, int64_t id, int64_t at, const uint8_t *hash) {
        return pg_exec(c, NULL, "move the audit chain",
                       "INSERT INTO audit_chain (role, id, at, hash) VALUES ($1, $2, $3, $4) "
                       "ON CONFLICT (role) DO UPDATE SET id = excluded.id, at = excluded.at, hash = excluded.hash",
                       "tIIb", role, id, at, hash, (size_t) STORE_AUDIT_HASH_LEN);
}

/* ---- the sink ---- */

static void copy_clear(store_pg_audit_copy *x) {
        for (size_t i = 0; i < ELEMENTSOF(x->f); i++)
                free(x->f[i]);
}

static void sink_queue(pg_slot *c, const store_audit *a, char *f[6]) {
        store_pg_audit_copy *x;

        if (!c->p->sink)
                return;
        if (c->n_queue == c->alloc_queue) {
                size_t n = c->alloc_queue ? c->alloc_queue * 2 : 8;
                if (!(x = realloc(c->queue, n * sizeof(*x))))
                        return; /* the record is in the database: only its copy to the sink is lost */
                c->queue = x;
                c->alloc_queue = n;
        }
        x = &c->queue[c->n_queue++];
        *x = (store_pg_audit_copy) { .id = a->id, .at = a->at, .has_prev = a->prev_hash != NULL };
        for (size_t i = 0; i < 6; i++)
                x->f[i] = f[i] ? strdup(f[i]) : NULL;
        if (a->prev_hash)
                memcpy(x->prev, a->prev_hash, STORE_AUDIT_HASH_LEN);
        memcpy(x->hash, a->hash, STORE_AUDIT_HASH_LEN);
}

void pg_sink_flush(pg_slot *c) {
        store_pg *p = c->p;

        pthread_mutex_lock(&p->sink_lock);
        for (size_t i = 0; p->sink && i < c->n_queue; i++) {
                store_pg_audit_copy *x = &c->queue[i];
                store_audit a = { .at = x->at, .actor = x->f[0], .action = x->f[1], .target = x->f[2],
                                  .outcome = x->f[3], .reason = x->f[4], .token_id = x->f[5], .id = x->id,
                                  .prev_hash = x->has_prev ? x->prev : NULL, .hash = x->hash };
                (void) p->sink(&a, p->sink_userdata);
        }
        pthread_mutex_unlock(&p->sink_lock);
        pg_sink_drop(c);
}

void pg_sink_truncate(pg_slot *c, size_t keep) {
        for (size_t i = keep; i < c->n_queue; i++)
                copy_clear(&c->queue[i]);
        if (keep < c->n_queue)
                c->n_queue = keep;
}

void pg_sink_drop(pg_slot *c) {
        pg_sink_truncate(c, 0);
}

/* ---- appending ---- */

static int escape_all(const store_audit *a, char *f[6]) {
        const char *in[6] = { a->actor, a->action, a->target, a->outcome, a->reason, a->token_id };
        int r;

        for (size_t i = 0; i < 6; i++)
                if (in[i] && (r = text_escape(in[i], strlen(in[i]), &f[i])) < 0)
                        return r;
        return 0;
}

static int audit_store(pg_slot *c, store_audit *rec, const store_audit_link *head, const uint8_t *hash) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "append to the audit log",
                        "INSERT INTO audit (at, actor, action, target, outcome, reason, token_id, prev_hash, hash) "
                        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
                        "Ittttttbb", rec->at, rec->actor, rec->action, rec->target, rec->outcome, rec->reason,
                        rec->token_id, head->hash, (size_t) STORE_AUDIT_HASH_LEN, hash,
                        (size_t) STORE_AUDIT_HASH_LEN);

        if (r >= 0)
                rec->id = pg_i64(res, 0, 0);
        return r;
}

int pg_audit_insert(pg_slot *c, const store_audit *a, int64_t now) {
        char *f[6] = { 0 };
        store_audit rec;
        store_audit_link head;
        uint8_t hash[STORE_AUDIT_HASH_LEN];
        int r;

        if (!audit_ok(a))
                return hwid_fail(HWID_E_INVALID, "audit record lacks an actor, action or outcome");
        rec = *a;
        if ((r = escape_all(a, f)) >= 0) {
                rec = (store_audit) { .at = a->at ? a->at : now, .actor = f[0], .action = f[1], .target = f[2],
                                      .outcome = f[3], .reason = f[4], .token_id = f[5] };
                if ((r = pg_exec(c, NULL, "lock the audit chain", "SELECT pg_advisory_xact_lock(" PG_AUDIT_LOCK ")",
                                 NULL)) >= 0 &&
                    (r = link_read(c, "head", &head)) >= 0 &&
                    (r = store_audit_hash(head.set ? head.hash : NULL, &rec, hash)) >= 0 &&
                    (r = audit_store(c, &rec, &head, hash)) >= 0 &&
                    (r = link_write(c, "head", rec.id, rec.at, hash)) >= 0) {
                        rec.prev_hash = head.set ? head.hash : NULL;
                        rec.hash = hash;
                        sink_queue(c, &rec, f);
                }
        }
        for (size_t i = 0; i < 6; i++)
                free(f[i]);
        return r;
}

typedef struct audit_q {
        const store_audit *a;
        size_t limit;
        int64_t before;
        size_t n;
        store_audit_fn fn;
        store_audit_checkpoint_fn cpfn;
        store_audit_sign_fn sign;
        void *userdata;
        store_audit_link *anchor, *head;
} audit_q;

static int append_run(pg_slot *c, void *userdata) {
        audit_q *q = userdata;

        return pg_audit_insert(c, q->a, (int64_t) time(NULL));
}

int store_pg_audit_append(store_pg *p, const store_audit *a) {
        if (!audit_ok(a))
                return hwid_fail(HWID_E_INVALID, "audit record lacks an actor, action or outcome");
        return pg_tx(p, append_run, &(audit_q) { .a = a }, "commit the audit record");
}

/* ---- reading ---- */

/* Calls fn for each row of res; blobs are decoded into buffers it lends. */
static int rows_each(PGresult *res, store_audit_fn fn, void *userdata) {
        uint8_t prev[STORE_AUDIT_HASH_LEN], hash[STORE_AUDIT_HASH_LEN];
        int r;

        for (int i = 0; i < PQntuples(res); i++) {
                store_audit a = { .id = pg_i64(res, i, 0), .at = pg_i64(res, i, 1), .actor = pg_val(res, i, 2),
                                  .action = pg_val(res, i, 3), .target = pg_val(res, i, 4),
                                  .outcome = pg_val(res, i, 5), .reason = pg_val(res, i, 6),
                                  .token_id = pg_val(res, i, 7) };
                if (pg_blob_copy(res, i, 8, prev, sizeof(prev)))
                        a.prev_hash = prev;
                if (pg_blob_copy(res, i, 9, hash, sizeof(hash)))
                        a.hash = hash;
                if ((r = fn(&a, userdata)) != 0)
                        return r;
        }
        return 0;
}

static int foreach_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        audit_q *q = userdata;
        int64_t lim = q->limit == 0 || q->limit > (size_t) INT64_MAX ? INT64_MAX : (int64_t) q->limit;
        int r = pg_exec(c, &res, "read the audit log",
                        "SELECT " AUDIT_COLS " FROM (SELECT * FROM audit ORDER BY id DESC LIMIT $1) AS a ORDER BY id",
                        "I", lim);

        return r < 0 ? r : rows_each(res, q->fn, q->userdata);
}

int store_pg_audit_foreach(store_pg *p, size_t limit, store_audit_fn fn, void *userdata) {
        return pg_read(p, foreach_run, &(audit_q) { .limit = limit, .fn = fn, .userdata = userdata });
}

/* One REPEATABLE READ transaction (without the write lock: appends go
 * on): the ends and the records are one snapshot. */
static int chain_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        audit_q *q = userdata;
        int r;

        r = pg_exec(c, NULL, "read the audit log", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL);
        if (r >= 0 &&
            (r = link_read(c, "anchor", q->anchor)) >= 0 && (r = link_read(c, "head", q->head)) >= 0 &&
            (!q->cpfn || (r = pg_audit_checkpoints_each(c, q->cpfn, q->userdata)) == 0) &&
            (r = pg_exec(c, &res, "read the audit log", "SELECT " AUDIT_COLS " FROM audit ORDER BY id", NULL)) >= 0)
                r = rows_each(res, q->fn, q->userdata);
        if (c->conn)
                PQclear(PQexec(c->conn, "ROLLBACK"));
        return r;
}

int store_pg_audit_chain_read(store_pg *p, store_audit_link *ret_anchor, store_audit_link *ret_head,
                              store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata) {
        audit_q q = { .anchor = ret_anchor, .head = ret_head, .cpfn = cpfn, .fn = fn, .userdata = userdata };

        return pg_read(p, chain_run, &q);
}

static int head_run(pg_slot *c, void *userdata) {
        return link_read(c, "head", userdata);
}

int store_pg_audit_head(store_pg *p, store_audit_link *ret) {
        return pg_read(p, head_run, ret);
}

/* ---- retention ---- */

typedef struct prune_scan {
        store_pg *p;
        int64_t before;
        store_audit_link anchor;
        size_t n;
} prune_scan;

static int prune_next(const store_audit *a, void *userdata) {
        prune_scan *s = userdata;
        uint8_t h[STORE_AUDIT_HASH_LEN];
        const uint8_t zero[STORE_AUDIT_HASH_LEN] = { 0 };

        if (a->at >= s->before)
                return 1; /* stop */
        if (!a->hash || !a->prev_hash ||
            memcmp(a->prev_hash, s->anchor.set ? s->anchor.hash : zero, STORE_AUDIT_HASH_LEN) != 0 ||
            store_audit_hash(a->prev_hash, a, h) < 0 || memcmp(h, a->hash, STORE_AUDIT_HASH_LEN) != 0)
                return hwid_fail(HWID_E_STORE, "audit record %lld in %s does not verify: not pruning it "
                                 "(see hwid audit verify)", (long long) a->id, s->p->label);
        s->anchor = (store_audit_link) { .set = true, .id = a->id, .at = a->at };
        memcpy(s->anchor.hash, a->hash, STORE_AUDIT_HASH_LEN);
        s->n++;
        return 0;
}

static int prune_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        audit_q *q = userdata;
        prune_scan s = { .p = c->p, .before = q->before };
        int r;

        if ((r = pg_exec(c, NULL, "lock the audit chain", "SELECT pg_advisory_xact_lock(" PG_AUDIT_LOCK ")", NULL)) < 0 ||
            (r = link_read(c, "anchor", &s.anchor)) < 0 ||
            (r = pg_exec(c, &res, "read the oldest audit records", "SELECT " AUDIT_COLS " FROM audit ORDER BY id LIMIT $1",
                         "I", (int64_t) q->limit)) < 0)
                return r;
        if ((r = rows_each(res, prune_next, &s)) < 0)
                return r;
        q->n = s.n;
        if (s.n == 0)
                return 0;
        if ((r = pg_exec(c, NULL, "prune the audit log", "DELETE FROM audit WHERE id <= $1", "I", s.anchor.id)) < 0 ||
            (r = link_write(c, "anchor", s.anchor.id, s.anchor.at, s.anchor.hash)) < 0)
                return r;
        return q->sign ? pg_audit_prune_checkpoint(c, &s.anchor, q->sign, q->userdata) : 0;
}

int store_pg_audit_prune(store_pg *p, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                         size_t *ret_n) {
        audit_q q = { .before = before, .limit = max_rows, .sign = sign, .userdata = userdata };
        int r;

        if (max_rows == 0 || max_rows > PRUNE_BATCH_MAX)
                return hwid_fail(HWID_E_INVALID, "an audit pruning batch is 1 to %d records", PRUNE_BATCH_MAX);
        if ((r = pg_tx(p, prune_run, &q, "commit the audit pruning")) < 0)
                return r;
        *ret_n = q.n;
        return 0;
}
