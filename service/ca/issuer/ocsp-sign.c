/* Signed OCSP answers (ocsp-sign.h). */
#include <openssl/err.h>
#include <openssl/ocsp.h>

#include "error.h"
#include "ocsp-sign.h"
#include "ossl-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(OCSP_BASICRESP *, OCSP_BASICRESP_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(OCSP_RESPONSE *, OCSP_RESPONSE_free)

static int add_status(OCSP_BASICRESP *bs, const ocsp_query *q, const ocsp_answer *a) {
        static const int codes[] = { V_OCSP_CERTSTATUS_GOOD, V_OCSP_CERTSTATUS_REVOKED, V_OCSP_CERTSTATUS_UNKNOWN };
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *this_update = ASN1_TIME_set(NULL, (time_t) a->this_update);
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *next_update = ASN1_TIME_set(NULL, (time_t) a->next_update);
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *revoked = NULL;
        bool is_revoked = a->status == OCSP_CERT_REVOKED;
        int reason = is_revoked && a->reason > 0 ? a->reason : -1;

        if (is_revoked && !(revoked = ASN1_TIME_set(NULL, (time_t) a->revoked_at)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!this_update || !next_update ||
            !OCSP_basic_add1_status(bs, (OCSP_CERTID *) q->id, codes[a->status], reason, revoked, this_update,
                                    next_update))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add the certificate's status to an OCSP answer");
        return 0;
}

/* The CA key signs the answer, through hsm/ (EVP_DigestSign with hwid's
 * provider); the responder is named by the key's hash. */
static int sign_basic(issuer *is, OCSP_BASICRESP *bs) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new();
        int r;

        if (!mctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = hwid_key_sign_init(issuer_key(is), mctx, NULL)) < 0)
                return r;
        hwid_error_clear();
        if (OCSP_basic_sign_ctx(bs, issuer_cert(is), mctx, NULL, OCSP_RESPID_KEY) <= 0)
                return hwid_fail_signing("an OCSP answer");
        return 0;
}

int issuer_ocsp_sign(issuer *is, const ocsp_query *q, const ocsp_answer *a, uint8_t **ret, size_t *ret_len) {
        _cleanup_(OCSP_BASICRESP_freep) OCSP_BASICRESP *bs = OCSP_BASICRESP_new();
        _cleanup_(OCSP_RESPONSE_freep) OCSP_RESPONSE *resp = NULL;
        unsigned char *der = NULL;
        int n, r;

        if (!bs)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = add_status(bs, q, a)) < 0)
                return r;
        if (a->echo_nonce && q->nonce_len && OCSP_copy_nonce(bs, q->req) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot echo the request's nonce");
        if ((r = sign_basic(is, bs)) < 0)
                return r;
        if (!(resp = OCSP_response_create(OCSP_RESPONSE_STATUS_SUCCESSFUL, bs)))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot make an OCSP answer");
        if ((n = i2d_OCSP_RESPONSE(resp, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode an OCSP answer");
        *ret = der;
        *ret_len = (size_t) n;
        return 0;
}
