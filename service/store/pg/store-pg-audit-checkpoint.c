/* Signed checkpoints of the audit chain in PostgreSQL (store.h): stored
 * as SQLite stores them (store-sqlite-audit.c), apart from the record
 * path (store-pg-audit.c), which only calls pg_audit_prune_checkpoint()
 * from a pruning's transaction. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "store-pg.h"

static int checkpoint_insert(pg_slot *c, const store_audit_checkpoint *cp) {
        char kind[2] = { cp->kind, 0 };

        return pg_exec(c, NULL, "store an audit checkpoint",
                       "INSERT INTO audit_checkpoints (kind, id, record_at, hash, at, sig) "
                       "VALUES ($1, $2, $3, $4, $5, $6)", "tIIbIb", kind, cp->id, cp->record_at, cp->hash,
                       (size_t) STORE_AUDIT_HASH_LEN, cp->at, cp->sig, cp->sig_len);
}

static int add_run(pg_slot *c, void *userdata) {
        return checkpoint_insert(c, userdata);
}

int pg_audit_checkpoint_add(store *s, const store_audit_checkpoint *cp) {
        return pg_tx(pg_of(s), add_run, (void *) cp, "commit an audit checkpoint");
}

int pg_audit_prune_checkpoint(pg_slot *c, const store_audit_link *anchor, store_audit_sign_fn sign, void *userdata) {
        store_audit_checkpoint cp = { .kind = STORE_CHECKPOINT_PRUNE, .id = anchor->id, .record_at = anchor->at,
                                      .at = (int64_t) time(NULL) };
        int r;

        memcpy(cp.hash, anchor->hash, STORE_AUDIT_HASH_LEN);
        if ((r = sign(&cp, userdata)) < 0 ||
            (r = pg_exec(c, NULL, "drop stale audit checkpoints",
                         "DELETE FROM audit_checkpoints WHERE kind = 'P' OR id <= $1", "I", anchor->id)) < 0)
                return r;
        return checkpoint_insert(c, &cp);
}

int pg_audit_checkpoints_each(pg_slot *c, store_audit_checkpoint_fn fn, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "read the audit checkpoints",
                        "SELECT kind, id, record_at, hash, at, sig FROM audit_checkpoints ORDER BY at, seq", NULL);

        for (int i = 0; r >= 0 && i < PQntuples(res); i++) {
                store_audit_checkpoint cp = { .kind = pg_val(res, i, 0)[0], .id = pg_i64(res, i, 1),
                                              .record_at = pg_i64(res, i, 2), .at = pg_i64(res, i, 4) };
                _cleanup_free_ uint8_t *sig = NULL;
                bool oom = false;
                size_t n = 0;

                (void) pg_blob_copy(res, i, 3, cp.hash, STORE_AUDIT_HASH_LEN);
                sig = pg_blobdup(res, i, 5, &n, &oom);
                if (oom)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                cp.sig_len = sig && n <= sizeof(cp.sig) ? n : 0;
                if (cp.sig_len)
                        memcpy(cp.sig, sig, cp.sig_len);
                r = fn(&cp, userdata);
        }
        return r;
}
