/* JWS verification (see jws.h): nothing in a token is believed before the
 * chain, the thumbprints and the signature are checked, and the algorithm
 * comes from the signer's key, never from the header alone. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "base64.h"
#include "error.h"
#include "fsutil.h"
#include "jws.h"
#include "ossl-util.h"

#define CRL_MAX (16 * 1024 * 1024)

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put)

/* A verification failure: "JWS refused: <why>". */
static int refuse(hwid_err code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(hwid_err code, const char *fmt, ...) {
        char why[400];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        ERR_clear_error();
        return hwid_fail(code, "JWS refused: %s", why);
}

void jws_verified_clear(jws_verified *v) {
        X509_free(v->signer);
        free(v->identity);
        free(v->payload);
        *v = (jws_verified) { 0 };
}

/* The three parts of a compact JWS. */
typedef struct parts {
        const char *h, *p, *s;
        size_t hlen, plen, slen;
} parts;

static int split(const char *token, size_t len, parts *ret) {
        const char *d1 = memchr(token, '.', len), *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t) (d1 + 1 - token)) : NULL;

        if (len > JWS_MAX)
                return refuse(HWID_E_INVALID, "the token has %zu bytes (at most %d)", len, JWS_MAX);
        if (!d2 || memchr(d2 + 1, '.', len - (size_t) (d2 + 1 - token)))
                return refuse(HWID_E_INVALID, "not a compact JWS (three base64url parts separated by '.')");
        *ret = (parts) { .h = token, .hlen = (size_t) (d1 - token), .p = d1 + 1, .plen = (size_t) (d2 - d1 - 1),
                         .s = d2 + 1, .slen = len - (size_t) (d2 + 1 - token) };
        /* An empty signature is left for the alg check ("none") to refuse. */
        if (ret->hlen == 0)
                return refuse(HWID_E_INVALID, "the token has an empty header");
        return 0;
}

static int decode(const char *text, size_t len, const char *what, uint8_t **ret, size_t *ret_len) {
        int r = base64_decode(text, len, true, ret, ret_len);

        return r < 0 ? refuse(HWID_E_INVALID, "its %s: %s", what, hwid_strerror(r)) : 0;
}

/* alg: one of ours; "none" and the others are named in the refusal. */
static int header_alg(json_object *h, jws_alg *ret) {
        json_object *v;
        const char *name;

        if (!json_object_object_get_ex(h, "alg", &v) || !json_object_is_type(v, json_type_string))
                return refuse(HWID_E_INVALID, "the header has no alg");
        name = json_object_get_string(v);
        if (strcmp(name, "none") == 0)
                return refuse(HWID_E_UNTRUSTED, "alg 'none' (an unsigned token) is never accepted");
        for (int a = 0; a < _JWS_ALG_MAX; a++)
                if (strcmp(name, jws_alg_name(a)) == 0) {
                        *ret = (jws_alg) a;
                        return 0;
                }
        return refuse(HWID_E_UNTRUSTED, "alg '%.32s' is not accepted (ES256, ES384 and RS256 are)", name);
}

static int x5c_cert(json_object *item, int i, X509 **ret) {
        _cleanup_free_ uint8_t *der = NULL;
        const unsigned char *p;
        size_t len;
        X509 *x;
        int r;

        if (!json_object_is_type(item, json_type_string))
                return refuse(HWID_E_INVALID, "x5c[%d] is not a string", i);
        r = base64_decode(json_object_get_string(item), (size_t) json_object_get_string_len(item), false, &der, &len);
        if (r < 0)
                return refuse(HWID_E_INVALID, "x5c[%d]: %s", i, hwid_strerror(r));
        p = der;
        x = d2i_X509(NULL, &p, (long) len);
        if (!x || p != der + len) {
                X509_free(x);
                return refuse(HWID_E_INVALID, "x5c[%d] is not one DER certificate", i);
        }
        *ret = x;
        return 0;
}

/* x5c: the leaf, then certificates that may help to chain it. */
static int header_x5c(json_object *h, X509 **ret_leaf, STACK_OF(X509) **ret_more) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *more = sk_X509_new_null();
        _cleanup_(X509_freep) X509 *leaf = NULL;
        json_object *a;
        size_t n;
        int r;

        if (!json_object_object_get_ex(h, "x5c", &a) || !json_object_is_type(a, json_type_array))
                return refuse(HWID_E_UNTRUSTED, "the header has no x5c certificate chain");
        n = json_object_array_length(a);
        if (n < 1 || n > JWS_X5C_MAX)
                return refuse(HWID_E_INVALID, "x5c holds %zu certificates (1 to %d)", n, JWS_X5C_MAX);
        if (!more)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = x5c_cert(json_object_array_get_idx(a, 0), 0, &leaf)) < 0)
                return r;
        for (size_t i = 1; i < n; i++) {
                X509 *x = NULL;
                if ((r = x5c_cert(json_object_array_get_idx(a, i), (int) i, &x)) < 0)
                        return r;
                if (!sk_X509_push(more, x)) {
                        X509_free(x);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
        }
        *ret_leaf = TAKE_PTR(leaf);
        *ret_more = TAKE_PTR(more);
        return 0;
}

/* x5t#S256 / x5t, when present, must be the leaf's thumbprints. */
static int check_thumbprint(json_object *h, const char *name, const EVP_MD *md, X509 *leaf) {
        _cleanup_free_ char *want = NULL;
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned int dlen = 0;
        json_object *v;
        int r;

        if (!json_object_object_get_ex(h, name, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return refuse(HWID_E_INVALID, "%s is not a string", name);
        if (!X509_digest(leaf, md, d, &dlen))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot hash the certificate");
        if ((r = base64_encode(d, dlen, true, &want)) < 0)
                return r;
        if (strcmp(json_object_get_string(v), want) != 0)
                return refuse(HWID_E_UNTRUSTED, "%s does not match the certificate in x5c[0]", name);
        return 0;
}

/* RFC 7515 §4.1.11: an extension we must understand; we understand none. */
static int header_rest(json_object *h, X509 *leaf) {
        int r;

        if (json_object_object_get_ex(h, "crit", NULL))
                return refuse(HWID_E_UNTRUSTED, "the header lists critical extensions (crit), which hwid does not "
                              "implement");
        if ((r = check_thumbprint(h, "x5t#S256", EVP_sha256(), leaf)) < 0)
                return r;
        return check_thumbprint(h, "x5t", EVP_sha1(), leaf);
}

static int chain_error(X509_STORE_CTX *ctx, X509 *leaf, const jws_trust *t) {
        int e = X509_STORE_CTX_get_error(ctx);
        char name[256] = "?";

        X509_NAME_oneline(X509_get_subject_name(leaf), name, sizeof(name));
        switch (e) {
        case X509_V_ERR_CERT_HAS_EXPIRED:
                return refuse(HWID_E_EXPIRED, "the signer's certificate (%s) has expired", name);
        case X509_V_ERR_CERT_NOT_YET_VALID:
                return refuse(HWID_E_NOT_YET_VALID, "the signer's certificate (%s) is not valid yet", name);
        case X509_V_ERR_CERT_REVOKED:
                return refuse(HWID_E_REVOKED, "the signer's certificate (%s) is revoked (in the CRL)", name);
        case X509_V_ERR_UNABLE_TO_GET_CRL:
        case X509_V_ERR_CRL_SIGNATURE_FAILURE:
        case X509_V_ERR_CRL_HAS_EXPIRED:
        case X509_V_ERR_CRL_NOT_YET_VALID:
                return refuse(HWID_E_UNTRUSTED, "the CRL cannot be used for the CA: %s", X509_verify_cert_error_string(e));
        default:
                return refuse(HWID_E_UNTRUSTED, "the signer's certificate (%s) does not chain to the CA: %s", name,
                              X509_verify_cert_error_string(e));
        }
}

/* The leaf chains to the CA alone (no other anchor), valid at t->now, not
 * in the CRL; it is no CA and may sign. */
static int check_chain(X509 *leaf, STACK_OF(X509) *more, const jws_trust *t) {
        _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        _cleanup_(X509_STORE_freep) X509_STORE *st = X509_STORE_new();
        unsigned long flags = X509_V_FLAG_PARTIAL_CHAIN | (t->crl ? X509_V_FLAG_CRL_CHECK : 0);

        if (!ctx || !st || !X509_STORE_add_cert(st, t->ca) || (t->crl && !X509_STORE_add_crl(st, t->crl)) ||
            !X509_STORE_CTX_init(ctx, st, leaf, more))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot set up the chain check");
        X509_STORE_CTX_set_time(ctx, 0, (time_t) t->now);
        X509_STORE_CTX_set_flags(ctx, flags);
        if (X509_verify_cert(ctx) != 1)
                return chain_error(ctx, leaf, t);
        if (X509_check_ca(leaf))
                return refuse(HWID_E_UNTRUSTED, "the signer's certificate is a CA certificate");
        if ((X509_get_extension_flags(leaf) & EXFLAG_KUSAGE) && !(X509_get_key_usage(leaf) & KU_DIGITAL_SIGNATURE))
                return refuse(HWID_E_UNTRUSTED, "the signer's certificate does not allow digital signatures");
        return 0;
}

static int check_signature(jws_alg alg, EVP_PKEY *pub, const parts *p, const uint8_t *sig, size_t sig_len) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new();
        _cleanup_free_ uint8_t *der = NULL;
        size_t der_len = sig_len;
        int r;

        if (!mctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (alg != JWS_RS256 &&
            (r = jws_ecdsa_jose_to_der(sig, sig_len, alg == JWS_ES256 ? 32 : 48, &der, &der_len)) < 0)
                return r == -HWID_E_UNTRUSTED ? refuse(HWID_E_UNTRUSTED, "%s", hwid_strerror(r)) : r;
        if (EVP_DigestVerifyInit_ex(mctx, NULL, alg == JWS_ES384 ? "SHA384" : "SHA256", NULL, NULL, pub, NULL) <= 0 ||
            EVP_DigestVerifyUpdate(mctx, p->h, p->hlen) <= 0 || EVP_DigestVerifyUpdate(mctx, ".", 1) <= 0 ||
            EVP_DigestVerifyUpdate(mctx, p->p, p->plen) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot verify the signature");
        if (EVP_DigestVerifyFinal(mctx, der ? der : sig, der_len) != 1)
                return refuse(HWID_E_UNTRUSTED, "the signature does not verify");
        return 0;
}

static int claim_time(json_object *c, const char *name, bool *ret_present, double *ret) {
        json_object *v;

        *ret_present = json_object_object_get_ex(c, name, &v);
        if (!*ret_present)
                return 0;
        if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
                return refuse(HWID_E_INVALID, "the claim %s is not a number of seconds", name);
        *ret = json_object_get_double(v);
        return 0;
}

/* RFC 7519 §4.1: exp, nbf, iat within the leeway; iss is the signer. */
static int check_claims(json_object *c, const char *identity, const jws_trust *t) {
        double now = (double) t->now, leeway = (double) t->leeway, v;
        json_object *iss;
        bool has;
        int r;

        if ((r = claim_time(c, "exp", &has, &v)) < 0)
                return r;
        if (has && now >= v + leeway)
                return refuse(HWID_E_EXPIRED, "the token expired at %.0f (now %.0f, leeway %.0fs)", v, now, leeway);
        if ((r = claim_time(c, "nbf", &has, &v)) < 0)
                return r;
        if (has && now + leeway < v)
                return refuse(HWID_E_NOT_YET_VALID, "the token is not valid before %.0f (now %.0f)", v, now);
        if ((r = claim_time(c, "iat", &has, &v)) < 0)
                return r;
        if (has && now + leeway < v)
                return refuse(HWID_E_NOT_YET_VALID, "the token was issued in the future (iat %.0f, now %.0f)", v, now);
        if (json_object_object_get_ex(c, "iss", &iss) &&
            (!json_object_is_type(iss, json_type_string) || strcmp(json_object_get_string(iss), identity) != 0))
                return refuse(HWID_E_UNTRUSTED, "the issuer claim '%.64s' is not the signer '%s'",
                              json_object_get_string(iss), identity);
        return 0;
}

/* The payload, and its claims when it is a JSON object (a JWT). */
static int check_payload(json_object *h, const parts *p, const char *identity, const jws_trust *t,
                         jws_verified *v) {
        _cleanup_(json_object_putp) json_object *claims = NULL;
        json_object *typ;
        int r;

        if ((r = decode(p->p, p->plen, "payload", &v->payload, &v->payload_len)) < 0)
                return r;
        if (jws_json_object((const char *) v->payload, v->payload_len, true, "the payload", &claims) < 0) {
                if (json_object_object_get_ex(h, "typ", &typ) && json_object_is_type(typ, json_type_string) &&
                    strcasecmp(json_object_get_string(typ), "JWT") == 0)
                        return refuse(HWID_E_INVALID, "typ is JWT but the payload is no JSON object");
                hwid_error_clear();
                return 0;
        }
        v->jwt = true;
        return check_claims(claims, identity, t);
}

static int check_alg_matches(jws_alg alg, X509 *leaf) {
        jws_alg key_alg;
        int r = jws_alg_for_key(X509_get0_pubkey(leaf), &key_alg);

        if (r < 0)
                return refuse(HWID_E_UNTRUSTED, "the signer's key: %s", hwid_strerror(r));
        if (key_alg != alg)
                return refuse(HWID_E_UNTRUSTED, "alg %s does not match the signer's key, which signs %s",
                              jws_alg_name(alg), jws_alg_name(key_alg));
        return 0;
}

static int verify_parts(const parts *p, const jws_trust *t, jws_verified *v) {
        _cleanup_(json_object_putp) json_object *h = NULL;
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *more = NULL;
        _cleanup_free_ uint8_t *hdr = NULL, *sig = NULL;
        size_t hdr_len, sig_len;
        char cn[256] = "";
        int r;

        if ((r = decode(p->h, p->hlen, "header", &hdr, &hdr_len)) < 0)
                return r;
        if ((r = jws_json_object((const char *) hdr, hdr_len, false, "the header", &h)) < 0)
                return refuse(HWID_E_INVALID, "%s", hwid_strerror(r));
        if ((r = header_alg(h, &v->alg)) < 0 || (r = header_x5c(h, &v->signer, &more)) < 0 ||
            (r = header_rest(h, v->signer)) < 0 || (r = check_alg_matches(v->alg, v->signer)) < 0 ||
            (r = check_chain(v->signer, more, t)) < 0)
                return r;
        if ((r = decode(p->s, p->slen, "signature", &sig, &sig_len)) < 0 ||
            (r = check_signature(v->alg, X509_get0_pubkey(v->signer), p, sig, sig_len)) < 0)
                return r;
        if (X509_NAME_get_text_by_NID(X509_get_subject_name(v->signer), NID_commonName, cn, sizeof(cn)) <= 0)
                return refuse(HWID_E_UNTRUSTED, "the signer's certificate has no CN");
        if (!(v->identity = strdup(cn)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return check_payload(h, p, cn, t, v);
}

int jws_verify(const char *token, size_t len, const jws_trust *t, jws_verified *ret) {
        jws_verified v = { 0 };
        parts p;
        int r;

        if (!t->ca)
                return hwid_fail(HWID_E_INVALID, "no CA to verify against");
        if ((r = split(token, len, &p)) < 0)
                return r;
        r = verify_parts(&p, t, &v);
        if (r < 0) {
                jws_verified_clear(&v);
                return r;
        }
        *ret = v;
        return 0;
}

static int load_crl(const char *path, X509_CRL **ret) {
        _cleanup_free_ char *data = NULL;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        const unsigned char *p;
        X509_CRL *crl;
        size_t len;
        int r;

        if ((r = read_file_capped(path, CRL_MAX, &data, &len)) < 0)
                return r;
        p = (const unsigned char *) data;
        crl = d2i_X509_CRL(NULL, &p, (long) len);
        if (!crl && (b = BIO_new_mem_buf(data, (int) len)))
                crl = PEM_read_bio_X509_CRL(b, NULL, NULL, NULL);
        ERR_clear_error();
        if (!crl)
                return hwid_fail(HWID_E_INVALID, "%s holds no CRL (DER or PEM)", path);
        *ret = crl;
        return 0;
}

int jws_load_trust(const char *ca_path, const char *crl_path, X509 **ret_ca, X509_CRL **ret_crl) {
        _cleanup_free_ char *pem = NULL;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *ca = NULL;
        X509_CRL *crl = NULL;
        size_t len;
        int r;

        if ((r = read_file_capped(ca_path, 1024 * 1024, &pem, &len)) < 0)
                return r;
        if ((b = BIO_new_mem_buf(pem, (int) len)))
                ca = PEM_read_bio_X509(b, NULL, NULL, NULL);
        ERR_clear_error();
        if (!ca)
                return hwid_fail(HWID_E_INVALID, "%s holds no PEM certificate", ca_path);
        if (crl_path && (r = load_crl(crl_path, &crl)) < 0)
                return r;
        *ret_ca = TAKE_PTR(ca);
        *ret_crl = crl;
        return 0;
}
