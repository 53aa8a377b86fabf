/* Certificates in PostgreSQL: commit (what an issuance pays for or
 * changes, as one hwid_issue() member: store-pg-issue.c,
 * store-pg-functions.c), lookups and DNS names.
 *
 * The partial unique index certificates_one_live lets one 'valid' row
 * per identity in: of two replicas committing for one identity at once,
 * the second waits on the first's index entry and is refused
 * (-HWID_E_CONFLICT), or, replacing, retires it and goes in.  A commit
 * first retires the identity's expired 'valid' rows, as the SQLite store
 * does.  An issuance holds its key's lock shared and a keyCompromise
 * revocation exclusive (store-pg-revoke.c), so that the two cannot pass
 * each other. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>

#include "base64.h"
#include "error.h"
#include "store-pg.h"
#include "store-rows.h"

static int cert_from_row(PGresult *res, int row, store_cert *ret) {
        store_cert c = { 0 };
        bool oom = false;

        c.serial = pg_strdup(res, row, 0, &oom);
        c.identity = pg_strdup(res, row, 1, &oom);
        c.subject = pg_strdup(res, row, 2, &oom);
        c.profile = pg_strdup(res, row, 3, &oom);
        pg_copy(res, row, 4, c.spki_sha256, sizeof(c.spki_sha256));
        c.der = pg_blobdup(res, row, 5, &c.der_len, &oom);
        c.not_before = pg_i64(res, row, 6);
        c.not_after = pg_i64(res, row, 7);
        c.status = store_cert_status_parse(pg_val(res, row, 8));
        c.revoked_at = pg_i64(res, row, 9);
        c.revocation_reason = (int) pg_i64(res, row, 10);
        c.request_id = pg_strdup(res, row, 11, &oom);
        c.created_at = pg_i64(res, row, 12);
        pg_copy(res, row, 13, c.role, sizeof(c.role));
        pg_copy(res, row, 14, c.token_id, sizeof(c.token_id));
        c.scope = pg_strdup(res, row, 15, &oom);
        pg_copy(res, row, 16, c.attestation.ek_cert_sha256, sizeof(c.attestation.ek_cert_sha256));
        pg_copy(res, row, 17, c.attestation.ek_pub_sha256, sizeof(c.attestation.ek_pub_sha256));
        pg_copy(res, row, 18, c.attestation.ak_name, sizeof(c.attestation.ak_name));
        c.generation = (int) pg_i64(res, row, 19);
        if (oom) {
                store_cert_clear(&c);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = c;
        return 0;
}

/* ---- reads ---- */

int pg_cert_serial_query(const char *serial, bool lock, pg_query *q) {
        if (!store_serial_ok(serial))
                return hwid_fail(HWID_E_NOT_FOUND, "no such certificate (a serial is upper-case hex)");
        /* The locking one runs inside transactions, seldom. */
        return pg_named(q, lock ? PG_STMT_NONE : PG_STMT_CERT,
                        pg_bind(q, "read a certificate",
                                lock ? "SELECT " CERT_COLS " FROM certificates WHERE serial = $1 FOR UPDATE"
                                     : "SELECT " CERT_COLS " FROM certificates WHERE serial = $1",
                                "t", serial));
}

int pg_cert_serial_answer(PGresult *res, const char *serial, store_cert *ret) {
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no certificate with serial %s", serial);
        return cert_from_row(res, 0, ret);
}

int pg_cert_read_serial(pg_slot *c, const char *serial, bool lock, store_cert *ret) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        pg_query q;
        int r = pg_cert_serial_query(serial, lock, &q);

        if (r < 0 || (r = pg_run(c, &q, &res)) < 0)
                return r;
        return pg_cert_serial_answer(res, serial, ret);
}

int pg_cert_live_query(const char *identity, int64_t now, pg_query *q) {
        return pg_named(q, PG_STMT_LIVE,
                        pg_bind(q, "read a certificate",
                                "SELECT " CERT_COLS " FROM certificates "
                                "WHERE hwid_fold(identity) = hwid_fold($1) AND status = 'valid' AND not_after > $2",
                                "tI", identity, now));
}

int pg_cert_live_answer(PGresult *res, const char *identity, store_cert *ret) {
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s has no live certificate", identity);
        return cert_from_row(res, 0, ret);
}

int pg_dns_owner_query(const char *canon, int64_t now, pg_query *q) {
        return pg_named(q, PG_STMT_DNS,
                        pg_bind(q, "look up a DNS name",
                                "SELECT c.identity FROM certificate_dns AS d JOIN certificates AS c ON c.serial = d.serial "
                                "WHERE d.name = $1 AND d.live AND c.not_after > $2", "tI", canon, now));
}

int pg_dns_owner_answer(PGresult *res, const char *canon, char **ret_identity) {
        bool oom = false;
        char *who;

        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no live certificate holds DNS name %s", canon);
        who = pg_strdup(res, 0, 0, &oom);
        if (oom || !who)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret_identity = who;
        return 0;
}

/* ---- commit ---- */

int pg_cert_commit(store *s, const store_issue *in, int64_t now) {
        int r = store_cert_check(in ? in->cert : NULL);

        if (r < 0)
                return r;
        /* Concurrent issuances share one statement and one WAL flush. */
        return pg_group_commit(pg_of(s), in, now);
}

/* ---- lookups ---- */

typedef struct cert_q {
        const char *key;
        int64_t now;
        store_cert *one;
        store_cert **all;
        size_t *n;
        char **identity;
} cert_q;

static int get_run(pg_slot *c, void *userdata) {
        cert_q *q = userdata;

        return pg_cert_read_serial(c, q->key, false, q->one);
}

int pg_cert_get(store *s, const char *serial, store_cert *ret) {
        return pg_read(pg_of(s), get_run, &(cert_q) { .key = serial, .one = ret });
}

static int live_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        cert_q *q = userdata;
        pg_query query;
        int r = pg_cert_live_query(q->key, q->now, &query);

        if (r < 0 || (r = pg_run(c, &query, &res)) < 0)
                return r;
        return pg_cert_live_answer(res, q->key, q->one);
}

int pg_cert_live_for(store *s, const char *identity, int64_t now, store_cert *ret) {
        if (!identity)
                return hwid_fail(HWID_E_INVALID, "no identity given");
        return pg_read(pg_of(s), live_run, &(cert_q) { .key = identity, .now = now, .one = ret });
}

static int cert_row(PGresult *res, int row, void *ret) {
        return cert_from_row(res, row, ret);
}

static void cert_list_free(void *all, size_t n) {
        store_cert_list_free(all, n);
}

static int list_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        cert_q *q = userdata;
        int r = q->key ? pg_exec(c, &res, "list certificates",
                                 "SELECT " CERT_COLS " FROM certificates WHERE hwid_fold(identity) = hwid_fold($1) "
                                 "ORDER BY created_at, serial", "t", q->key)
                       : pg_exec(c, &res, "list certificates",
                                 "SELECT " CERT_COLS " FROM certificates ORDER BY created_at, serial", NULL);

        return r < 0 ? r : pg_rows(res, sizeof(store_cert), cert_row, cert_list_free, (void **) q->all, q->n);
}

int pg_cert_list(store *s, const char *identity, store_cert **ret, size_t *ret_n) {
        return pg_read(pg_of(s), list_run, &(cert_q) { .key = identity, .all = ret, .n = ret_n });
}

static int dns_owner_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        cert_q *q = userdata;
        pg_query query;
        int r = pg_dns_owner_query(q->key, q->now, &query);

        if (r < 0 || (r = pg_run(c, &query, &res)) < 0)
                return r;
        return pg_dns_owner_answer(res, q->key, q->identity);
}

int pg_dns_owner(store *s, const char *name, int64_t now, char **ret_identity) {
        char canon[STORE_DNS_NAME_MAX + 1];
        int r = store_dns_canonical(name, canon, sizeof(canon));

        if (r < 0)
                return r;
        return pg_read(pg_of(s), dns_owner_run, &(cert_q) { .key = canon, .now = now, .identity = ret_identity });
}

/* A PostgreSQL store records DNS names from its first certificate on
 * (and `hwid store migrate` copies them): nothing to backfill. */
int pg_cert_dns_backfill(store *s, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                         size_t *ret_skipped) {
        (void) s;
        (void) now;
        (void) names_of;
        *ret_recorded = *ret_skipped = 0;
        return 0;
}
