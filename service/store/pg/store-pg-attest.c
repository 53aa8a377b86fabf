/* TPM attestation in PostgreSQL: challenges (taken by DELETE ...
 * RETURNING, so that of two replicas answering one challenge only one
 * gets it) and the EK allowlist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"
#include "store-rows.h"


typedef struct chal_q {
        const char *id;
        store_challenge *out;
} chal_q;

static int64_t bound(size_t n) {
        return n > (size_t) INT64_MAX ? INT64_MAX : (int64_t) n;
}

/* One statement, hwid_challenge_put(): the bounds on pending challenges
 * (all of them, and each requester's) hold across replicas, under a lock
 * held for no round trip. */
int pg_challenge_put(store *s, const store_challenge *c, int64_t now, size_t max_pending,
                     size_t max_per_requester, size_t *ret_replaced) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        _cleanup_(pg_leavep) pg_slot *slot = NULL;
        const char *result;
        pg_query q;
        int r;

        if (!c || !store_hex_ok(c->id, 32, 32) || !c->ak_public || c->ak_public_len == 0 || c->ak_public_len > 1024 ||
            !c->ek_cert || c->ek_cert_len == 0 || c->ek_cert_len > 4096)
                return hwid_fail(HWID_E_INVALID, "attestation challenge to store has a bad id, AK or EK certificate");
        if ((r = pg_bind(&q, "record an attestation challenge",
                         "SELECT result, replaced FROM hwid_challenge_put($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                         "tbbbbIIItI", c->id, c->secret_sha256, sizeof(c->secret_sha256), c->nonce, sizeof(c->nonce),
                         c->ak_public, c->ak_public_len, c->ek_cert, c->ek_cert_len, c->expires_at, now,
                         bound(max_pending), c->requester ? c->requester : "", bound(max_per_requester))) < 0 ||
            (r = pg_statement(pg_of(s), &q, &slot, &res)) < 0)
                return r;
        result = pg_val(res, 0, 0);
        if (result && strcmp(result, "full") == 0)
                return hwid_fail(HWID_E_RATE_LIMITED, "%zu attestation challenges are already waiting for an answer",
                                 max_pending);
        if (result && strcmp(result, "exists") == 0)
                return hwid_fail(HWID_E_EXISTS, "attestation challenge %.8s... exists already", c->id);
        if (ret_replaced)
                *ret_replaced = (size_t) pg_i64(res, 0, 1);
        return 0;
}

static int take_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        chal_q *q = userdata;
        store_challenge x = { 0 };
        bool oom = false;
        int r = pg_exec(c, &res, "take an attestation challenge",
                        "DELETE FROM attest_challenges WHERE id = $1 "
                        "RETURNING secret_sha256, nonce, ak_public, ek_cert, expires_at", "t", q->id);

        if (r < 0)
                return r;
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no attestation challenge %.8s...", q->id);
        snprintf(x.id, sizeof(x.id), "%s", q->id);
        x.expires_at = pg_i64(res, 0, 4);
        x.ak_public = pg_blobdup(res, 0, 2, &x.ak_public_len, &oom);
        x.ek_cert = pg_blobdup(res, 0, 3, &x.ek_cert_len, &oom);
        if (oom || !x.ak_public || !x.ek_cert || !pg_blob_copy(res, 0, 0, x.secret_sha256, sizeof(x.secret_sha256)) ||
            !pg_blob_copy(res, 0, 1, x.nonce, sizeof(x.nonce))) {
                store_challenge_clear(&x);
                return oom ? hwid_fail(HWID_E_NOMEM, NULL)
                           : hwid_fail(HWID_E_STORE, "attestation challenge %.8s... is damaged", q->id);
        }
        store_challenge_clear(q->out);
        *q->out = x;
        return 0;
}

int pg_challenge_take(store *s, const char *id, store_challenge *ret) {
        store_challenge x = { 0 };
        int r;

        if (!id || !store_hex_ok(id, 32, 32))
                return hwid_fail(HWID_E_NOT_FOUND, "no such attestation challenge");
        r = pg_tx(pg_of(s), take_run, &(chal_q) { .id = id, .out = &x }, "commit the taken attestation challenge");
        if (r < 0) {
                store_challenge_clear(&x);
                return r;
        }
        *ret = x;
        return 0;
}

/* ---- the EK allowlist ---- */

static int ek_from_row(PGresult *res, int row, store_ek *ret) {
        store_ek e = { .added_at = pg_i64(res, row, 4) };
        bool oom = false;

        pg_copy(res, row, 0, e.ek_cert_sha256, sizeof(e.ek_cert_sha256));
        pg_copy(res, row, 1, e.ek_pub_sha256, sizeof(e.ek_pub_sha256));
        e.identity = pg_strdup(res, row, 2, &oom);
        e.profile = pg_strdup(res, row, 3, &oom);
        if (oom) {
                store_ek_clear(&e);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = e;
        return 0;
}

typedef struct ek_q {
        const store_ek *v;
        size_t n;
        const store_audit *audit;
        int64_t now;
        const char *a, *b;
        store_ek *one;
        store_ek **all;
        size_t *ret_n;
} ek_q;

static int ek_insert(pg_slot *c, const store_ek *e, int64_t now) {
        int r;

        if (!store_ek_ok(e))
                return hwid_fail(HWID_E_INVALID, "EK allowlist entry %s lacks a valid name (1-%d bytes), profile, "
                                 "or EK hash (64 lower-case hex digits)", e->identity ? e->identity : "(none)",
                                 STORE_EK_NAME_MAX);
        r = pg_exec(c, NULL, "add to the EK allowlist",
                    "INSERT INTO ek_allowlist (" EK_COLS ") VALUES ($1, $2, $3, $4, $5)", "ttttI",
                    store_opt(e->ek_cert_sha256), store_opt(e->ek_pub_sha256), e->identity, e->profile, now);
        if (r == -HWID_E_INVALID && strcmp(c->constraint, "ek_allowlist_identity") == 0)
                return hwid_fail(HWID_E_EXISTS, "%s is already on the EK allowlist (identities ignore case)",
                                 e->identity);
        if (r == -HWID_E_INVALID && strcmp(c->sqlstate, "23505") == 0)
                return hwid_fail(HWID_E_EXISTS, "the EK of %s (%s) is already on the EK allowlist", e->identity,
                                 e->ek_pub_sha256[0] ? e->ek_pub_sha256 : e->ek_cert_sha256);
        return r;
}

static int ek_add_run(pg_slot *c, void *userdata) {
        ek_q *q = userdata;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < q->n; i++)
                r = ek_insert(c, &q->v[i], q->now);
        if (r >= 0 && q->audit)
                r = pg_audit_insert(c, q->audit, q->now);
        return r;
}

int pg_ek_add(store *s, const store_ek *v, size_t n, const store_audit *audit, int64_t now) {
        if (!v || n == 0)
                return hwid_fail(HWID_E_INVALID, "no EK allowlist entry to add");
        return pg_tx(pg_of(s), ek_add_run, &(ek_q) { .v = v, .n = n, .audit = audit, .now = now },
                     "commit the EK allowlist entries");
}

static int ek_find_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        ek_q *q = userdata;
        int r = pg_exec(c, &res, "look up the EK allowlist",
                        "SELECT " EK_COLS " FROM ek_allowlist WHERE ek_cert_sha256 = $1 OR ek_pub_sha256 = $2 LIMIT 2",
                        "tt", store_opt(q->a), store_opt(q->b));

        if (r < 0)
                return r;
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "the EK is not on the EK allowlist");
        if (PQntuples(res) > 1)
                return hwid_fail(HWID_E_CONFLICT, "the EK certificate and the EK key are listed under two names (%s "
                                 "and %s)", pg_val(res, 0, 2), pg_val(res, 1, 2));
        return ek_from_row(res, 0, q->one);
}

int pg_ek_find(store *s, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret) {
        return pg_read(pg_of(s), ek_find_run, &(ek_q) { .a = ek_cert_sha256, .b = ek_pub_sha256, .one = ret });
}

static int ek_row(PGresult *res, int row, void *ret) {
        return ek_from_row(res, row, ret);
}

static void ek_list_free(void *all, size_t n) {
        store_ek_list_free(all, n);
}

static int ek_list_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        ek_q *q = userdata;
        int r = pg_exec(c, &res, "list the EK allowlist", "SELECT " EK_COLS " FROM ek_allowlist ORDER BY identity",
                        NULL);

        return r < 0 ? r : pg_rows(res, sizeof(store_ek), ek_row, ek_list_free, (void **) q->all, q->ret_n);
}

int pg_ek_list(store *s, store_ek **ret, size_t *ret_n) {
        return pg_read(pg_of(s), ek_list_run, &(ek_q) { .all = ret, .ret_n = ret_n });
}

static int ek_remove_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        ek_q *q = userdata;
        int r = pg_exec(c, &res, "remove from the EK allowlist",
                        "DELETE FROM ek_allowlist WHERE hwid_fold(identity) = hwid_fold($1) "
                        "OR ek_cert_sha256 = lower($1) OR ek_pub_sha256 = lower($1)", "t", q->a);

        if (r >= 0 && pg_changes(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s is not on the EK allowlist", q->a);
        if (r >= 0 && q->audit)
                r = pg_audit_insert(c, q->audit, q->now);
        return r;
}

int pg_ek_remove(store *s, const char *key, const store_audit *audit, int64_t now) {
        if (!store_str_ok(key, 128))
                return hwid_fail(HWID_E_INVALID, "no name or EK hash to remove from the EK allowlist");
        return pg_tx(pg_of(s), ek_remove_run, &(ek_q) { .a = key, .audit = audit, .now = now },
                     "commit the EK allowlist removal");
}
