/* provisioning/jws*.c and common/base64.c without a TPM: software keys
 * stand in for the device (the signing path is the same EVP digest-sign
 * call), certificates are made here.  The interop with an independent
 * implementation (jwcrypto) and the TPM are in device-jws.sh.
 *
 * Proves: base64/base64url against RFC 4648's vectors, and that decoding
 * refuses everything but the one canonical encoding; ECDSA DER <-> JOSE
 * r||s keeps the signature valid whatever the lengths of r and s (2000
 * signatures, short ones included); a JWS of each algorithm verifies, and
 * is refused with the right error when its signature, payload or header
 * changed, its certificate is expired or not yet valid at the time of
 * verification, its JWT expired (the leeway counted), its iss is not the
 * signer, or its form is wrong. */
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base64.h"
#include "check.h"
#include "error.h"
#include "jws.h"
#include "ossl-util.h"

#define NOW ((int64_t) 1800000000)

static void base64_vectors(void) {
        static const struct { const char *in, *std, *url; } v[] = {
                { "", "", "" },           { "f", "Zg==", "Zg" },         { "fo", "Zm8=", "Zm8" },
                { "foo", "Zm9v", "Zm9v" }, { "foob", "Zm9vYg==", "Zm9vYg" }, { "fooba", "Zm9vYmE=", "Zm9vYmE" },
                { "foobar", "Zm9vYmFy", "Zm9vYmFy" }, { "\xfb\xff", "+/8=", "-_8" },
        };

        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                for (int url = 0; url <= 1; url++) {
                        const char *want = url ? v[i].url : v[i].std;
                        _cleanup_free_ char *enc = NULL;
                        _cleanup_free_ uint8_t *dec = NULL;
                        size_t n = 0;

                        CHECK(base64_encode((const uint8_t *) v[i].in, strlen(v[i].in), url, &enc) == 0);
                        CHECK_STREQ(enc, want);
                        CHECK(base64_decode(want, strlen(want), url, &dec, &n) == 0);
                        CHECK(dec && n == strlen(v[i].in) && memcmp(dec, v[i].in, n) == 0);
                }
        }
}

static void base64_strict(void) {
        static const struct { const char *text; bool url; } bad[] = {
                { "Zg=", true },  { "Zg==", true }, { "Z", true },    { "Zh", true },   { " Zg", true },
                { "Zg\n", true }, { "+/8", true },  { "-_8=", false }, { "Zg", false }, { "Zg=", false },
                { "Zh==", false }, { "Zm9v\n", false }, { "Zm=v", false }, { "Zm9v=", false },
        };
        uint8_t *out = NULL;
        size_t n;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (base64_decode(bad[i].text, strlen(bad[i].text), bad[i].url, &out, &n) != -HWID_E_INVALID) {
                        fprintf(stderr, "base64%s '%s' was not refused\n", bad[i].url ? "url" : "", bad[i].text);
                        check_failures++;
                        free(TAKE_PTR(out));
                }
        CHECK(base64_decode("Zg\0x", 4, true, &out, &n) == -HWID_E_INVALID); /* an embedded NUL */
}

static EVP_PKEY *keygen(const char *alg, const char *param) {
        return strcmp(alg, "RSA") == 0 ? EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t) 2048)
                                       : EVP_PKEY_Q_keygen(NULL, NULL, "EC", param);
}

static X509 *make_cert(EVP_PKEY *key, const char *cn, EVP_PKEY *ca_key, X509 *ca, int64_t nb, int64_t na) {
        X509 *x = X509_new();
        X509_NAME *name = X509_NAME_new();
        ASN1_INTEGER *serial = ASN1_INTEGER_new();
        X509V3_CTX v3;
        X509_EXTENSION *bc;

        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *) cn, -1, -1, 0);
        ASN1_INTEGER_set_int64(serial, nb);
        X509_set_version(x, X509_VERSION_3);
        X509_set_serialNumber(x, serial);
        X509_set_subject_name(x, name);
        X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : name);
        X509_time_adj_ex(X509_getm_notBefore(x), 0, (long) (nb - time(NULL)), NULL);
        X509_time_adj_ex(X509_getm_notAfter(x), 0, (long) (na - time(NULL)), NULL);
        X509_set_pubkey(x, key);
        X509V3_set_ctx(&v3, ca ? ca : x, x, NULL, NULL, 0);
        bc = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, ca ? "critical,CA:FALSE" : "critical,CA:TRUE");
        X509_add_ext(x, bc, -1);
        X509_EXTENSION_free(bc);
        CHECK(X509_sign(x, ca_key, EVP_sha256()) > 0);
        X509_NAME_free(name);
        ASN1_INTEGER_free(serial);
        return x;
}

static int software_init(void *userdata, EVP_MD_CTX *mctx, const char *md) {
        return EVP_DigestSignInit_ex(mctx, NULL, md, NULL, NULL, userdata, NULL) > 0 ? 0
               : hwid_fail_ossl(HWID_E_CRYPTO, "cannot sign");
}

static void ecdsa_forms(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = keygen("EC", "P-256");
        int short_ones = 0;

        for (int i = 0; i < 2000; i++) {
                _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *m = EVP_MD_CTX_new(), *v = EVP_MD_CTX_new();
                _cleanup_free_ uint8_t *jose = NULL, *back = NULL;
                unsigned char der[80];
                size_t n = sizeof(der), jn = 0, bn = 0;
                char msg[16];

                snprintf(msg, sizeof(msg), "m%d", i);
                CHECK(EVP_DigestSignInit(m, NULL, EVP_sha256(), NULL, k) > 0);
                CHECK(EVP_DigestSign(m, der, &n, (const unsigned char *) msg, strlen(msg)) > 0);
                CHECK(jws_ecdsa_der_to_jose(der, n, 32, &jose, &jn) == 0 && jn == 64);
                short_ones += jose && (jose[0] == 0 || jose[32] == 0);
                CHECK(jws_ecdsa_jose_to_der(jose, jn, 32, &back, &bn) == 0);
                CHECK(bn == n && memcmp(back, der, n) == 0);
                CHECK(EVP_DigestVerifyInit(v, NULL, EVP_sha256(), NULL, k) > 0);
                CHECK(EVP_DigestVerify(v, back, bn, (const unsigned char *) msg, strlen(msg)) == 1);
        }
        CHECK(short_ones > 0); /* r or s with a leading zero byte: padded, not dropped */
        {
                uint8_t sig[63] = { 0 }, *out = NULL;
                size_t on;
                CHECK(jws_ecdsa_jose_to_der(sig, sizeof(sig), 32, &out, &on) == -HWID_E_UNTRUSTED);
        }
}

typedef struct pki {
        EVP_PKEY *ca_key, *key;
        X509 *ca, *leaf;
        STACK_OF(X509) *chain;
} pki;

static void pki_make(pki *p, const char *alg, const char *param, int64_t nb, int64_t na) {
        p->ca_key = keygen("EC", "P-256");
        p->ca = make_cert(p->ca_key, "test CA", p->ca_key, NULL, NOW - 86400, NOW + 86400);
        p->key = keygen(alg, param);
        p->leaf = make_cert(p->key, "dev-1", p->ca_key, p->ca, nb, na);
        p->chain = sk_X509_new_null();
        sk_X509_push(p->chain, p->leaf);
        sk_X509_push(p->chain, p->ca);
}

static void pki_free(pki *p) {
        sk_X509_free(p->chain);
        X509_free(p->leaf);
        X509_free(p->ca);
        EVP_PKEY_free(p->key);
        EVP_PKEY_free(p->ca_key);
}

static char *sign(pki *p, const char *payload, bool jwt) {
        jws_signer s = { .public_key = p->key, .init = software_init, .userdata = p->key, .chain = p->chain };
        char *tok = NULL;

        CHECK(jws_sign(&s, (const uint8_t *) payload, strlen(payload), jwt, &tok) == 0);
        return tok;
}

static int verify(pki *p, const char *tok, int64_t now, int64_t leeway, const char *why) {
        jws_trust t = { .ca = p->ca, .now = now, .leeway = leeway };
        jws_verified v = { 0 };
        int r = jws_verify(tok, strlen(tok), &t, &v);

        if (why && (r >= 0 || !strstr(hwid_strerror(r), why))) {
                fprintf(stderr, "expected a refusal with \"%s\", got %d: %s\n", why, r, r < 0 ? hwid_strerror(r) : "");
                check_failures++;
        }
        if (r >= 0)
                CHECK_STREQ(v.identity, "dev-1");
        jws_verified_clear(&v);
        return r;
}

static void round_trips(void) {
        static const struct { const char *alg, *param, *name; } keys[] = {
                { "EC", "P-256", "ES256" }, { "EC", "P-384", "ES384" }, { "RSA", NULL, "RS256" },
        };

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                pki p = { 0 };
                jws_alg a;
                _cleanup_free_ char *claims = NULL, *tok = NULL;

                pki_make(&p, keys[i].alg, keys[i].param, NOW - 3600, NOW + 3600);
                CHECK(jws_alg_for_key(p.key, &a) == 0);
                CHECK_STREQ(jws_alg_name(a), keys[i].name);
                CHECK(jws_claims("{\"aud\":\"x\"}", "dev-1", 0, NOW, NOW + 300, &claims) == 0);
                tok = sign(&p, claims, true);
                CHECK(tok && verify(&p, tok, NOW, 0, NULL) == 0);
                CHECK(verify(&p, tok, NOW + 299, 0, NULL) == 0);
                CHECK(verify(&p, tok, NOW + 300, 0, "the token expired") == -HWID_E_EXPIRED);
                CHECK(verify(&p, tok, NOW + 300, 60, NULL) == 0); /* within the leeway */
                CHECK(verify(&p, tok, NOW - 61, 60, "issued in the future") == -HWID_E_NOT_YET_VALID);
                pki_free(&p);
        }
}

/* A token with one character of part `which` (0 header, 1 payload, 2
 * signature) changed. */
static char *tamper(const char *tok, int which) {
        char *t = strdup(tok), *p = t;

        for (int i = 0; i < which; i++)
                p = strchr(p, '.') + 1;
        p[2] = p[2] == 'A' ? 'B' : 'A';
        return t;
}

static void refusals(void) {
        pki p = { 0 };
        _cleanup_free_ char *claims = NULL, *tok = NULL, *raw = NULL, *t0 = NULL, *t1 = NULL, *t2 = NULL,
                            *bad_iss = NULL, *jwt_text = NULL;

        pki_make(&p, "EC", "P-256", NOW - 3600, NOW + 3600);
        CHECK(jws_claims(NULL, "dev-1", 0, NOW, NOW + 300, &claims) == 0);
        tok = sign(&p, claims, true);
        t0 = tamper(tok, 0), t1 = tamper(tok, 1), t2 = tamper(tok, 2);
        CHECK(verify(&p, t0, NOW, 0, "JWS refused") < 0);
        CHECK(verify(&p, t1, NOW, 0, "JWS refused") < 0);
        CHECK(verify(&p, t2, NOW, 0, "the signature does not verify") == -HWID_E_UNTRUSTED);
        CHECK(verify(&p, tok, NOW + 3601, 0, "has expired") == -HWID_E_EXPIRED);
        CHECK(verify(&p, tok, NOW - 3601, 0, "is not valid yet") == -HWID_E_NOT_YET_VALID);
        CHECK(verify(&p, "a.b", NOW, 0, "not a compact JWS") == -HWID_E_INVALID);
        CHECK(verify(&p, "a.b.c.d", NOW, 0, "not a compact JWS") == -HWID_E_INVALID);
        /* iss must be the signer; a raw payload is no JWT; typ JWT must be one. */
        CHECK(jws_claims(NULL, "dev-2", 0, NOW, NOW + 300, &bad_iss) == 0);
        free(tok);
        tok = sign(&p, bad_iss, true);
        CHECK(verify(&p, tok, NOW, 0, "is not the signer 'dev-1'") == -HWID_E_UNTRUSTED);
        raw = sign(&p, "not json", false);
        CHECK(verify(&p, raw, NOW, 0, NULL) == 0);
        jwt_text = sign(&p, "not json", true);
        CHECK(verify(&p, jwt_text, NOW, 0, "typ is JWT but the payload is no JSON object") == -HWID_E_INVALID);
        /* hwid sets iss, iat and exp itself. */
        free(claims);
        claims = NULL;
        CHECK(jws_claims("{\"exp\":1}", "dev-1", 0, NOW, NOW + 1, &claims) == -HWID_E_INVALID);
        CHECK(jws_claims("{\"a\":1} x", "dev-1", 0, NOW, NOW + 1, &claims) == -HWID_E_INVALID);
        CHECK(jws_claims("{\"a\":\"\xff\"}", "dev-1", 0, NOW, NOW + 1, &claims) == -HWID_E_INVALID);
        pki_free(&p);
}

/* The protected header of tok, parsed. */
static json_object *header_of(const char *tok) {
        _cleanup_free_ uint8_t *h = NULL;
        json_object *o = NULL;
        size_t n = 0;

        CHECK(base64_decode(tok, (size_t) (strchr(tok, '.') - tok), true, &h, &n) == 0);
        CHECK(h && jws_json_object((const char *) h, n, false, "the header", &o) == 0);
        return o;
}

/* The base64url thumbprint of cert with md. */
static char *thumbprint(X509 *cert, const EVP_MD *md) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned int dlen = 0;
        char *t = NULL;

        CHECK(X509_digest(cert, md, d, &dlen) == 1);
        CHECK(base64_encode(d, dlen, true, &t) == 0);
        return t;
}

/* x5t#S256 and x5t (SHA-1, RFC 7515 §4.1.7) are the leaf's; the identity
 * goes to iss, sub or both, and the claims may not set those. */
static void thumbprints_and_identity(void) {
        static const struct { unsigned flags; bool iss, sub; } ids[] = {
                { 0, true, false }, { JWS_IDENTITY_ISS, true, false }, { JWS_IDENTITY_SUB, false, true },
                { JWS_IDENTITY_ISS | JWS_IDENTITY_SUB, true, true },
        };
        _cleanup_free_ char *claims = NULL, *tok = NULL, *s256 = NULL, *s1 = NULL;
        json_object *h, *v;
        pki p = { 0 };

        pki_make(&p, "EC", "P-256", NOW - 3600, NOW + 3600);
        CHECK(jws_claims(NULL, "dev-1", 0, NOW, NOW + 300, &claims) == 0);
        tok = sign(&p, claims, true);
        h = header_of(tok);
        s256 = thumbprint(p.leaf, EVP_sha256());
        s1 = thumbprint(p.leaf, EVP_sha1());
        CHECK(json_object_object_get_ex(h, "x5t#S256", &v) && strcmp(json_object_get_string(v), s256) == 0);
        CHECK(json_object_object_get_ex(h, "x5t", &v) && strcmp(json_object_get_string(v), s1) == 0);
        CHECK(strlen(s1) == 27); /* 20 bytes */
        json_object_put(h);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                _cleanup_free_ char *c = NULL, *t = NULL;
                json_object *o = NULL;
                CHECK(jws_claims("{\"aud\":\"x\"}", "dev-1", ids[i].flags, NOW, NOW + 300, &c) == 0);
                CHECK(c && jws_json_object(c, strlen(c), false, "claims", &o) == 0);
                CHECK(json_object_object_get_ex(o, "iss", &v) == ids[i].iss);
                CHECK(!ids[i].iss || strcmp(json_object_get_string(v), "dev-1") == 0);
                CHECK(json_object_object_get_ex(o, "sub", &v) == ids[i].sub);
                CHECK(!ids[i].sub || strcmp(json_object_get_string(v), "dev-1") == 0);
                json_object_put(o);
                t = sign(&p, c, true);
                CHECK(verify(&p, t, NOW, 0, NULL) == 0);
        }
        free(claims);
        claims = NULL;
        CHECK(jws_claims("{\"sub\":\"x\"}", "dev-1", JWS_IDENTITY_SUB, NOW, NOW + 1, &claims) == -HWID_E_INVALID);
        CHECK(strstr(hwid_strerror(-HWID_E_INVALID), "may not set 'sub': hwid sets sub"));
        CHECK(jws_claims("{\"iss\":\"x\"}", "dev-1", JWS_IDENTITY_ISS | JWS_IDENTITY_SUB, NOW, NOW + 1, &claims) ==
              -HWID_E_INVALID);
        CHECK(strstr(hwid_strerror(-HWID_E_INVALID), "hwid sets iss and sub"));
        CHECK(jws_claims("{\"sub\":\"x\"}", "dev-1", JWS_IDENTITY_ISS, NOW, NOW + 1, &claims) == 0);
        pki_free(&p);
}

int main(void) {
        base64_vectors();
        base64_strict();
        ecdsa_forms();
        round_trips();
        refusals();
        thumbprints_and_identity();
        ERR_clear_error();
        if (!check_failures)
                printf("test-jws: all checks passed\n");
        return check_done("test-jws");
}
