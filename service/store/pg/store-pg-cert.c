/* Certificates in PostgreSQL: commit (with everything an issuance pays
 * for or changes, in one transaction), lookups and DNS names.
 *
 * The partial unique index certificates_one_live lets one 'valid' row
 * per identity in: of two replicas committing for one identity at once,
 * the second waits on the first's index entry and fails with a unique
 * violation (-HWID_E_CONFLICT).  A commit first retires the identity's
 * expired 'valid' rows, as the SQLite store does.  Writes take turns on
 * the write lock (store-pg.h), so a keyCompromise revocation and an
 * issuance of the same key cannot pass each other. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
        if (oom) {
                store_cert_clear(&c);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = c;
        return 0;
}

/* One row of sql (one parameter, text) into *ret; -HWID_E_NOT_FOUND if none. */
static int cert_one(pg_slot *c, const char *sql, const char *fmt, const char *a, int64_t b, store_cert *ret) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "read a certificate", sql, fmt, a, b);

        if (r < 0)
                return r;
        if (PQntuples(res) == 0)
                return -HWID_E_NOT_FOUND;
        return cert_from_row(res, 0, ret);
}

int pg_cert_read_serial(pg_slot *c, const char *serial, bool lock, store_cert *ret) {
        int r;

        if (!store_serial_ok(serial))
                return hwid_fail(HWID_E_NOT_FOUND, "no such certificate (a serial is upper-case hex)");
        r = cert_one(c, lock ? "SELECT " CERT_COLS " FROM certificates WHERE serial = $1 FOR UPDATE"
                             : "SELECT " CERT_COLS " FROM certificates WHERE serial = $1",
                     "t", serial, 0, ret);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "no certificate with serial %s", serial);
        return r;
}

/* ---- commit ---- */

static int supersede(pg_slot *c, const char *serial, const char *identity, int64_t now) {
        _cleanup_(store_cert_clear) store_cert old = { 0 };
        int r = pg_cert_read_serial(c, serial, true, &old);

        if (r < 0)
                return r;
        if (strcasecmp(old.identity, identity) != 0)
                return hwid_fail(HWID_E_FORBIDDEN, "certificate %s belongs to %s, not %s", serial, old.identity,
                                 identity);
        if (old.status == CERT_REVOKED)
                return hwid_fail(HWID_E_REVOKED, "certificate %s is revoked and cannot be renewed", serial);
        if (old.status == CERT_SUPERSEDED)
                return hwid_fail(HWID_E_CONFLICT, "certificate %s has already been renewed", serial);
        if (now >= old.not_after)
                return hwid_fail(HWID_E_EXPIRED, "certificate %s has expired and cannot be renewed", serial);
        return pg_exec(c, NULL, "supersede a certificate",
                       "UPDATE certificates SET status = 'superseded' WHERE serial = $1 AND status = 'valid'", "t",
                       serial);
}

static int retire(pg_slot *c, const char *identity, int64_t now, bool replace_live) {
        if (replace_live)
                return pg_exec(c, NULL, "retire old certificates",
                               "UPDATE certificates SET status = 'superseded' "
                               "WHERE hwid_fold(identity) = hwid_fold($1) AND status = 'valid'", "t", identity);
        return pg_exec(c, NULL, "retire old certificates",
                       "UPDATE certificates SET status = 'superseded' "
                       "WHERE hwid_fold(identity) = hwid_fold($1) AND status = 'valid' AND not_after <= $2",
                       "tI", identity, now);
}

static int cert_insert(pg_slot *c, const store_cert *x, const char *request_id, const char *token_id, int64_t now,
                       bool replace_live) {
        int r = pg_exec(c, NULL, "insert a certificate",
                        "INSERT INTO certificates (" CERT_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'valid', 0, 0, "
                        "$9, $10, $11, $12, $13, $14, $15, $16)",
                        "tttttbIItItttttt", x->serial, x->identity, x->subject, x->profile, x->spki_sha256, x->der,
                        x->der_len, x->not_before, x->not_after, request_id, now, x->role[0] ? x->role : "node",
                        token_id, x->scope, store_opt(x->attestation.ek_cert_sha256),
                        store_opt(x->attestation.ek_pub_sha256), store_opt(x->attestation.ak_name));

        if (r != -HWID_E_INVALID)
                return r;
        if (strcmp(c->constraint, "certificates_pkey") == 0)
                return hwid_fail(HWID_E_EXISTS, "a certificate with serial %s is already stored", x->serial);
        if (strcmp(c->constraint, "certificates_one_live") == 0) {
                /* Replacing: the live one committed meanwhile is retired on the next attempt. */
                c->retry = replace_live;
                return hwid_fail(HWID_E_CONFLICT, "%s already has a live certificate (identities ignore case); "
                                 "revoke it first", x->identity);
        }
        return r;
}

static int dns_record(pg_slot *c, const store_issue *in, int64_t now) {
        char name[STORE_DNS_NAME_MAX + 1];
        int r;

        for (size_t i = 0; i < in->n_dns_names; i++) {
                if ((r = store_dns_canonical(in->dns_names[i], name, sizeof(name))) < 0 ||
                    (r = pg_exec(c, NULL, "retire an expired holder of a DNS name",
                                 "UPDATE certificates SET status = 'superseded' WHERE status = 'valid' AND not_after <= $2 "
                                 "AND serial = (SELECT serial FROM certificate_dns WHERE name = $1 AND live)",
                                 "tI", name, now)) < 0)
                        return r;
                r = pg_exec(c, NULL, "record a DNS name",
                            "INSERT INTO certificate_dns (serial, name, live) VALUES ($1, $2, true) "
                            "ON CONFLICT (serial, name) DO NOTHING", "tt", in->cert->serial, name);
                if (r == -HWID_E_INVALID && strcmp(c->constraint, "certificate_dns_one_live") == 0)
                        return hwid_fail(HWID_E_CONFLICT, "DNS name %s already belongs to another live certificate; "
                                         "%s cannot have it", name, in->cert->identity);
                if (r < 0)
                        return r;
        }
        return 0;
}

typedef struct commit_q {
        const store_issue *in;
        int64_t now;
} commit_q;

static int commit_run(pg_slot *c, void *userdata) {
        const commit_q *q = userdata;
        const store_issue *in = q->in;
        const store_cert *x = in->cert;
        int r = pg_key_check(c, x->spki_sha256);
        if (r >= 0 && in->consume_token_id)
                r = pg_token_consume(c, in->consume_token_id, q->now);
        if (r >= 0 && in->request_id)
                r = pg_request_mark_issued(c, in->request_id, x->identity, x->serial, q->now);
        if (r >= 0 && in->supersedes_serial)
                r = supersede(c, in->supersedes_serial, x->identity, q->now);
        if (r >= 0)
                r = retire(c, x->identity, q->now, in->replace_live);
        if (r >= 0)
                r = cert_insert(c, x, x->request_id ? x->request_id : in->request_id, in->consume_token_id, q->now,
                                in->replace_live);
        if (r >= 0)
                r = dns_record(c, in, q->now);
        if (r >= 0 && in->audit)
                r = pg_audit_insert(c, in->audit, q->now);
        return r;
}

int store_pg_cert_commit(store_pg *p, const store_issue *in, int64_t now) {
        int r = store_cert_check(in ? in->cert : NULL);

        if (r < 0)
                return r;
        /* Concurrent issuances share one transaction and one WAL flush. */
        return pg_group_commit(p, commit_run, &(commit_q) { .in = in, .now = now }, "commit the certificate");
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

int store_pg_cert_get(store_pg *p, const char *serial, store_cert *ret) {
        return pg_read(p, get_run, &(cert_q) { .key = serial, .one = ret });
}

static int live_run(pg_slot *c, void *userdata) {
        cert_q *q = userdata;
        int r = cert_one(c,
                         "SELECT " CERT_COLS " FROM certificates "
                         "WHERE hwid_fold(identity) = hwid_fold($1) AND status = 'valid' AND not_after > $2",
                         "tI", q->key, q->now, q->one);

        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "%s has no live certificate", q->key);
        return r;
}

int store_pg_cert_live_for(store_pg *p, const char *identity, int64_t now, store_cert *ret) {
        if (!identity)
                return hwid_fail(HWID_E_INVALID, "no identity given");
        return pg_read(p, live_run, &(cert_q) { .key = identity, .now = now, .one = ret });
}

static int list_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        cert_q *q = userdata;
        store_cert *all;
        size_t n = 0;
        int r = q->key ? pg_exec(c, &res, "list certificates",
                                 "SELECT " CERT_COLS " FROM certificates WHERE hwid_fold(identity) = hwid_fold($1) "
                                 "ORDER BY created_at, serial", "t", q->key)
                       : pg_exec(c, &res, "list certificates",
                                 "SELECT " CERT_COLS " FROM certificates ORDER BY created_at, serial", NULL);

        if (r < 0)
                return r;
        if (!(all = calloc((size_t) PQntuples(res) + 1, sizeof(*all))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (; r >= 0 && n < (size_t) PQntuples(res); n++)
                if ((r = cert_from_row(res, (int) n, &all[n])) < 0)
                        break;
        if (r < 0) {
                store_cert_list_free(all, n);
                return r;
        }
        *q->all = all;
        *q->n = n;
        return 0;
}

int store_pg_cert_list(store_pg *p, const char *identity, store_cert **ret, size_t *ret_n) {
        return pg_read(p, list_run, &(cert_q) { .key = identity, .all = ret, .n = ret_n });
}

static int dns_owner_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        cert_q *q = userdata;
        bool oom = false;
        int r = pg_exec(c, &res, "look up a DNS name",
                        "SELECT c.identity FROM certificate_dns AS d JOIN certificates AS c ON c.serial = d.serial "
                        "WHERE d.name = $1 AND d.live AND c.not_after > $2", "tI", q->key, q->now);

        if (r < 0)
                return r;
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no live certificate holds DNS name %s", q->key);
        *q->identity = pg_strdup(res, 0, 0, &oom);
        return oom || !*q->identity ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
}

int store_pg_dns_owner(store_pg *p, const char *name, int64_t now, char **ret_identity) {
        char canon[STORE_DNS_NAME_MAX + 1];
        int r = store_dns_canonical(name, canon, sizeof(canon));

        if (r < 0)
                return r;
        return pg_read(p, dns_owner_run, &(cert_q) { .key = canon, .now = now, .identity = ret_identity });
}

/* A PostgreSQL store records DNS names from its first certificate on
 * (and `hwid store migrate` copies them): nothing to backfill. */
int store_pg_cert_dns_backfill(store_pg *p, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                               size_t *ret_skipped) {
        (void) p;
        (void) now;
        (void) names_of;
        *ret_recorded = *ret_skipped = 0;
        return 0;
}
