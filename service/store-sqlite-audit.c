/* Retention of the audit trail (appending and reading it are in
 * store-sqlite-token.c).
 *
 * store_audit_prune() is the one place audit records are ever deleted, so
 * that whatever must accompany a deletion (an anchor record, once the log
 * is hash-chained) is written there, in the same transaction.  It deletes
 * a small batch per call, oldest first: the write lock is held for a
 * moment, and issuances go on between batches. */
#include "error.h"
#include "store-sqlite.h"

#define PRUNE_BATCH_MAX 10000

int store_audit_prune(store *s, int64_t before, size_t max_rows, size_t *ret_n) {
        _cleanup_(store_leavep) store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        size_t n;
        int r;

        if (max_rows == 0 || max_rows > PRUNE_BATCH_MAX)
                return hwid_fail(HWID_E_INVALID, "an audit pruning batch is 1 to %d records", PRUNE_BATCH_MAX);
        r = store_enter(s, true, &g);
        /* Oldest first through audit_at: what is left is always the newest. */
        if (r >= 0)
                r = store_stmt(s, ST_AUDIT_PRUNE,
                               "DELETE FROM audit WHERE id IN "
                               "(SELECT id FROM audit WHERE at < ?1 ORDER BY at, id LIMIT ?2)", &st);
        if (r >= 0)
                r = store_bind(s, st, "II", before, (int64_t) max_rows);
        if (r >= 0)
                r = store_step(s, st, "prune the audit log");
        if (r < 0)
                return r;
        n = (size_t) sqlite3_changes(s->db);
        if (n > 0 && (r = store_commit(s, "commit the audit pruning")) < 0)
                return r;
        *ret_n = n;
        return 0;
}
