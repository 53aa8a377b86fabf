/* Identities bound to the TPM that attested them (store.h), in
 * PostgreSQL: the table identity_bindings (one row per hwid_fold() of an
 * identity), written by hwid_issue_one() in the issuance's own statement
 * (store-pg-functions.c, migration 12), and read, listed and released
 * here.  The read is also one of those an issuance makes ahead
 * (store-pg-reads.c). */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"
#include "store-rows.h"

static int binding_from_row(PGresult *res, int row, store_binding *ret) {
        store_binding b = { .bound_at = pg_i64(res, row, 4) };
        bool oom = false;

        b.identity = pg_strdup(res, row, 0, &oom);
        pg_copy(res, row, 1, b.ek_pub_sha256, sizeof(b.ek_pub_sha256));
        pg_copy(res, row, 2, b.ek_cert_sha256, sizeof(b.ek_cert_sha256));
        b.serial = pg_strdup(res, row, 3, &oom);
        if (oom) {
                store_binding_clear(&b);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = b;
        return 0;
}

int pg_binding_query(const char *identity, pg_query *q) {
        if (!store_str_ok(identity, STORE_BINDING_NAME_MAX))
                return hwid_fail(HWID_E_INVALID, "an identity is 1 to %d bytes", STORE_BINDING_NAME_MAX);
        return pg_named(q, PG_STMT_BINDING,
                        pg_bind(q, "read an identity's binding",
                                "SELECT " BINDING_COLS " FROM identity_bindings "
                                "WHERE hwid_fold(identity) = hwid_fold($1)", "t", identity));
}

int pg_binding_answer(PGresult *res, const char *identity, store_binding *ret) {
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s is not bound to a TPM", identity);
        return binding_from_row(res, 0, ret);
}

typedef struct binding_q {
        const char *identity;
        const store_binding *b;
        const store_audit *audit;
        int64_t now;
        store_binding *one;
        store_binding **all;
        size_t *n;
} binding_q;

static int get_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        binding_q *q = userdata;
        pg_query query;
        int r = pg_binding_query(q->identity, &query);

        if (r < 0 || (r = pg_run(c, &query, &res)) < 0)
                return r;
        return pg_binding_answer(res, q->identity, q->one);
}

int pg_binding_get(store *s, const char *identity, store_binding *ret) {
        return pg_read(pg_of(s), get_run, &(binding_q) { .identity = identity, .one = ret });
}

static int binding_row(PGresult *res, int row, void *ret) {
        return binding_from_row(res, row, ret);
}

static void binding_list_free(void *all, size_t n) {
        store_binding_list_free(all, n);
}

static int list_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        binding_q *q = userdata;
        int r = pg_exec(c, &res, "list the identities bound to a TPM",
                        "SELECT " BINDING_COLS " FROM identity_bindings ORDER BY hwid_fold(identity)", NULL);

        return r < 0 ? r : pg_rows(res, sizeof(store_binding), binding_row, binding_list_free, (void **) q->all, q->n);
}

int pg_binding_list(store *s, store_binding **ret, size_t *ret_n) {
        return pg_read(pg_of(s), list_run, &(binding_q) { .all = ret, .n = ret_n });
}

static int release_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        binding_q *q = userdata;
        int r = pg_exec(c, &res, "release an identity's binding",
                        "DELETE FROM identity_bindings "
                        "WHERE hwid_fold(identity) = hwid_fold($1) AND ek_pub_sha256 = $2", "tt", q->b->identity,
                        q->b->ek_pub_sha256);

        if (r >= 0 && pg_changes(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s is no longer bound to the TPM with EK sha256:%s",
                                 q->b->identity, q->b->ek_pub_sha256);
        if (r >= 0 && q->audit)
                r = pg_audit_insert(c, q->audit, q->now);
        return r;
}

int pg_binding_release(store *s, const store_binding *b, const store_audit *audit, int64_t now) {
        if (!store_binding_ok(b))
                return hwid_fail(HWID_E_INVALID, "no identity binding to release");
        return pg_tx(pg_of(s), release_run, &(binding_q) { .b = b, .audit = audit, .now = now },
                     "commit the identity's release");
}

/* hwid_issue_one()'s refusal 'bound': detail is the binding as it found
 * it, "EK SERIAL IDENTITY" (the identity last: it may hold blanks). */
int pg_binding_refusal(const store_issue *in, const char *detail) {
        _cleanup_(store_binding_clear) store_binding b = { 0 };
        const char *serial = strchr(detail, ' '), *identity = serial ? strchr(serial + 1, ' ') : NULL;
        int r;

        if (!identity || serial - detail != 64)
                return hwid_fail(HWID_E_STORE, "hwid_issue() refused a bound identity without saying how: '%s'",
                                 detail);
        memcpy(b.ek_pub_sha256, detail, 64);
        if (!(b.serial = strndup(serial + 1, (size_t) (identity - serial - 1))) || !(b.identity = strdup(identity + 1)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = store_binding_check(&b, in->cert->attestation.ek_pub_sha256, in->supersedes_serial != NULL);
        return r < 0 ? r : hwid_fail(HWID_E_FORBIDDEN, "%s is bound to the TPM with EK sha256:%s", b.identity,
                                     b.ek_pub_sha256);
}
