/* The audit trail in PostgreSQL: the same hash chain as every store
 * (store.h), chained by the database itself.  A transaction's records are
 * appended by hwid_audit_chain() (store-pg-schema.c) in the pipeline that
 * commits it, or by hwid_issue() for issuances: it locks the chain's head
 * row, hashes each record with sha256() over the encoding of store.h,
 * inserts it and moves the head, so that the head is held from there to
 * the end of the commit -- microseconds and a WAL flush, never a round
 * trip.  Appends from all replicas take turns on that row: an append
 * waits for the one before it to commit, so ids grow in chain order and
 * no two records share a prev_hash.  Records reach the sink only after
 * their transaction committed.  Issuances' records are the exception
 * (since schema version 6): queued unchained (in audit_queue since
 * version 9), linked later by hwidd (store-pg-link.c); what reads the
 * chain reads the audit table, what lists the log shows both, the queued
 * ones with negative ids (-seq). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "store-pg.h"
#include "store-rows.h"

/* pg_advisory_xact_lock key of retention pruning: one replica prunes at
 * a time (appends never take it). */
#define PG_PRUNE_LOCK "1752656232"
#define PRUNE_BATCH_MAX 10000
#define AUDIT_COLS "id, at, actor, action, target, outcome, reason, token_id, prev_hash, hash"

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

/* The anchor moves forward only: a pruning by an hwid of an earlier
 * version (under the audit chain's lock, not the pruning one) may have
 * moved it further meanwhile. */
static int anchor_write(pg_slot *c, int64_t id, int64_t at, const uint8_t *hash) {
        return pg_exec(c, NULL, "move the audit chain's anchor",
                       "INSERT INTO audit_chain (role, id, at, hash) VALUES ('anchor', $1, $2, $3) "
                       "ON CONFLICT (role) DO UPDATE SET id = excluded.id, at = excluded.at, hash = excluded.hash "
                       "WHERE audit_chain.id < excluded.id",
                       "IIb", id, at, hash, (size_t) STORE_AUDIT_HASH_LEN);
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

/* One round trip: the record is all the transaction holds, and goes with
 * its BEGIN and COMMIT (pg_tx()). */
int pg_audit_append(store *s, const store_audit *a) {
        if (!pg_audit_ok(a))
                return hwid_fail(HWID_E_INVALID, "audit record lacks an actor, action or outcome");
        return pg_tx(pg_of(s), append_run, &(audit_q) { .a = a }, "commit the audit record");
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

/* The newest records first: those not chained yet (negative ids, the
 * newest lowest; store-pg-link.c), then the chain from its head. */
#define NEWEST_FIRST \
        "SELECT * FROM ((SELECT -seq AS id, at, actor, action, target, outcome, reason, token_id, " \
        "NULL::bytea AS prev_hash, NULL::bytea AS hash FROM audit_queue ORDER BY seq DESC LIMIT $1) UNION ALL " \
        "(SELECT " AUDIT_COLS " FROM audit WHERE id > 0 ORDER BY id DESC LIMIT $1)) AS u " \
        "ORDER BY id < 0 DESC, abs(id) DESC"

static int foreach_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        audit_q *q = userdata;
        int64_t lim = q->limit == 0 || q->limit > (size_t) INT64_MAX ? INT64_MAX : (int64_t) q->limit;
        int r = pg_exec(c, &res, "read the audit log", "SELECT " AUDIT_COLS " FROM (" NEWEST_FIRST " LIMIT $1) AS a "
                        "ORDER BY id < 0, abs(id)", "I", lim);

        return r < 0 ? r : rows_each(res, q->fn, q->userdata);
}

int pg_audit_foreach(store *s, size_t limit, store_audit_fn fn, void *userdata) {
        return pg_read(pg_of(s), foreach_run, &(audit_q) { .limit = limit, .fn = fn, .userdata = userdata });
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
            (r = pg_exec(c, &res, "read the audit log", "SELECT " AUDIT_COLS " FROM audit WHERE id > 0 ORDER BY id",
                         NULL)) >= 0)
                r = rows_each(res, q->fn, q->userdata);
        if (c->conn)
                PQclear(PQexec(c->conn, "ROLLBACK"));
        return r;
}

int pg_audit_chain_read(store *s, store_audit_link *ret_anchor, store_audit_link *ret_head,
                        store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata) {
        audit_q q = { .anchor = ret_anchor, .head = ret_head, .cpfn = cpfn, .fn = fn, .userdata = userdata };

        return pg_read(pg_of(s), chain_run, &q);
}

static int head_run(pg_slot *c, void *userdata) {
        return link_read(c, "head", userdata);
}

int pg_audit_head(store *s, store_audit_link *ret) {
        return pg_read(pg_of(s), head_run, ret);
}

/* ---- retention ---- */

typedef struct prune_scan {
        pg_store *p;
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

        if ((r = pg_exec(c, NULL, "take the pruning turn", "SELECT pg_advisory_xact_lock(" PG_PRUNE_LOCK ")",
                         NULL)) < 0 ||
            (r = link_read(c, "anchor", &s.anchor)) < 0 ||
            (r = pg_exec(c, &res, "read the oldest audit records",
                         "SELECT " AUDIT_COLS " FROM audit WHERE id > 0 ORDER BY id LIMIT $1", "I",
                         (int64_t) q->limit)) < 0)
                return r;
        if ((r = rows_each(res, prune_next, &s)) < 0)
                return r;
        q->n = s.n;
        if (s.n == 0)
                return 0;
        if ((r = pg_exec(c, NULL, "prune the audit log", "DELETE FROM audit WHERE id > 0 AND id <= $1", "I",
                         s.anchor.id)) < 0 ||
            (r = anchor_write(c, s.anchor.id, s.anchor.at, s.anchor.hash)) < 0)
                return r;
        return q->sign ? pg_audit_prune_checkpoint(c, &s.anchor, q->sign, q->userdata) : 0;
}

/* Whether the oldest record is older than before: pruning would start
 * there (one read, without the pruning turn, once a minute per replica
 * when there is nothing to prune). */
static int oldest_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        audit_q *q = userdata;
        int r = pg_exec(c, &res, "read the oldest audit record",
                        "SELECT at FROM audit WHERE id > 0 ORDER BY id LIMIT 1", NULL);

        if (r >= 0)
                q->n = PQntuples(res) == 1 && pg_i64(res, 0, 0) < q->before;
        return r;
}

int pg_audit_prune(store *base, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                   size_t *ret_n) {
        pg_store *p = pg_of(base);
        audit_q q = { .before = before, .limit = max_rows, .sign = sign, .userdata = userdata };
        int r;

        if (max_rows == 0 || max_rows > PRUNE_BATCH_MAX)
                return hwid_fail(HWID_E_INVALID, "an audit pruning batch is 1 to %d records", PRUNE_BATCH_MAX);
        if ((r = pg_read(p, oldest_run, &q)) < 0)
                return r;
        if (q.n > 0 && (r = pg_tx(p, prune_run, &q, "commit the audit pruning")) < 0)
                return r;
        *ret_n = q.n;
        return 0;
}
