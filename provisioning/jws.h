/* JSON Web Signatures (RFC 7515, compact serialization) with a device's
 * identity: the device key signs inside its TPM/HSM, and the certificate
 * chain travels in the protected header (x5c: leaf first, then its
 * issuers; x5t#S256 and x5t: the leaf's SHA-256 and SHA-1 thumbprints,
 * RFC 7515 §4.1.8 and §4.1.7), so that a verifier needs nothing but the
 * CA.
 *
 *   alg    key                           signature
 *   ES256  EC P-256                      r || s, 32 bytes each (RFC 7518 §3.4)
 *   ES384  EC P-384                      r || s, 48 bytes each
 *   RS256  RSA, at least 2048 bits       RSASSA-PKCS1-v1_5 with SHA-256
 *
 * The algorithm always follows from the key; a verifier takes it from the
 * header only to refuse a token whose header disagrees with the signer's
 * key ("none", HS256 with a public key as secret, ...).
 *
 * Library code: 0 or -hwid_err with a detail, never prints. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "cleanup.h"

typedef enum jws_alg {
        JWS_ES256,
        JWS_ES384,
        JWS_RS256,
        _JWS_ALG_MAX,
} jws_alg;

/* Largest compact JWS hwid reads or makes. */
#define JWS_MAX (256 * 1024)
/* Largest payload hwid signs. */
#define JWS_PAYLOAD_MAX (128 * 1024)
/* Longest x5c hwid reads. */
#define JWS_X5C_MAX 8

const char *jws_alg_name(jws_alg a);
/* The algorithm for a public key; -HWID_E_KEY_TYPE for any other key. */
int jws_alg_for_key(const EVP_PKEY *pub, jws_alg *ret);

/* ECDSA signatures as OpenSSL and devices make them (DER) and as JOSE
 * wants them (r || s, n bytes each, big-endian, left-padded). */
int jws_ecdsa_der_to_jose(const uint8_t *der, size_t len, size_t n, uint8_t **ret, size_t *ret_len);
int jws_ecdsa_jose_to_der(const uint8_t *sig, size_t len, size_t n, uint8_t **ret, size_t *ret_len);

/* Parses a JSON object, strictly (RFC 8259, UTF-8, nothing after it but
 * white space when trailing_space); -HWID_E_INVALID naming what. */
int jws_json_object(const char *text, size_t len, bool trailing_space, const char *what, json_object **ret);

/* ---------- signing ---------- */

/* Starts a digest-sign operation with md ("SHA256", "SHA384") on mctx. */
typedef int (*jws_sign_init_fn)(void *userdata, EVP_MD_CTX *mctx, const char *md);

typedef struct jws_signer {
        EVP_PKEY *public_key;       /* the signing key's public part */
        jws_sign_init_fn init;      /* signs with the private part */
        void *userdata;
        STACK_OF(X509) *chain;      /* leaf (for public_key) first, then its issuers */
} jws_signer;

/* A compact JWS of payload; the protected header holds alg, typ "JWT"
 * when jwt, x5c, x5t#S256 and x5t (SHA-1: for verifiers that know only
 * that one; it identifies, the signature and chain are what is checked). */
int jws_sign(const jws_signer *s, const uint8_t *payload, size_t len, bool jwt, char **ret_token);

/* Where a JWT names the device's identity: iss (what hwid jws verify
 * checks against the signer), sub, or both. */
enum {
        JWS_IDENTITY_ISS = 1 << 0,
        JWS_IDENTITY_SUB = 1 << 1,
};

/* A JWT claims set: the members of extra (a JSON object as text, or
 * NULL), then identity as iss and/or sub (identity_claims, 0: iss), iat
 * and exp (Unix seconds); extra may not set any claim hwid sets. */
int jws_claims(const char *extra, const char *identity, unsigned identity_claims, int64_t iat, int64_t exp,
               char **ret_json);

typedef struct jws_device_opts {
        const char *dir;            /* the identity (hwid join) */
        const char *tcti;
        const uint8_t *payload;     /* NULL: a JWT of claims */
        size_t payload_len;
        const char *claims;         /* extra claims (JSON object text), or NULL */
        unsigned identity_claims;   /* JWS_IDENTITY_*, 0: iss */
        int64_t ttl;                /* JWT lifetime in seconds; exp never past the certificate's end */
        int64_t now;
} jws_device_opts;

/* The identity in DIR as a signer may use it: loaded, not marked for
 * bootstrap, its certificate valid at now and chained to DIR/ca.pem (up
 * to a self-signed root there, else to the pinned CA): ret_chain holds
 * the leaf first.  Errors name DIR. */
struct device_state;
int jws_device_load(const char *dir, int64_t now, struct device_state *ret_state, STACK_OF(X509) **ret_chain);

/* Signs with the identity in DIR (jws_device_load() first): its key in
 * the TPM/HSM, which is opened for this signature and closed after it.
 * ret_exp (may be NULL): the JWT's exp. */
int jws_device_sign(const jws_device_opts *o, char **ret_token, int64_t *ret_exp);

/* ---------- verification ---------- */

typedef struct jws_trust {
        X509 *ca;            /* the CA that issues the identities: the only trust anchor */
        X509_CRL *crl;       /* its CRL, or NULL: revocation not checked */
        int64_t now;
        int64_t leeway;      /* seconds of clock skew allowed on exp, nbf and iat */
} jws_trust;

typedef struct jws_verified {
        jws_alg alg;
        X509 *signer;        /* the leaf of x5c */
        char *identity;      /* its CN */
        uint8_t *payload;    /* NUL-terminated */
        size_t payload_len;
        bool jwt;            /* the payload is a JSON object: its exp, nbf, iat and iss were checked */
} jws_verified;

void jws_verified_clear(jws_verified *v);

/* Verifies a compact JWS: its form, alg (one of the three, matching the
 * signer's key), crit (refused), x5c (the leaf chains to t->ca, is valid
 * at t->now and not in t->crl), x5t#S256 and x5t (when present, the
 * leaf's thumbprints), the signature, and for a JSON-object payload the
 * claims (exp, nbf, iat within leeway; iss, when present, the signer's
 * CN).  Errors: -HWID_E_INVALID (malformed), -HWID_E_EXPIRED,
 * -HWID_E_NOT_YET_VALID, -HWID_E_REVOKED, -HWID_E_UNTRUSTED (everything
 * else), with the reason. */
int jws_verify(const char *token, size_t len, const jws_trust *t, jws_verified *ret);

/* Reads the trust anchor (the first certificate of a PEM file) and a CRL
 * (DER or PEM; path may be NULL). */
int jws_load_trust(const char *ca_path, const char *crl_path, X509 **ret_ca, X509_CRL **ret_crl);
