/* Certificates.  Everything a certificate says comes from the policy's
 * decision (issue_request), never from the CSR's requested extensions.
 * This file: the CA's state, CA certificates and the signing of a DER
 * TBS; leaf certificates are assembled in issuer-leaf.c. */
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "der-write.h"
#include "error.h"
#include "issuer-internal.h"
#include "ossl-util.h"
#include "x509-util.h"

/* A new root starts in the past by hwidd's default clock_skew: the
 * clocks of the machines that verify with it may be behind the CA host's. */
#define CA_BACKDATE 300

/* A signature: an RSA-3072 one is 384 bytes, ECDSA P-384 at most 104. */
#define SIG_MAX 1024

/* What every leaf takes from the CA certificate, encoded once: its
 * subject (the leaves' issuer) and its notAfter (where theirs stop). */
static int cache_ca_parts(issuer *is) {
        const ASN1_TIME *na = X509_get0_notAfter(is->cert);
        unsigned char *name = NULL, *t = NULL;
        int name_len = i2d_X509_NAME(X509_get_subject_name(is->cert), &name);
        int t_len = i2d_ASN1_TIME(na, &t);
        struct tm tm;

        is->name_der = name;
        is->not_after_der = t;
        if (name_len <= 0 || t_len <= 0 || !ASN1_TIME_to_tm(na, &tm))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot read the CA certificate's subject and notAfter");
        is->name_len = (size_t) name_len;
        is->not_after_len = (size_t) t_len;
        is->not_after = (int64_t) timegm(&tm);
        return 0;
}

int issuer_new(hwid_key *ca_key, X509 *ca_cert, issuer **ret) {
        _cleanup_(issuer_freep) issuer *is = NULL;
        int r;

        if (EVP_PKEY_eq(X509_get0_pubkey(ca_cert), hwid_key_public(ca_key)) != 1)
                return hwid_fail(HWID_E_CONFIG, "the CA certificate does not belong to the CA key %s",
                                 hwid_key_uri(ca_key));
        is = calloc(1, sizeof(*is));
        if (!is)
                return hwid_fail(HWID_E_NOMEM, NULL);
        is->key = ca_key;
        is->cert = ca_cert;
        pthread_mutex_init(&is->ext_lock, NULL);
        if ((r = cache_ca_parts(is)) < 0)
                return r;
        *ret = TAKE_PTR(is);
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
                OPENSSL_free(is->ext_cache[i].der);
        }
        OPENSSL_free(is->name_der);
        OPENSSL_free(is->not_after_der);
        pthread_mutex_destroy(&is->ext_lock);
        free(is);
}

int issuer_serial_bytes(uint8_t raw[16]) {
        if (RAND_bytes(raw, 16) != 1)
                return hwid_fail_ossl(HWID_E_CRYPTO, "no randomness for a serial number");
        raw[0] &= 0x7f;
        raw[0] |= 0x40; /* keep all 16 bytes significant */
        return 0;
}

static int random_serial(X509 *x) {
        uint8_t raw[16];
        _cleanup_(BN_freep) BIGNUM *bn = NULL;
        int r;

        if ((r = issuer_serial_bytes(raw)) < 0)
                return r;
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

int issuer_sign_tbs(EVP_MD_CTX *mctx, buf *b, size_t start, const uint8_t *alg, size_t alg_len) {
        uint8_t sig[SIG_MAX];
        size_t sig_len = sizeof(sig);
        int r;

        hwid_error_clear();
        if (EVP_DigestSign(mctx, sig, &sig_len, b->data + start, b->len - start) <= 0)
                return hwid_fail_signing("a certificate");
        if ((r = buf_append(b, alg, alg_len)) < 0 || (r = der_append_bit_string(b, sig, sig_len)) < 0)
                return r;
        return der_wrap(b, start, DER_SEQUENCE);
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

/* Validity from now-backdate to now+seconds. */
static int set_validity(X509 *x, int64_t now, int64_t backdate, int64_t seconds) {
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *nb = ASN1_TIME_set(NULL, (time_t) (now - backdate));
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *na = ASN1_TIME_set(NULL, (time_t) (now + seconds));

        if (!nb || !na)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!X509_set1_notBefore(x, nb) || !X509_set1_notAfter(x, na))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot set the validity");
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
            (r = set_validity(x, (int64_t) time(NULL), CA_BACKDATE, (int64_t) days * 86400)) < 0 ||
            (r = add_ca_extensions(x)) < 0 ||
            (r = sign_cert(k, x)) < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}

/* The earlier of a and b: a link stops where the shorter-lived of its two
 * CAs does. */
static const ASN1_TIME *earlier(const ASN1_TIME *a, const ASN1_TIME *b) {
        return ASN1_TIME_compare(a, b) <= 0 ? a : b;
}

static int link_fill(X509 *x, X509 *signer_cert, X509 *subject_cert) {
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *nb = ASN1_TIME_set(NULL, time(NULL) - CA_BACKDATE);
        const ASN1_TIME *na = earlier(X509_get0_notAfter(signer_cert), X509_get0_notAfter(subject_cert));

        if (!nb)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!X509_set_version(x, X509_VERSION_3) || !X509_set_subject_name(x, X509_get_subject_name(subject_cert)) ||
            !X509_set_issuer_name(x, X509_get_subject_name(signer_cert)) ||
            !X509_set_pubkey(x, X509_get0_pubkey(subject_cert)) || !X509_set1_notBefore(x, nb) ||
            !X509_set1_notAfter(x, na))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot fill in a link certificate");
        return 0;
}

int ca_link_sign(hwid_key *signer, X509 *signer_cert, X509 *subject_cert, X509 **ret) {
        _cleanup_(X509_freep) X509 *x = X509_new();
        int r;

        if (!x)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (EVP_PKEY_eq(X509_get0_pubkey(signer_cert), hwid_key_public(signer)) != 1)
                return hwid_fail(HWID_E_CONFIG, "the CA certificate does not belong to the key %s",
                                 hwid_key_uri(signer));
        if ((r = link_fill(x, signer_cert, subject_cert)) < 0 || (r = random_serial(x)) < 0 ||
            (r = add_conf_ext(x, NULL, NID_basic_constraints, "critical,CA:TRUE")) < 0 ||
            (r = add_conf_ext(x, NULL, NID_key_usage, "critical,keyCertSign,cRLSign")) < 0 ||
            (r = add_conf_ext(x, NULL, NID_subject_key_identifier, "hash")) < 0 ||
            (r = add_conf_ext(x, signer_cert, NID_authority_key_identifier, "keyid:always")) < 0 ||
            (r = sign_cert(signer, x)) < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}
