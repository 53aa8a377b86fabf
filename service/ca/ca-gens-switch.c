/* The CA's generations in the running service (ca-gens.h): loaded at
 * start, reloaded at the housekeeping tick when the store's sequence
 * moved -- a rollover step on the CA host, or another replica's -- and
 * swapped under the write lock, which no request holds, so that every
 * request sees one set from start to end.  Every replica reads the
 * sequence once a second: they switch together.  Also the warning before
 * the active CA's end, in the log at start and once a day. */
#include <string.h>
#include <time.h>

#include "ca-internal.h"
#include "error.h"
#include "log.h"
#include "rollover.h"

#define WARN_EVERY (24 * 3600)
#define RETRY_EVERY 10

static int gens_load(ca_service *ca, ca_gens **ret) {
        ca_gens_source src = { .ca_cert = ca->ca_cert, .ca_chain_pem = ca->ca_chain_pem, .ca_key = ca->ca_key,
                               .tcti = ca->cfg->tcti };

        return ca_gens_load(ca->store, &src, ret);
}

/* The active CA's nearing end, in the log (at most once a day). */
static void warn_expiry(ca_service *ca, int64_t now, bool force) {
        const ca_gen *a = ca_active(ca);
        char why[512];

        if (!force && now < ca->gens_warned_at + WARN_EVERY)
                return;
        if (rollover_expiry_warning(a->n, a->not_after, now, policy_longest_validity(ca->cfg->policy), ca->cfg->ca_expiry_warning, why,
                                    sizeof(why))) {
                log_warning("%s", why);
                ca->gens_warned_at = now;
        }
}

static void say_generations(const ca_gens *g) {
        char list[256] = "";

        for (size_t i = 0; i < g->n; i++)
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d (%s)", i ? ", " : "", g->v[i].n,
                         store_ca_state_name(g->v[i].state));
        log_notice("CA generations served: %s; generation %d signs", list, g->active->n);
}

int ca_gens_start(ca_service *ca) {
        int r = gens_load(ca, &ca->gens);

        if (r < 0)
                return r;
        if (ca->gens->n > 1)
                say_generations(ca->gens);
        warn_expiry(ca, (int64_t) time(NULL), true);
        return 0;
}

/* The reload failed: kept as it was, said once per sequence, and shown by
 * /readyz until a reload succeeds. */
static void reload_failed(ca_service *ca, int r) {
        char why[256];

        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        if (ca->gens_error == 0 || strcmp(why, ca->gens_why) != 0)
                log_error("cannot switch to the CA generations the store now records (this hwidd keeps signing "
                          "with generation %d): %s", ca_active(ca)->n, why);
        /* /readyz reads them in a request, under the read lock. */
        pthread_rwlock_wrlock(&ca->cfg_lock);
        snprintf(ca->gens_why, sizeof(ca->gens_why), "%s", why);
        ca->gens_error = r;
        pthread_rwlock_unlock(&ca->cfg_lock);
}

void ca_gens_tick(ca_service *ca, int64_t now) {
        ca_gens *fresh = NULL, *old;
        int64_t seq = 0;
        int r = store_ca_gen_seq(ca->store, &seq);

        /* Moved since; or a reload that failed, tried again every RETRY_EVERY. */
        if (r < 0 || !(ca->gens_error ? now >= ca->gens_retry_at : seq != ca->gens->seq)) {
                warn_expiry(ca, now, false);
                return;
        }
        if ((r = gens_load(ca, &fresh)) < 0) {
                reload_failed(ca, r);
                ca->gens_retry_at = now + RETRY_EVERY;
                return;
        }
        pthread_rwlock_wrlock(&ca->cfg_lock);
        old = ca->gens;
        ca->gens = fresh;
        ca->gens_error = 0;
        pthread_rwlock_unlock(&ca->cfg_lock);
        ca_gens_free(old);
        say_generations(fresh);
        warn_expiry(ca, now, true);
}

ca_gen *ca_active(const ca_service *ca) {
        return ca->gens->active;
}

int64_t ca_service_generations(const ca_service *ca) {
        return ca->gens->seq;
}

int ca_service_tls_chain(const ca_service *ca, char **ret) {
        if (!ca->tls_pem)
                return hwid_fail(HWID_E_NOT_READY, "no TLS certificate yet");
        return ca_gens_tls_chain(ca->gens, ca->tls_pem, ret);
}

bool ca_service_signed(const ca_service *ca, X509 *x) {
        return ca_gens_signer_of(ca->gens, x) != NULL;
}

bool ca_service_ca_name(const ca_service *ca, const X509_NAME *name) {
        for (size_t i = 0; name && i < ca->gens->n; i++)
                if (X509_NAME_cmp(name, X509_get_subject_name(ca->gens->v[i].cert)) == 0)
                        return true;
        return false;
}
