/* TPM attestation over HTTP (attest-api.h, docs/ATTESTATION.md).
 *
 *   POST /v1/attest  {"ek_cert", "ek_public", "ak_public"}
 *     -> 201 {"id", "credential", "secret", "nonce", "expires"}
 *   POST /csr, POST /v1/renew  (Content-Type: application/json)
 *        {"csr": PEM, "attestation": {"id", "activated", "certify_info",
 *                                     "signature", "key_public"}}
 *
 * Binary fields are standard base64 with padding; every field is
 * required, bounded and checked, unknown fields are refused. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/sha.h>

#include "api.h"
#include "attest-api.h"
#include "base64.h"
#include "error.h"
#include "json-read.h"
#include "secret.h"

#define ATTEST_BODY_MAX (16 * 1024)
#define JSON_DEPTH 4
#define CERTIFY_INFO_MAX sizeof(TPMS_ATTEST)
#define SIGNATURE_MAX sizeof(TPMT_SIGNATURE)
#define ACTIVATED_MAX 64

/* ---------- JSON ---------- */

/* body is exactly one JSON object (UTF-8, strict, shallow, no member twice). */
static int json_body(const uint8_t *body, size_t len, const char *what, json_object **ret) {
        return json_read(body, len, JSON_DEPTH, 0, what, ret);
}

/* One member of a JSON object: a string, or base64 decoded into bytes. */
typedef struct member {
        const char *key;
        size_t min, max;      /* bytes (decoded) or characters (strings) */
        bool text;            /* a string, not base64 */
        const char **str;     /* text: borrowed from the object */
        uint8_t **bytes;      /* base64: owned by the caller */
        size_t *len;
} member;

static int member_value(json_object *v, const char *what, const member *m) {
        const char *s;
        size_t n;
        int r;

        if (!json_object_is_type(v, json_type_string))
                return hwid_fail(HWID_E_INVALID, "%s: '%s' must be a string", what, m->key);
        s = json_object_get_string(v);
        n = (size_t) json_object_get_string_len(v);
        if (m->text) {
                if (n < m->min || n > m->max)
                        return hwid_fail(HWID_E_INVALID, "%s: '%s' has %zu characters (%zu to %zu)", what, m->key, n,
                                         m->min, m->max);
                *m->str = s;
                return 0;
        }
        if (n > 4 * ((m->max + 2) / 3))
                return hwid_fail(HWID_E_INVALID, "%s: '%s' is longer than %zu bytes", what, m->key, m->max);
        r = base64_decode(s, n, false, m->bytes, m->len);
        if (r < 0)
                return hwid_fail(HWID_E_INVALID, "%s: '%s' is not base64: %s", what, m->key, hwid_strerror(r));
        if (*m->len < m->min || *m->len > m->max)
                return hwid_fail(HWID_E_INVALID, "%s: '%s' has %zu bytes (%zu to %zu)", what, m->key, *m->len, m->min,
                                 m->max);
        return 0;
}

/* Every member of o is one of ms, and every one of ms is there. */
static int members(json_object *o, const char *what, const member *ms, size_t n) {
        size_t seen = 0;
        int r;

        json_object_object_foreach(o, key, v) {
                size_t i;

                for (i = 0; i < n && strcmp(ms[i].key, key) != 0; i++)
                        ;
                if (i == n)
                        return hwid_fail(HWID_E_INVALID, "%s: unknown member '%.64s'", what, key);
                if ((r = member_value(v, what, &ms[i])) < 0)
                        return r;
                seen++;
        }
        for (size_t i = 0; seen < n && i < n; i++)
                if (!json_object_object_get_ex(o, ms[i].key, NULL))
                        return hwid_fail(HWID_E_INVALID, "%s: '%s' is missing", what, ms[i].key);
        return 0;
}

static bool is_json(const http_request *req) {
        const char *ct = req->content_type;
        size_t n = strlen("application/json");

        return ct && strncasecmp(ct, "application/json", n) == 0 && (!ct[n] || ct[n] == ';' || ct[n] == ' ');
}

/* ---------- the CSR body ---------- */

void ca_body_clear(ca_body *b) {
        if (!b)
                return;
        if (b->ev.activated)
                secret_wipe(b->ev.activated, b->ev.activated_len);
        free(b->ev.activated);
        free(b->ev.certify_info);
        free(b->ev.signature);
        free(b->ev.key_public);
        free(b->csr_text);
        *b = (ca_body) { 0 };
}

static int evidence_parse(json_object *att, ca_body *b) {
        ca_evidence *e = &b->ev;
        const char *id = NULL;
        const member ms[] = {
                { "id", 32, 32, true, &id, NULL, NULL },
                { "activated", 1, ACTIVATED_MAX, false, NULL, &e->activated, &e->activated_len },
                { "certify_info", 1, CERTIFY_INFO_MAX, false, NULL, &e->certify_info, &e->certify_info_len },
                { "signature", 1, SIGNATURE_MAX, false, NULL, &e->signature, &e->signature_len },
                { "key_public", 1, TPM_PUBLIC_MAX, false, NULL, &e->key_public, &e->key_public_len },
        };
        int r;

        if (!json_object_is_type(att, json_type_object))
                return hwid_fail(HWID_E_INVALID, "the request's attestation must be a JSON object");
        if ((r = members(att, "the request's attestation", ms, ELEMENTSOF(ms))) < 0)
                return r;
        if (strspn(id, "0123456789abcdef") != 32)
                return hwid_fail(HWID_E_INVALID, "the request's attestation: 'id' is not 32 lower-case hex digits");
        memcpy(e->id, id, 33);
        b->has_evidence = true;
        return 0;
}

static int json_csr_body(const http_request *req, ca_body *b) {
        json_object *o = NULL, *csr = NULL, *att = NULL;
        int r = json_body(req->body, req->body_len, "the request body", &o);

        if (r < 0)
                return r;
        json_object_object_foreach(o, key, v) {
                (void) v;
                if (strcmp(key, "csr") != 0 && strcmp(key, "attestation") != 0) {
                        r = hwid_fail(HWID_E_INVALID, "the request body: unknown member '%.64s'", key);
                        break;
                }
        }
        if (r >= 0 && (!json_object_object_get_ex(o, "csr", &csr) || !json_object_is_type(csr, json_type_string)))
                r = hwid_fail(HWID_E_INVALID, "the request body: 'csr' (the PEM certificate request) is missing");
        if (r >= 0 && !(b->csr_text = strdup(json_object_get_string(csr))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0 && json_object_object_get_ex(o, "attestation", &att))
                r = evidence_parse(att, b);
        json_object_put(o);
        if (r < 0)
                return r;
        b->csr = (const uint8_t *) b->csr_text;
        b->csr_len = strlen(b->csr_text);
        return 0;
}

int ca_body_parse(const http_request *req, ca_body *ret) {
        ca_body b = { .csr = req->body, .csr_len = req->body_len };
        int r;

        if (is_json(req) && (r = json_csr_body(req, &b)) < 0) {
                ca_body_clear(&b);
                *ret = (ca_body) { 0 };
                return r;
        }
        *ret = b;
        return 0;
}

/* ---------- POST /v1/attest ---------- */

typedef struct attest_in {
        uint8_t *ek_cert, *ek_public, *ak_public;
        size_t ek_cert_len, ek_public_len, ak_public_len;
        char *identity; /* optional: the name a TPM without a token comes back as */
} attest_in;

static void attest_in_clear(attest_in *in) {
        free(in->identity);
        free(in->ek_cert);
        free(in->ek_public);
        free(in->ak_public);
}

/* "identity", optional (a device coming back by attestation names
 * itself): taken out of o, so that the members left are the required. */
static int optional_identity(json_object *o, attest_in *in) {
        json_object *v;
        size_t n;

        if (!json_object_object_get_ex(o, "identity", &v))
                return 0;
        n = json_object_is_type(v, json_type_string) ? (size_t) json_object_get_string_len(v) : 0;
        if (n < 1 || n > 64 || strlen(json_object_get_string(v)) != n)
                return hwid_fail(HWID_E_INVALID, "the attestation request: 'identity' must be a name of 1 to 64 "
                                 "characters");
        if (!(in->identity = strdup(json_object_get_string(v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_object_object_del(o, "identity");
        return 0;
}

static int attest_in_parse(const http_request *req, attest_in *in) {
        const member ms[] = {
                { "ek_cert", 1, TPM_EK_CERT_MAX, false, NULL, &in->ek_cert, &in->ek_cert_len },
                { "ek_public", 1, TPM_PUBLIC_MAX, false, NULL, &in->ek_public, &in->ek_public_len },
                { "ak_public", 1, TPM_PUBLIC_MAX, false, NULL, &in->ak_public, &in->ak_public_len },
        };
        json_object *o = NULL;
        int r;

        if (req->body_len > ATTEST_BODY_MAX)
                return hwid_fail(HWID_E_TOO_LARGE, "an attestation request is at most %d bytes", ATTEST_BODY_MAX);
        if (!is_json(req))
                return hwid_fail(HWID_E_INVALID, "an attestation request is application/json");
        if ((r = json_body(req->body, req->body_len, "the attestation request", &o)) < 0)
                return r;
        r = optional_identity(o, in);
        if (r >= 0)
                r = members(o, "the attestation request", ms, ELEMENTSOF(ms));
        json_object_put(o);
        return r;
}

static int respond_challenge(const attest_challenge *c, http_response *resp) {
        _cleanup_free_ char *cred = NULL, *seed = NULL, *nonce = NULL;
        json_object *o;
        char expires[32];
        struct tm tm;
        time_t t = (time_t) c->expires;
        int r;

        if ((r = base64_encode(c->credential, c->credential_len, false, &cred)) < 0 ||
            (r = base64_encode(c->seed, c->seed_len, false, &seed)) < 0 ||
            (r = base64_encode(c->nonce, sizeof(c->nonce), false, &nonce)) < 0)
                return r;
        if (!gmtime_r(&t, &tm) || !strftime(expires, sizeof(expires), "%Y-%m-%dT%H:%M:%SZ", &tm))
                return hwid_fail(HWID_E_INTERNAL, "cannot format the challenge's expiry");
        o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_string(c->id));
        json_object_object_add(o, "credential", json_object_new_string(cred));
        json_object_object_add(o, "secret", json_object_new_string(seed));
        json_object_object_add(o, "nonce", json_object_new_string(nonce));
        json_object_object_add(o, "expires", json_object_new_string(expires));
        http_respond_json(resp, 201, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                                            JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return 0;
}

/* POST /v1/attest: the request parsed (a refusal of it is the core's to
 * answer, after whether attestation is configured at all), one call. */
void api_attest(ca_service *ca, const http_request *req, http_response *resp) {
        _cleanup_(attest_in_clear) attest_in in = { 0 };
        int64_t now = (int64_t) time(NULL);
        ca_attest_ask ask = { 0 };
        ca_request call = { .op = CA_OP_CHALLENGE, .now = now, .authorization = req->authorization, .bearer = true,
                            .peer = door_peer(req), .attest = &ask };
        ca_result res;
        int r = attest_in_parse(req, &in);

        if (r < 0)
                ca_request_refuse(&call, r);
        ask = (ca_attest_ask) { in.ek_cert, in.ek_public, in.ak_public, in.ek_cert_len, in.ek_public_len,
                                in.ak_public_len, in.identity };
        if (ca_call(ca, &call, &res) == CA_DONE && (r = respond_challenge(&res.challenge, resp)) < 0) {
                res.outcome = CA_REFUSED;
                res.error = r;
                snprintf(res.message, sizeof(res.message), "%s", hwid_public_message(r));
        }
        if (res.outcome != CA_DONE)
                door_respond_refusal(resp, &res, NULL, now);
        ca_result_clear(&res);
}
