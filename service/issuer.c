/* Certificates.  Everything a certificate says comes from the policy's
 * decision (issue_request), never from the CSR's requested extensions. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "error.h"
#include "issuer.h"
#include "ossl-util.h"
#include "x509-util.h"

/* A new root starts in the past by hwidd's default clock_skew: the
 * clocks of the machines that verify with it may be behind the CA host's. */
#define CA_BACKDATE 300

/* Distinct extension values cached (a handful: see add_cached_ext()). */
#define EXT_CACHE_MAX 16

typedef struct ext_cached {
        int nid;
        char *value;
        X509_EXTENSION *ext;
} ext_cached;

struct issuer {
        hwid_key *key;
        X509 *cert;
        pthread_mutex_t ext_lock; /* guards the cache below */
        ext_cached ext_cache[EXT_CACHE_MAX];
        size_t n_ext;
};

int issuer_new(hwid_key *ca_key, X509 *ca_cert, issuer **ret) {
        issuer *is;

        if (EVP_PKEY_eq(X509_get0_pubkey(ca_cert), hwid_key_public(ca_key)) != 1)
                return hwid_fail(HWID_E_CONFIG, "the CA certificate does not belong to the CA key %s",
                                 hwid_key_uri(ca_key));
        is = calloc(1, sizeof(*is));
        if (!is)
                return hwid_fail(HWID_E_NOMEM, NULL);
        is->key = ca_key;
        is->cert = ca_cert;
        pthread_mutex_init(&is->ext_lock, NULL);
        *ret = is;
        return 0;
}

hwid_key *issuer_key(const issuer *is) {
        return is->key;
}

X509 *issuer_cert(const issuer *is) {
        return is->cert;
}

void issuer_free(issuer *is) {
        if (!is)
                return;
        for (size_t i = 0; i < is->n_ext; i++) {
                free(is->ext_cache[i].value);
                X509_EXTENSION_free(is->ext_cache[i].ext);
        }
        pthread_mutex_destroy(&is->ext_lock);
        free(is);
}

int serial_to_hex(const ASN1_INTEGER *serial, char **ret) {
        _cleanup_(BN_freep) BIGNUM *bn = ASN1_INTEGER_to_BN(serial, NULL);
        char *hex = bn ? BN_bn2hex(bn) : NULL;

        if (!hex)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot format a serial number");
        *ret = strdup(hex);
        OPENSSL_free(hex);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* 16 random bytes with the top bit cleared: a positive 127-bit serial. */
static int random_serial(X509 *x) {
        unsigned char raw[16];
        _cleanup_(BN_freep) BIGNUM *bn = NULL;

        if (RAND_bytes(raw, sizeof(raw)) != 1)
                return hwid_fail_ossl(HWID_E_CRYPTO, "no randomness for a serial number");
        raw[0] &= 0x7f;
        raw[0] |= 0x40; /* keep all 16 bytes significant */
        bn = BN_bin2bn(raw, sizeof(raw), NULL);
        if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot set the serial number");
        return 0;
}

/* Adds an extension written in OpenSSL's configuration syntax, with the
 * issuer/subject context needed for SKI/AKI. */
static int add_conf_ext(X509 *x, X509 *issuer_cert, int nid, const char *value) {
        _cleanup_(X509_EXTENSION_freep) X509_EXTENSION *ext = NULL;
        X509V3_CTX ctx;

        X509V3_set_ctx(&ctx, issuer_cert ? issuer_cert : x, x, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!ext || !X509_add_ext(x, ext, -1))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add extension %s=%s", OBJ_nid2sn(nid), value);
        return 0;
}

/* An extension that depends only on the CA and its value (not on the
 * subject) is made from its text once and copied into each certificate:
 * parsing the same strings for every certificate cost a few percent of
 * an issuance.  Called with ext_lock held. */
static X509_EXTENSION *cache_ext(issuer *is, X509 *x, int nid, const char *value) {
        X509V3_CTX ctx;
        X509_EXTENSION *ext;
        char *v = strdup(value);

        X509V3_set_ctx(&ctx, is->cert, x, NULL, NULL, 0);
        ext = v ? X509V3_EXT_conf_nid(NULL, &ctx, nid, value) : NULL;
        if (!ext) {
                free(v);
                return NULL; /* the caller makes it the slow way and reports why */
        }
        is->ext_cache[is->n_ext++] = (ext_cached) { .nid = nid, .value = v, .ext = ext };
        return ext;
}

static int add_cached_ext(issuer *is, X509 *x, int nid, const char *value) {
        X509_EXTENSION *ext = NULL;
        int ok = 0;

        pthread_mutex_lock(&is->ext_lock);
        for (size_t i = 0; i < is->n_ext && !ext; i++)
                if (is->ext_cache[i].nid == nid && strcmp(is->ext_cache[i].value, value) == 0)
                        ext = is->ext_cache[i].ext;
        if (!ext && is->n_ext < EXT_CACHE_MAX)
                ext = cache_ext(is, x, nid, value);
        if (ext)
                ok = X509_add_ext(x, ext, -1); /* adds a copy */
        pthread_mutex_unlock(&is->ext_lock);
        if (!ext)
                return add_conf_ext(x, is->cert, nid, value);
        return ok ? 0 : hwid_fail_ossl(HWID_E_CRYPTO, "cannot add extension %s=%s", OBJ_nid2sn(nid), value);
}

/* subjectKeyIdentifier as RFC 5280 4.2.1.2 (1) and OpenSSL's "hash":
 * SHA-1 of the subjectPublicKey bits, made directly rather than by
 * parsing the text "hash" for every certificate. */
static int add_ski(X509 *x) {
        _cleanup_(ASN1_OCTET_STRING_freep) ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
        const unsigned char *pk = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        int pk_len = 0;

        if (!ski || !X509_PUBKEY_get0_param(NULL, &pk, &pk_len, NULL, X509_get_X509_PUBKEY(x)) ||
            !EVP_Digest(pk, (size_t) pk_len, md, &md_len, EVP_sha1(), NULL) ||
            !ASN1_OCTET_STRING_set(ski, md, (int) md_len) ||
            !X509_add1_ext_i2d(x, NID_subject_key_identifier, ski, 0, X509V3_ADD_DEFAULT))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add subjectKeyIdentifier");
        return 0;
}

static int key_usage_string(uint32_t ku, char *out, size_t n) {
        static const struct { uint32_t bit; const char *name; } names[] = {
                { KU_DIGITAL_SIGNATURE, "digitalSignature" }, { KU_KEY_ENCIPHERMENT, "keyEncipherment" },
                { KU_KEY_AGREEMENT, "keyAgreement" },
        };
        out[0] = '\0';
        snprintf(out, n, "critical");
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (ku & names[i].bit) {
                        size_t l = strlen(out);
                        snprintf(out + l, n - l, ",%s", names[i].name);
                }
        return strcmp(out, "critical") == 0 ? hwid_fail(HWID_E_CONFIG, "profile grants no key usage") : 0;
}

static int add_leaf_extensions(issuer *is, X509 *x, const issue_request *in) {
        char ku[128], eku[64] = "";
        int r;

        if ((r = key_usage_string(in->key_usage, ku, sizeof(ku))) < 0)
                return r;
        if (in->eku & EKU_CLIENT_AUTH)
                strcat(eku, "clientAuth");
        if (in->eku & EKU_SERVER_AUTH)
                strcat(eku, eku[0] ? ",serverAuth" : "serverAuth");
        /* The key identifier is the subject's own; everything else is the
         * CA's or the profile's, the same for many certificates. */
        if ((r = add_cached_ext(is, x, NID_basic_constraints, "critical,CA:FALSE")) < 0 ||
            (r = add_cached_ext(is, x, NID_key_usage, ku)) < 0 ||
            (eku[0] && (r = add_cached_ext(is, x, NID_ext_key_usage, eku)) < 0) ||
            (r = add_ski(x)) < 0 ||
            (r = add_cached_ext(is, x, NID_authority_key_identifier, "keyid:always")) < 0)
                return r;
        if (in->crl_url) {
                _cleanup_free_ char *dp = NULL;
                if (asprintf(&dp, "URI:%s", in->crl_url) < 0)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                if ((r = add_cached_ext(is, x, NID_crl_distribution_points, dp)) < 0)
                        return r;
        }
        if (in->sans && sk_GENERAL_NAME_num(in->sans) > 0 &&
            !X509_add1_ext_i2d(x, NID_subject_alt_name, (void *) in->sans, 0, X509V3_ADD_DEFAULT))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add subjectAltName");
        return 0;
}

static int sign_cert(hwid_key *k, X509 *x) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new();
        int r;

        if (!mctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = hwid_key_sign_init(k, mctx, NULL)) < 0)
                return r;
        hwid_error_clear();
        if (X509_sign_ctx(x, mctx) <= 0)
                return hwid_fail_signing("a certificate");
        return 0;
}

/* Validity from now-backdate to now+seconds, never past the CA's own end. */
static int set_validity(X509 *x, const X509 *ca, int64_t now, int64_t backdate, int64_t seconds) {
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *nb = ASN1_TIME_set(NULL, (time_t) (now - backdate));
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *na = ASN1_TIME_set(NULL, (time_t) (now + seconds));

        if (!nb || !na)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!X509_set1_notBefore(x, nb))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot set notBefore");
        if (ca && ASN1_TIME_compare(na, X509_get0_notAfter(ca)) > 0)
                return X509_set1_notAfter(x, X509_get0_notAfter(ca)) ? 0
                       : hwid_fail_ossl(HWID_E_CRYPTO, "cannot set notAfter");
        return X509_set1_notAfter(x, na) ? 0 : hwid_fail_ossl(HWID_E_CRYPTO, "cannot set notAfter");
}

int issuer_sign(issuer *is, const issue_request *in, X509 **ret) {
        _cleanup_(X509_freep) X509 *x = X509_new();
        int r;

        if (!x)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!X509_set_version(x, X509_VERSION_3) ||
            !X509_set_subject_name(x, in->subject) ||
            !X509_set_issuer_name(x, X509_get_subject_name(is->cert)) ||
            (!in->subject_spki && !X509_set_pubkey(x, in->subject_key)))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot fill in the certificate");
        if ((in->subject_spki && (r = x509_set_spki(x, in->subject_spki)) < 0) ||
            (r = random_serial(x)) < 0 ||
            (r = set_validity(x, is->cert, in->now, in->backdate, in->validity)) < 0 ||
            (r = add_leaf_extensions(is, x, in)) < 0 ||
            (r = sign_cert(is->key, x)) < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}

static int add_ca_extensions(X509 *x) {
        int r;

        if ((r = add_conf_ext(x, NULL, NID_basic_constraints, "critical,CA:TRUE")) < 0 ||
            (r = add_conf_ext(x, NULL, NID_key_usage, "critical,keyCertSign,cRLSign")) < 0 ||
            (r = add_conf_ext(x, NULL, NID_subject_key_identifier, "hash")) < 0 ||
            (r = add_conf_ext(x, x, NID_authority_key_identifier, "keyid:always")) < 0)
                return r;
        return 0;
}

int ca_self_sign(hwid_key *k, const X509_NAME *subject, int days, X509 **ret) {
        _cleanup_(X509_freep) X509 *x = X509_new();
        int r;

        if (!x)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!X509_set_version(x, X509_VERSION_3) || !X509_set_subject_name(x, subject) ||
            !X509_set_issuer_name(x, subject) || !X509_set_pubkey(x, hwid_key_public(k)))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot fill in the CA certificate");
        if ((r = random_serial(x)) < 0 ||
            (r = set_validity(x, NULL, (int64_t) time(NULL), CA_BACKDATE, (int64_t) days * 86400)) < 0 ||
            (r = add_ca_extensions(x)) < 0 ||
            (r = sign_cert(k, x)) < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}
