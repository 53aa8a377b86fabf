/* The audit trail in SQLite: appending and chaining records, reading
 * them back, and retention.
 *
 * Every append reads the chain's head, hashes the record over it
 * (store_audit_hash(), the one encoding every backend shares), inserts it
 * and moves the head, in the write transaction it belongs to.
 * sqlite_audit_prune() is the one place records are ever deleted: the
 * oldest first, in id order, after checking their chain, and the anchor
 * moves to the last one deleted in the same transaction, with its signed
 * checkpoint (store.h) when the caller signs one.  Records reach
 * the audit sink (syslog) only once their transaction has committed
 * (store-sqlite-audit-sink.c). */
#include <string.h>
#include <time.h>

#include "error.h"
#include "escape.h"
#include "store-sqlite.h"

#define PRUNE_BATCH_MAX 10000
#define AUDIT_COLS "id, at, actor, action, target, outcome, reason, token_id, prev_hash, hash"

static bool audit_ok(const store_audit *a) {
        return a && store_str_ok(a->actor, 256) && store_str_ok(a->action, 64) && store_str_ok(a->outcome, 64);
}

/* ---- chain ends ---- */

static int link_read(sqlite_store *s, stmt_id id, const char *role, store_audit_link *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, id, "SELECT id, at, hash FROM audit_chain WHERE role = ?1", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "t", role);
        if (r >= 0)
                r = sqlite_step(s, st, "read the audit chain");
        if (r < 0)
                return r;
        *ret = (store_audit_link) { 0 };
        if (r == 0)
                return 0;
        if (sqlite3_column_bytes(st, 2) != STORE_AUDIT_HASH_LEN)
                return hwid_fail(HWID_E_STORE, "the audit chain's %s in %s has no valid hash", role, s->path);
        ret->set = true;
        ret->id = sqlite3_column_int64(st, 0);
        ret->at = sqlite3_column_int64(st, 1);
        memcpy(ret->hash, sqlite3_column_blob(st, 2), STORE_AUDIT_HASH_LEN);
        return 0;
}

static int link_write(sqlite_store *s, stmt_id id, const char *role, int64_t rec_id, int64_t at, const uint8_t *hash) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, id,
                            "INSERT INTO audit_chain (role, id, at, hash) VALUES (?1, ?2, ?3, ?4) "
                            "ON CONFLICT (role) DO UPDATE SET id = excluded.id, at = excluded.at, hash = excluded.hash",
                            &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "tIIb", role, rec_id, at, hash, (size_t) STORE_AUDIT_HASH_LEN);
        if (r >= 0)
                r = sqlite_step(s, st, "move the audit chain");
        return r < 0 ? r : 0;
}

/* ---- signed checkpoints ---- */

static int checkpoint_insert(sqlite_store *s, const store_audit_checkpoint *cp) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        char kind[2] = { cp->kind, 0 };
        int r;

        if (sqlite3_prepare_v2(s->db, "INSERT INTO audit_checkpoints (kind, id, record_at, hash, at, sig) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, ?6)", -1, &st, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "store an audit checkpoint");
        r = sqlite_bind(s, st, "tIIbIb", kind, cp->id, cp->record_at, cp->hash, (size_t) STORE_AUDIT_HASH_LEN, cp->at,
                        cp->sig, cp->sig_len);
        if (r >= 0)
                r = sqlite_step(s, st, "store an audit checkpoint");
        return r < 0 ? r : 0;
}

int sqlite_audit_checkpoint_add(store *base, const store_audit_checkpoint *cp) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_enter(s, true, &g);

        if (r >= 0)
                r = checkpoint_insert(s, cp);
        return r < 0 ? r : sqlite_commit(s, "commit an audit checkpoint");
}

int sqlite_audit_head(store *base, store_audit_link *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_read_enter(&s, &g);

        return r < 0 ? r : link_read(s, ST_AUDIT_HEAD, "head", ret);
}

/* A pruning's checkpoint of its new anchor, in its transaction; those of
 * records now gone, and the pruning ones before it, are dropped. */
static int prune_checkpoint(sqlite_store *s, const store_audit_link *anchor, store_audit_sign_fn sign, void *userdata) {
        store_audit_checkpoint cp = { .kind = STORE_CHECKPOINT_PRUNE, .id = anchor->id, .record_at = anchor->at,
                                      .at = (int64_t) time(NULL) };
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r;

        memcpy(cp.hash, anchor->hash, STORE_AUDIT_HASH_LEN);
        if ((r = sign(&cp, userdata)) < 0)
                return r;
        if (sqlite3_prepare_v2(s->db, "DELETE FROM audit_checkpoints WHERE kind = 'P' OR id <= ?1", -1, &st, NULL) !=
            SQLITE_OK)
                return sqlite_sql_fail(s, "drop stale audit checkpoints");
        if ((r = sqlite_bind(s, st, "I", anchor->id)) < 0 ||
            (r = sqlite_step(s, st, "drop stale audit checkpoints")) < 0)
                return r;
        return checkpoint_insert(s, &cp);
}

static int checkpoints_each(sqlite_store *s, store_audit_checkpoint_fn fn, void *userdata) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r;

        if (sqlite3_prepare_v2(s->db, "SELECT kind, id, record_at, hash, at, sig FROM audit_checkpoints "
                               "ORDER BY at, seq", -1, &st, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "read the audit checkpoints");
        while ((r = sqlite_step(s, st, "read the audit checkpoints")) == 1) {
                store_audit_checkpoint cp = { .kind = ((const char *) sqlite3_column_text(st, 0))[0],
                                              .id = sqlite3_column_int64(st, 1),
                                              .record_at = sqlite3_column_int64(st, 2),
                                              .at = sqlite3_column_int64(st, 4) };
                size_t n = (size_t) sqlite3_column_bytes(st, 5);

                if (sqlite3_column_bytes(st, 3) == STORE_AUDIT_HASH_LEN)
                        memcpy(cp.hash, sqlite3_column_blob(st, 3), STORE_AUDIT_HASH_LEN);
                cp.sig_len = n <= sizeof(cp.sig) ? n : 0;
                if (cp.sig_len)
                        memcpy(cp.sig, sqlite3_column_blob(st, 5), cp.sig_len);
                if ((r = fn(&cp, userdata)) != 0)
                        return r;
        }
        return r;
}

/* ---- appending ---- */

/* The fields of an audit record as stored (and hashed): with every
 * control and bidi character escaped (common/escape.h), so that no field,
 * whoever chose it (a CSR's CN, a reason quoting it), can fake a row or a
 * column of `hwid audit list` or of anything else that reads the table. */
typedef struct audit_text {
        char *f[6];
} audit_text;

static void audit_text_clear(audit_text *t) {
        for (size_t i = 0; i < ELEMENTSOF(t->f); i++)
                free(t->f[i]);
}

static int audit_text_escape(const store_audit *a, audit_text *t, store_audit *rec) {
        const char *in[6] = { a->actor, a->action, a->target, a->outcome, a->reason, a->token_id };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(in); i++)
                if (in[i] && (r = text_escape(in[i], strlen(in[i]), &t->f[i])) < 0)
                        return r;
        *rec = *a;
        rec->actor = t->f[0];
        rec->action = t->f[1];
        rec->target = t->f[2];
        rec->outcome = t->f[3];
        rec->reason = t->f[4];
        rec->token_id = t->f[5];
        return 0;
}

int sqlite_audit_insert(sqlite_store *s, const store_audit *a, int64_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_(audit_text_clear) audit_text text = { 0 };
        store_audit rec;
        store_audit_link head;
        uint8_t hash[STORE_AUDIT_HASH_LEN];
        int r;

        if (!audit_ok(a))
                return hwid_fail(HWID_E_INVALID, "audit record lacks an actor, action or outcome");
        if ((r = audit_text_escape(a, &text, &rec)) < 0)
                return r;
        rec.at = a->at ? a->at : now;
        if ((r = link_read(s, ST_AUDIT_HEAD, "head", &head)) < 0 ||
            (r = store_audit_hash(head.set ? head.hash : NULL, &rec, hash)) < 0)
                return r;
        r = sqlite_stmt(s, ST_AUDIT_INSERT,
                        "INSERT INTO audit (at, actor, action, target, outcome, reason, token_id, prev_hash, hash) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "Ittttttbb", rec.at, rec.actor, rec.action, rec.target, rec.outcome, rec.reason,
                                rec.token_id, head.hash, (size_t) STORE_AUDIT_HASH_LEN, hash,
                                (size_t) STORE_AUDIT_HASH_LEN);
        if (r >= 0)
                r = sqlite_step(s, st, "append to the audit log");
        if (r < 0)
                return r;
        rec.id = sqlite3_last_insert_rowid(s->db);
        rec.prev_hash = head.set ? head.hash : NULL;
        rec.hash = hash;
        if ((r = link_write(s, ST_AUDIT_SET_HEAD, "head", rec.id, rec.at, hash)) < 0)
                return r;
        sqlite_audit_sink_queue(s, &rec);
        return 0;
}

int sqlite_audit_append(store *base, const store_audit *a) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r;

        if (!audit_ok(a))
                return hwid_fail(HWID_E_INVALID, "audit record lacks an actor, action or outcome");
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_audit_insert(s, a, (int64_t) time(NULL));
        if (r < 0)
                return r;
        return sqlite_commit(s, "commit the audit record");
}

/* ---- reading ---- */

static void audit_from_row(sqlite3_stmt *st, store_audit *a) {
        *a = (store_audit) {
                .id = sqlite3_column_int64(st, 0),
                .at = sqlite3_column_int64(st, 1),
                .actor = (const char *) sqlite3_column_text(st, 2),
                .action = (const char *) sqlite3_column_text(st, 3),
                .target = (const char *) sqlite3_column_text(st, 4),
                .outcome = (const char *) sqlite3_column_text(st, 5),
                .reason = (const char *) sqlite3_column_text(st, 6),
                .token_id = (const char *) sqlite3_column_text(st, 7),
        };
        /* A hash of another length (a tampered row) reads as none. */
        if (sqlite3_column_bytes(st, 8) == STORE_AUDIT_HASH_LEN)
                a->prev_hash = sqlite3_column_blob(st, 8);
        if (sqlite3_column_bytes(st, 9) == STORE_AUDIT_HASH_LEN)
                a->hash = sqlite3_column_blob(st, 9);
}

/* fn runs with the store locked (it must not call the store: that
 * fails with -HWID_E_INTERNAL); non-zero from fn stops the walk and is
 * returned. */
int sqlite_audit_foreach(store *base, size_t limit, store_audit_fn fn, void *userdata) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int64_t lim = limit == 0 || limit > (size_t) INT64_MAX ? -1 : (int64_t) limit; /* -1: no limit */
        store_audit a;
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_AUDIT_LAST,
                                "SELECT " AUDIT_COLS " FROM "
                                "(SELECT * FROM audit ORDER BY id DESC LIMIT ?1) ORDER BY id", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "I", lim);
        while (r >= 0 && (r = sqlite_step(s, st, "read the audit log")) == 1) {
                audit_from_row(st, &a);
                r = fn(&a, userdata);
                if (r != 0)
                        return r;
        }
        return r < 0 ? r : 0;
}

static int chain_walk(sqlite_store *s, store_audit_link *anchor, store_audit_link *head, store_audit_checkpoint_fn cpfn,
                      store_audit_fn fn, void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_audit a;
        int r;

        if ((r = link_read(s, ST_AUDIT_ANCHOR, "anchor", anchor)) < 0 ||
            (r = link_read(s, ST_AUDIT_HEAD, "head", head)) < 0 ||
            (cpfn && (r = checkpoints_each(s, cpfn, userdata)) != 0) ||
            (r = sqlite_stmt(s, ST_AUDIT_ALL, "SELECT " AUDIT_COLS " FROM audit ORDER BY id", &st)) < 0)
                return r;
        while ((r = sqlite_step(s, st, "read the audit log")) == 1) {
                audit_from_row(st, &a);
                r = fn(&a, userdata);
                if (r != 0)
                        return r;
        }
        return r;
}

/* One read transaction: the ends and the records are one snapshot, while
 * hwidd goes on appending. */
int sqlite_audit_chain_read(store *base, store_audit_link *ret_anchor, store_audit_link *ret_head,
                            store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_read_enter(&s, &g);

        if (r < 0)
                return r;
        if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "start reading the audit log");
        r = chain_walk(s, ret_anchor, ret_head, cpfn, fn, userdata);
        /* sqlite_leavep() rolls the read transaction back. */
        return r < 0 ? r : 0;
}

/* ---- retention ---- */

typedef struct prune_scan {
        int64_t before;
        size_t max;
        store_audit_link anchor; /* moves along the records that will go */
        size_t n;
} prune_scan;

/* Walks the oldest records while they are older than `before`, checking
 * that each one's chain holds: what is pruned must have verified. */
static int prune_next(sqlite_store *s, prune_scan *p, const store_audit *a) {
        uint8_t h[STORE_AUDIT_HASH_LEN];
        const uint8_t zero[STORE_AUDIT_HASH_LEN] = { 0 };
        int r;

        if (a->at >= p->before)
                return 0;
        if (!a->hash || !a->prev_hash ||
            memcmp(a->prev_hash, p->anchor.set ? p->anchor.hash : zero, STORE_AUDIT_HASH_LEN) != 0 ||
            (r = store_audit_hash(a->prev_hash, a, h)) < 0 || memcmp(h, a->hash, STORE_AUDIT_HASH_LEN) != 0)
                return hwid_fail(HWID_E_STORE, "audit record %lld in %s does not verify: not pruning it "
                                 "(see hwid audit verify)", (long long) a->id, s->path);
        p->anchor = (store_audit_link) { .set = true, .id = a->id, .at = a->at };
        memcpy(p->anchor.hash, a->hash, STORE_AUDIT_HASH_LEN);
        p->n++;
        return 1;
}

static int prune_scan_run(sqlite_store *s, prune_scan *p) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_audit a;
        int r = sqlite_stmt(s, ST_AUDIT_PRUNE_SCAN, "SELECT " AUDIT_COLS " FROM audit ORDER BY id LIMIT ?1", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "I", (int64_t) p->max);
        while (r >= 0 && (r = sqlite_step(s, st, "read the oldest audit records")) == 1) {
                audit_from_row(st, &a);
                r = prune_next(s, p, &a);
                if (r == 0)
                        break;
        }
        return r < 0 ? r : 0;
}

int sqlite_audit_prune(store *base, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                       size_t *ret_n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        prune_scan p = { .before = before, .max = max_rows };
        int r;

        if (max_rows == 0 || max_rows > PRUNE_BATCH_MAX)
                return hwid_fail(HWID_E_INVALID, "an audit pruning batch is 1 to %d records", PRUNE_BATCH_MAX);
        if ((r = sqlite_enter(s, true, &g)) < 0 || (r = link_read(s, ST_AUDIT_ANCHOR, "anchor", &p.anchor)) < 0 ||
            (r = prune_scan_run(s, &p)) < 0)
                return r;
        if (p.n == 0) {
                *ret_n = 0;
                return 0;
        }
        r = sqlite_stmt(s, ST_AUDIT_PRUNE, "DELETE FROM audit WHERE id <= ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "I", p.anchor.id);
        if (r >= 0)
                r = sqlite_step(s, st, "prune the audit log");
        if (r >= 0)
                r = link_write(s, ST_AUDIT_SET_ANCHOR, "anchor", p.anchor.id, p.anchor.at, p.anchor.hash);
        if (r >= 0 && sign)
                r = prune_checkpoint(s, &p.anchor, sign, userdata);
        if (r >= 0)
                r = sqlite_commit(s, "commit the audit pruning");
        if (r < 0)
                return r;
        *ret_n = p.n;
        return 0;
}

/* ---- records from before the chain ---- */

/* One record at a time, each read by id after the last: nothing is
 * changed under a statement that is still reading. */
static int backfill_one(sqlite_store *s, sqlite3_stmt *sel, sqlite3_stmt *upd, store_audit_link *head) {
        uint8_t hash[STORE_AUDIT_HASH_LEN];
        store_audit a;
        int r;

        if ((r = sqlite_bind(s, sel, "I", head->set ? head->id : INT64_MIN)) < 0 ||
            (r = sqlite_step(s, sel, "read the audit log")) <= 0)
                return r;
        audit_from_row(sel, &a);
        if ((r = store_audit_hash(head->set ? head->hash : NULL, &a, hash)) < 0 ||
            (r = sqlite_bind(s, upd, "Ibb", a.id, head->hash, (size_t) STORE_AUDIT_HASH_LEN, hash,
                             (size_t) STORE_AUDIT_HASH_LEN)) < 0 ||
            (r = sqlite_step(s, upd, "chain an audit record")) < 0)
                return r;
        *head = (store_audit_link) { .set = true, .id = a.id, .at = a.at };
        memcpy(head->hash, hash, sizeof(hash));
        sqlite3_reset(sel);
        sqlite3_reset(upd);
        return 1;
}

static int backfill_rows(sqlite_store *s) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *sel = NULL, *upd = NULL;
        store_audit_link head;
        int r = link_read(s, ST_AUDIT_HEAD, "head", &head);

        if (r < 0)
                return r;
        if (sqlite3_prepare_v2(s->db, "SELECT " AUDIT_COLS " FROM audit WHERE id > ?1 ORDER BY id LIMIT 1", -1,
                               &sel, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->db, "UPDATE audit SET prev_hash = ?2, hash = ?3 WHERE id = ?1", -1, &upd,
                               NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "chain the audit records written before the chain");
        while ((r = backfill_one(s, sel, upd, &head)) == 1)
                ;
        if (r < 0)
                return r;
        return head.set ? link_write(s, ST_AUDIT_SET_HEAD, "head", head.id, head.at, head.hash) : 0;
}

static int chained(sqlite_store *s, bool *ret) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r;

        if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'audit_chained'", -1, &st, NULL) !=
            SQLITE_OK)
                return sqlite_sql_fail(s, "read whether the audit log is chained");
        r = sqlite_step(s, st, "read whether the audit log is chained");
        if (r < 0)
                return r;
        *ret = r == 0 || sqlite3_column_int64(st, 0) == 1;
        return 0;
}

/* Audit records written before the database had a chain (schema < 6) are
 * chained once, in id order, when it is first opened: from then on they
 * are covered like the rest (what was changed before cannot be told). */
int sqlite_audit_backfill(sqlite_store *s) {
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        bool done = false;
        int r = chained(s, &done);

        /* The common case, a chained log, needs no write lock. */
        if (r < 0 || done)
                return r;
        if ((r = sqlite_enter(s, true, &g)) < 0 || (r = chained(s, &done)) < 0 || done)
                return r;
        if ((r = backfill_rows(s)) < 0)
                return r;
        if (sqlite3_exec(s->db, "UPDATE meta SET value = 1 WHERE key = 'audit_chained'", NULL, NULL, NULL) !=
            SQLITE_OK)
                return sqlite_sql_fail(s, "record that the audit log is chained");
        return sqlite_commit(s, "commit the chaining of the audit log");
}
