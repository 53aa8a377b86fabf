#include <stdio.h>
#include <string.h>

#include <openssl/pem.h>

#include "admin-json.h"
#include "error.h"
#include "json-read.h"
#include "ossl-util.h"
#include "x509-util.h"

static const char *const token_states[] = { "active", "expired", "used-up", "revoked" };
static const char *const request_statuses[] = { "pending", "approved", "denied", "issued" };
static const char *const cert_statuses[] = { "valid", "revoked", "superseded" };

const char *admin_token_state_name(store_token_state s) {
        return (size_t) s < ELEMENTSOF(token_states) ? token_states[s] : "unknown";
}

const char *admin_request_status_name(store_request_status s) {
        return (size_t) s < ELEMENTSOF(request_statuses) ? request_statuses[s] : "unknown";
}

const char *admin_cert_status_name(store_cert_status s) {
        return (size_t) s < ELEMENTSOF(cert_statuses) ? cert_statuses[s] : "unknown";
}

static void set_int(json_object *o, const char *key, int64_t v) {
        json_object_object_add(o, key, json_object_new_int64(v));
}

/* ---------- encoders ---------- */

json_object *admin_json_token(const store_token *t, int64_t now) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_set_str(o, "id", t->id);
        json_set_str(o, "state", admin_token_state_name(store_token_state_at(t, now)));
        json_set_str(o, "profile", t->profile);
        json_set_str(o, "name_pattern", t->name_pattern);
        json_set_str(o, "description", t->description);
        set_int(o, "created_at", t->created_at);
        set_int(o, "expires_at", t->expires_at);
        set_int(o, "uses_total", t->uses_total);
        set_int(o, "uses_left", t->uses_left);
        json_object_object_add(o, "revoked", json_object_new_boolean(t->revoked));
        return o;
}

json_object *admin_json_request(const store_request *r) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_set_str(o, "id", r->id);
        json_set_str(o, "status", admin_request_status_name(r->status));
        json_set_str(o, "identity", r->identity);
        json_set_str(o, "profile", r->profile);
        json_set_str(o, "token_id", r->token_id);
        json_set_str(o, "spki_sha256", r->spki_sha256);
        json_set_str(o, "reason", r->reason);
        json_set_str(o, "serial", r->serial);
        set_int(o, "created_at", r->created_at);
        set_int(o, "updated_at", r->updated_at);
        return o;
}

/* What TPM attestation proved of the key (docs/ATTESTATION.md), or null. */
static json_object *attestation_json(const store_attestation *a) {
        json_object *o;

        if (!store_attested(a) || !(o = json_object_new_object()))
                return NULL;
        json_set_str(o, "ek_pub_sha256", a->ek_pub_sha256);
        json_set_str(o, "ek_cert_sha256", a->ek_cert_sha256[0] ? a->ek_cert_sha256 : NULL);
        json_set_str(o, "ak_name", a->ak_name[0] ? a->ak_name : NULL);
        return o;
}

/* The scope recorded with a provisioner's certificate, or null. */
static json_object *scope_json(const char *scope) {
        json_object *o = NULL;

        return scope && json_read(scope, strlen(scope), 4, 0, "the recorded scope", &o) >= 0 ? o : NULL;
}

json_object *admin_json_cert(const store_cert *c, bool with_pem) {
        json_object *o = json_object_new_object();
        _cleanup_free_ char *pem = NULL;

        if (!o)
                return NULL;
        json_set_str(o, "serial", c->serial);
        json_set_str(o, "status", admin_cert_status_name(c->status));
        json_set_str(o, "identity", c->identity);
        json_set_str(o, "subject", c->subject);
        json_set_str(o, "profile", c->profile);
        json_set_str(o, "role", c->role);
        json_object_object_add(o, "scope", scope_json(c->scope));
        json_set_str(o, "spki_sha256", c->spki_sha256);
        set_int(o, "not_before", c->not_before);
        set_int(o, "not_after", c->not_after);
        set_int(o, "revoked_at", c->revoked_at);
        json_set_str(o, "revocation_reason", c->status == CERT_REVOKED ? revocation_reason_name(c->revocation_reason)
                                                                        : NULL);
        json_set_str(o, "request_id", c->request_id);
        set_int(o, "created_at", c->created_at);
        json_object_object_add(o, "attestation", attestation_json(&c->attestation));
        if (with_pem && cert_der_to_pem(c->der, c->der_len, &pem) >= 0)
                json_set_str(o, "pem", pem);
        return o;
}

json_object *admin_json_audit(const store_audit *a) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        set_int(o, "at", a->at);
        json_set_str(o, "actor", a->actor);
        json_set_str(o, "action", a->action);
        json_set_str(o, "target", a->target);
        json_set_str(o, "outcome", a->outcome);
        json_set_str(o, "reason", a->reason);
        json_set_str(o, "token_id", a->token_id);
        return o;
}

json_object *admin_json_ek(const store_ek *e) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_set_str(o, "identity", e->identity);
        json_set_str(o, "profile", e->profile);
        json_set_str(o, "ek_pub_sha256", e->ek_pub_sha256[0] ? e->ek_pub_sha256 : NULL);
        json_set_str(o, "ek_cert_sha256", e->ek_cert_sha256[0] ? e->ek_cert_sha256 : NULL);
        json_object_object_add(o, "added_at", json_object_new_int64(e->added_at));
        return o;
}

json_object *admin_json_binding(const store_binding *b) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_set_str(o, "identity", b->identity);
        json_set_str(o, "ek_pub_sha256", b->ek_pub_sha256);
        json_set_str(o, "ek_cert_sha256", b->ek_cert_sha256[0] ? b->ek_cert_sha256 : NULL);
        json_set_str(o, "serial", b->serial);
        json_object_object_add(o, "bound_at", json_object_new_int64(b->bound_at));
        return o;
}

/* ---------- decoders ---------- */

/* A field of a record: its string (NULL for null if nullable). */
static int get_str(json_object *o, const char *key, bool nullable, const char **ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || (!v && !nullable) ||
            (v && !json_object_is_type(v, json_type_string)))
                return hwid_fail(HWID_E_INVALID, "the server's answer has no valid \"%s\"", key);
        *ret = v ? json_object_get_string(v) : NULL;
        return 0;
}

static int get_int(json_object *o, const char *key, int64_t *ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return hwid_fail(HWID_E_INVALID, "the server's answer has no valid \"%s\"", key);
        *ret = json_object_get_int64(v);
        return 0;
}

static int dup_str(json_object *o, const char *key, bool nullable, char **ret) {
        const char *s;
        int r = get_str(o, key, nullable, &s);

        if (r < 0)
                return r;
        *ret = s ? strdup(s) : NULL;
        return s && !*ret ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
}

static int copy_str(json_object *o, const char *key, char *buf, size_t size) {
        const char *s;
        int r = get_str(o, key, false, &s);

        if (r < 0)
                return r;
        if (strlen(s) >= size)
                return hwid_fail(HWID_E_INVALID, "the server's \"%s\" is too long", key);
        memcpy(buf, s, strlen(s) + 1);
        return 0;
}

static int pick_name(json_object *o, const char *key, const char *const *names, size_t n, int *ret) {
        const char *s;
        int r = get_str(o, key, false, &s);

        for (size_t i = 0; r >= 0 && i < n; i++)
                if (strcmp(s, names[i]) == 0) {
                        *ret = (int) i;
                        return 0;
                }
        return r < 0 ? r : hwid_fail(HWID_E_INVALID, "the server's \"%s\" is '%s', which this hwid does not know",
                                     key, s);
}

/* The certificate of "pem", if any, as DER. */
static int cert_pem_der(json_object *o, store_cert *c) {
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *x = NULL;
        unsigned char *der = NULL;
        const char *pem;
        int len;

        if (!json_object_object_get_ex(o, "pem", NULL))
                return 0;
        if (get_str(o, "pem", false, &pem) < 0 || !(b = BIO_new_mem_buf(pem, -1)) ||
            !(x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
                return hwid_fail_ossl(HWID_E_INVALID, "the server's \"pem\" holds no certificate");
        if ((len = i2d_X509(x, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the certificate");
        c->der = malloc((size_t) len);
        if (c->der) {
                memcpy(c->der, der, (size_t) len);
                c->der_len = (size_t) len;
        }
        OPENSSL_free(der);
        return c->der ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* The "attestation" of a certificate: absent or null when not attested. */
static int attestation_from_json(json_object *o, store_attestation *ret) {
        json_object *a = NULL;
        const char *v[3] = { NULL, NULL, NULL };
        int r;

        if (!json_object_object_get_ex(o, "attestation", &a) || !a)
                return 0;
        if ((r = get_str(a, "ek_pub_sha256", false, &v[0])) < 0 || (r = get_str(a, "ek_cert_sha256", true, &v[1])) < 0 ||
            (r = get_str(a, "ak_name", true, &v[2])) < 0)
                return r;
        if (strlen(v[0]) >= sizeof(ret->ek_pub_sha256) || (v[1] && strlen(v[1]) >= sizeof(ret->ek_cert_sha256)) ||
            (v[2] && strlen(v[2]) >= sizeof(ret->ak_name)))
                return hwid_fail(HWID_E_INVALID, "the server's \"attestation\" is malformed");
        snprintf(ret->ek_pub_sha256, sizeof(ret->ek_pub_sha256), "%s", v[0]);
        snprintf(ret->ek_cert_sha256, sizeof(ret->ek_cert_sha256), "%s", v[1] ? v[1] : "");
        snprintf(ret->ak_name, sizeof(ret->ak_name), "%s", v[2] ? v[2] : "");
        return 0;
}

int admin_json_to_cert(json_object *o, store_cert *ret) {
        store_cert c = { 0 };
        json_object *scope = NULL;
        int status = 0, r;

        if ((r = dup_str(o, "serial", false, &c.serial)) < 0 ||
            (r = pick_name(o, "status", cert_statuses, ELEMENTSOF(cert_statuses), &status)) < 0 ||
            (r = dup_str(o, "identity", false, &c.identity)) < 0 || (r = dup_str(o, "subject", false, &c.subject)) < 0 ||
            (r = dup_str(o, "profile", false, &c.profile)) < 0 || (r = copy_str(o, "role", c.role, sizeof(c.role))) < 0 ||
            (r = copy_str(o, "spki_sha256", c.spki_sha256, sizeof(c.spki_sha256))) < 0 ||
            (r = get_int(o, "not_before", &c.not_before)) < 0 || (r = get_int(o, "not_after", &c.not_after)) < 0 ||
            (r = get_int(o, "revoked_at", &c.revoked_at)) < 0 || (r = get_int(o, "created_at", &c.created_at)) < 0 ||
            (r = dup_str(o, "request_id", true, &c.request_id)) < 0 || (r = cert_pem_der(o, &c)) < 0 ||
            (r = attestation_from_json(o, &c.attestation)) < 0)
                goto fail;
        if (json_object_object_get_ex(o, "scope", &scope) && scope &&
            !(c.scope = strdup(json_object_to_json_string_ext(scope, JSON_C_TO_STRING_PLAIN)))) {
                r = hwid_fail(HWID_E_NOMEM, NULL);
                goto fail;
        }
        c.status = (store_cert_status) status;
        *ret = c;
        return 0;
fail:
        store_cert_clear(&c);
        return r;
}
