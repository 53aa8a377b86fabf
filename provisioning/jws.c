/* JWS: algorithms, signature forms, strict JSON, and signing (see jws.h). */
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>

#include "base64.h"
#include "error.h"
#include "hsm.h"
#include "json-read.h"
#include "jws.h"
#include "ossl-util.h"

static const struct {
        const char *name, *md;
        size_t ec_bytes; /* 0: RSA */
} algs[_JWS_ALG_MAX] = {
        [JWS_ES256] = { "ES256", "SHA256", 32 },
        [JWS_ES384] = { "ES384", "SHA384", 48 },
        [JWS_RS256] = { "RS256", "SHA256", 0 },
};

const char *jws_alg_name(jws_alg a) {
        return a >= 0 && a < _JWS_ALG_MAX ? algs[a].name : "?";
}

int jws_alg_for_key(const EVP_PKEY *pub, jws_alg *ret) {
        char group[64] = "";

        if (EVP_PKEY_is_a(pub, "RSA")) {
                if (EVP_PKEY_get_bits(pub) < 2048)
                        return hwid_fail(HWID_E_KEY_TYPE, "an RSA key of %d bits is too weak for RS256",
                                         EVP_PKEY_get_bits(pub));
                *ret = JWS_RS256;
                return 0;
        }
        if (EVP_PKEY_is_a(pub, "EC") &&
            EVP_PKEY_get_utf8_string_param(pub, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), NULL)) {
                if (strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0) {
                        *ret = JWS_ES256;
                        return 0;
                }
                if (strcmp(group, "secp384r1") == 0 || strcmp(group, "P-384") == 0) {
                        *ret = JWS_ES384;
                        return 0;
                }
        }
        ERR_clear_error();
        return hwid_fail(HWID_E_KEY_TYPE, "a %s%s%s key has no JWS algorithm here (EC P-256: ES256, P-384: ES384, "
                         "RSA: RS256)", EVP_PKEY_get0_type_name(pub) ? EVP_PKEY_get0_type_name(pub) : "?",
                         group[0] ? " " : "", group);
}

int jws_ecdsa_der_to_jose(const uint8_t *der, size_t len, size_t n, uint8_t **ret, size_t *ret_len) {
        const unsigned char *p = der;
        _cleanup_(ECDSA_SIG_freep) ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long) len);
        const BIGNUM *r, *s;
        uint8_t *out;

        if (!sig || p != der + len) {
                ERR_clear_error();
                return hwid_fail(HWID_E_CRYPTO, "the device returned a malformed ECDSA signature");
        }
        ECDSA_SIG_get0(sig, &r, &s);
        if ((size_t) BN_num_bytes(r) > n || (size_t) BN_num_bytes(s) > n)
                return hwid_fail(HWID_E_CRYPTO, "the ECDSA signature is larger than its curve");
        if (!(out = malloc(2 * n)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        BN_bn2binpad(r, out, (int) n);
        BN_bn2binpad(s, out + n, (int) n);
        *ret = out;
        *ret_len = 2 * n;
        return 0;
}

int jws_ecdsa_jose_to_der(const uint8_t *sig, size_t len, size_t n, uint8_t **ret, size_t *ret_len) {
        _cleanup_(ECDSA_SIG_freep) ECDSA_SIG *es = ECDSA_SIG_new();
        BIGNUM *r, *s;
        unsigned char *der = NULL;
        uint8_t *out;
        int dlen;

        if (len != 2 * n)
                return hwid_fail(HWID_E_UNTRUSTED, "the signature has %zu bytes, not the %zu of its algorithm", len, 2 * n);
        r = BN_bin2bn(sig, (int) n, NULL);
        s = BN_bin2bn(sig + n, (int) n, NULL);
        if (!es || !r || !s || !ECDSA_SIG_set0(es, r, s)) {
                BN_free(r);
                BN_free(s);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if ((dlen = i2d_ECDSA_SIG(es, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the ECDSA signature");
        out = malloc((size_t) dlen);
        if (out)
                memcpy(out, der, (size_t) dlen);
        OPENSSL_free(der);
        if (!out)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = out;
        *ret_len = (size_t) dlen;
        return 0;
}

int jws_json_object(const char *text, size_t len, bool trailing_space, const char *what, json_object **ret) {
        return json_read(text, len, 16, trailing_space ? 0 : JSON_READ_NO_TRAILING_SPACE, what, ret);
}

static const char *json_text(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* A thumbprint of the leaf's DER (base64url), as header member name. */
static int add_thumbprint(json_object *h, const char *name, const EVP_MD *md, const unsigned char *der, size_t len) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned int dlen = 0;
        _cleanup_free_ char *t = NULL;
        int r;

        if (!EVP_Digest(der, len, d, &dlen, md, NULL))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot hash the certificate");
        if ((r = base64_encode(d, dlen, true, &t)) < 0)
                return r;
        json_object_object_add(h, name, json_object_new_string(t));
        return 0;
}

/* x5c (standard base64 DER, RFC 7515 §4.1.6), x5t#S256 and x5t
 * (base64url, §4.1.8 and §4.1.7). */
static int add_certs(json_object *h, STACK_OF(X509) *chain) {
        json_object *x5c = json_object_new_array();
        int r = 0;

        json_object_object_add(h, "x5c", x5c);
        for (int i = 0; r >= 0 && i < sk_X509_num(chain); i++) {
                _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
                _cleanup_free_ char *b64 = NULL;
                int len = i2d_X509(sk_X509_value(chain, i), &der);

                if (len <= 0)
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode certificate %d of the chain", i + 1);
                if (i == 0 && ((r = add_thumbprint(h, "x5t#S256", EVP_sha256(), der, (size_t) len)) < 0 ||
                               (r = add_thumbprint(h, "x5t", EVP_sha1(), der, (size_t) len)) < 0))
                        return r;
                if ((r = base64_encode(der, (size_t) len, false, &b64)) >= 0)
                        json_object_array_add(x5c, json_object_new_string(b64));
        }
        return r;
}

static int header_b64(const jws_signer *s, jws_alg alg, bool jwt, char **ret) {
        json_object *h = json_object_new_object();
        int r;

        if (!h)
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_object_object_add(h, "alg", json_object_new_string(algs[alg].name));
        if (jwt)
                json_object_object_add(h, "typ", json_object_new_string("JWT"));
        r = add_certs(h, s->chain);
        if (r >= 0)
                r = base64_encode((const uint8_t *) json_text(h), strlen(json_text(h)), true, ret);
        json_object_put(h);
        return r;
}

/* The signature over input, in JOSE form. */
static int sign_input(const jws_signer *s, jws_alg alg, const char *input, uint8_t **ret, size_t *ret_len) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new();
        _cleanup_free_ uint8_t *sig = NULL;
        size_t n = 0;
        int r;

        if (!mctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = s->init(s->userdata, mctx, algs[alg].md)) < 0)
                return r;
        hwid_error_clear();
        if (EVP_DigestSignUpdate(mctx, input, strlen(input)) <= 0 || EVP_DigestSignFinal(mctx, NULL, &n) <= 0)
                return hwid_fail_signing("the JWS");
        if (!(sig = malloc(n)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (EVP_DigestSignFinal(mctx, sig, &n) <= 0)
                return hwid_fail_signing("the JWS");
        if (algs[alg].ec_bytes)
                return jws_ecdsa_der_to_jose(sig, n, algs[alg].ec_bytes, ret, ret_len);
        *ret = TAKE_PTR(sig);
        *ret_len = n;
        return 0;
}

int jws_sign(const jws_signer *s, const uint8_t *payload, size_t len, bool jwt, char **ret_token) {
        _cleanup_free_ char *h64 = NULL, *p64 = NULL, *s64 = NULL, *input = NULL;
        _cleanup_free_ uint8_t *sig = NULL;
        size_t sig_len;
        jws_alg alg;
        int r;

        if (len > JWS_PAYLOAD_MAX)
                return hwid_fail(HWID_E_TOO_LARGE, "the payload has %zu bytes (at most %d)", len, JWS_PAYLOAD_MAX);
        if (!s->chain || sk_X509_num(s->chain) < 1)
                return hwid_fail(HWID_E_INVALID, "no certificate to sign with");
        if (EVP_PKEY_eq(X509_get0_pubkey(sk_X509_value(s->chain, 0)), s->public_key) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "the certificate is not for the signing key");
        }
        if ((r = jws_alg_for_key(s->public_key, &alg)) < 0 || (r = header_b64(s, alg, jwt, &h64)) < 0 ||
            (r = base64_encode(payload, len, true, &p64)) < 0)
                return r;
        if (asprintf(&input, "%s.%s", h64, p64) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = sign_input(s, alg, input, &sig, &sig_len)) < 0 || (r = base64_encode(sig, sig_len, true, &s64)) < 0)
                return r;
        if (asprintf(ret_token, "%s.%s", input, s64) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

/* The claims hwid sets, which extra may not. */
static int claims_free_of(json_object *o, unsigned identity_claims) {
        static const struct {
                const char *name;
                unsigned when; /* 0: always */
        } ours[] = { { "iss", JWS_IDENTITY_ISS }, { "sub", JWS_IDENTITY_SUB }, { "iat", 0 }, { "exp", 0 } };

        for (size_t i = 0; i < ELEMENTSOF(ours); i++)
                if ((!ours[i].when || (identity_claims & ours[i].when)) && json_object_object_get_ex(o, ours[i].name, NULL))
                        return hwid_fail(HWID_E_INVALID, "the claims may not set '%s': hwid sets %s (the device's "
                                         "identity), iat (now) and exp (now + the lifetime)", ours[i].name,
                                         identity_claims == (JWS_IDENTITY_ISS | JWS_IDENTITY_SUB) ? "iss and sub"
                                         : identity_claims == JWS_IDENTITY_SUB                 ? "sub"
                                                                                               : "iss");
        return 0;
}

int jws_claims(const char *extra, const char *identity, unsigned identity_claims, int64_t iat, int64_t exp,
               char **ret_json) {
        json_object *o = NULL;
        int r = 0;

        if (!identity_claims)
                identity_claims = JWS_IDENTITY_ISS;
        if (extra)
                r = jws_json_object(extra, strlen(extra), true, "the claims", &o);
        else if (!(o = json_object_new_object()))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0)
                r = claims_free_of(o, identity_claims);
        if (r >= 0) {
                if (identity_claims & JWS_IDENTITY_ISS)
                        json_object_object_add(o, "iss", json_object_new_string(identity));
                if (identity_claims & JWS_IDENTITY_SUB)
                        json_object_object_add(o, "sub", json_object_new_string(identity));
                json_object_object_add(o, "iat", json_object_new_int64(iat));
                json_object_object_add(o, "exp", json_object_new_int64(exp));
                if (!(*ret_json = strdup(json_text(o))))
                        r = hwid_fail(HWID_E_NOMEM, NULL);
        }
        json_object_put(o);
        return r;
}
