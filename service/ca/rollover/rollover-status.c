/* Where a rollover stands (rollover.h): every generation, how many of its
 * certificates have not expired, and what to do next; and the warning
 * before the active CA's end, which hwidd gives too (ca-gens.h). */
#include <string.h>
#include <time.h>

#include "error.h"
#include "ossl-util.h"
#include "rollover-internal.h"
#include "x509-util.h"

static void fmt_day(int64_t t, char out[32]) {
        time_t tt = (time_t) t;
        struct tm tm;

        if (!gmtime_r(&tt, &tm) || !strftime(out, 32, "%Y-%m-%d", &tm))
                snprintf(out, 32, "@%lld", (long long) t);
}

bool rollover_expiry_warning(int generation, int64_t not_after, int64_t now, int64_t longest, int64_t warn,
                             char *out, size_t size) {
        char end[32];

        fmt_day(not_after, end);
        if (longest > 0 && not_after - now < longest)
                snprintf(out, size, "the active CA (generation %d) expires on %s, sooner than the longest profile "
                         "validity (%lld days): certificates issued now end with it; roll the CA over (hwid ca "
                         "rollover prepare)", generation, end, (long long) (longest / 86400));
        else if (warn > 0 && not_after - now < warn)
                snprintf(out, size, "the active CA (generation %d) expires on %s, in less than %lld days: roll the CA "
                         "over (hwid ca rollover prepare)", generation, end, (long long) (warn / 86400));
        else
                return false;
        return true;
}

static int gen_status(const rollover_ctx *c, const store_ca_gen *row, X509 *cert, rollover_gen_status *ret) {
        _cleanup_free_ char *subject = NULL;
        int r;

        *ret = (rollover_gen_status) { .generation = row->generation, .state = row->state, .has_cert = cert != NULL };
        snprintf(ret->subject, sizeof(ret->subject), "%s", row->subject ? row->subject : "");
        if (cert && !row->subject && (r = name_to_string(X509_get_subject_name(cert), &subject)) >= 0)
                snprintf(ret->subject, sizeof(ret->subject), "%s", subject);
        if (cert && (r = x509_not_after(cert, &ret->not_after)) < 0)
                return r;
        if (row->state == CA_GEN_RETIRED || row->state == CA_GEN_PREPARED)
                return 0;
        return store_ca_gen_unexpired(c->store, row->generation, c->now, &ret->unexpired, &ret->last_expiry);
}

/* Generation 1 as the configuration names it, before any rollover. */
static int first_status(const rollover_ctx *c, rollover_status *st) {
        store_ca_gen row = { .generation = 1, .state = CA_GEN_ACTIVE };

        st->n = 1;
        return gen_status(c, &row, c->ca_cert, &st->gens[0]);
}

static int rows_status(const rollover_ctx *c, const rollover_rows *rows, rollover_status *st) {
        int r = 0;

        for (size_t i = rows->n > ROLLOVER_STATUS_MAX ? rows->n - ROLLOVER_STATUS_MAX : 0; r >= 0 && i < rows->n; i++) {
                _cleanup_(X509_freep) X509 *cert = NULL;

                if (rows->v[i].cert && (r = rollover_cert_of(rows->v[i].cert, rows->v[i].cert_len, &cert)) < 0)
                        break;
                r = gen_status(c, &rows->v[i], cert, &st->gens[st->n++]);
        }
        return r;
}

static const rollover_gen_status *in_state(const rollover_status *st, store_ca_state s) {
        for (size_t i = 0; i < st->n; i++)
                if (st->gens[i].state == s)
                        return &st->gens[i];
        return NULL;
}

/* A generation the active one replaced: retire it, now or later. */
static void next_retire(const rollover_gen_status *g, int active, char *out, size_t size) {
        char last[32];

        fmt_day(g->last_expiry, last);
        if (g->unexpired == 0)
                snprintf(out, size, "generation %d has no unexpired certificate left: retire it (hwid ca rollover "
                         "retire)", g->generation);
        else
                snprintf(out, size, "devices move to generation %d as they renew; generation %d still has %llu "
                         "unexpired certificate%s, the last expiring on %s: retire it after that (hwid ca rollover "
                         "retire)", active, g->generation, (unsigned long long) g->unexpired,
                         g->unexpired == 1 ? "" : "s", last);
}

/* The one sentence of what to do next, in the order a rollover goes. */
static void advise(const rollover_ctx *c, int64_t longest, int64_t warn, rollover_status *st) {
        const rollover_gen_status *prep = in_state(st, CA_GEN_PREPARED), *prev = in_state(st, CA_GEN_PREVIOUS);
        const rollover_gen_status *active = in_state(st, CA_GEN_ACTIVE);
        char end[32];

        if (prep && !prep->has_cert)
                snprintf(st->next, sizeof(st->next), "generation %d waits for its certificate: have the offline root "
                         "sign its request, then hwid ca rollover import --cert FILE", prep->generation);
        else if (prep)
                snprintf(st->next, sizeof(st->next), "generation %d is served with its links: give relying parties "
                         "both CA certificates, let devices renew (they adopt it), then hwid ca rollover activate",
                         prep->generation);
        else if (prev && active)
                next_retire(prev, active->generation, st->next, sizeof(st->next));
        else if (active && !rollover_expiry_warning(active->generation, active->not_after, c->now, longest, warn,
                                                    st->next, sizeof(st->next))) {
                fmt_day(active->not_after, end);
                snprintf(st->next, sizeof(st->next), "nothing to do: the active CA (generation %d) is valid until %s",
                         active->generation, end);
        }
}

int rollover_status_get(const rollover_ctx *c, int64_t longest, int64_t warn, rollover_status *ret) {
        _cleanup_(rollover_rows_clear) rollover_rows rows = { 0 };
        rollover_status st = { 0 };
        int r = rollover_rows_read(c, &rows);

        if (r >= 0)
                r = rows.n == 0 ? first_status(c, &st) : rows_status(c, &rows, &st);
        if (r < 0)
                return r;
        advise(c, longest, warn, &st);
        *ret = st;
        return 0;
}
