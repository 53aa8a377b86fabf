/* CRLs and the CA's own request.  A CRL is built entry by entry (a store
 * of 100,000 revocations streams through without a second copy) and
 * signed once by the CA key. */
#include <string.h>

#include "error.h"
#include "issuer.h"
#include "ossl-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(X509_REVOKED *, X509_REVOKED_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(ASN1_ENUMERATED *, ASN1_ENUMERATED_free)

struct crl_builder {
        issuer *is;
        X509_CRL *crl;
};

static int crl_number(int64_t n, ASN1_INTEGER **ret) {
        ASN1_INTEGER *ai = ASN1_INTEGER_new();

        if (!ai || !ASN1_INTEGER_set_int64(ai, n)) {
                ASN1_INTEGER_free(ai);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = ai;
        return 0;
}

static int set_crl_times(X509_CRL *crl, int64_t now, int64_t validity) {
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *last = ASN1_TIME_set(NULL, (time_t) now);
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *next = ASN1_TIME_set(NULL, (time_t) (now + validity));

        if (!last || !next || !X509_CRL_set1_lastUpdate(crl, last) || !X509_CRL_set1_nextUpdate(crl, next))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot set CRL times");
        return 0;
}

static int add_crl_extensions(X509_CRL *crl, X509 *ca, int64_t number) {
        _cleanup_(ASN1_INTEGER_freep) ASN1_INTEGER *num = NULL;
        _cleanup_(X509_EXTENSION_freep) X509_EXTENSION *aki = NULL;
        X509V3_CTX ctx;
        int r;

        if ((r = crl_number(number, &num)) < 0)
                return r;
        if (!X509_CRL_add1_ext_i2d(crl, NID_crl_number, num, 0, 0))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add the CRL number");
        X509V3_set_ctx(&ctx, ca, NULL, NULL, crl, 0);
        aki = X509V3_EXT_conf_nid(NULL, &ctx, NID_authority_key_identifier, "keyid:always");
        if (!aki || !X509_CRL_add_ext(crl, aki, -1))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add the CRL's authority key identifier");
        return 0;
}

int crl_builder_new(issuer *is, int64_t now, int64_t validity, int64_t number, crl_builder **ret) {
        _cleanup_(X509_CRL_freep) X509_CRL *crl = X509_CRL_new();
        crl_builder *b;
        int r;

        if (!crl)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!X509_CRL_set_version(crl, X509_CRL_VERSION_2) ||
            !X509_CRL_set_issuer_name(crl, X509_get_subject_name(issuer_cert(is))))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot start a CRL");
        if ((r = set_crl_times(crl, now, validity)) < 0 || (r = add_crl_extensions(crl, issuer_cert(is), number)) < 0)
                return r;
        b = calloc(1, sizeof(*b));
        if (!b)
                return hwid_fail(HWID_E_NOMEM, NULL);
        b->is = is;
        b->crl = TAKE_PTR(crl);
        *ret = b;
        return 0;
}

static int revoked_serial(const char *hex, ASN1_INTEGER **ret) {
        _cleanup_(BN_freep) BIGNUM *bn = NULL;
        ASN1_INTEGER *ai;

        if (!BN_hex2bn(&bn, hex))
                return hwid_fail(HWID_E_INVALID, "serial '%s' is not hexadecimal", hex);
        ai = BN_to_ASN1_INTEGER(bn, NULL);
        if (!ai)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = ai;
        return 0;
}

int crl_builder_add(crl_builder *b, const crl_entry *e) {
        _cleanup_(X509_REVOKED_freep) X509_REVOKED *rev = X509_REVOKED_new();
        _cleanup_(ASN1_INTEGER_freep) ASN1_INTEGER *serial = NULL;
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *when = ASN1_TIME_set(NULL, (time_t) e->revoked_at);
        int r;

        if (!rev || !when)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = revoked_serial(e->serial_hex, &serial)) < 0)
                return r;
        if (!X509_REVOKED_set_serialNumber(rev, serial) || !X509_REVOKED_set_revocationDate(rev, when))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add serial %s to the CRL", e->serial_hex);
        if (e->reason > 0) {
                _cleanup_(ASN1_ENUMERATED_freep) ASN1_ENUMERATED *code = ASN1_ENUMERATED_new();
                if (!code || !ASN1_ENUMERATED_set(code, e->reason) ||
                    !X509_REVOKED_add1_ext_i2d(rev, NID_crl_reason, code, 0, 0))
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add a revocation reason");
        }
        if (!X509_CRL_add0_revoked(b->crl, rev))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot grow the CRL");
        rev = NULL; /* owned by the CRL now */
        return 0;
}

int crl_builder_finish(crl_builder *b, uint8_t **ret_der, size_t *ret_len) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new();
        unsigned char *der = NULL;
        int len, r;

        if (!mctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = hwid_key_sign_init(issuer_key(b->is), mctx, NULL)) < 0)
                return r;
        X509_CRL_sort(b->crl);
        hwid_error_clear();
        if (X509_CRL_sign_ctx(b->crl, mctx) <= 0)
                return hwid_fail_signing("the CRL");
        len = i2d_X509_CRL(b->crl, &der);
        if (len <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the CRL");
        *ret_der = der;
        *ret_len = (size_t) len;
        return 0;
}

void crl_builder_free(crl_builder *b) {
        if (!b)
                return;
        X509_CRL_free(b->crl);
        free(b);
}
