/* Certificates in PostgreSQL: commit (what an issuance pays for or
 * changes, as one hwid_issue() member: store-pg-functions.c), lookups and
 * DNS names.
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

static void put_i64(json_object *m, const char *key, int64_t v) {
        json_object_object_add(m, key, json_object_new_int64(v));
}

/* The DNS names, canonical, as a JSON array. */
static int dns_json(const store_issue *in, json_object *m) {
        char name[STORE_DNS_NAME_MAX + 1];
        json_object *all = json_object_new_array();
        int r = 0;

        json_object_object_add(m, "dns", all);
        for (size_t i = 0; r >= 0 && i < in->n_dns_names; i++)
                if ((r = store_dns_canonical(in->dns_names[i], name, sizeof(name))) >= 0)
                        json_object_array_add(all, json_object_new_string(name));
        return r;
}

/* The certificate's own columns. */
static int cert_json(const store_issue *in, json_object *m) {
        const store_cert *x = in->cert;
        _cleanup_free_ char *der = NULL;
        int r = base64_encode(x->der, x->der_len, false, &der);

        if (r < 0)
                return r;
        pg_json_str(m, "serial", x->serial);
        pg_json_str(m, "identity", x->identity);
        pg_json_str(m, "subject", x->subject);
        pg_json_str(m, "profile", x->profile);
        pg_json_str(m, "spki", x->spki_sha256);
        pg_json_str(m, "der", der);
        put_i64(m, "not_before", x->not_before);
        put_i64(m, "not_after", x->not_after);
        pg_json_str(m, "request_id", x->request_id ? x->request_id : in->request_id);
        pg_json_str(m, "role", x->role[0] ? x->role : "node");
        pg_json_str(m, "scope", x->scope);
        pg_json_str(m, "ek_cert", store_opt(x->attestation.ek_cert_sha256));
        pg_json_str(m, "ek_pub", store_opt(x->attestation.ek_pub_sha256));
        pg_json_str(m, "ak_name", store_opt(x->attestation.ak_name));
        return 0;
}

int pg_issue_json(const store_issue *in, int64_t now, json_object **ret) {
        json_object *m = json_object_new_object(), *audit = NULL;
        int r;

        if (!m)
                return hwid_fail(HWID_E_NOMEM, NULL);
        put_i64(m, "now", now);
        pg_json_str(m, "token", in->consume_token_id);
        pg_json_str(m, "request", in->request_id);
        pg_json_str(m, "supersedes", in->supersedes_serial);
        json_object_object_add(m, "replace", json_object_new_boolean(in->replace_live));
        if ((r = cert_json(in, m)) >= 0 && (r = dns_json(in, m)) >= 0 && in->audit &&
            (r = pg_audit_record(in->audit, now, &audit)) >= 0)
                json_object_object_add(m, "audit", audit);
        if (r < 0) {
                json_object_put(m);
                return r;
        }
        *ret = m;
        return 0;
}

/* The refusals of the certificate a renewal supersedes. */
static int supersede_refusal(const store_issue *in, const char *result, const char *detail) {
        const char *serial = in->supersedes_serial, *identity = in->cert->identity;

        if (strcmp(result, "cert_missing") == 0)
                return store_serial_ok(serial) ? hwid_fail(HWID_E_NOT_FOUND, "no certificate with serial %s", serial)
                                               : hwid_fail(HWID_E_NOT_FOUND, "no such certificate (a serial is "
                                                           "upper-case hex)");
        if (strcmp(result, "cert_identity") == 0)
                return hwid_fail(HWID_E_FORBIDDEN, "certificate %s belongs to %s, not %s", serial, detail, identity);
        if (strcmp(result, "cert_revoked") == 0)
                return hwid_fail(HWID_E_REVOKED, "certificate %s is revoked and cannot be renewed", serial);
        if (strcmp(result, "cert_superseded") == 0)
                return hwid_fail(HWID_E_CONFLICT, "certificate %s has already been renewed", serial);
        return hwid_fail(HWID_E_EXPIRED, "certificate %s has expired and cannot be renewed", serial);
}

/* The refusals of the approved request an issuance completes. */
static int request_refusal(const store_issue *in, const char *result, const char *detail) {
        const char *id = in->request_id;

        if (strcmp(result, "request_missing") == 0)
                return store_request_id_ok(id) ? hwid_fail(HWID_E_NOT_FOUND, "no request " REQUEST_ID_FMT, id)
                                               : hwid_fail(HWID_E_NOT_FOUND, "no such request");
        if (strcmp(result, "request_status") == 0)
                return hwid_fail(HWID_E_CONFLICT, "request " REQUEST_ID_FMT " is %s, not approved", id, detail);
        return hwid_fail(HWID_E_FORBIDDEN, "request " REQUEST_ID_FMT " is for %s, not %s", id, detail,
                         in->cert->identity);
}

int pg_issue_result(store_pg *p, const store_issue *in, int64_t now, const char *result, const char *detail) {
        const store_cert *x = in->cert;

        detail = detail ? detail : "";
        if (strcmp(result, "ok") == 0)
                return 0;
        if (strcmp(result, "key_blocked") == 0)
                return hwid_fail(HWID_E_KEY_BLOCKED, "this key (SPKI SHA-256 %s) was revoked as compromised with "
                                 "certificate %s and is never certified again: make a new key", x->spki_sha256, detail);
        if (strncmp(result, "token", 5) == 0)
                return pg_token_refusal(in->consume_token_id, result[5] ? NULL : detail, now);
        if (strncmp(result, "request_", 8) == 0)
                return request_refusal(in, result, detail);
        if (strncmp(result, "cert_", 5) == 0)
                return supersede_refusal(in, result, detail);
        if (strcmp(result, "exists") == 0)
                return hwid_fail(HWID_E_EXISTS, "a certificate with serial %s is already stored", x->serial);
        if (strcmp(result, "live") == 0)
                return hwid_fail(HWID_E_CONFLICT, "%s already has a live certificate (identities ignore case); "
                                 "revoke it first", x->identity);
        if (strcmp(result, "bound") == 0)
                return pg_binding_refusal(in, detail);
        if (strcmp(result, "dns") == 0)
                return hwid_fail(HWID_E_CONFLICT, "DNS name %s already belongs to another live certificate; %s cannot "
                                 "have it", detail, x->identity);
        if (strcmp(result, "invalid") == 0)
                return hwid_fail(HWID_E_INVALID, "cannot commit the certificate in %s: %s", p->label, detail);
        return hwid_fail(HWID_E_STORE, "cannot commit the certificate in PostgreSQL %s: %s", p->label, detail);
}

int store_pg_cert_commit(store_pg *p, const store_issue *in, int64_t now) {
        int r = store_cert_check(in ? in->cert : NULL);

        if (r < 0)
                return r;
        /* Concurrent issuances share one statement and one WAL flush. */
        return pg_group_commit(p, in, now);
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
        _cleanup_(PQclearp) PGresult *res = NULL;
        cert_q *q = userdata;
        pg_query query;
        int r = pg_cert_live_query(q->key, q->now, &query);

        if (r < 0 || (r = pg_run(c, &query, &res)) < 0)
                return r;
        return pg_cert_live_answer(res, q->key, q->one);
}

int store_pg_cert_live_for(store_pg *p, const char *identity, int64_t now, store_cert *ret) {
        if (!identity)
                return hwid_fail(HWID_E_INVALID, "no identity given");
        return pg_read(p, live_run, &(cert_q) { .key = identity, .now = now, .one = ret });
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

int store_pg_cert_list(store_pg *p, const char *identity, store_cert **ret, size_t *ret_n) {
        return pg_read(p, list_run, &(cert_q) { .key = identity, .all = ret, .n = ret_n });
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
