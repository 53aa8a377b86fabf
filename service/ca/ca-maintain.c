/* hwidd's housekeeping, run once a second off the request path (from
 * hwidd's main thread): the summary of refusals without valid
 * credentials, and the audit retention.
 *
 * Pruning deletes small batches, each its own short transaction, so an
 * issuance waits at most for one batch; a backlog (a first start after an
 * upgrade, a shortened retention) is worked off a little each second. */
#include <time.h>

#include "ca-internal.h"
#include "error.h"
#include "log.h"

#define PRUNE_BATCH 1000
#define PRUNE_BUDGET_MS 200  /* per tick, then the rest is left for the next */
#define PRUNE_PERIOD 60      /* between passes once nothing is left to prune */

static int64_t mono_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One pass: batches until none is left or the budget is spent.  Returns
 * whether records older than the retention may remain. */
static bool prune_pass(ca_service *ca, int64_t before, size_t *ret_n) {
        int64_t until = mono_ms() + PRUNE_BUDGET_MS;
        size_t n = 0, total = 0;
        int r;

        do {
                r = store_audit_prune(ca->store, before, PRUNE_BATCH, &n);
                if (r < 0) {
                        log_error("cannot prune the audit log: %s", hwid_strerror(r));
                        break;
                }
                total += n;
        } while (n == PRUNE_BATCH && mono_ms() < until);
        *ret_n = total;
        return r >= 0 && n == PRUNE_BATCH;
}

static void prune_audit(ca_service *ca, int64_t now) {
        int64_t retention, before;
        bool more;
        size_t n;

        if (now < ca->prune_at)
                return;
        pthread_rwlock_rdlock(&ca->cfg_lock); /* a reload may change the retention */
        retention = ca->cfg ? ca->cfg->audit_retention : 0;
        pthread_rwlock_unlock(&ca->cfg_lock);
        if (retention <= 0)
                return;
        before = now - retention;
        more = prune_pass(ca, before, &n);
        if (n > 0)
                log_info("audit retention: removed %zu record%s older than %lld days%s", n, n == 1 ? "" : "s",
                         (long long) (retention / 86400), more ? " (more to go)" : "");
        ca->prune_at = more ? now : now + PRUNE_PERIOD;
}

void ca_service_tick(ca_service *ca, int64_t now) {
        ca_refusals_flush(ca, now, false);
        prune_audit(ca, now);
}
