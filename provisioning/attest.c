/* The device's half of TPM attestation over HTTP (attest.h). */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "attest.h"
#include "base64.h"
#include "error.h"

struct device_attest {
        tpm_attest *tpm;
        char id[33];
        uint8_t *credential, *secret, *nonce;
        size_t credential_len, secret_len, nonce_len;
};

void device_attest_free(device_attest *d) {
        if (!d)
                return;
        tpm_attest_free(d->tpm); /* flushes a held AK */
        free(d->credential);
        free(d->secret);
        free(d->nonce);
        free(d);
}

const char *device_attest_ek(const device_attest *d) {
        return tpm_ek_alg_to_string(tpm_attest_ek_alg(d->tpm));
}

static int add_b64(json_object *o, const char *key, const uint8_t *p, size_t n) {
        _cleanup_free_ char *s = NULL;
        int r = base64_encode(p, n, false, &s);

        if (r < 0)
                return r;
        json_object_object_add(o, key, json_object_new_string(s));
        return 0;
}

static const char *json_text(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* {"ek_cert", "ek_public", "ak_public"}, for POST /v1/attest. */
static int request_body(const tpm_attest *a, char **ret) {
        json_object *o = json_object_new_object();
        const uint8_t *p;
        size_t n;
        int r;

        p = tpm_attest_ek_cert(a, &n);
        r = add_b64(o, "ek_cert", p, n);
        p = tpm_attest_ek_public(a, &n);
        if (r >= 0)
                r = add_b64(o, "ek_public", p, n);
        p = tpm_attest_ak_public(a, &n);
        if (r >= 0)
                r = add_b64(o, "ak_public", p, n);
        if (r >= 0 && !(*ret = strdup(json_text(o))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        json_object_put(o);
        return r;
}

static int challenge_bytes(json_object *o, const char *key, size_t max, uint8_t **ret, size_t *ret_len) {
        json_object *v;
        int r;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return hwid_fail(HWID_E_NETWORK, "the CA's challenge lacks \"%s\"", key);
        r = base64_decode(json_object_get_string(v), (size_t) json_object_get_string_len(v), false, ret, ret_len);
        if (r >= 0 && (*ret_len == 0 || *ret_len > max))
                r = hwid_fail(HWID_E_NETWORK, "the CA's challenge has a \"%s\" of %zu bytes", key, *ret_len);
        return r < 0 ? hwid_fail(HWID_E_NETWORK, "the CA's challenge is malformed: %s", hwid_strerror(r)) : 0;
}

/* 201 {"id", "credential", "secret", "nonce", "expires"}. */
static int challenge_parse(const client_response *resp, device_attest *d) {
        json_object *o = NULL, *id = NULL;
        int r = client_response_json(resp, &o);

        if (r < 0)
                return hwid_fail(HWID_E_NETWORK, "the CA's challenge is malformed: %s", hwid_strerror(r));
        if (!json_object_object_get_ex(o, "id", &id) || !json_object_is_type(id, json_type_string) ||
            json_object_get_string_len(id) != 32)
                r = hwid_fail(HWID_E_NETWORK, "the CA answered its attestation challenge without an id");
        if (r >= 0) {
                snprintf(d->id, sizeof(d->id), "%s", json_object_get_string(id));
                r = challenge_bytes(o, "credential", sizeof(TPM2B_ID_OBJECT), &d->credential, &d->credential_len);
        }
        if (r >= 0)
                r = challenge_bytes(o, "secret", sizeof(TPM2B_ENCRYPTED_SECRET), &d->secret, &d->secret_len);
        if (r >= 0)
                r = challenge_bytes(o, "nonce", TPM_NONCE_MAX, &d->nonce, &d->nonce_len);
        json_object_put(o);
        return r;
}

int device_attest_begin(client_session *cs, const char *auth, const char *tcti, tpm_ek_alg alg,
                        device_attest **ret) {
        _cleanup_(device_attest_freep) device_attest *d = calloc(1, sizeof(*d));
        _cleanup_free_ char *body = NULL;
        hsm_options ho = { .tcti = tcti, .hold = true };
        client_response resp;
        int r;

        if (!d)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = tpm_attest_begin(&ho, alg, &d->tpm)) < 0 || (r = request_body(d->tpm, &body)) < 0)
                return r;
        r = client_session_request(cs, "POST", "/v1/attest", auth, (const uint8_t *) body, strlen(body),
                                   "application/json", &resp);
        if (r < 0)
                return r;
        if (resp.status == 201)
                r = challenge_parse(&resp, d);
        else
                r = client_error_from_response(&resp);
        client_response_clear(&resp);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(d);
        return 0;
}

/* The answer's "attestation" member. */
static int answer_object(const device_attest *d, const tpm_attest_answer *ans, json_object **ret) {
        json_object *a = json_object_new_object();
        int r;

        json_object_object_add(a, "id", json_object_new_string(d->id));
        r = add_b64(a, "activated", ans->activated, ans->activated_len);
        if (r >= 0)
                r = add_b64(a, "certify_info", ans->certify_info, ans->certify_info_len);
        if (r >= 0)
                r = add_b64(a, "signature", ans->signature, ans->signature_len);
        if (r >= 0)
                r = add_b64(a, "key_public", ans->key_public, ans->key_public_len);
        if (r < 0) {
                json_object_put(a);
                return r;
        }
        *ret = a;
        return 0;
}

int device_attest_body(device_attest *d, hwid_key *key, const char *csr_pem, char **ret_json) {
        _cleanup_(tpm_attest_answer_freep) tpm_attest_answer *ans = NULL;
        tpm_attest_challenge c = { d->credential, d->credential_len, d->secret, d->secret_len, d->nonce,
                                   d->nonce_len };
        json_object *o, *a = NULL;
        const char *text;
        int r = tpm_attest_respond(d->tpm, key, &c, &ans);

        if (r >= 0)
                r = answer_object(d, ans, &a);
        if (r < 0)
                return r;
        o = json_object_new_object();
        json_object_object_add(o, "csr", json_object_new_string(csr_pem));
        json_object_object_add(o, "attestation", a);
        /* The activated secret is worth nothing once sent: the CA takes
         * its challenge away at the first answer, good or bad. */
        text = json_text(o);
        *ret_json = text ? strdup(text) : NULL;
        json_object_put(o);
        return *ret_json ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}
