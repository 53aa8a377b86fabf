/* What an issuance reads before signing (store.h's store_reads), in one
 * pipeline: the token, the presented certificate, whether the key is
 * blocked, the identity's live certificate and its binding to a TPM, and
 * each DNS name's holder are sent at once and answered in one round trip, each by the same
 * statement and the same reading of its result as the read made alone
 * (store-pg-token.c, store-pg-cert.c, store-pg-revoke.c,
 * store-pg-binding.c). */
#include <stdlib.h>

#include "error.h"
#include "store-pg.h"
#include "store-reads.h"

enum { READ_TOKEN, READ_CERT, READ_KEY, READ_LIVE, READ_BINDING, READ_DNS };

typedef struct reads_plan {
        pg_query *q;
        int *kind;     /* READ_*, or READ_DNS + the name's index */
        size_t n;
} reads_plan;

/* Adds the read of one key, or -- a key its query refuses (malformed) --
 * records that refusal as the answer. */
static void plan_add(reads_plan *pl, store_answer *a, int kind, int built) {
        if (built < 0)
                store_answer_set(a, built);
        else
                pl->kind[pl->n++] = kind;
}

static void plan_build(reads_plan *pl, store_reads *rd) {
        if (rd->token_id)
                plan_add(pl, &rd->token_a, READ_TOKEN, pg_token_query(rd->token_id, &pl->q[pl->n]));
        if (rd->serial)
                plan_add(pl, &rd->cert_a, READ_CERT, pg_cert_serial_query(rd->serial, false, &pl->q[pl->n]));
        if (rd->spki_sha256)
                plan_add(pl, &rd->key_a, READ_KEY, pg_key_query(rd->spki_sha256, &pl->q[pl->n]));
        if (rd->identity)
                plan_add(pl, &rd->live_a, READ_LIVE, pg_cert_live_query(rd->identity, rd->now, &pl->q[pl->n]));
        if (rd->identity)
                plan_add(pl, &rd->bind_a, READ_BINDING, pg_binding_query(rd->identity, &pl->q[pl->n]));
        for (size_t i = 0; i < rd->n_dns; i++)
                if (rd->dns[i])
                        plan_add(pl, &rd->dns_a[i], READ_DNS + (int) i,
                                 pg_dns_owner_query(rd->dns[i], rd->now, &pl->q[pl->n]));
}

/* Each result read as the read made alone reads it. */
static void answer(store_reads *rd, int kind, PGresult *res) {
        size_t i = (size_t) (kind - READ_DNS);

        switch (kind) {
        case READ_TOKEN:
                store_answer_set(&rd->token_a, pg_token_answer(res, rd->token_id, &rd->token));
                break;
        case READ_CERT:
                store_answer_set(&rd->cert_a, pg_cert_serial_answer(res, rd->serial, &rd->cert));
                break;
        case READ_KEY:
                store_answer_set(&rd->key_a, pg_key_answer(res, rd->spki_sha256));
                break;
        case READ_LIVE:
                store_answer_set(&rd->live_a, pg_cert_live_answer(res, rd->identity, &rd->live));
                break;
        case READ_BINDING:
                store_answer_set(&rd->bind_a, pg_binding_answer(res, rd->identity, &rd->bind));
                break;
        default:
                store_answer_set(&rd->dns_a[i], pg_dns_owner_answer(res, rd->dns[i], &rd->owner[i]));
        }
}

/* A pipeline on a connection that turns out broken runs once more on a
 * new one, as pg_read() does. */
static int plan_run(pg_store *p, const reads_plan *pl, PGresult **res) {
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        int r = pg_enter(p, &c);

        if (r >= 0 && (r = pg_pipeline(c, pl->q, pl->n, res)) < 0 && c->lost) {
                pg_leavep(&c);
                if ((r = pg_enter(p, &c)) >= 0)
                        r = pg_pipeline(c, pl->q, pl->n, res);
        }
        return r;
}

int pg_reads_fetch(store *s, store_reads *rd) {
        size_t max = 5 + rd->n_dns;
        reads_plan pl = { .q = calloc(max, sizeof(*pl.q)), .kind = calloc(max, sizeof(*pl.kind)) };
        PGresult **res = calloc(max, sizeof(*res));
        int r = 0;

        if (!pl.q || !pl.kind || !res)
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0)
                plan_build(&pl, rd);
        if (r >= 0 && pl.n > 0 && (r = plan_run(pg_of(s), &pl, res)) < 0)
                store_reads_fail_all(rd, r);
        for (size_t i = 0; r >= 0 && i < pl.n; i++)
                answer(rd, pl.kind[i], res[i]);
        for (size_t i = 0; res && i < pl.n; i++)
                PQclear(res[i]);
        free(pl.q);
        free(pl.kind);
        free(res);
        return r == -HWID_E_NOMEM ? r : 0;
}
