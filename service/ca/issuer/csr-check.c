#include <pthread.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/provider.h>

#include "csr-check.h"
#include "error.h"
#include "escape.h"
#include "ossl-util.h"
#include "x509-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(BASIC_CONSTRAINTS *, BASIC_CONSTRAINTS_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(ASN1_BIT_STRING *, ASN1_BIT_STRING_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(EC_GROUP *, EC_GROUP_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(EC_POINT *, EC_POINT_free)

struct csr_info {
        X509_REQ *req;
        EVP_PKEY *pub;                  /* the request's public key */
        uint8_t *der;
        size_t der_len;
        policy_csr facts;
        policy_attr attrs[CSR_MAX_ATTRS];
        unsigned char *attr_utf8[CSR_MAX_ATTRS]; /* owned UTF-8 copies */
        char attr_type[CSR_MAX_ATTRS][64];
        policy_san sans[CSR_MAX_SANS];
        STACK_OF(X509_EXTENSION) *exts; /* requested extensions */
        GENERAL_NAMES *gens;            /* the SANs point into these */
        X509_PUBKEY *spki;              /* the key, canonically encoded (canonical_spki()) */
        bool crmf;                      /* req was made of a CRMF request's template */
        char curve[64];
        char spki_hex[65];
};

void csr_info_free(csr_info *c) {
        if (!c)
                return;
        for (size_t i = 0; i < CSR_MAX_ATTRS; i++)
                OPENSSL_free(c->attr_utf8[i]);
        sk_X509_EXTENSION_pop_free(c->exts, X509_EXTENSION_free);
        GENERAL_NAMES_free(c->gens);
        X509_PUBKEY_free(c->spki);
        EVP_PKEY_free(c->pub);
        X509_REQ_free(c->req);
        OPENSSL_free(c->der);
        free(c);
}

/* OpenSSL 3.0 decodes the public key of every request it parses, and sets
 * up a decoder for that by walking every algorithm of every provider: a
 * quarter of hwidd's time per issuance went there.  Requests are parsed
 * in a library context with no algorithms (only the "null" provider), so
 * that attempt ends at once, and the key is then imported from its curve
 * and point (import_pubkey()).  Without that context, parsing is as it
 * was. */
static OSSL_LIB_CTX *parse_ctx;
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;

static void parse_ctx_init(void) {
        OSSL_LIB_CTX *ctx = OSSL_LIB_CTX_new();

        /* Loading any provider keeps "default" from being loaded by itself. */
        if (ctx && !OSSL_PROVIDER_load(ctx, "null")) {
                OSSL_LIB_CTX_free(ctx);
                ctx = NULL;
        }
        ERR_clear_error();
        parse_ctx = ctx;
}

static X509_REQ *d2i_req(const unsigned char **p, long len) {
        return (X509_REQ *) ASN1_item_d2i_ex(NULL, p, len, ASN1_ITEM_rptr(X509_REQ), parse_ctx, NULL);
}

/* Exactly one PEM block of a request and nothing after it but white
 * space: PEM_bytes_read_bio() would skip blocks of other types and ignore
 * anything after the one it found. */
static X509_REQ *decode_pem(const uint8_t *data, size_t len) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(data, (int) len);
        _cleanup_(OPENSSL_freep) char *name = NULL, *header = NULL;
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        const unsigned char *p;
        X509_REQ *req = NULL;
        char rest[64];
        long n = 0;
        int got;

        if (!b || !PEM_read_bio_ex(b, &name, &header, &der, &n, PEM_FLAG_ONLY_B64) ||
            (strcmp(name, PEM_STRING_X509_REQ) != 0 && strcmp(name, PEM_STRING_X509_REQ_OLD) != 0) ||
            header[0])
                return NULL;
        while ((got = BIO_read(b, rest, sizeof(rest))) > 0)
                for (int i = 0; i < got; i++)
                        if (!strchr(" \t\r\n", rest[i]) || rest[i] == '\0')
                                return NULL;
        p = der;
        req = d2i_req(&p, n);
        if (req && p != der + n) { /* bytes after the DER object inside the block */
                X509_REQ_free(req);
                return NULL;
        }
        return req;
}

static int decode(const uint8_t *data, size_t len, X509_REQ **ret) {
        X509_REQ *req = NULL;

        pthread_once(&parse_once, parse_ctx_init);
        if (len > 10 && memcmp(data, "-----BEGIN", 10) == 0) {
                req = decode_pem(data, len);
        } else {
                const unsigned char *p = data;
                req = d2i_req(&p, (long) len);
                if (req && p != data + len) { /* trailing bytes: not one DER object */
                        X509_REQ_free(req);
                        req = NULL;
                }
        }
        ERR_clear_error();
        if (!req)
                return hwid_fail(HWID_E_CSR_INVALID, "the body is not a PKCS#10 request in PEM or DER "
                                                     "(exactly one, with nothing after it)");
        *ret = req;
        return 0;
}

static int extract_subject(csr_info *c) {
        const X509_NAME *name = X509_REQ_get_subject_name(c->req);
        int n = X509_NAME_entry_count(name);

        if (n > CSR_MAX_ATTRS)
                return hwid_fail(HWID_E_CSR_INVALID, "subject has %d attributes (at most %d)", n, CSR_MAX_ATTRS);
        for (int i = 0; i < n; i++) {
                const X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
                const ASN1_OBJECT *obj = X509_NAME_ENTRY_get_object(e);
                int nid = OBJ_obj2nid(obj);
                int len = ASN1_STRING_to_UTF8(&c->attr_utf8[i], X509_NAME_ENTRY_get_data(e));

                if (len < 0)
                        return hwid_fail(HWID_E_CSR_INVALID, "subject attribute %d is not a valid string", i + 1);
                if (nid != NID_undef)
                        snprintf(c->attr_type[i], sizeof(c->attr_type[i]), "%s", OBJ_nid2sn(nid));
                else
                        OBJ_obj2txt(c->attr_type[i], sizeof(c->attr_type[i]), obj, 1);
                c->attrs[i] = (policy_attr) { c->attr_type[i], (const char *) c->attr_utf8[i], (size_t) len };
        }
        c->facts.subject = c->attrs;
        c->facts.n_subject = (size_t) n;
        return 0;
}

static void san_fact(const GENERAL_NAME *gn, policy_san *s) {
        const ASN1_STRING *str = NULL;

        *s = (policy_san) { .type = SAN_OTHER };
        switch (gn->type) {
        case GEN_DNS: s->type = SAN_DNS; str = gn->d.dNSName; break;
        case GEN_URI: s->type = SAN_URI; str = gn->d.uniformResourceIdentifier; break;
        case GEN_EMAIL: s->type = SAN_EMAIL; str = gn->d.rfc822Name; break;
        case GEN_IPADD:
                if (gn->d.iPAddress->length == 4 || gn->d.iPAddress->length == 16) {
                        s->type = SAN_IP;
                        s->ip_len = gn->d.iPAddress->length;
                        memcpy(s->ip, gn->d.iPAddress->data, (size_t) s->ip_len);
                }
                return;
        default: return;
        }
        s->value = (const char *) ASN1_STRING_get0_data(str);
        s->len = (size_t) ASN1_STRING_length(str);
}

static int extract_sans(csr_info *c, X509_EXTENSION *ext) {
        int n;

        c->gens = X509V3_EXT_d2i(ext);
        if (!c->gens)
                return hwid_fail(HWID_E_CSR_INVALID, "subjectAltName extension is malformed");
        n = sk_GENERAL_NAME_num(c->gens);
        if (n > CSR_MAX_SANS)
                return hwid_fail(HWID_E_CSR_INVALID, "%d subjectAltNames (at most %d)", n, CSR_MAX_SANS);
        for (int i = 0; i < n; i++)
                san_fact(sk_GENERAL_NAME_value(c->gens, i), &c->sans[i]);
        c->facts.sans = c->sans;
        c->facts.n_sans = (size_t) n;
        return 0;
}

/* Records what the request asks for beyond names: never copied into a
 * certificate, but policy must know (CA:TRUE, keyCertSign, ...). */
static int extract_extension(csr_info *c, X509_EXTENSION *ext) {
        int nid = OBJ_obj2nid(X509_EXTENSION_get_object(ext));

        if (nid == NID_subject_alt_name)
                return extract_sans(c, ext);
        if (nid == NID_basic_constraints) {
                _cleanup_(BASIC_CONSTRAINTS_freep) BASIC_CONSTRAINTS *bc = X509V3_EXT_d2i(ext);
                if (!bc)
                        return hwid_fail(HWID_E_CSR_INVALID, "basicConstraints extension is malformed");
                c->facts.asks_ca = c->facts.asks_ca || bc->ca;
        } else if (nid == NID_key_usage) {
                _cleanup_(ASN1_BIT_STRING_freep) ASN1_BIT_STRING *ku = X509V3_EXT_d2i(ext);
                if (!ku)
                        return hwid_fail(HWID_E_CSR_INVALID, "keyUsage extension is malformed");
                if (ASN1_BIT_STRING_get_bit(ku, 5) || ASN1_BIT_STRING_get_bit(ku, 6))
                        c->facts.asks_cert_sign = true; /* keyCertSign(5), cRLSign(6) */
        } else if (nid != NID_ext_key_usage) {
                c->facts.asks_other_ext = true;
        }
        return 0;
}

static int extract_extensions(csr_info *c) {
        int r;

        c->exts = X509_REQ_get_extensions(c->req);
        ERR_clear_error();
        for (int i = 0; c->exts && i < sk_X509_EXTENSION_num(c->exts); i++) {
                X509_EXTENSION *ext = sk_X509_EXTENSION_value(c->exts, i);
                const ASN1_OBJECT *obj = X509_EXTENSION_get_object(ext);

                /* An extension asked for twice is ambiguous: refuse it. */
                if (X509v3_get_ext_by_OBJ(c->exts, obj, i) >= 0)
                        return hwid_fail(HWID_E_CSR_INVALID, "the request repeats the %s extension",
                                         OBJ_nid2sn(OBJ_obj2nid(obj)));
                if ((r = extract_extension(c, ext)) < 0)
                        return r;
        }
        return 0;
}

static int extract_key(csr_info *c, EVP_PKEY *pub) {
        char group[64];
        int r;

        c->facts.key_alg = EVP_PKEY_is_a(pub, "EC") ? "EC" : EVP_PKEY_is_a(pub, "RSA") ? "RSA"
                         : EVP_PKEY_get0_type_name(pub);
        c->facts.key_bits = EVP_PKEY_get_bits(pub);
        if (EVP_PKEY_is_a(pub, "EC") &&
            EVP_PKEY_get_utf8_string_param(pub, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), NULL)) {
                const char *nist = EC_curve_nid2nist(OBJ_sn2nid(group));
                snprintf(c->curve, sizeof(c->curve), "%s", nist ? nist : group);
                c->facts.curve = c->curve;
        }
        /* The fingerprint of the key, not of how this request spelt it:
         * every comparison of keys (rotation, blocked keys, approval)
         * goes through it. */
        if ((r = spki_der_sha256_hex(c->spki, c->spki_hex)) < 0)
                return r;
        c->facts.spki_sha256 = c->spki_hex;
        return 0;
}

/* A named-curve EC key (what devices send) is imported from its curve and
 * point, which checks the point like decoding does; any other key, or
 * one the import refuses, is decoded as OpenSSL would have. */
static EVP_PKEY *import_ec_by_name(const char *group, const unsigned char *point, int len) {
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
        OSSL_PARAM params[] = {
                OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *) group, 0),
                OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *) point, (size_t) len),
                OSSL_PARAM_construct_end(),
        };
        EVP_PKEY *pkey = NULL;

        if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 || EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
                return NULL;
        return pkey;
}

/* Importing by name builds the curve's group, Montgomery constants
 * included, for every key: 33 µs of a P-256 import.  The common curves
 * are built once as parameter-only keys; a key copied from one gets its
 * group by copy and then its point (checked on the curve as above):
 * 8 µs. */
static struct {
        int nid;
        EVP_PKEY *params;
} curve_params[] = { { NID_X9_62_prime256v1, NULL }, { NID_secp384r1, NULL }, { NID_secp521r1, NULL } };
static pthread_once_t curve_params_once = PTHREAD_ONCE_INIT;

static void curve_params_init(void) {
        for (size_t i = 0; i < ELEMENTSOF(curve_params); i++) {
                _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
                OSSL_PARAM params[] = {
                        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
                                                         (char *) OBJ_nid2sn(curve_params[i].nid), 0),
                        OSSL_PARAM_construct_end(),
                };

                /* On failure the curve is imported by name, as before. */
                if (ctx && EVP_PKEY_fromdata_init(ctx) > 0)
                        EVP_PKEY_fromdata(ctx, &curve_params[i].params, EVP_PKEY_KEY_PARAMETERS, params);
        }
        ERR_clear_error();
}

static EVP_PKEY *import_ec(int curve_nid, const unsigned char *point, int len) {
        pthread_once(&curve_params_once, curve_params_init);
        for (size_t i = 0; i < ELEMENTSOF(curve_params); i++) {
                EVP_PKEY *pkey;

                if (curve_params[i].nid != curve_nid || !curve_params[i].params)
                        continue;
                pkey = EVP_PKEY_dup(curve_params[i].params);
                if (pkey && EVP_PKEY_set1_encoded_public_key(pkey, point, (size_t) len) > 0)
                        return pkey;
                EVP_PKEY_free(pkey);
                return NULL;
        }
        return import_ec_by_name(OBJ_nid2sn(curve_nid), point, len);
}

static int import_pubkey(const X509_PUBKEY *spki, EVP_PKEY **ret) {
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        ASN1_OBJECT *alg = NULL;
        const unsigned char *pk = NULL, *p;
        const void *pval = NULL;
        X509_ALGOR *a = NULL;
        EVP_PKEY *pkey = NULL;
        int pk_len = 0, ptype = V_ASN1_UNDEF, len;

        if (X509_PUBKEY_get0_param(&alg, &pk, &pk_len, &a, spki) && a) {
                X509_ALGOR_get0(NULL, &ptype, &pval, a);
                if (OBJ_obj2nid(alg) == NID_X9_62_id_ecPublicKey && ptype == V_ASN1_OBJECT &&
                    OBJ_obj2nid(pval) != NID_undef && pk_len > 0)
                        pkey = import_ec(OBJ_obj2nid(pval), pk, pk_len);
        }
        if (!pkey && (len = i2d_X509_PUBKEY(spki, &der)) > 0) {
                p = der;
                pkey = d2i_PUBKEY(NULL, &p, len);
        }
        ERR_clear_error();
        if (!pkey)
                return hwid_fail(HWID_E_CSR_INVALID, "the request's public key cannot be read");
        *ret = pkey;
        return 0;
}

/* RFC 5480: an EC key names its curve.  Explicit parameters (a curve
 * spelt out, which verifiers refuse, and which can hide a weak curve
 * behind familiar numbers) and implicitCA are refused. */
static int check_ec_params(const X509_PUBKEY *spki) {
        ASN1_OBJECT *alg = NULL;
        X509_ALGOR *a = NULL;
        const void *pval = NULL;
        int ptype = V_ASN1_UNDEF;

        if (!X509_PUBKEY_get0_param(&alg, NULL, NULL, &a, spki) || OBJ_obj2nid(alg) != NID_X9_62_id_ecPublicKey)
                return 0;
        if (a)
                X509_ALGOR_get0(NULL, &ptype, &pval, a);
        if (ptype == V_ASN1_OBJECT && OBJ_obj2nid(pval) != NID_undef)
                return 0;
        if (ptype == V_ASN1_SEQUENCE)
                return hwid_fail(HWID_E_CSR_INVALID, "the request's EC key spells out explicit curve parameters; "
                                 "RFC 5480 allows only a named curve (P-256, P-384)");
        return hwid_fail(HWID_E_CSR_INVALID, "the request's EC key does not name its curve (RFC 5480 requires a "
                         "named curve)");
}

/* The point in uncompressed form (04 || x || y), decoded and re-encoded
 * if the request sent it compressed (or hybrid); checked on the curve. */
static int uncompressed_point(int nid, const unsigned char *pk, int len, unsigned char **ret, int *ret_len) {
        _cleanup_(EC_GROUP_freep) EC_GROUP *g = NULL;
        _cleanup_(EC_POINT_freep) EC_POINT *pt = NULL;
        unsigned char *buf;
        size_t n;

        if (len > 0 && pk[0] == POINT_CONVERSION_UNCOMPRESSED) {
                buf = OPENSSL_memdup(pk, (size_t) len);
                n = (size_t) len;
        } else {
                g = EC_GROUP_new_by_curve_name(nid);
                pt = g ? EC_POINT_new(g) : NULL;
                if (!pt || !EC_POINT_oct2point(g, pt, pk, (size_t) len, NULL) ||
                    (n = EC_POINT_point2oct(g, pt, POINT_CONVERSION_UNCOMPRESSED, NULL, 0, NULL)) == 0) {
                        ERR_clear_error();
                        return hwid_fail(HWID_E_CSR_INVALID, "the request's EC point cannot be read");
                }
                buf = OPENSSL_malloc(n);
                if (buf && EC_POINT_point2oct(g, pt, POINT_CONVERSION_UNCOMPRESSED, buf, n, NULL) != n) {
                        OPENSSL_free(buf);
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode an EC point");
                }
        }
        if (!buf)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = buf;
        *ret_len = (int) n;
        return 0;
}

/* id-ecPublicKey, the named curve, the uncompressed point. */
static int canonical_ec(const X509_PUBKEY *in, X509_PUBKEY **ret) {
        _cleanup_(X509_PUBKEY_freep) X509_PUBKEY *out = X509_PUBKEY_new();
        const unsigned char *pk = NULL;
        unsigned char *point = NULL;
        const void *pval = NULL;
        X509_ALGOR *a = NULL;
        int pk_len = 0, ptype, nid, len = 0, r;

        if (!out)
                return hwid_fail(HWID_E_NOMEM, NULL);
        X509_PUBKEY_get0_param(NULL, &pk, &pk_len, &a, in);
        X509_ALGOR_get0(NULL, &ptype, &pval, a);
        nid = OBJ_obj2nid(pval); /* named: check_ec_params() saw to it */
        if ((r = uncompressed_point(nid, pk, pk_len, &point, &len)) < 0)
                return r;
        if (!X509_PUBKEY_set0_param(out, OBJ_nid2obj(NID_X9_62_id_ecPublicKey), V_ASN1_OBJECT, OBJ_nid2obj(nid),
                                    point, len)) {
                OPENSSL_free(point);
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the request's key");
        }
        *ret = TAKE_PTR(out);
        return 0;
}

/* One key, one encoding (RFC 5480 for EC, a fresh DER encoding for RSA):
 * what the certificate carries and what its fingerprint is taken of, so
 * that a key re-sent in another encoding is still the same key.  Other
 * key types (refused by policy) are kept as sent. */
static int canonical_spki(csr_info *c) {
        const X509_PUBKEY *in = X509_REQ_get_X509_PUBKEY(c->req);

        if (EVP_PKEY_is_a(c->pub, "EC"))
                return canonical_ec(in, &c->spki);
        if (EVP_PKEY_is_a(c->pub, "RSA")) {
                if (!X509_PUBKEY_set(&c->spki, c->pub))
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the request's RSA key");
                return 0;
        }
        c->spki = X509_PUBKEY_dup(in);
        return c->spki ? 0 : hwid_fail_ossl(HWID_E_NOMEM, "cannot copy the request's key");
}

static int keep_der(csr_info *c) {
        unsigned char *der = NULL;
        int len = i2d_X509_REQ(c->req, &der);

        if (len <= 0)
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "cannot re-encode the request");
        c->der = der;
        c->der_len = (size_t) len;
        return 0;
}

/* The original DER of a CRMF request: what proves its key again later. */
static int keep_crmf_der(csr_info *c, const uint8_t *data, size_t len) {
        if (!(c->der = OPENSSL_memdup(data, len)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        c->der_len = len;
        return 0;
}

int csr_info_parse(const uint8_t *data, size_t len, csr_info **ret) {
        _cleanup_(csr_info_freep) csr_info *c = NULL;
        bool crmf = false;
        EVP_PKEY *pub;
        int r;

        if (len == 0)
                return hwid_fail(HWID_E_CSR_INVALID, "the body is empty: send a PKCS#10 request");
        if (len > CSR_MAX_BYTES)
                return hwid_fail(HWID_E_CSR_INVALID, "the request is larger than %d bytes", CSR_MAX_BYTES);
        c = calloc(1, sizeof(*c));
        if (!c)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = decode(data, len, &c->req)) < 0) {
                char why[256];

                /* Not PKCS#10: a CRMF request (CMP) proves its key itself. */
                snprintf(why, sizeof(why), "%s", hwid_strerror(r));
                r = data[0] == 0x30 ? csr_crmf_decode(data, len, &c->req) : -HWID_E_CSR_INVALID;
                if (r == -HWID_E_CSR_INVALID)
                        return hwid_fail(HWID_E_CSR_INVALID, "%s", why);
                if (r < 0)
                        return r;
                crmf = true;
        }
        if ((r = check_ec_params(X509_REQ_get_X509_PUBKEY(c->req))) < 0 ||
            (r = import_pubkey(X509_REQ_get_X509_PUBKEY(c->req), &c->pub)) < 0)
                return r;
        pub = c->pub;
        /* Verified in the default context (the request's own has no algorithms). */
        if (!crmf && X509_REQ_verify_ex(c->req, pub, NULL, NULL) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_CSR_SIGNATURE, "the request's signature does not verify with its key");
        }
        if ((r = extract_subject(c)) < 0 || (r = extract_extensions(c)) < 0 || (r = canonical_spki(c)) < 0 ||
            (r = extract_key(c, pub)) < 0 || (r = crmf ? keep_crmf_der(c, data, len) : keep_der(c)) < 0)
                return r;
        c->crmf = crmf;
        *ret = TAKE_PTR(c);
        return 0;
}

const policy_csr *csr_info_facts(const csr_info *c) {
        return &c->facts;
}

EVP_PKEY *csr_info_pubkey(const csr_info *c) {
        return c->pub;
}

const X509_PUBKEY *csr_info_spki(const csr_info *c) {
        return c->spki;
}

const X509_REQ *csr_info_pkcs10(const csr_info *c) {
        return c->crmf ? NULL : c->req;
}

const uint8_t *csr_info_der(const csr_info *c, size_t *ret_len) {
        *ret_len = c->der_len;
        return c->der;
}

static int add_issue_san(GENERAL_NAMES *gens, const policy_san *s) {
        GENERAL_NAME *gn = GENERAL_NAME_new();
        ASN1_STRING *str = NULL;
        int type;

        if (!gn)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (s->type == SAN_IP) {
                str = ASN1_OCTET_STRING_new();
                type = GEN_IPADD;
                if (str && !ASN1_OCTET_STRING_set(str, s->ip, s->ip_len))
                        goto fail;
        } else {
                type = s->type == SAN_DNS ? GEN_DNS : s->type == SAN_URI ? GEN_URI : GEN_EMAIL;
                str = ASN1_IA5STRING_new();
                if (str && !ASN1_STRING_set(str, s->value, (int) s->len))
                        goto fail;
        }
        if (!str)
                goto fail;
        GENERAL_NAME_set0_value(gn, type, str);
        if (!sk_GENERAL_NAME_push(gens, gn)) {
                GENERAL_NAME_free(gn);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
fail:
        ASN1_STRING_free(str);
        GENERAL_NAME_free(gn);
        return hwid_fail(HWID_E_NOMEM, NULL);
}

/* A DNS SAN is a DNS name, whatever made it: never an IP address in a
 * dNSName (policy_dns_name_problem(), the policy's own rule, once more
 * where the name is signed). */
static int check_issue_dns(const policy_san *s) {
        const char *why = s->type == SAN_DNS ? policy_dns_name_problem(s->value, s->len) : NULL;
        _cleanup_free_ char *q = NULL;

        if (!why)
                return 0;
        if (text_escape(s->value, s->len, &q) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return hwid_fail(HWID_E_CSR_INVALID, "DNS SAN '%s' %s", q, why);
}

int issue_names(const policy_issue *iss, X509_NAME **ret_subject, GENERAL_NAMES **ret_sans) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = X509_NAME_new();
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *gens = GENERAL_NAMES_new();
        int r;

        if (!name || !gens)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < iss->n_subject; i++)
                if (!X509_NAME_add_entry_by_txt(name, iss->subject[i].type, MBSTRING_UTF8,
                                                (const unsigned char *) iss->subject[i].value,
                                                (int) iss->subject[i].len, -1, 0))
                        return hwid_fail_ossl(HWID_E_CSR_INVALID, "cannot encode subject attribute %s",
                                              iss->subject[i].type);
        for (size_t i = 0; i < iss->n_sans; i++)
                if ((r = check_issue_dns(&iss->sans[i])) < 0 || (r = add_issue_san(gens, &iss->sans[i])) < 0)
                        return r;
        *ret_subject = TAKE_PTR(name);
        *ret_sans = TAKE_PTR(gens);
        return 0;
}
