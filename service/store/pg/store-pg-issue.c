/* An issuance as one member of hwid_issue() (store-pg-functions.c): the
 * JSON object hwid_issue_one() takes, and the refusal its result names --
 * the same words as the SQLite store's (store-sqlite-cert.c).  Shared by
 * the group commit (store-pg-batch.c), below it. */
#include <string.h>

#include <json-c/json.h>

#include "base64.h"
#include "error.h"
#include "store-pg.h"
#include "store-rows.h"

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
        put_i64(m, "generation", x->generation > 0 ? x->generation : 1);
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

int pg_issue_result(pg_store *p, const store_issue *in, int64_t now, const char *result, const char *detail) {
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
