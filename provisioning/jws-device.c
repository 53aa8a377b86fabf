/* The identity in DIR signs: hwid jws sign, and the agent's workload tokens (see jws.h). */
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "device.h"
#include "error.h"
#include "hsm.h"
#include "jws.h"
#include "ossl-util.h"

/* Every certificate of a PEM text, in order. */
static int pem_certs(const char *pem, const char *what, STACK_OF(X509) **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(pem, -1);
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *v = sk_X509_new_null();
        X509 *x;

        if (!b || !v)
                return hwid_fail(HWID_E_NOMEM, NULL);
        while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
                if (!sk_X509_push(v, x)) {
                        X509_free(x);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
        ERR_clear_error(); /* the end of the text */
        if (sk_X509_num(v) == 0)
                return hwid_fail(HWID_E_INVALID, "%s holds no certificate", what);
        *ret = TAKE_PTR(v);
        return 0;
}

static int verify_at(X509_STORE *st, X509 *leaf, STACK_OF(X509) *untrusted, int64_t now, unsigned long flags,
                     STACK_OF(X509) **ret_chain) {
        _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        int e;

        if (!ctx || !X509_STORE_CTX_init(ctx, st, leaf, untrusted))
                return hwid_fail(HWID_E_NOMEM, NULL);
        X509_STORE_CTX_set_time(ctx, 0, (time_t) now);
        X509_STORE_CTX_set_flags(ctx, flags);
        if (X509_verify_cert(ctx) == 1) {
                *ret_chain = X509_STORE_CTX_get1_chain(ctx);
                return *ret_chain ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        }
        ERR_clear_error();
        e = X509_STORE_CTX_get_error(ctx);
        if (e == X509_V_ERR_CERT_HAS_EXPIRED)
                return hwid_fail(HWID_E_EXPIRED, "the certificate has expired: renew it (hwid renew) or join again");
        if (e == X509_V_ERR_CERT_NOT_YET_VALID)
                return hwid_fail(HWID_E_NOT_YET_VALID, "the certificate is not valid yet (check the clock)");
        return hwid_fail(HWID_E_UNTRUSTED, "the certificate does not chain to ca.pem: %s",
                         X509_verify_cert_error_string(e));
}

/* The leaf of DIR and the chain above it, as ca.pem proves it: up to a
 * self-signed root when ca.pem holds one, else up to the pinned CA. */
static int device_chain(const device_state *s, int64_t now, STACK_OF(X509) **ret) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *certs = NULL, *cas = NULL;
        _cleanup_(X509_STORE_freep) X509_STORE *st = X509_STORE_new();
        int r;

        if (!st)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = pem_certs(s->cert_pem, "the certificate", &certs)) < 0 || (r = pem_certs(s->ca_pem, "ca.pem", &cas)) < 0)
                return r;
        for (int i = 0; i < sk_X509_num(cas); i++)
                if (!X509_STORE_add_cert(st, sk_X509_value(cas, i)))
                        ERR_clear_error(); /* a duplicate */
        r = verify_at(st, sk_X509_value(certs, 0), certs, now, 0, ret);
        if (r == -HWID_E_UNTRUSTED)
                r = verify_at(st, sk_X509_value(certs, 0), certs, now, X509_V_FLAG_PARTIAL_CHAIN, ret);
        return r;
}

static int sign_init(void *userdata, EVP_MD_CTX *mctx, const char *md) {
        return hwid_key_sign_init(userdata, mctx, md);
}

int jws_device_load(const char *dir, int64_t now, device_state *ret_state, STACK_OF(X509) **ret_chain) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *chain = NULL;
        device_state s;
        char why[512];
        int r;

        if ((r = device_load(dir, &s)) < 0)
                return r;
        if (device_needs_bootstrap(dir))
                r = hwid_fail(HWID_E_REVOKED, "the identity in %s can no longer renew (see %s/needs-bootstrap): "
                              "it signs nothing; join again", dir, dir);
        else if ((r = device_chain(&s, now, &chain)) < 0) {
                snprintf(why, sizeof(why), "%s", hwid_strerror(r)); /* the detail is about to be replaced */
                r = hwid_fail((hwid_err) -r, "%s: %s", dir, why);
        }
        if (r < 0) {
                device_state_clear(&s);
                return r;
        }
        *ret_state = s;
        *ret_chain = TAKE_PTR(chain);
        return 0;
}

/* A JWT's claims; exp never past the certificate's end (a token that
 * outlives its certificate could not be verified anyway). */
static int payload_of(const jws_device_opts *o, const device_state *s, char **ret_claims, int64_t *ret_exp) {
        int64_t exp = o->now + (o->ttl > 0 ? o->ttl : 300);
        int r;

        if (exp > s->not_after)
                exp = s->not_after;
        if ((r = jws_claims(o->claims, s->identity, o->identity_claims, o->now, exp, ret_claims)) < 0)
                return r;
        *ret_exp = exp;
        return 0;
}

static int sign_with(const jws_device_opts *o, const device_state *s, STACK_OF(X509) *chain, char **ret_token,
                     int64_t *ret_exp) {
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        _cleanup_free_ char *claims = NULL;
        hsm_options ho = { .tcti = o->tcti };
        jws_signer signer;
        int64_t exp = 0;
        int r;

        if (!o->payload && (r = payload_of(o, s, &claims, &exp)) < 0)
                return r;
        if ((r = hwid_key_open(s->key_uri, &ho, &k)) < 0)
                return r;
        signer = (jws_signer) { .public_key = hwid_key_public(k), .init = sign_init, .userdata = k, .chain = chain };
        if (o->payload)
                r = jws_sign(&signer, o->payload, o->payload_len, false, ret_token);
        else
                r = jws_sign(&signer, (const uint8_t *) claims, strlen(claims), true, ret_token);
        if (r >= 0 && ret_exp)
                *ret_exp = exp;
        return r;
}

int jws_device_sign(const jws_device_opts *o, char **ret_token, int64_t *ret_exp) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *chain = NULL;
        device_state s;
        int r;

        if ((r = jws_device_load(o->dir, o->now, &s, &chain)) < 0)
                return r;
        r = sign_with(o, &s, chain, ret_token, ret_exp);
        device_state_clear(&s);
        return r;
}
