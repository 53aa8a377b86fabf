/* A rollover's last steps (rollover.h): the prepared generation becomes
 * the active one, and the one it replaced is retired once nothing it
 * signed is left unexpired (or when the operator says so). */
#include <string.h>
#include <time.h>

#include "ca-link.h"
#include "error.h"
#include "ossl-util.h"
#include "rollover-internal.h"

/* What activation checks first: the prepared key opens and is its
 * certificate's, and both links hold now. */
static int activation_check(const rollover_ctx *c, const store_ca_gen *prep, const store_ca_gen *active) {
        _cleanup_(hwid_key_freep) hwid_key *key = NULL;
        _cleanup_(X509_freep) X509 *cert = NULL, *old = NULL, *nwo = NULL, *own = NULL;
        int r;

        if ((r = rollover_cert_of(prep->cert, prep->cert_len, &cert)) < 0 ||
            (r = rollover_cert_of(active->cert, active->cert_len, &old)) < 0 ||
            (r = rollover_cert_of(prep->new_with_old, prep->new_with_old_len, &nwo)) < 0 ||
            (r = rollover_cert_of(prep->old_with_new, prep->old_with_new_len, &own)) < 0)
                return r;
        if ((r = ca_link_verify(nwo, old, cert, c->now)) < 0 || (r = ca_link_verify(own, cert, old, c->now)) < 0)
                return r;
        if ((r = rollover_key_open(c, prep->key_uri, &key)) < 0)
                return r;
        if (EVP_PKEY_eq(hwid_key_public(key), X509_get0_pubkey(cert)) != 1)
                return hwid_fail(HWID_E_CONFIG, "the key %s is not the key of CA generation %d's certificate",
                                 prep->key_uri, prep->generation);
        return 0;
}

int rollover_activate(const rollover_ctx *c, int *ret_generation) {
        _cleanup_(rollover_rows_clear) rollover_rows rows = { 0 };
        const store_ca_gen *prep, *active;
        char reason[256];
        int r = rollover_rows_read(c, &rows);

        if (r < 0)
                return r;
        prep = rollover_row_prepared(rows.v, rows.n);
        active = rollover_row_active(rows.v, rows.n);
        if (!prep || !active)
                return hwid_fail(HWID_E_NOT_FOUND, "no CA generation is prepared: hwid ca rollover prepare first");
        if (!prep->cert)
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d has no certificate yet: import the one the "
                                 "offline root signed (hwid ca rollover import)", prep->generation);
        if ((r = activation_check(c, prep, active)) < 0)
                return r;
        snprintf(reason, sizeof(reason), "generation %d replaces generation %d: new certificates and their CRL "
                 "are signed by %s", prep->generation, active->generation, prep->subject);
        if ((r = rollover_write(c, "ca.rollover.activate", prep->generation, reason,
                                &(rollover_op) { .kind = ROLLOVER_ACTIVATE })) < 0)
                return r;
        *ret_generation = prep->generation;
        return 0;
}

/* generation, or the oldest one the active one replaced (0). */
static const store_ca_gen *retiree(const rollover_rows *rows, int generation) {
        for (size_t i = 0; i < rows->n; i++)
                if (generation ? rows->v[i].generation == generation : rows->v[i].state == CA_GEN_PREVIOUS)
                        return &rows->v[i];
        return NULL;
}

static void fmt_utc(int64_t t, char out[32]) {
        time_t tt = (time_t) t;
        struct tm tm;

        if (!gmtime_r(&tt, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
                snprintf(out, 32, "@%lld", (long long) t);
}

/* What a retirement leaves without a CRL, in words. */
static void left_behind(const rollover_retired *x, char *out, size_t size) {
        char last[32];

        fmt_utc(x->last_expiry, last);
        if (x->unexpired == 0)
                snprintf(out, size, "no certificate of generation %d is left unexpired", x->generation);
        else
                snprintf(out, size, "%llu certificate%s of generation %d, the last expiring %s, that relying parties "
                         "will no longer find a CRL for and hwidd no longer renews", (unsigned long long) x->unexpired,
                         x->unexpired == 1 ? "" : "s", x->generation, last);
}

int rollover_retire(const rollover_ctx *c, int generation, bool force, rollover_retired *ret) {
        _cleanup_(rollover_rows_clear) rollover_rows rows = { 0 };
        const store_ca_gen *g;
        rollover_retired x = { 0 };
        char what[384], reason[512], last[32];
        int r = rollover_rows_read(c, &rows);

        if (r >= 0 && !(g = retiree(&rows, generation)))
                r = generation ? hwid_fail(HWID_E_NOT_FOUND, "there is no CA generation %d", generation)
                               : hwid_fail(HWID_E_NOT_FOUND, "no CA generation was replaced: nothing to retire");
        if (r >= 0)
                r = store_ca_gen_unexpired(c->store, (x.generation = g->generation), c->now, &x.unexpired,
                                           &x.last_expiry);
        if (r < 0)
                return r;
        left_behind(&x, what, sizeof(what));
        if (x.unexpired > 0 && !force && g->state == CA_GEN_PREVIOUS) {
                fmt_utc(x.last_expiry, last);
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d still has %llu unexpired certificate%s, the last "
                                 "expiring %s: retire it once they have expired, or now with --force (relying "
                                 "parties then find no CRL for them, and their holders cannot renew with them)", x.generation,
                                 (unsigned long long) x.unexpired, x.unexpired == 1 ? "" : "s", last);
        }
        snprintf(reason, sizeof(reason), "%s%s", force && x.unexpired ? "forced: " : "", what);
        if ((r = rollover_write(c, "ca.rollover.retire", x.generation, reason,
                                &(rollover_op) { .kind = ROLLOVER_RETIRE })) < 0)
                return r;
        *ret = x;
        return 0;
}
