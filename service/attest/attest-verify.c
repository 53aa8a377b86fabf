/* The CA's side of one attestation: a challenge for a verified EK and AK,
 * then the check of the answer against it (see attest-verify.h). */
#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>
#include <openssl/sha.h>

#include "attest-verify.h"
#include "error.h"
#include "ossl-util.h"
#include "secret.h"

struct attest_verifier {
        const attest_roots *roots;
        attest_fresh *fresh;
        unsigned ttl;
};

int attest_verifier_new(const attest_roots *roots, attest_fresh *fresh, unsigned ttl, attest_verifier **ret) {
        attest_verifier *v;

        if (ttl == 0 || !roots || !fresh)
                return hwid_fail(HWID_E_INVALID, "an attestation verifier needs roots, a table and a TTL");
        v = calloc(1, sizeof(*v));
        if (!v)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *v = (attest_verifier) { .roots = roots, .fresh = fresh, .ttl = ttl };
        *ret = v;
        return 0;
}

void attest_verifier_free(attest_verifier *v) {
        free(v);
}

static void pending_wipe(attest_pending *p) {
        secret_wipe(p, sizeof(*p));
}

/* The request's EK and AK, checked, into p (all but id, secret, nonce). */
static int request_check(attest_verifier *v, const attest_request *req, attest_pending *p,
                         TPMT_PUBLIC *ret_ek, TPM2B_NAME *ret_ak_name) {
        _cleanup_(X509_freep) X509 *cert = NULL;
        int r;

        r = tpm_public_unmarshal(req->ek_public, req->ek_public_len, "the EK public area", ret_ek);
        if (r >= 0)
                r = tpm_public_unmarshal(req->ak_public, req->ak_public_len, "the AK public area", &p->ak);
        if (r >= 0)
                r = attest_ek_cert_verify(v->roots, req->ek_cert, req->ek_cert_len, &cert);
        if (r >= 0)
                r = attest_check_ek_public(ret_ek, cert);
        if (r >= 0)
                r = attest_check_ak(&p->ak);
        if (r >= 0)
                r = tpm_public_name(&p->ak, ret_ak_name);
        if (r < 0)
                return r;
        memcpy(p->ek_cert, req->ek_cert, req->ek_cert_len);
        p->ek_cert_len = req->ek_cert_len;
        return 0;
}

int attest_challenge_new(attest_verifier *v, const attest_request *req, uint64_t now,
                         attest_challenge *ret) {
        _cleanup_(pending_wipe) attest_pending p = { .expires = now + v->ttl };
        attest_challenge c = { .expires = p.expires };
        uint8_t secret[ATTEST_SECRET_LEN];
        TPM2B_NAME ak_name;
        TPMT_PUBLIC ek;
        int r;

        r = request_check(v, req, &p, &ek, &ak_name);
        if (r < 0)
                return r;
        if (RAND_bytes(p.id, sizeof(p.id)) != 1 || RAND_priv_bytes(secret, sizeof(secret)) != 1 ||
            RAND_bytes(p.nonce, sizeof(p.nonce)) != 1)
                return hwid_fail_ossl(HWID_E_CRYPTO, "no random bytes for the challenge");
        SHA256(secret, sizeof(secret), p.secret_sha256);
        r = attest_make_credential(&ek, &ak_name, secret, sizeof(secret), c.credential,
                                   &c.credential_len, c.seed, &c.seed_len);
        secret_wipe(secret, sizeof(secret));
        if (r >= 0)
                r = attest_fresh_put(v->fresh, &p, now);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(p.id); i++)
                snprintf(c.id + 2 * i, 3, "%02x", p.id[i]);
        memcpy(c.nonce, p.nonce, sizeof(c.nonce));
        *ret = c;
        return 0;
}

static int id_parse(const char *s, uint8_t id[ATTEST_ID_LEN]) {
        if (!s || strlen(s) != 2 * ATTEST_ID_LEN)
                return hwid_fail(HWID_E_INVALID, "an attestation challenge id is %d hex digits", 2 * ATTEST_ID_LEN);
        for (size_t i = 0; i < ATTEST_ID_LEN; i++) {
                unsigned int b;

                if (sscanf(s + 2 * i, "%2x", &b) != 1 || !strchr("0123456789abcdef", s[2 * i]) ||
                    !strchr("0123456789abcdef", s[2 * i + 1]))
                        return hwid_fail(HWID_E_INVALID, "the attestation challenge id is not lower-case hex");
                id[i] = (uint8_t) b;
        }
        return 0;
}

/* The evidence's form, before it may use up its challenge. */
static int evidence_parse(const attest_evidence *ev, uint8_t id[ATTEST_ID_LEN], TPMT_PUBLIC *ret_key) {
        int r;

        r = id_parse(ev->id, id);
        if (r >= 0)
                r = tpm_public_unmarshal(ev->key_public, ev->key_public_len, "the device key's public area", ret_key);
        if (r < 0)
                return r;
        if (!ev->activated || ev->activated_len == 0 || ev->activated_len > 64)
                return hwid_fail(HWID_E_INVALID, "the activated secret has %zu bytes", ev->activated_len);
        if (!ev->certify_info || !ev->signature)
                return hwid_fail(HWID_E_INVALID, "the evidence lacks its certify info or signature");
        return 0;
}

int attest_ek_pub_sha256(const uint8_t *der, size_t len, uint8_t ret[32]) {
        const unsigned char *p = der;
        _cleanup_(X509_freep) X509 *x = d2i_X509(NULL, &p, (long) len);
        unsigned char *spki = NULL;
        int n;

        if (!x || (size_t) (p - der) != len)
                return hwid_fail_ossl(HWID_E_INVALID, "the EK certificate is not one DER certificate");
        n = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(x), &spki);
        if (n <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the EK's public key");
        SHA256(spki, (size_t) n, ret);
        OPENSSL_free(spki);
        return 0;
}

static int fact_make(const attest_pending *p, attest_fact *ret) {
        attest_fact f = { .ek_cert_len = p->ek_cert_len };
        int r;

        r = tpm_public_name(&p->ak, &f.ak_name);
        if (r >= 0)
                r = attest_ek_pub_sha256(p->ek_cert, p->ek_cert_len, f.ek_pub_sha256);
        if (r < 0)
                return r;
        SHA256(p->ek_cert, p->ek_cert_len, f.ek_cert_sha256);
        memcpy(f.ek_cert, p->ek_cert, p->ek_cert_len);
        *ret = f;
        return 0;
}

int attest_evidence_verify(attest_verifier *v, const attest_evidence *ev, EVP_PKEY *csr_key,
                           uint64_t now, attest_fact *ret) {
        _cleanup_(pending_wipe) attest_pending p = { 0 };
        uint8_t id[ATTEST_ID_LEN], got[32];
        TPMT_PUBLIC key;
        int r;

        r = evidence_parse(ev, id, &key);
        if (r >= 0)
                r = attest_fresh_take(v->fresh, id, now, &p);
        if (r < 0)
                return r;
        /* Only the TPM holding the certified EK, with this AK loaded,
         * could recover the secret. */
        SHA256(ev->activated, ev->activated_len, got);
        if (ev->activated_len != ATTEST_SECRET_LEN || !secret_equal(got, p.secret_sha256, sizeof(got)))
                return hwid_fail(HWID_E_ATTESTATION, "the activated secret is wrong: the AK is not in the TPM "
                                 "whose EK certificate was sent");
        r = attest_verify_certify(&p.ak, ev->certify_info, ev->certify_info_len, ev->signature,
                                  ev->signature_len, &key, p.nonce, sizeof(p.nonce));
        if (r >= 0)
                r = attest_check_device_key(&key);
        if (r >= 0)
                r = attest_key_matches(&key, csr_key);
        if (r >= 0)
                r = fact_make(&p, ret);
        return r;
}
