/* Leaf certificates, assembled as DER (performance issue 16).
 *
 * The TBSCertificate is put together from pieces: what depends only on
 * the CA and the profile (the issuer name, basicConstraints, keyUsage,
 * EKU, authorityKeyIdentifier, the CRL distribution point) is encoded
 * once and copied; the rest (serial, validity, subject, key, SKI, SANs)
 * is encoded per certificate by OpenSSL and framed by der-write.h.  Going
 * through an X509 object instead set every field by a DER round trip,
 * encoded the TBS to sign it and the certificate again to store it, and
 * read serial, times and names back out: more than twice the work.  The
 * bytes are the same as that way's (tests/unit/test-issuer.c). */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/sha.h>

#include "der-write.h"
#include "error.h"
#include "issuer-internal.h"
#include "ossl-util.h"

/* Larger than any certificate hwid issues (SANs are bounded by policy). */
#define LEAF_DER_MAX (256 * 1024)
/* A signature AlgorithmIdentifier: an OID and a NULL (~15 bytes), or
 * RSASSA-PSS parameters (~65). */
#define ALG_ID_MAX 128

void issued_cert_clear(issued_cert *c) {
        free(c->der);
        *c = (issued_cert) { 0 };
}

/* The DER of an extension written in OpenSSL's configuration syntax,
 * with the CA as the issuer (for AKI). */
static int conf_ext_der(X509 *ca, int nid, const char *value, uint8_t **ret, size_t *ret_len) {
        _cleanup_(X509_EXTENSION_freep) X509_EXTENSION *ext = NULL;
        unsigned char *der = NULL;
        X509V3_CTX ctx;
        int len;

        X509V3_set_ctx(&ctx, ca, NULL, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!ext || (len = i2d_X509_EXTENSION(ext, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot make extension %s=%s", OBJ_nid2sn(nid), value);
        *ret = der;
        *ret_len = (size_t) len;
        return 0;
}

/* The cached entry for (nid, value), made on first use; NULL when the
 * cache is full (an odd configuration: the caller makes it each time). */
static int cached_ext(issuer *is, int nid, const char *value, const ext_cached **ret) {
        ext_cached *e = NULL;
        int r = 0;

        pthread_mutex_lock(&is->ext_lock);
        for (size_t i = 0; i < is->n_ext && !e; i++)
                if (is->ext_cache[i].nid == nid && strcmp(is->ext_cache[i].value, value) == 0)
                        e = &is->ext_cache[i];
        if (!e && is->n_ext < EXT_CACHE_MAX) {
                ext_cached n = { .nid = nid, .value = strdup(value) };
                if (!n.value)
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                else if ((r = conf_ext_der(is->cert, nid, value, &n.der, &n.der_len)) < 0)
                        free(n.value);
                else {
                        e = &is->ext_cache[is->n_ext++];
                        *e = n;
                }
        }
        pthread_mutex_unlock(&is->ext_lock);
        if (r >= 0)
                *ret = e; /* entries never move or change once made */
        return r;
}

static int append_conf_ext(issuer *is, buf *b, int nid, const char *value) {
        _cleanup_(OPENSSL_freep) uint8_t *der = NULL;
        const ext_cached *e;
        size_t len;
        int r;

        if ((r = cached_ext(is, nid, value, &e)) < 0)
                return r;
        if (e)
                return buf_append(b, e->der, e->der_len);
        if ((r = conf_ext_der(is->cert, nid, value, &der, &len)) < 0)
                return r;
        return buf_append(b, der, len);
}

/* Extension ::= SEQUENCE { extnID, extnValue OCTET STRING }, not
 * critical (DEFAULT FALSE, so absent), the value OpenSSL's DER of val. */
static int append_ext(buf *b, int nid, const void *val, const ASN1_ITEM *it) {
        size_t start = b->len, value;
        int r;

        if ((r = der_append_item(b, OBJ_nid2obj(nid), ASN1_ITEM_rptr(ASN1_OBJECT))) < 0)
                return r;
        value = b->len;
        if ((r = der_append_item(b, val, it)) < 0 || (r = der_wrap(b, value, DER_OCTET_STRING)) < 0)
                return r;
        return der_wrap(b, start, DER_SEQUENCE);
}

/* subjectKeyIdentifier as RFC 5280 4.2.1.2 (1) and OpenSSL's "hash":
 * SHA-1 of the subjectPublicKey bits. */
static int append_ski(buf *b, const X509_PUBKEY *spki) {
        _cleanup_(ASN1_OCTET_STRING_freep) ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
        const unsigned char *pk = NULL;
        unsigned char md[SHA_DIGEST_LENGTH];
        int pk_len = 0;

        if (!ski || !X509_PUBKEY_get0_param(NULL, &pk, &pk_len, NULL, spki) ||
            !EVP_Digest(pk, (size_t) pk_len, md, NULL, EVP_sha1(), NULL) ||
            !ASN1_OCTET_STRING_set(ski, md, sizeof(md)))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot make the subjectKeyIdentifier");
        return append_ext(b, NID_subject_key_identifier, ski, ASN1_ITEM_rptr(ASN1_OCTET_STRING));
}

static int key_usage_string(uint32_t ku, char *out, size_t n) {
        static const struct { uint32_t bit; const char *name; } names[] = {
                { KU_DIGITAL_SIGNATURE, "digitalSignature" }, { KU_KEY_ENCIPHERMENT, "keyEncipherment" },
                { KU_KEY_AGREEMENT, "keyAgreement" },
        };
        snprintf(out, n, "critical");
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (ku & names[i].bit) {
                        size_t l = strlen(out);
                        snprintf(out + l, n - l, ",%s", names[i].name);
                }
        return strcmp(out, "critical") == 0 ? hwid_fail(HWID_E_CONFIG, "profile grants no key usage") : 0;
}

/* The CA's and the profile's extensions that come before the subject's
 * key identifier: basicConstraints, keyUsage, EKU. */
static int append_profile_exts(issuer *is, buf *b, const issue_request *in) {
        char ku[128], eku[64] = "";
        int r;

        if ((r = key_usage_string(in->key_usage, ku, sizeof(ku))) < 0)
                return r;
        if (in->eku & EKU_CLIENT_AUTH)
                strcat(eku, "clientAuth");
        if (in->eku & EKU_SERVER_AUTH)
                strcat(eku, eku[0] ? ",serverAuth" : "serverAuth");
        if ((r = append_conf_ext(is, b, NID_basic_constraints, "critical,CA:FALSE")) < 0 ||
            (r = append_conf_ext(is, b, NID_key_usage, ku)) < 0 ||
            (eku[0] && (r = append_conf_ext(is, b, NID_ext_key_usage, eku)) < 0))
                return r;
        return 0;
}

/* An extension naming url (none when it is NULL): the CRL distribution
 * point, the OCSP responder (authorityInfoAccess). */
static int append_url_ext(issuer *is, buf *b, int nid, const char *prefix, const char *url) {
        _cleanup_free_ char *value = NULL;

        if (!url)
                return 0;
        if (asprintf(&value, "%s%s", prefix, url) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return append_conf_ext(is, b, nid, value);
}

/* extensions [3] EXPLICIT SEQUENCE OF Extension, in the order hwid has
 * always written them. */
static int append_extensions(issuer *is, buf *b, const issue_request *in, const X509_PUBKEY *spki) {
        size_t start = b->len;
        int r;

        if ((r = append_profile_exts(is, b, in)) < 0 || (r = append_ski(b, spki)) < 0 ||
            (r = append_conf_ext(is, b, NID_authority_key_identifier, "keyid:always")) < 0)
                return r;
        if ((r = append_url_ext(is, b, NID_crl_distribution_points, "URI:", in->crl_url)) < 0 ||
            (r = append_url_ext(is, b, NID_info_access, "OCSP;URI:", in->ocsp_url)) < 0)
                return r;
        if (in->sans && sk_GENERAL_NAME_num(in->sans) > 0 &&
            (r = append_ext(b, NID_subject_alt_name, in->sans, ASN1_ITEM_rptr(GENERAL_NAMES))) < 0)
                return r;
        if ((r = der_wrap(b, start, DER_SEQUENCE)) < 0)
                return r;
        return der_wrap(b, start, DER_EXPLICIT(3));
}

/* UTCTime before 2050, GeneralizedTime from then on: ASN1_TIME_set's choice. */
static int append_time(buf *b, int64_t t) {
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *at = ASN1_TIME_set(NULL, (time_t) t);

        if (!at)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode a time");
        return der_append_item(b, at, ASN1_ITEM_rptr(ASN1_TIME));
}

/* Validity from now-backdate to now+validity, never past the CA's own end
 * (then the CA's notAfter as the CA certificate has it). */
static int append_validity(const issuer *is, buf *b, const issue_request *in, issued_cert *c) {
        size_t start = b->len;
        int64_t nb = in->now - in->backdate, na = in->now + in->validity;
        int r;

        if ((r = append_time(b, nb)) < 0)
                return r;
        if (na > is->not_after) {
                na = is->not_after;
                r = buf_append(b, is->not_after_der, is->not_after_len);
        } else
                r = append_time(b, na);
        if (r < 0 || (r = der_wrap(b, start, DER_SEQUENCE)) < 0)
                return r;
        c->not_before = nb;
        c->not_after = na;
        return 0;
}

/* version [0] EXPLICIT v3, and the serial, also kept as hex. */
static int append_version_serial(buf *b, issued_cert *c) {
        static const uint8_t v3 = 2;
        uint8_t raw[16];
        size_t start = b->len;
        int r;

        if ((r = der_append_uint(b, &v3, 1)) < 0 || (r = der_wrap(b, start, DER_EXPLICIT(0))) < 0 ||
            (r = issuer_serial_bytes(raw)) < 0)
                return r;
        /* raw[0] >= 0x40: 32 digits, as BN_bn2hex() gives them. */
        for (size_t i = 0; i < sizeof(raw); i++) {
                c->serial[2 * i] = "0123456789ABCDEF"[raw[i] >> 4];
                c->serial[2 * i + 1] = "0123456789ABCDEF"[raw[i] & 0xf];
        }
        c->serial[2 * sizeof(raw)] = '\0';
        return der_append_uint(b, raw, sizeof(raw));
}

/* The subject's key as the CSR had it, else made from the key (as
 * X509_set_pubkey() does); *own holds the latter. */
static int subject_spki(const issue_request *in, X509_PUBKEY **own, const X509_PUBKEY **ret) {
        if (in->subject_spki) {
                *ret = in->subject_spki;
                return 0;
        }
        if (!in->subject_key || !X509_PUBKEY_set(own, in->subject_key))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the subject's public key");
        *ret = *own;
        return 0;
}

/* TBSCertificate ::= SEQUENCE { version, serialNumber, signature, issuer,
 * validity, subject, subjectPublicKeyInfo, extensions } */
static int append_tbs(issuer *is, buf *b, const issue_request *in, const uint8_t *alg, size_t alg_len,
                      issued_cert *c) {
        _cleanup_(X509_PUBKEY_freep) X509_PUBKEY *own = NULL;
        const X509_PUBKEY *spki = NULL;
        size_t start = b->len;
        int r;

        if ((r = subject_spki(in, &own, &spki)) < 0 ||
            (r = append_version_serial(b, c)) < 0 ||
            (r = buf_append(b, alg, alg_len)) < 0 ||
            (r = buf_append(b, is->name_der, is->name_len)) < 0 ||
            (r = append_validity(is, b, in, c)) < 0 ||
            (r = der_append_item(b, in->subject, ASN1_ITEM_rptr(X509_NAME))) < 0 ||
            (r = der_append_item(b, spki, ASN1_ITEM_rptr(X509_PUBKEY))) < 0 ||
            (r = append_extensions(is, b, in, spki)) < 0)
                return r;
        return der_wrap(b, start, DER_SEQUENCE);
}

/* The signature AlgorithmIdentifier the key's provider signs with, asked
 * of the signing context as ASN1_item_sign_ctx() asks for it: the TBS
 * names it before it is signed. */
static int sign_alg_id(EVP_MD_CTX *mctx, uint8_t *alg, size_t size, size_t *ret_len) {
        OSSL_PARAM p[] = {
                OSSL_PARAM_octet_string(OSSL_SIGNATURE_PARAM_ALGORITHM_ID, alg, size),
                OSSL_PARAM_END,
        };

        if (EVP_PKEY_CTX_get_params(EVP_MD_CTX_get_pkey_ctx(mctx), p) <= 0 || !OSSL_PARAM_modified(p) ||
            p[0].return_size == 0 || p[0].return_size > size)
                return hwid_fail_ossl(HWID_E_CRYPTO, "the CA key's signature algorithm is unknown");
        *ret_len = p[0].return_size;
        return 0;
}

int issuer_sign(issuer *is, const issue_request *in, issued_cert *ret) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new();
        _cleanup_buf_ buf b;
        uint8_t alg[ALG_ID_MAX];
        size_t alg_len = 0;
        issued_cert c = { 0 };
        int r;

        buf_init(&b, LEAF_DER_MAX);
        if (!mctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = hwid_key_sign_init(is->key, mctx, NULL)) < 0 ||
            (r = sign_alg_id(mctx, alg, sizeof(alg), &alg_len)) < 0 ||
            (r = append_tbs(is, &b, in, alg, alg_len, &c)) < 0 ||
            (r = issuer_sign_tbs(mctx, &b, 0, alg, alg_len)) < 0)
                return r;
        c.der = buf_steal(&b, &c.der_len);
        *ret = c;
        return 0;
}
